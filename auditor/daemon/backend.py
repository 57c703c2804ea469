"""The daemon's side of the admin API: `StateBackend` answers from a `DaemonState`, plus the two actions the
daemon plugs in (`trigger`, `explain`)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from auditor import __version__
from auditor.admin.errors import (
    FindingNotFoundError,
    InvalidArgumentError,
    NotSupportedError,
    StandbyError,
    UnknownCheckError,
)
from auditor.admin.models import ExplainFn, LedgerExplanation, StatusSnapshot, TriggerFn, TriggerResult
from auditor.board.findings import FindingPage
from auditor.durability.ids import LedgerId
from auditor.durability.javatext import shown

from .state import DaemonState

SetPauseFn = Callable[[bool, str], Awaitable[bool]]
RecheckFn = Callable[[set[LedgerId], set[str] | None], Awaitable[dict[str, int] | None]]


class StateBackend:
    """AdminBackend over a DaemonState. `trigger` runs only on the leader (standbys raise StandbyError)
    and only for tasks on the board, or re-checks one ledger (`recheck`); `explain` works on any replica.
    The daemon plugs in `OperatorBackend.explain` (operator.py), which bounds it as the other
    bookie-reading questions: one at a time, within admin.question_timeout_seconds. With `set_pause`
    (the daemon's: cluster-wide, kept in ZooKeeper by the leader) pause and resume are the leader's; a
    standby refuses them. Without it they switch this process alone."""

    def __init__(
        self,
        state: DaemonState,
        *,
        trigger: TriggerFn | None = None,
        explain: ExplainFn | None = None,
        set_pause: SetPauseFn | None = None,
        recheck: RecheckFn | None = None,
        version: str = __version__,
    ) -> None:
        self.state = state
        self._trigger = trigger
        self._explain = explain
        self._set_pause = set_pause
        self._recheck = recheck
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
            findings_source=s.findings_source.kind if not confirmed else "leader",
            findings_as_of=s.findings_source.as_of if not confirmed else None,
            findings_saved_by=s.findings_source.saved_by if not confirmed else "",
            paused_by=s.pause.by,
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
        page = self.state.findings.page(
            category=category, ledger=ledger, bookie=bookie, include_resolved=include_resolved, limit=limit
        )
        lead = self.state.leadership
        assert lead is not None
        if lead.confirmed:
            return replace(page, source="leader", leader=lead.leader or self.state.identity)
        src = self.state.findings_source
        return replace(page, source=src.kind, as_of=src.as_of, saved_by=src.saved_by, leader=lead.leader or "")

    async def trigger(self, check: str, ledger: LedgerId | None = None, finding_key: str = "") -> TriggerResult:
        if ledger is not None or finding_key:
            return await self._trigger_ledger(check, ledger, finding_key)
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

    async def _trigger_ledger(self, check: str, ledger: LedgerId | None, finding_key: str) -> TriggerResult:
        """Re-check one ledger now: `ledger` with `check` (every per-ledger check it has findings of, or
        every scheduled one, when `check` is empty), or the ledger of the finding `finding_key`."""
        lead = self.state.leadership
        assert lead is not None
        if not lead.confirmed:
            raise StandbyError(lead.leader if not lead.is_leader else None)
        if self._recheck is None:
            raise NotSupportedError("this daemon cannot re-check ledgers")
        checks: set[str] | None = {check} if check else None
        if finding_key:
            key = _parse_key(finding_key)
            rec = self.state.findings.get(key) if key is not None else None
            if rec is None or not rec.active:
                raise FindingNotFoundError(f"no active finding has the key {shown(finding_key)}")
            if rec.finding.ledger is None or rec.check is None:
                raise InvalidArgumentError(f"finding {shown(finding_key)} is not about one ledger: trigger its check")
            ledger, checks = rec.finding.ledger, {rec.check}
        assert ledger is not None
        if checks is None:
            flagged = self.state.findings.flagged_ledgers().get(ledger)
            checks = flagged or None
        done = await self._recheck({ledger}, checks)  # None: every check the daemon schedules
        if done is None:
            raise StandbyError(lead.leader if not lead.is_leader else None)
        if not done:
            return TriggerResult(
                False,
                f"ledger {ledger}: no check of it is scheduled here ({', '.join(sorted(checks or ())) or 'none'})",
            )
        ran = ", ".join(sorted(done))
        return TriggerResult(True, f"ledger {ledger} re-checked by {ran}")

    async def pause(self, reason: str) -> bool:
        if self._set_pause is not None:
            return await self._set_pause(True, reason)
        changed = self.state.pause.pause(reason)
        self.state.tasks.pause_all()
        return changed

    async def resume(self) -> bool:
        if self._set_pause is not None:
            return await self._set_pause(False, "")
        changed = self.state.pause.resume()
        self.state.tasks.resume_all()
        return changed


def _parse_key(finding_key: str) -> tuple[Any, ...] | None:
    """The dedup key a finding's key text names (`key_text` inverted: its JSON array), if it parses."""
    try:
        parts = json.loads(finding_key)
    except ValueError:
        return None
    if not isinstance(parts, list) or any(isinstance(p, list | dict) for p in parts):
        return None  # not a key the API showed (its parts are text, numbers and nulls)
    return tuple(parts)
