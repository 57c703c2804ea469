"""The leader's check loops: one per scheduled check (scrutiny, ledger, open, references), each waiting for
its interval or a trigger, resuming an interrupted scan from its saved cursor, and running the check over
every ledger; the per-ledger checks on worker processes when the daemon has an engine for them.

A `CheckLoops` lives for one leadership term (the leader's context, rack locations and deletion watch are
fixed for it); the triggers and the runs in progress are the replica's, shared across terms. A complete
pass resolves the findings it no longer sees; the ledger check marks confirmed losses for Java's
replication workers when `ledger_check.mark_under_replicated` says so.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from auditor.board.tasks import TaskState
from auditor.checks.build import Locations
from auditor.checks.context import AuditContext
from auditor.checks.per_ledger import CHECKS as CHECK_CLASSES
from auditor.checks.per_ledger import judges_each_ledger_alone
from auditor.checks.references import ReferencesCheck
from auditor.checks.runner import CheckRun, LedgerCheck, Progress
from auditor.checks.sharded import PartitionDone, ScanHooks, ShardedChecks
from auditor.durability.findings import Category, Finding, FindingSummary
from auditor.durability.ids import LedgerId, next_id
from auditor.durability.model import LedgerMetadata
from auditor.logging import get_logger
from auditor.metadata.interfaces import CorruptLedger, LedgerRecord, WriteGuard
from auditor.metadata.own.checkstate import CheckState
from auditor.metadata.own.referencestate import SeenStore
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.settings import Settings

from .deletion_watch import DeletionWatch
from .metrics import AuditorMetrics, RunSummary
from .reporter import CURSOR_SAVE_SECONDS, SAVE_ERRORS, CheckStates, Reporter, new_seen
from .state import DaemonState

log = get_logger("auditor.daemon")

REFERENCES = "references"


def intervals(settings: Settings) -> dict[str, float]:
    """Each scheduled check's interval in seconds (0: not run)."""
    s = settings.schedule
    return {
        "scrutiny": s.scrutiny_seconds,
        "ledger": s.ledger_check_seconds,
        "open": s.open_ledger_check_seconds,
        "references": s.references_seconds,
    }


