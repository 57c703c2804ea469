"""The leader's digest scrub loop: one pass per period (settings `scrub:`), resumed where the last leader
stopped, its progress saved to `<ledgersRoot>/bk-auditor/scrub/state` with the leader's guarded writes
every `save_every_ledgers` ledgers or `save_every_seconds` seconds (and at the end of a pass).

The pass itself is auditor/checks/scrub.py's (`scrub_pass`); the period, pacing and coverage arithmetic
auditor/durability/scrub.py's. Confirmed damage goes to the daemon's findings as `digest_mismatch` (check
`scrub`); the metrics `bk_auditor_scrub_*` follow the progress.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from auditor.checks.context import AuditContext
from auditor.checks.scrub import ScrubRunner, scrub_pass
from auditor.durability.findings import Finding, FindingSummary
from auditor.durability.scrub import ScrubProgress, coverage_ratio, next_pass_in, oldest_verification_age_s
from auditor.logging import get_logger
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.own.scrubstate import ScrubStateStore
from auditor.settings import Settings

from .metrics import AuditorMetrics
from .reporter import SAVE_ERRORS, Reporter, count_replaced, new_seen
from .state import DaemonState

log = get_logger("auditor.daemon.scrub")

SCRUB = "scrub"
IDLE_POLL_SECONDS = 60.0  # how often the gauges follow while the scrub waits for its next period


class ScrubLoop:
    """The scrub of one leadership term."""

    def __init__(
        self,
        settings: Settings,
        state: DaemonState,
        metrics: AuditorMetrics,
        reporter: Reporter,
        *,
        ctx: AuditContext,
        store: ScrubStateStore,
        guard: Callable[[], WriteGuard],
        gate: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self.state = state
        self.metrics = metrics
        self.reporter = reporter
        self.ctx = ctx
        self.store = store
        self._guard = guard
        self._gate = gate
        self.progress = ScrubProgress()
        self._saved_at = time.monotonic()
        self._saved_ledgers = 0

    @property
    def period_ms(self) -> int:
        return int(self.settings.scrub.period_days * 86400 * 1000)

    async def read(self) -> ScrubProgress:
        """The saved progress; a corrupt one is reported once and replaced by a fresh state."""
        return await self.store.get_or_replace(
            ScrubProgress(),
            log=log,
            count=count_replaced(self.state, self.metrics, SCRUB, "scrub/state"),
            replace=self.save,
            check=SCRUB,
        )

    async def save(self, progress: ScrubProgress) -> None:
        try:
            await self.store.put(progress, self._guard())
        except SAVE_ERRORS as exc:  # the next save retries; anything else is a bug and fails the task
            log.info("scrub state not saved", error=str(exc))
            return
        self._saved_at = time.monotonic()
        self._saved_ledgers = progress.ledgers

    def _gauges(self, progress: ScrubProgress) -> None:
        self.metrics.scrub_coverage_ratio.set(coverage_ratio(progress))
        age = oldest_verification_age_s(progress, int(time.time() * 1000))
        self.metrics.scrub_oldest_unverified_seconds.set(age if age is not None else 0.0)

    async def _advanced(self, progress: ScrubProgress) -> None:
        before = self.progress
        if progress.pass_started_ms == before.pass_started_ms:  # counters by the deltas of one pass
            self.metrics.scrub_verified_entries.inc(max(0, progress.entries - before.entries))
            self.metrics.scrub_bytes.inc(max(0, progress.bytes - before.bytes))
            self.metrics.scrub_corrupt.inc(max(0, progress.corrupt - before.corrupt))
        self.progress = progress
        self._gauges(progress)
        self.state.tasks.progress(
            SCRUB, progress.ledgers, cursor=progress.cursor.qualified_name if progress.cursor else None
        )
        s = self.settings.scrub
        if (
            progress.ledgers - self._saved_ledgers >= s.save_every_ledgers
            or time.monotonic() - self._saved_at >= s.save_every_seconds
            or progress.ledgers == 0
        ):
            await self.save(progress)

    async def run(self) -> None:
        """Until cancelled: wait for the period, scrub a pass (resuming a saved one), save, repeat."""
        s = self.settings.scrub
        board = self.state.tasks
        if s.start_delay_seconds > 0:
            board.schedule(SCRUB, time.time() + s.start_delay_seconds)
            await asyncio.sleep(s.start_delay_seconds)
        seen = new_seen()
        while True:
            self.progress = progress = await self.read()
            self._saved_ledgers = progress.ledgers
            self._gauges(progress)
            wait = next_pass_in(progress, int(time.time() * 1000), self.period_ms)
            if wait > 0:
                board.schedule(SCRUB, time.time() + wait)
                await asyncio.sleep(min(wait, IDLE_POLL_SECONDS))
                continue
            if progress.in_pass:
                log.info("resuming the scrub pass", after=progress.cursor.qualified_name if progress.cursor else None)
            board.start(SCRUB, cursor=progress.cursor.qualified_name if progress.cursor else None)
            runner = ScrubRunner(
                self.ctx,
                bytes_per_second=s.bytes_per_second_per_bookie,
                max_concurrent_ledgers=s.max_concurrent_ledgers,
                confirm_delays=self.settings.recheck.schedule()[:2],
            )

            def report(f: Finding, seen: FindingSummary = seen) -> None:
                self.reporter.report(SCRUB, f, seen)

            done = await scrub_pass(self.ctx, runner, progress, report=report, advanced=self._advanced, gate=self._gate)
            await self.save(done)
            self.progress = done
            self._gauges(done)
            board.succeed(SCRUB)
            took_s = ((done.previous_finished_ms or 0) - (done.previous_started_ms or 0)) / 1000
            log.info(
                "scrub pass finished",
                ledgers=done.ledgers,
                copies=done.copies,
                entries=done.entries,
                bytes=done.bytes,
                unverifiedEntries=done.unverified_entries,
                corrupt=done.corrupt,
                seconds=round(took_s, 1),
            )
            if took_s * 1000 > self.period_ms:
                log.warning(
                    "the scrub pass took longer than its period: raise scrub.bytes_per_second_per_bookie or the period",
                    seconds=round(took_s),
                    periodDays=s.period_days,
                )
            seen = new_seen()
