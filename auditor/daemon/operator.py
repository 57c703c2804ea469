"""The daemon's answers to the operator's questions (admin API: CanDecommission, ListUnderreplicated,
ExplainLedger, WhoIsAuditor, Get/SetRecoveryDelay, Get/SetReplication, Get/SetRepairLimits), computed by
the same code as the command line's direct form (auditor/checks/decommission.py,
auditor/checks/underreplicated.py, auditor/checks/explain.py, OperatorSwitches).

The questions that read bookies use the daemon's own context: its read-only bookie pool with its
per-bookie rate limits and in-flight bounds, shared with the running checks (an operator's question
slows the checks a little rather than doubling the load on a bookie). They are asynchronous all the way
(they never block the event loop, so health, election and the checks go on), answered one at a time
(two operators asking at once wait in turn; the bookies see one question's reads), and bounded by
`admin.question_timeout_seconds`, waiting included: past it the call fails with DEADLINE_EXCEEDED
naming the setting. A caller that gives up first (its gRPC deadline) cancels the work.

`ExplainLedger` reads bookies too, so it goes through the same bound (`explain`): one at a time with the
other questions, within the same timeout.

The changes (recovery delay, replication switch, repair limits) are made only on an operator's explicit,
authorised call (access.py counts them as mutations), only by the leader (a standby refuses with
StandbyError naming the leader), with the leader's write guard: the write is a multi-op that first checks
our election vote, so a leader that lost its vote cannot make it. Like the command line they are
compare-and-set and read back, and each is logged with who asked. This module is the daemon's one door
to OperatorSwitches (an import contract).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from auditor.admin.errors import (
    InvalidArgumentError,
    LedgerNotFoundError,
    NotConnectedError,
    QuestionTimeoutError,
    StandbyError,
)
from auditor.admin.models import RecoveryDelayState, RepairLimitsState, ReplicationState
from auditor.checks.context import AuditContext
from auditor.checks.decommission import DecommissionReport, decommission_report
from auditor.checks.explain import LedgerExplanation, explain_ledger
from auditor.checks.underreplicated import MarkedLedger, marked_ledgers
from auditor.durability.ids import LedgerId
from auditor.logging import get_logger
from auditor.metadata.bookkeeper.operator import Leader, OperatorSwitches, check_recovery_delay
from auditor.metadata.codecs.formats import is_valid_bookie_id
from auditor.metadata.errors import NoSuchLedgerError
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.own.repairlimits import RepairLimits, RepairLimitsNode
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.metadata.zk.connection import ZooKeeperConnection

log = get_logger("auditor.admin.operator")
T = TypeVar("T")


class OperatorBackend:
    """`models.OperatorQuestions` over the daemon's live context (`context()`: None while not connected)."""

    def __init__(
        self,
        context: Callable[[], AuditContext | None],
        *,
        election_path: str,
        timeout: float = 120.0,
        leader_guard: Callable[[], WriteGuard | None] = lambda: None,
    ) -> None:
        self._context = context
        self._leader_guard = leader_guard  # the leader's write guard; None while standing by
        self.election_path = election_path
        self.timeout = timeout
        self._one_at_a_time = asyncio.Lock()

    def _ctx(self) -> AuditContext:
        ctx = self._context()
        if ctx is None:
            raise NotConnectedError("not connected to ZooKeeper yet; try again")
        return ctx

    def _switches(self) -> OperatorSwitches:
        store = self._ctx().store
        assert isinstance(store, ZooKeeperConnection)  # the daemon's store is ZooKeeper's
        return OperatorSwitches(store)

    async def _bounded(self, what: str, work: Callable[[AuditContext], Awaitable[T]]) -> T:
        self._ctx()  # not connected: say so at once rather than after waiting for the lock
        try:
            async with asyncio.timeout(self.timeout):
                async with self._one_at_a_time:
                    # Taken after the wait: the daemon may have reconnected (a new context) meanwhile.
                    return await work(self._ctx())
        except TimeoutError:
            raise QuestionTimeoutError(
                f"{what}: not answered within {self.timeout:g}s (admin.question_timeout_seconds; bookie reads "
                "go at bookie_client.requests_per_second, one question at a time)"
            ) from None

    async def can_decommission(self, bookie: str) -> DecommissionReport:
        if not is_valid_bookie_id(bookie):
            raise InvalidArgumentError(f"{bookie!r} is not a bookie id (host:port or a custom id)")
        return await self._bounded(f"can-decommission {bookie}", lambda ctx: decommission_report(ctx, bookie))

    async def explain(self, ledger: LedgerId) -> LedgerExplanation:
        """ExplainLedger (any replica): its bookie reads bounded like the other questions'."""

        async def answer(ctx: AuditContext) -> LedgerExplanation:
            try:
                return await explain_ledger(ctx, ledger)
            except NoSuchLedgerError:
                raise LedgerNotFoundError(f"ledger {ledger} does not exist") from None

        return await self._bounded(f"explain {ledger}", answer)

    async def underreplicated(self) -> list[MarkedLedger]:
        async def collect(ctx: AuditContext) -> list[MarkedLedger]:
            return [m async for m in marked_ledgers(ctx)]

        return await self._bounded("underreplicated", collect)

    async def who_is_auditor(self) -> list[Leader]:
        return await self._switches().current_leaders(self.election_path)

    async def recovery_delay(self) -> RecoveryDelayState:
        switches = self._switches()
        seconds, version = await switches.lost_bookie_recovery_delay()
        return RecoveryDelayState(switches.conn.root, seconds, version)

    async def set_recovery_delay(self, seconds: int, expected_version: int | None, caller: str) -> RecoveryDelayState:
        """Leader only, guarded, compare-and-set on `expected_version`."""
        check_recovery_delay(seconds)  # a value Java cannot read is INVALID_ARGUMENT on any replica
        guard = await self._leader_only()
        switches = self._switches()
        previous, _ = await switches.lost_bookie_recovery_delay()
        now, version = await switches.change_lost_bookie_recovery_delay(seconds, expected_version, guard=guard)
        log.warning(
            "lostBookieRecoveryDelay set on an operator's request",
            ledgersRoot=switches.conn.root,
            previous=previous,
            seconds=now,
            caller=caller,
        )
        return RecoveryDelayState(switches.conn.root, now, version, previous)

    async def replication(self) -> ReplicationState:
        switches = self._switches()
        return ReplicationState(switches.conn.root, not await switches.replication_disabled())

    async def set_replication(self, enabled: bool, caller: str) -> ReplicationState:
        """Leader only, guarded."""
        guard = await self._leader_only()
        switches = self._switches()
        before = await switches.replication_disabled()
        disabled = await switches.change_replication_disabled(not enabled, guard=guard)
        changed = before != disabled
        if changed:
            log.warning(
                f"replication {'disabled' if disabled else 'enabled'} on an operator's request",
                ledgersRoot=switches.conn.root,
                caller=caller,
            )
        return ReplicationState(switches.conn.root, not disabled, changed)

    async def repair_limits(self) -> RepairLimitsState:
        store = self._own()
        return RepairLimitsState(store.root, await RepairLimitsNode(store).get())

    async def set_repair_limits(self, change: RepairLimits, clear: bool, caller: str) -> RepairLimitsState:
        """Replace the limits `change` sets (after removing all of them with `clear`), on the leader only:
        the write to our own subtree is guarded by its election."""
        try:
            change.check()
        except ValueError as exc:
            raise InvalidArgumentError(str(exc)) from None
        guard = await self._leader_only()
        store = self._own()
        node = RepairLimitsNode(store)
        before = RepairLimits() if clear else await node.get()
        now = RepairLimits(
            change.bytes_per_second if change.bytes_per_second is not None else before.bytes_per_second,
            change.entries_in_flight if change.entries_in_flight is not None else before.entries_in_flight,
            change.entries_in_flight_per_bookie
            if change.entries_in_flight_per_bookie is not None
            else before.entries_in_flight_per_bookie,
            caller,
            int(time.time() * 1000),
        )
        await node.put(now, guard)
        log.warning(
            "repair limits set on an operator's request",
            ledgersRoot=store.root,
            bytesPerSecond=now.bytes_per_second,
            entriesInFlight=now.entries_in_flight,
            entriesInFlightPerBookie=now.entries_in_flight_per_bookie,
            caller=caller,
        )
        return RepairLimitsState(store.root, now)

    async def _leader_only(self) -> WriteGuard:
        """The leader's write guard; on a standby, StandbyError naming the leader of our election."""
        guard = self._leader_guard()
        if guard is None:
            leaders = await self.who_is_auditor()
            raise StandbyError(next((x.identity for x in leaders if x.election == self.election_path), None))
        return guard

    def _own(self) -> ZooKeeperMetadataStore:
        store = self._ctx().store
        assert isinstance(store, ZooKeeperMetadataStore)  # the daemon's store is ZooKeeper's
        return store