class CheckLoops:
    """The check loops of one leadership term, and the leader's one-off runs (a priority scrutiny)."""

    def __init__(
        self,
        settings: Settings,
        state: DaemonState,
        metrics: AuditorMetrics,
        reporter: Reporter,
        states: CheckStates,
        *,
        ctx: AuditContext,
        locations: Locations | None,
        deletion_watch: DeletionWatch | None,
        guard: Callable[[], WriteGuard],
        fire: Callable[[str, Coroutine[Any, Any, Any]], None],
        triggers: dict[str, asyncio.Event],
        runs: dict[str, CheckRun],
        sharded: ShardedChecks | None,
        scan_processes: int,
    ) -> None:
        self.settings = settings
        self.state = state
        self.metrics = metrics
        self.reporter = reporter
        self.states = states
        self.ctx = ctx
        self.locations = locations
        self.deletion_watch = deletion_watch
        self._guard = guard
        self._fire = fire  # a one-shot background job of the leader (cancelled with the leader's tasks)
        self._triggers = triggers
        self._runs = runs  # the runs in progress (a scan on worker processes too)
        # The checks that judge each ledger alone, run on `scan_processes` worker processes
        # (schedule.scan_processes > 1).
        self.sharded = sharded
        self.scan_processes = scan_processes

    @property
    def zk(self) -> ZooKeeperMetadataStore:
        assert isinstance(self.ctx.store, ZooKeeperMetadataStore)
        return self.ctx.store

    async def gate(self) -> None:
        """Before each ledger: wait while paused or outside the time-of-day windows (the scrub's too)."""
        while True:
            await self.state.pause.wait_resumed()
            if self.settings.schedule.in_window(None):
                return
            await asyncio.sleep(30)

    def _may_start(self) -> bool:
        """`gate` for a scan on worker processes, asked from its engine's thread: False holds back new
        partitions."""
        return not self.state.pause.paused and self.settings.schedule.in_window(None)

    async def run_check(
        self, name: str, start: LedgerId | None, records: list[Any] | None = None, full: bool = True
    ) -> bool:
        """One run of check `name` (from `start`, or of `records` only); True when it finished. A run of
        `records` (a re-check of some ledgers, outside the schedule) leaves the task board to the scheduled
        runs, and resolves what it no longer sees on exactly those ledgers."""
        seen = new_seen()
        partial = records is not None
        if self.locations is not None and name == "scrutiny" and not partial:
            await self.locations.refresh()  # racks may have moved since the last run
            self._report_rack_problem(name, seen)
        check: LedgerCheck = self._new_check(name)
        board = self.state.tasks
        last_save = [time.monotonic()]

        def progress(p: Progress) -> None:
            self.metrics.ledger_checked(name)
            if partial:
                return
            board.progress(name, p.ledgers_done, cursor=p.cursor.qualified_name if p.cursor else None)
            if full and p.cursor is not None and time.monotonic() - last_save[0] > CURSOR_SAVE_SECONDS:
                last_save[0] = time.monotonic()
                self._fire(
                    "checkstate-save", self.states.save(name, CheckState(run_started_ms=started_ms, cursor=p.cursor))
                )

        run = CheckRun(
            self.ctx,
            check,
            lambda f: self.reporter.report(name, f, seen),
            progress=progress,
            gate=self.gate,
            queue=None,
        )
        # Requests counted as they complete (in this process; a worker process's as each partition ends).
        run.stats.on_requests = lambda bookie, n, errors: self.metrics.bookie_requests_done(bookie, name, n, errors)
        key = name if not partial else f"{name}@{id(run)}"  # a re-check does not make the check "running"
        self._runs[key] = run
        started = time.time()
        started_ms = int(started * 1000)
        if not partial:
            board.start(name, cursor=start.qualified_name if start else None)
        elsewhere = self.sharded if records is None and judges_each_ledger_alone(name) else None
        ok = False
        try:
            if await run.begin():
                if records is not None:

                    async def source() -> Any:
                        yield records

                    await run.scan(records=source())
                elif elsewhere is not None:
                    await self._scan_on_processes(elsewhere, run, start, started_ms, full)
                else:
                    await run.scan(start)
                await run.drain_rechecks()
                await run.end()
            run.stats.finished = time.time()
            ok = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not partial:
                board.fail(name, exc)
            log.error("check failed", check=name, error=str(exc), exc_info=True, ledgers=len(records or ()))
        finally:
            self._runs.pop(key, None)
        if name == "scrutiny" and not partial:
            self._report_rack_problem(name, seen)  # also when a rack script failed during the run
        if ok and isinstance(check, ReferencesCheck) and full and start is None and check.refs is not None:
            await self._references_done(check, started_ms)
        if ok:
            resolved = []
            if partial:
                ledgers = {_ledger_of(r) for r in records or ()}
                resolved = self.state.findings.resolve_absent(name, seen, ledgers=ledgers, seen_before=started)
            else:
                board.succeed(name)
                if full and start is None:
                    # A complete pass: what it no longer sees is resolved (unless sighted since it began,
                    # by a re-check of its ledger).
                    resolved = self.state.findings.resolve_absent(name, seen, seen_before=started)
            for rec in resolved:
                self.metrics.finding_resolved(rec.category)
            self.metrics.observe_run(
                RunSummary(
                    name,
                    run.stats.started,
                    run.stats.finished or time.time(),
                    True,
                    run.stats.ledgers_checked,
                    seen.counts(),
                    full and start is None and not partial,
                )
            )
            self.reporter.sync_findings()
            log.info(
                "check finished",
                **run.stats.as_dict(),
                findingsByCategory=seen.counts(),
                processes=self.scan_processes if elsewhere is not None else 1,
                recheck=partial or None,
                resolved=len(resolved),
            )
        return ok

    async def _scan_on_processes(
        self, sharded: ShardedChecks, run: CheckRun, start: LedgerId | None, started_ms: int, full: bool
    ) -> None:
        """`run`'s scan on worker processes. They only read: their findings come back here as each
        partition ends, to be reported, and marked (the ledger check's confirmed losses) by this leader
        through its guarded writes; their suspects join `run`'s re-check queue, worked here on the
        daemon's delays after the scan; the cursor is saved as the partitions below it end."""
        name = run.check.name
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        found: list[Finding] = []  # filled and emptied on the engine's thread, per partition
        done_ledgers = 0
        last_save = time.monotonic()
        cursor = start

        async def take(done: PartitionDone, findings: list[Finding]) -> None:
            nonlocal done_ledgers, last_save, cursor
            for f in findings:
                run.sink(f)
            if name == "ledger":  # what its marker hook would have been called with, in this process
                by_ledger: dict[LedgerId, list[Finding]] = {}
                for f in findings:
                    if f.ledger is not None:
                        by_ledger.setdefault(f.ledger, []).append(f)
                for lid, confirmed in by_ledger.items():
                    await self._marker(lid, confirmed)
            for s in done.suspects:
                run.queue.submit(s.ledger, s.ledger, s.attempt)
            if name in done.stats:
                run.stats.absorb(done.stats[name])
            visited = done.visited.get(name, 0)
            done_ledgers += visited
            self.metrics.ledger_checked(name, visited)
            moved, cursor = done.cursor is not None, done.cursor or cursor
            self.state.tasks.progress(name, done_ledgers, cursor=cursor.qualified_name if cursor else None)
            if full and moved and cursor is not None and time.monotonic() - last_save > CURSOR_SAVE_SECONDS:
                last_save = time.monotonic()
                await self.states.save(name, CheckState(run_started_ms=started_ms, cursor=cursor))

        def partition_done(done: PartitionDone) -> Future[None]:  # on the engine's thread
            findings = found[:]
            found.clear()
            return asyncio.run_coroutine_threadsafe(take(done, findings), loop)

        hooks = ScanHooks(start=start, may_start=self._may_start, partition_done=partition_done, leader_rechecks=True)
        job = asyncio.ensure_future(
            asyncio.to_thread(sharded, [name], lambda f, _check: found.append(f), None, stop, hooks=hooks)
        )
        try:
            await asyncio.shield(job)
        except asyncio.CancelledError:
            # Lost leadership or stopping: the engine stops its worker processes; wait for that (it gives
            # up within a poll), so none outlives this leader's tasks.
            stop.set()
            await asyncio.wait([job])
            raise

    def _new_check(self, name: str) -> LedgerCheck:
        if name == REFERENCES:
            watch = self.deletion_watch
            return ReferencesCheck(self.ctx, last_seen=watch.last_seen if watch is not None else None)
        return CHECK_CLASSES[name](self.ctx, self.locations, marker=self._mark_ledger if name == "ledger" else None)

    async def _references_done(self, check: ReferencesCheck, started_ms: int) -> None:
        """After a complete references pass: remember what it saw present (last-seen times for any leader
        and for `check`), and watch it."""
        try:
            await SeenStore(self.zk).put(check.seen_now(started_ms), self._guard())
        except SAVE_ERRORS as exc:
            log.info("references state not saved", error=str(exc))
        if self.deletion_watch is not None:
            await self.deletion_watch.arm(check)

    def _report_rack_problem(self, check: str, seen: FindingSummary) -> None:
        finding = self.locations.finding() if self.locations is not None else None
        if finding is not None:
            self.reporter.report(check, finding, seen)

    async def loop(self, name: str, every: float) -> None:
        """Check `name` every `every` seconds (sooner when triggered), resuming an interrupted scan."""
        board = self.state.tasks
        trigger = self._triggers[name]
        while True:
            st = await self.states.read(name)
            resume = st.cursor if st.run_started_ms is not None else None
            due_at = (st.last_success_ms or 0) / 1000 + every
            wait = 0.0 if resume is not None else max(0.0, due_at - time.time())
            if wait > 0:
                board.schedule(name, time.time() + wait)
                board.set_state(name, TaskState.IDLE)
                try:
                    async with asyncio.timeout(wait):
                        await trigger.wait()
                except TimeoutError:
                    pass
            trigger.clear()
            start = next_id(resume) if resume is not None else None
            if resume is not None:
                log.info("resuming an interrupted scan", check=name, after=resume.qualified_name)
            await self.states.save(name, CheckState(st.last_success_ms, int(time.time() * 1000), resume))
            if await self.run_check(name, start):
                await self.states.save(name, CheckState(int(time.time() * 1000), None, None))
            else:
                await asyncio.sleep(min(60.0, every))

    async def _marker(self, ledger: LedgerId, findings: list[Finding]) -> None:
        """Optional (ledger_check.mark_under_replicated): mark confirmed losses for Java workers."""
        if not self.settings.ledger_check.mark_under_replicated:
            return
        bookies = set()
        for f in findings:
            if f.category in (
                Category.ENTRY_NO_REPLICA,
                Category.ENTRY_BELOW_ACK_QUORUM,
                Category.ENTRY_BELOW_WRITE_QUORUM,
                Category.DIGEST_MISMATCH,
            ):
                bookies |= {m["bookie"] for m in f.detail.get("missing", []) if m.get("missing")}
                if f.bookie:
                    bookies.add(f.bookie)
        if bookies and not await self.ctx.store.is_replication_disabled():
            await self.ctx.store.mark_underreplicated(ledger, sorted(bookies), self._guard())

    async def _mark_ledger(self, md: LedgerMetadata, findings: list[Finding]) -> None:
        """The ledger check's marker hook (in this process)."""
        await self._marker(md.ledger_id, findings)

    async def priority(self, ledgers: set[LedgerId], why: str) -> bool:
        """Scrutinise these ledgers now (e.g. a reincarnated bookie's), outside the schedule; True when
        the run finished."""
        records = [r for r in await self.ctx.store.read_ledgers(sorted(ledgers)) if r is not None]
        log.warning("priority scrutiny", reason=why, ledgers=len(records))
        return await self.run_check("scrutiny", None, records=records, full=False)

    def recheckable(self) -> list[str]:
        """The checks a re-check of one ledger may run: those this daemon schedules that judge each ledger
        alone (not references: its findings are about what the application lists, a ledger_missing one
        about a ledger that is gone, and its deletion watch and passes keep them)."""
        every = intervals(self.settings)
        return [n for n in CHECK_CLASSES if every.get(n, 0) > 0 and judges_each_ledger_alone(n)]

    async def recheck(self, ledgers: set[LedgerId], why: str, checks: set[str] | None = None) -> dict[str, int]:
        """Re-check `ledgers` now with `checks` (default: the checks with an active finding on each), and
        resolve what those checks no longer see on them; a ledger deleted meanwhile has its findings of
        those checks resolved. Returns the ledgers re-checked per check."""
        allowed = set(self.recheckable())
        flagged = self.state.findings.flagged_ledgers()
        per_check: dict[str, set[LedgerId]] = {}
        for lid in ledgers:
            for name in (checks if checks is not None else flagged.get(lid, set())) & allowed:
                per_check.setdefault(name, set()).add(lid)
        done: dict[str, int] = {}
        for name, ids in sorted(per_check.items()):
            ordered = sorted(ids)
            got = await self.ctx.store.read_ledgers(ordered)
            records = [r for r in got if r is not None]
            gone = {lid for lid, r in zip(ordered, got, strict=True) if r is None}
            if gone:
                for rec in self.state.findings.resolve_absent(name, (), ledgers=gone):
                    self.metrics.finding_resolved(rec.category)
                self.reporter.sync_findings()
            log.info("re-checking ledgers", check=name, reason=why, ledgers=len(ordered), deleted=len(gone))
            if records:
                await self.run_check(name, None, records=records, full=False)
            done[name] = len(ordered)
        return done


def _ledger_of(record: LedgerRecord | CorruptLedger) -> LedgerId:
    return record.ledger_id if isinstance(record, CorruptLedger) else record.metadata.ledger_id
