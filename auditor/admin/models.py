"""The plain answers an admin backend gives, and `AdminBackend`, the protocol the daemon implements.

The server turns these into protobuf messages (convert.py). `explain`'s answer is made where it is
computed, in auditor/checks/explain.py; it is re-exported here so every answer type is in one place.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from auditor import __version__
from auditor.board.findings import FindingPage
from auditor.board.tasks import TaskInfo
from auditor.checks.decommission import DecommissionReport
from auditor.checks.explain import BookieCopies, LedgerExplanation, SegmentCopies
from auditor.checks.underreplicated import MarkedLedger
from auditor.durability.ids import LedgerId
from auditor.metadata.bookkeeper.election import Leader
from auditor.metadata.own.repairlimits import RepairLimits

__all__ = [
    "AdminBackend",
    "BookieCopies",
    "ExplainFn",
    "FindingPage",
    "LedgerExplanation",
    "OperatorQuestions",
    "RecoveryDelayState",
    "ReplicationState",
    "SegmentCopies",
    "StatusSnapshot",
    "TriggerFn",
    "TriggerResult",
]


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    identity: str
    is_leader: bool
    leader: str | None
    paused: bool
    pause_reason: str
    paused_since: float | None
    tasks: list[TaskInfo]
    recheck_queue_depth: int
    finding_counts: Mapping[str, int]
    started_at: float
    leader_since: float | None = None
    version: str = __version__
    leadership: str = "standby"  # leader | unconfirmed | standby (state.Leadership.status)
    vote_path: str | None = None
    findings_source: str = "leader"  # leader | persisted (a standby's copy of the leader's) | none
    findings_as_of: float | None = None
    findings_saved_by: str = ""
    paused_by: str = ""


@dataclass(frozen=True, slots=True)
class TriggerResult:
    accepted: bool
    message: str = ""


class AdminBackend(Protocol):
    """What the admin service needs from the daemon. Raise the errors of errors.py to choose a status."""

    def status(self) -> StatusSnapshot: ...

    def query_findings(
        self,
        *,
        category: str | None,
        ledger: LedgerId | None,
        bookie: str | None,
        include_resolved: bool,
        limit: int | None = None,
    ) -> FindingPage:
        """The first `limit` matching findings (all when None) and how many matched."""
        ...

    async def trigger(self, check: str, ledger: LedgerId | None = None, finding_key: str = "") -> TriggerResult:
        """Run `check` now; with `ledger` or `finding_key`: re-check that one ledger now."""
        ...

    async def explain(self, ledger: LedgerId) -> LedgerExplanation: ...

    async def pause(self, reason: str) -> bool: ...

    async def resume(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class RecoveryDelayState:
    """lostBookieRecoveryDelay as read (seconds None: not set), or after a set: read back, with the value
    it replaced in `previous`."""

    ledgers_root: str
    seconds: int | None
    version: int | None
    previous: int | None = None


@dataclass(frozen=True, slots=True)
class ReplicationState:
    ledgers_root: str
    enabled: bool
    changed: bool = False


@dataclass(frozen=True, slots=True)
class RepairLimitsState:
    ledgers_root: str
    limits: RepairLimits  # what is set (unset fields: each worker's own settings)


class OperatorQuestions(Protocol):
    """The operator's questions (auditor/daemon/operator.py answers them). `caller` names who asked a
    change, for the log."""

    async def can_decommission(self, bookie: str) -> DecommissionReport: ...

    async def underreplicated(self) -> list[MarkedLedger]: ...

    async def who_is_auditor(self) -> list[Leader]: ...

    async def recovery_delay(self) -> RecoveryDelayState: ...

    async def set_recovery_delay(
        self, seconds: int, expected_version: int | None, caller: str
    ) -> RecoveryDelayState: ...

    async def replication(self) -> ReplicationState: ...

    async def set_replication(self, enabled: bool, caller: str) -> ReplicationState: ...

    async def repair_limits(self) -> RepairLimitsState: ...

    async def set_repair_limits(self, change: RepairLimits, clear: bool, caller: str) -> RepairLimitsState: ...


TriggerFn = Callable[[str], Awaitable[TriggerResult | bool | None]]
ExplainFn = Callable[[LedgerId], Awaitable[LedgerExplanation]]
