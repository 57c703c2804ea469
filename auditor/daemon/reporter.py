"""What the leader's tasks hand on: findings into the store, and each check's state to ZooKeeper.

* `Reporter`: a finding into the daemon's store; a new one is logged (above informational) and counted,
  and the findings gauges follow at most once per FINDINGS_SYNC_SECONDS.
* `CheckStates`: a check's `lastSuccessMs` and scan cursor read from and saved to
  `<ledgersRoot>/bk-auditor/checks/<check>` with the leader's guarded writes; a save that meets
  ZooKeeper trouble or a lost leadership (SAVE_ERRORS) is logged and retried by the next one, and a
  corrupt state is reported once and replaced by a fresh one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kazoo.exceptions import KazooException

from auditor.durability.findings import Finding, FindingSummary
from auditor.logging import get_logger, log_new_finding
from auditor.metadata.errors import ConcurrentUpdateError, CorruptZnodeError, NotLeaderError
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.own.checkstate import CheckState, CheckStateStore

from .metrics import AuditorMetrics
from .state import DaemonState

log = get_logger("auditor.daemon")

CURSOR_SAVE_SECONDS = 5.0
FINDINGS_SYNC_SECONDS = 1.0
# What a state save may meet that the next save retries: not the leader (any more), ZooKeeper trouble.
SAVE_ERRORS = (NotLeaderError, ConcurrentUpdateError, KazooException, asyncio.TimeoutError)


def new_seen() -> FindingSummary:
    """The findings one run reported, as keys and counts only: a pass over a million WQ == AQ ledgers
    reports a million informational findings, and the store already holds them."""
    return FindingSummary(keep=lambda _: False)


class Reporter:
    """Findings into `state.findings`, with their log line, counters and (throttled) gauges."""

    def __init__(self, state: DaemonState, metrics: AuditorMetrics) -> None:
        self.state = state
        self.metrics = metrics
        self._synced_at = float("-inf")  # when the findings gauges were last synced (monotonic)
        self._sync_later: asyncio.TimerHandle | None = None
        self.on_new_actionable: Callable[[], None] | None = None  # the leader's resolution watch

    def report(self, check: str, finding: Finding, seen: FindingSummary | None = None) -> None:
        rec = self.state.findings.add(finding, check)
        if seen is not None:
            seen.add(finding)
        if rec.times_seen == 1:
            log_new_finding(finding, logger=log, check=check)
            self.metrics.finding_reported(finding)
            if finding.actionable and self.on_new_actionable is not None:
                self.on_new_actionable()
        self._findings_changed()

    def _findings_changed(self) -> None:
        """The findings gauges follow: at once, or, within FINDINGS_SYNC_SECONDS of the last sync, once that
        time is up. A scan reporting thousands of findings a second costs one sync per interval, not one
        per finding (the namespaces' gauge reads every actionable finding)."""
        if self._sync_later is not None:
            return
        wait = self._synced_at + FINDINGS_SYNC_SECONDS - time.monotonic()
        if wait > 0:
            try:
                self._sync_later = asyncio.get_running_loop().call_later(wait, self.sync_findings)
                return
            except RuntimeError:  # no loop (a caller outside the daemon's): now
                pass
        self.sync_findings()

    def sync_findings(self) -> None:
        """The findings gauges now (a pending delayed sync is dropped)."""
        if self._sync_later is not None:
            self._sync_later.cancel()
            self._sync_later = None
        self._synced_at = time.monotonic()
        self.metrics.sync_findings(self.state.findings)


class CheckStates:
    """The checks' own state in ZooKeeper, read and written by the leader (`guard`: its write guard)."""

    def __init__(
        self,
        store: CheckStateStore,
        guard: Callable[[], WriteGuard],
        state: DaemonState,
        metrics: AuditorMetrics,
    ) -> None:
        self.store = store
        self._guard = guard
        self.state = state
        self.metrics = metrics

    async def save(self, name: str, st: CheckState) -> None:
        try:
            await self.store.put(name, st, self._guard())
        except SAVE_ERRORS as exc:  # anything else is a bug: it fails the task and is counted
            log.info("check state not saved", check=name, error=str(exc))

    async def read(self, name: str) -> CheckState:
        """Our check state; a corrupt one is reported once and replaced by a fresh state (the write is
        guarded; if it fails, the next read replaces it again)."""
        return await self.store.document(name).get_or_replace(
            CheckState(),
            log=log,
            count=count_replaced(self.state, self.metrics, name, f"checks/{name}"),
            replace=lambda fresh: self.save(name, fresh),
            check=name,
        )


def count_replaced(
    state: DaemonState, metrics: AuditorMetrics, task: str, node: str
) -> Callable[[CorruptZnodeError], None]:
    """How the daemon counts a state znode of ours replaced for being corrupt (`OwnDocument.get_or_replace`):
    the task's last error, and the metric by node."""

    def count(exc: CorruptZnodeError) -> None:
        state.tasks.note_error(task, f"{exc} (replaced with a fresh state)")
        metrics.state_replaced(node)

    return count
