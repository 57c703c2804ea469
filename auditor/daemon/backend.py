"""The daemon's side of the admin API: `StateBackend` answers from a `DaemonState`, plus the two actions the
daemon plugs in (`trigger`, `explain`)."""

from __future__ import annotations

from auditor import __version__
from auditor.admin.errors import NotSupportedError, StandbyError, UnknownCheckError
from auditor.admin.models import ExplainFn, LedgerExplanation, StatusSnapshot, TriggerFn, TriggerResult
from auditor.board.findings import FindingPage
from auditor.durability.ids import LedgerId
from auditor.durability.javatext import shown

from .state import DaemonState


class StateBackend:
    """AdminBackend over a DaemonState. `trigger` runs only on the leader (standbys raise StandbyError)
    and only for tasks on the board; `explain` works on any replica. The daemon plugs in
    `OperatorBackend.explain` (operator.py), which bounds it as the other bookie-reading questions: one
    at a time, within admin.question_timeout_seconds."""

    def __init__(
        self,
        state: DaemonState,
        *,
        trigger: TriggerFn | None = None,
        explain: ExplainFn | None = None,
        version: str = __version__,
    ) -> None:
        self.state = state
        self._trigger = trigger
        self._explain = explain
        self.version = version

    def status(self) -> StatusSnapshot:
        s = self.state
        lead = s.leadership
        assert lead is not None
        confirmed = lead.confirmed
        return StatusSnapshot(
            identity=s.identity,
            is_leader=confirmed,
            leader=lead.leader if confirmed or not lead.is_leader else None,
            paused=s.pause.paused,
            pause_reason=s.pause.reason,
            paused_since=s.pause.since,
            tasks=s.tasks.snapshot(),
            recheck_queue_depth=s.recheck_depth(),
            finding_counts=s.findings.counts(),
            started_at=s.started_at,
            leader_since=lead.since if lead.is_leader else None,
            version=self.version,
            leadership=lead.status,
            vote_path=lead.vote_path,
        )

    def query_findings(
        self,
        *,
        category: str | None = None,
        ledger: LedgerId | None = None,
        bookie: str | None = None,
        include_resolved: bool = False,
        limit: int | None = None,
    ) -> FindingPage:
        return self.state.findings.page(
            category=category, ledger=ledger, bookie=bookie, include_resolved=include_resolved, limit=limit
        )

    async def trigger(self, check: str) -> TriggerResult:
        if check not in self.state.tasks:
            raise UnknownCheckError(f"unknown check {shown(check)}; known: {', '.join(self.state.tasks.names())}")
        lead = self.state.leadership
        assert lead is not None
        if not lead.confirmed:
            raise StandbyError(lead.leader if not lead.is_leader else None)
        if self._trigger is None:
            raise NotSupportedError("this daemon cannot trigger checks")
        result = await self._trigger(check)
        if isinstance(result, TriggerResult):
            return result
        accepted = result is None or bool(result)
        return TriggerResult(accepted, f"{check} {'triggered' if accepted else 'is already running or queued'}")

    async def explain(self, ledger: LedgerId) -> LedgerExplanation:
        if self._explain is None:
            raise NotSupportedError("this daemon cannot explain ledgers")
        return await self._explain(ledger)

    async def pause(self, reason: str) -> bool:
        changed = self.state.pause.pause(reason)
        self.state.tasks.pause_all()
        return changed

    async def resume(self) -> bool:
        changed = self.state.pause.resume()
        self.state.tasks.resume_all()
        return changed
