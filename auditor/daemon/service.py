"""`bk-auditor run`: the long-running, leader-elected service.

Every replica serves the admin API, health and metrics and takes part in the election. Only the leader
runs checks and writes: the bookie watch, scrutiny, the periodic ledger check and the open-ledger check
run as independent asyncio tasks (a long scan never delays the reaction to a lost bookie), each under
the supervisor (supervisor.py): a task that fails is logged, counted and restarted alone with backoff,
its siblings and the leadership untouched. On losing leadership or the ZooKeeper session every leader
task is cancelled at once; writes are guarded by the leader's vote in any case, and by the loop
watchdog's confirmation after a freeze (watchdog.py). ZooKeeper blinking never ends the process: it
steps down and rejoins.
"""

from __future__ import annotations

import asyncio
import functools
import signal
import threading
import time
from concurrent.futures import Future
from typing import Any

from kazoo.exceptions import KazooException

from auditor.admin.server import AdminServer
from auditor.bookie.results import Outcome
from auditor.checks.build import Locations, audit_context
from auditor.checks.catalog import CHECKS as CHECK_CLASSES
from auditor.checks.catalog import judges_each_ledger_alone
from auditor.checks.context import AuditContext
from auditor.checks.references import ReferencesCheck
from auditor.checks.runner import CheckRun, LedgerCheck, Progress
from auditor.checks.sharded import PartitionDone, ScanHooks, ShardedChecks
from auditor.durability.findings import Category, Finding, FindingSummary
from auditor.durability.ids import LedgerId, next_id
from auditor.durability.model import LedgerMetadata
from auditor.durability.repairblocked import blocked_finding
from auditor.logging import get_logger, log_new_finding
from auditor.metadata.checkstate import CheckState, CheckStateStore
from auditor.metadata.election import LeaderElection
from auditor.metadata.errors import (
    ConcurrentUpdateError,
    CorruptZnodeError,
    LayoutMismatchError,
    MetadataConfigError,
    NotLeaderError,
    UnsupportedLayoutError,
)
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.referencestate import SeenStore
from auditor.metadata.repairstate import RepairBlocks
from auditor.metadata.zkstore import ZooKeeperMetadataStore
from auditor.settings import Settings

from .backend import StateBackend
from .bookie_watch import BookieWatch
from .deletion_watch import DeletionWatch
from .ledger_index import LedgerIndex
from .metrics import AuditorMetrics, RunSummary
from .operator import OperatorBackend
from .repair_workers import RepairWorkers
from .state import DaemonState, TaskState
from .supervisor import Supervisor
from .watchdog import ConfirmedGuard, LoopWatchdog

log = get_logger("auditor.daemon")

BOOKIE_WATCH = "bookies"
REFERENCES = "references"
UNDERREPLICATION = "underreplication"
CURSOR_SAVE_SECONDS = 5.0
FINDINGS_SYNC_SECONDS = 1.0
# What a state save may meet that the next save retries: not the leader (any more), ZooKeeper trouble.
SAVE_ERRORS = (NotLeaderError, ConcurrentUpdateError, KazooException, asyncio.TimeoutError)


def _seen() -> FindingSummary:
    """The findings one run reported, as keys and counts only: a pass over a million WQ == AQ ledgers
    reports a million informational findings, and the store already holds them."""
    return FindingSummary(keep=lambda _: False)


def intervals(settings: Settings) -> dict[str, float]:
    s = settings.schedule
    return {
        "scrutiny": s.scrutiny_seconds,
        "ledger": s.ledger_check_seconds,
        "open": s.open_ledger_check_seconds,
        "references": s.references_seconds,
    }


class Auditor:
    """One replica: the leader runs the checks; every replica serves state."""

    def __init__(
        self,
        settings: Settings,
        state: DaemonState,
        metrics: AuditorMetrics,
        sharded: ShardedChecks | None = None,
        scan_processes: int = 1,
    ) -> None:
        self.settings = settings
        # The checks that judge each ledger alone, run on `scan_processes` worker processes
        # (schedule.scan_processes > 1; injected by the CLI: the daemon does not import their engine).
        self.sharded = sharded
        self.scan_processes = scan_processes if sharded is not None else 1
        self.state = state
        self.metrics = metrics
        self.ctx: AuditContext | None = None
        self.locations: Locations | None = None
        self.election: LeaderElection | None = None
        self.index: LedgerIndex | None = None
        self.bookie_watch: BookieWatch | None = None
        self.deletion_watch: DeletionWatch | None = None  # the leader's, after its first references pass
        self.checkstate: CheckStateStore | None = None
        self.tasks: Supervisor | None = None  # the leader's tasks (None while standing by)
        self.repair_blocks: RepairBlocks | None = None  # the repair role's records, read by the leader
        self._triggers: dict[str, asyncio.Event] = {n: asyncio.Event() for n in CHECK_CLASSES}
        self._runs: dict[str, CheckRun] = {}  # the runs in progress (a scan on worker processes too)
        self._ready = asyncio.Event()
        self._synced_at = float("-inf")  # when the findings gauges were last synced (monotonic)
        self._sync_later: asyncio.TimerHandle | None = None
        self.fatal: str | None = None  # why the configuration cannot work with this cluster (exit 2)
        for name, every in intervals(settings).items():
            state.tasks.register(name, enabled=every > 0, interval_seconds=every or None)
            metrics.register_check(name)
        state.tasks.register(BOOKIE_WATCH, interval_seconds=settings.schedule.bookie_check_seconds or None)
        metrics.register_check(BOOKIE_WATCH)
        state.recheck_depth = lambda: sum(len(r.queue) for r in self._runs.values())

    # ----------------------------------------------------------------------------- reporting
    def report(self, check: str, finding: Finding, seen: FindingSummary | None = None) -> None:
        rec = self.state.findings.add(finding, check)
        if seen is not None:
            seen.add(finding)
        if rec.times_seen == 1:
            log_new_finding(finding, logger=log, check=check)
            self.metrics.finding_reported(finding)
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
                self._sync_later = asyncio.get_running_loop().call_later(wait, self._sync_findings)
                return
            except RuntimeError:  # no loop (a caller outside the daemon's): now
                pass
        self._sync_findings()

    def _sync_findings(self) -> None:
        if self._sync_later is not None:
            self._sync_later.cancel()
            self._sync_later = None
        self._synced_at = time.monotonic()
        self.metrics.sync_findings(self.state.findings)

    @property
    def zk(self) -> ZooKeeperMetadataStore:
        """The checks' store as what it is here: the election, the bookie watch and our own state are
        ZooKeeper's."""
        assert self.ctx is not None and isinstance(self.ctx.store, ZooKeeperMetadataStore)
        return self.ctx.store

    # ----------------------------------------------------------------------------- leader tasks
    def _guard(self) -> WriteGuard:
        assert self.election is not None and self.state.leadership is not None
        return ConfirmedGuard(self.election.guard, self.state.leadership)

    def leader_guard(self) -> WriteGuard | None:
        """The leader's write guard for an operator's change through the admin API; None on a standby."""
        return self._guard() if self.tasks is not None and self.election is not None else None

    def _fire(self, name: str, coro: Any) -> None:
        """A one-shot background job of the leader (cancelled with the leader's tasks)."""
        if self.tasks is None:
            coro.close()
            return
        self.tasks.fire(name, coro)

    async def _gate(self) -> None:
        """Before each ledger: wait while paused or outside the time-of-day windows."""
        while True:
            await self.state.pause.wait_resumed()
            if self.settings.schedule.in_window(None):
                return
            await asyncio.sleep(30)

    def _may_start(self) -> bool:
        """`_gate` for a scan on worker processes, asked from its engine's thread: False holds back new
        partitions."""
        return not self.state.pause.paused and self.settings.schedule.in_window(None)

    async def _run_check(
        self, name: str, start: LedgerId | None, records: list[Any] | None = None, full: bool = True
    ) -> bool:
        """One run of check `name` (from `start`, or of `records` only); True when it finished."""
        assert self.ctx is not None and self.checkstate is not None
        seen = _seen()
        if self.locations is not None and name == "scrutiny":
            await self.locations.refresh()  # racks may have moved since the last run
            self._report_rack_problem(name, seen)
        check: LedgerCheck = self._new_check(name)
        board = self.state.tasks
        last_save = [time.monotonic()]

        def progress(p: Progress) -> None:
            board.progress(name, p.ledgers_done, cursor=p.cursor.qualified_name if p.cursor else None)
            self.metrics.ledger_checked(name)
            if full and p.cursor is not None and time.monotonic() - last_save[0] > CURSOR_SAVE_SECONDS:
                last_save[0] = time.monotonic()
                self._fire(
                    "checkstate-save", self._save_state(name, CheckState(run_started_ms=started_ms, cursor=p.cursor))
                )

        run = CheckRun(
            self.ctx, check, lambda f: self.report(name, f, seen), progress=progress, gate=self._gate, queue=None
        )
        self._runs[name] = run
        started_ms = int(time.time() * 1000)
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
            board.fail(name, exc)
            log.error("check failed", check=name, error=str(exc), exc_info=True)
        finally:
            self._runs.pop(name, None)
        if name == "scrutiny":
            self._report_rack_problem(name, seen)  # also when a rack script failed during the run
        if ok and isinstance(check, ReferencesCheck) and full and start is None and check.refs is not None:
            await self._references_done(check, started_ms)
        if ok:
            board.succeed(name)
            if full and start is None:
                # A complete pass: what it no longer sees is resolved.
                for rec in self.state.findings.resolve_absent(name, seen):
                    self.metrics.finding_resolved(rec.category)
            self.metrics.observe_run(
                RunSummary(
                    name,
                    run.stats.started,
                    run.stats.finished or time.time(),
                    True,
                    run.stats.ledgers_checked,
                    seen.counts(),
                    full and start is None,
                )
            )
            self._sync_findings()
            for bookie, n in run.stats.bookie_requests.items():
                self.metrics.bookie_requests.labels(bookie, name).inc(n)
            for bookie, n in run.stats.bookie_unknown.items():
                self.metrics.bookie_request_errors.labels(bookie, name, "unknown").inc(n)
            log.info(
                "check finished",
                **run.stats.as_dict(),
                findingsByCategory=seen.counts(),
                processes=self.scan_processes if elsewhere is not None else 1,
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
                await self._save_state(name, CheckState(run_started_ms=started_ms, cursor=cursor))

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
        assert self.ctx is not None
        if name == REFERENCES:
            watch = self.deletion_watch
            return ReferencesCheck(self.ctx, last_seen=watch.last_seen if watch is not None else None)
        return CHECK_CLASSES[name](self.ctx, self.locations, marker=self._mark_ledger if name == "ledger" else None)

    async def _references_done(self, check: ReferencesCheck, started_ms: int) -> None:
        """After a complete references pass: remember what it saw present (last-seen times for any leader
        and for `check`), and watch it."""
        try:
            await SeenStore(self.zk).write(check.seen_now(started_ms), self._guard())
        except SAVE_ERRORS as exc:
            log.info("references state not saved", error=str(exc))
        if self.deletion_watch is not None:
            await self.deletion_watch.arm(check)

    def _report_rack_problem(self, check: str, seen: FindingSummary) -> None:
        finding = self.locations.finding() if self.locations is not None else None
        if finding is not None:
            self.report(check, finding, seen)

    async def _save_state(self, name: str, st: CheckState) -> None:
        assert self.checkstate is not None
        try:
            await self.checkstate.write(name, st, self._guard())
        except SAVE_ERRORS as exc:  # anything else is a bug: it fails the task and is counted
            log.info("check state not saved", check=name, error=str(exc))

    async def _read_state(self, name: str) -> CheckState:
        """Our check state; a corrupt one is reported once and replaced by a fresh state."""
        assert self.checkstate is not None
        try:
            return await self.checkstate.read(name)
        except CorruptZnodeError as exc:
            log.warning(
                "bk-auditor state is corrupt: replacing it with a fresh state",
                check=name,
                path=exc.path,
                problem=exc.problem,
            )
            self.state.tasks.note_error(name, f"{exc} (replaced with a fresh state)")
            self.metrics.state_replaced(f"checks/{name}")
            fresh = CheckState()
            await self._save_state(name, fresh)  # guarded; if it fails, the next read replaces it again
            return fresh

    async def _check_loop(self, name: str, every: float) -> None:
        assert self.checkstate is not None
        board = self.state.tasks
        trigger = self._triggers[name]
        while True:
            st = await self._read_state(name)
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
            await self._save_state(name, CheckState(st.last_success_ms, int(time.time() * 1000), resume))
            if await self._run_check(name, start):
                await self._save_state(name, CheckState(int(time.time() * 1000), None, None))
            else:
                await asyncio.sleep(min(60.0, every))

    async def _marker(self, ledger: LedgerId, findings: list[Finding]) -> None:
        """Optional (ledger_check.mark_under_replicated): mark confirmed losses for Java workers."""
        if not self.settings.ledger_check.mark_under_replicated:
            return
        assert self.ctx is not None
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

    async def _priority(self, ledgers: set[LedgerId], why: str) -> None:
        """Scrutinise these ledgers now (e.g. a reincarnated bookie's), outside the schedule."""
        assert self.ctx is not None
        records = [r for r in await self.ctx.store.read_ledgers(sorted(ledgers)) if r is not None]
        log.warning("priority scrutiny", reason=why, ledgers=len(records))
        await self._run_check("scrutiny", None, records=records, full=False)

    async def _underreplication_loop(self) -> None:
        assert self.ctx is not None
        grace = self.settings.under_replication.grace_seconds
        while True:
            n, oldest, past = 0, None, 0
            now = time.time() * 1000
            marked: set[LedgerId] = set()
            async for m in self.ctx.store.list_markers():
                n += 1
                marked.add(m.ledger_id)
                if m.ctime > 0:
                    age = (now - m.ctime) / 1000
                    oldest = age if oldest is None else max(oldest, age)
                    past += 1 if grace > 0 and age > grace else 0
            self.metrics.set_under_replication(n, oldest, past)
            await self._report_repair_blocked(marked, now)
            await asyncio.sleep(self.settings.under_replication.poll_seconds)

    async def _report_repair_blocked(self, marked: set[LedgerId], now_ms: float) -> None:
        """The repair role's blocked records (any worker's, ours or another process's) as `repair_blocked`
        findings of the leader, so operators see, count and alert on them where they see everything else;
        only for ledgers still marked (a record outlives its marker only until the next repair)."""
        seen = _seen()
        if self.repair_blocks is None or self.repair_blocks.store is not self.zk:
            self.repair_blocks = RepairBlocks(self.zk)
        records = await self.repair_blocks.readable()
        for lid, block in sorted(records.items()):
            if lid in marked:
                retry = max(0.0, (block.not_before_ms - now_ms) / 1000)
                self.report(UNDERREPLICATION, blocked_finding(lid, block, round(retry, 1)), seen)
        for rec in self.state.findings.resolve_absent(
            UNDERREPLICATION, seen, categories={Category.REPAIR_BLOCKED.value}
        ):
            self.metrics.finding_resolved(rec.category)
            self._sync_findings()

    async def _watch_bookies(self) -> None:
        """The bookie watch, fresh at each (re)start: nothing half-done is carried over from a failure."""
        assert self.ctx is not None and self.tasks is not None
        self.index = LedgerIndex(self.zk)
        watch = BookieWatch(
            self.zk,
            self.index,
            self._guard,
            lambda f: self.report(BOOKIE_WATCH, f),
            self._priority,
            metrics=self.metrics,
            default_delay=self.settings.schedule.lost_bookie_delay_seconds,
            periodic_seconds=self.settings.schedule.bookie_check_seconds,
            spawn=self.tasks.fire,
            on_corrupt_state=self._bookie_state_replaced,
            probe=self._answers,
        )
        self.bookie_watch = watch
        self.state.tasks.start(BOOKIE_WATCH)
        await watch.run()

    async def _answers(self, bookie: str) -> bool:
        """Whether `bookie` answers a read-only GET_BOOKIE_INFO now (the bookie watch's probe of an
        unregistered bookie); a timeout or a refused connection is no answer."""
        assert self.ctx is not None
        pool = self.ctx.bookies
        got = await pool.client(bookie).ping(timeout=pool.config.liveness_timeout)
        return got.outcome is Outcome.PRESENT

    def _bookie_state_replaced(self, exc: CorruptZnodeError) -> None:
        self.state.tasks.note_error(BOOKIE_WATCH, f"{exc} (replaced with a fresh state)")
        self.metrics.state_replaced("bookies")

    async def _lead(self) -> None:
        """Everything the leader does, as independent supervised tasks (one failing is restarted alone);
        cancelled as a whole on losing leadership."""
        assert self.ctx is not None
        tasks = self.tasks = Supervisor(metrics=self.metrics, board=self.state.tasks)
        refs = self.settings.references
        self.deletion_watch = DeletionWatch(
            self.zk,
            lambda f: self.report(REFERENCES, f),
            enabled=refs.deletion_watch,
            confirm_seconds=refs.confirm_seconds,
            on_deletion=self.metrics.listed_ledger_deletions.inc,
        )
        try:
            tasks.keep(BOOKIE_WATCH, self._watch_bookies)
            tasks.keep(UNDERREPLICATION, self._underreplication_loop)
            for name, every in intervals(self.settings).items():
                if every > 0:
                    tasks.keep(name, functools.partial(self._check_loop, name, every))
            await asyncio.Event().wait()  # until cancelled
        finally:
            self.tasks = None
            self.bookie_watch = None
            if self.deletion_watch is not None:
                self.deletion_watch.close()
                self.deletion_watch = None
            await tasks.close()

    # ----------------------------------------------------------------------------- admin backend
    async def trigger(self, check: str) -> bool:
        if check == BOOKIE_WATCH:
            watch = self.bookie_watch
            if watch is None:
                return False
            watch.audit_now()  # like Java's triggeraudit: audit lost bookies now, skipping any delay
            return True
        if check not in self._triggers:
            return False
        if check in self._runs:
            return False
        self._triggers[check].set()
        return True

    # ----------------------------------------------------------------------------- main loop
    async def run(self, stop: asyncio.Event, admin: AdminServer) -> None:
        backoff = 1.0
        while not stop.is_set():
            try:
                judges = self.settings.schedule.scrutiny_seconds > 0
                async with audit_context(self.settings, judges_placement=judges) as (ctx, locations):
                    self.ctx, self.locations = ctx, locations
                    self.checkstate = CheckStateStore(self.zk)
                    await admin.set_health(ready=True)
                    backoff = 1.0
                    await self._elect_and_lead(stop)
            except asyncio.CancelledError:
                raise
            except (MetadataConfigError, UnsupportedLayoutError, LayoutMismatchError) as exc:
                # The configuration does not fit this cluster (e.g. a wrong ledgers root): retrying cannot
                # help, and standing by unready would hide it. Exit 2, having created nothing.
                self.fatal = str(exc)
                log.error("refusing to run: the configuration does not match the cluster", error=str(exc))
                stop.set()
                return
            except Exception as exc:
                log.error("cannot reach the metadata store; retrying", error=str(exc), retryInSeconds=backoff)
                await admin.set_health(ready=False)
                try:
                    async with asyncio.timeout(backoff):
                        await stop.wait()
                except TimeoutError:
                    pass
                backoff = min(backoff * 2, 30.0)
            finally:
                self.ctx = None

    async def _follow(self, election: LeaderElection) -> None:
        """While standing by, keep track of who leads (for status and for naming the leader on refusals)."""
        lead = self.state.leadership
        assert lead is not None
        while True:
            try:
                current = await election.current_leader()
                lead.set(False, current[1] if current else None)
            except Exception as exc:
                log.info("cannot tell who leads", error=str(exc))
            await asyncio.sleep(2.0)

    async def confirm_leadership(self) -> bool:
        """For the loop watchdog: a ZooKeeper round trip showing our vote is still ours."""
        election = self.election
        return election is not None and await election.vote_is_ours()

    def _new_election(self) -> LeaderElection:
        s = self.settings
        return LeaderElection(
            self.zk.bridge,
            s.election_path,
            s.election.identity,
            java_compatible=s.election.join_java_election,
            ledgers_root=s.ledgers_root,
        )

    async def _elect_and_lead(self, stop: asyncio.Event) -> None:
        assert self.ctx is not None
        s = self.settings
        election = self._new_election()
        self.election = election
        lead = self.state.leadership
        assert lead is not None
        await election.start()
        try:
            while not stop.is_set():
                stop_wait = asyncio.ensure_future(stop.wait())
                became = asyncio.ensure_future(election.wait_leader())
                watching = asyncio.ensure_future(self._follow(election))
                await asyncio.wait([stop_wait, became], return_when=asyncio.FIRST_COMPLETED)
                for t in (stop_wait, became, watching):
                    t.cancel()
                if stop.is_set():
                    break
                lead.set(True, s.election.identity, vote_path=election.vote_path)
                self.metrics.set_leader(True)
                log.warning("became the leader: starting checks", identity=s.election.identity)
                leading = asyncio.ensure_future(self._lead())
                deposed = asyncio.ensure_future(election.wait_follower())
                stop_wait = asyncio.ensure_future(stop.wait())
                done, _ = await asyncio.wait([leading, deposed, stop_wait], return_when=asyncio.FIRST_COMPLETED)
                for t in (leading, deposed, stop_wait):
                    t.cancel()
                try:
                    await leading
                except BaseException as exc:  # cancelled (leader tasks fail alone, inside _lead)
                    if not isinstance(exc, asyncio.CancelledError):
                        log.error("leader tasks failed; stepping down", error=repr(exc))
                lead.set(False, None)
                self.metrics.set_leader(False)
                log.warning("not the leader any more: checks stopped", identity=s.election.identity)
                if leading in done and not stop.is_set():
                    # Not a leader task (those are restarted alone) but the leading itself broke: give
                    # another replica the chance, then rejoin.
                    _said_released(await election.close())
                    await asyncio.sleep(1.0)
                    election = self._new_election()
                    self.election = election
                    await election.start()
        finally:
            _said_released(await election.close())


def _said_released(vote: str | None) -> None:
    """Log the vote an election deleted; nothing when it had none (a daemon that never got as far as
    voting, e.g. one refusing a wrong ledgers root, must not claim to have released one)."""
    if vote is not None:
        log.info("election node released", vote=vote)


def daemon_metrics(settings: Settings) -> AuditorMetrics:
    """The daemon's metrics: every check's series, the process collectors, `cluster` from the settings."""
    metrics = AuditorMetrics(
        cluster=settings.metrics_cluster,
        checks=list(CHECK_CLASSES),
        process_metrics=True,
        namespace_limit=settings.metrics.namespace_limit,
    )
    metrics.set_info(version=__import__("auditor").__version__, identity=settings.election.identity)
    return metrics


async def serve(settings: Settings, sharded: ShardedChecks | None = None, scan_processes: int = 1) -> int:
    """Run until SIGTERM/SIGINT; exit 0 after releasing the election node. `sharded`: the engine that runs
    the per-ledger checks on `scan_processes` worker processes (None: in this process)."""
    state = DaemonState(settings.election.identity)
    metrics = daemon_metrics(settings)
    assert state.leadership is not None
    metrics.follow_leadership(state.leadership)
    server = metrics.serve(settings.metrics.bind) if settings.metrics.enabled else None
    background = Supervisor(metrics=metrics)  # this process's own tasks (the leader's have their own)
    auditor = Auditor(settings, state, metrics, sharded, scan_processes)
    questions = OperatorBackend(
        lambda: auditor.ctx,
        election_path=settings.election_path,
        timeout=settings.admin.question_timeout_seconds,
        leader_guard=auditor.leader_guard,
    )
    # ExplainLedger reads bookies: bounded with the operator's questions (one at a time, question_timeout).
    backend = StateBackend(state, trigger=auditor.trigger, explain=questions.explain)
    admin = AdminServer(
        backend,
        settings.admin.bind,
        tls_cert=settings.admin.tls_cert,
        tls_key=settings.admin.tls_key,
        tls_client_ca=settings.admin.tls_client_ca,
        authorized_clients=settings.admin.authorized_clients,
        unauthenticated_reads=settings.admin.unauthenticated_reads,
        probe_bind=settings.admin.probe_bind,
        supervisor=background,
        questions=questions,
        tls_reloaded=metrics.admin_tls_reloaded,
        max_concurrent_calls=settings.admin.max_concurrent_calls,
    )
    port = await admin.start()
    admin.follow_leadership(state.leadership)
    watchdog = LoopWatchdog(
        state.leadership,
        auditor.confirm_leadership,
        background.fire,
        session_timeout=settings.zookeeper.session_timeout_seconds,
    )
    background.keep("watchdog", watchdog.run)
    background.keep("metrics-sync", lambda: _sync_metrics(metrics, state))
    RepairWorkers(settings, background).start()  # repair.workers_beside_auditor processes, 0 by default
    await admin.set_health(live=True, ready=False, leader=False)
    log.info(
        "bk-auditor started",
        identity=settings.election.identity,
        adminPort=port,
        adminTls="mutual" if settings.admin.tls_client_ca else ("server" if settings.admin.tls_cert else "off"),
        probePort=admin.probe_port,
        metrics=settings.metrics.bind if server else None,
        cluster=settings.metrics_cluster,
        election=settings.election_path,
        repairWorkers=settings.repair.workers_beside_auditor,
        scanProcesses=scan_processes if sharded is not None else 1,
    )
    if scan_processes < settings.schedule.scan_processes:
        log.warning(
            "schedule.scan_processes is more than the CPUs this process may use: using fewer",
            configured=settings.schedule.scan_processes,
            using=scan_processes,
        )
    if settings.admin.tls_cert is not None and settings.admin.tls_client_ca is None:
        log.warning(
            "admin API: TLS without admin.tls_client_ca: no client can authenticate, so pause, resume and "
            "trigger are refused"
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = asyncio.ensure_future(auditor.run(stop, admin))
    await stop.wait()
    log.warning("stopping: health NOT_SERVING, checks stopped")
    await admin.set_health(live=False, ready=False, leader=False)
    try:
        await asyncio.wait_for(runner, timeout=10)
    except (TimeoutError, asyncio.CancelledError):
        runner.cancel()
    await background.close()
    await admin.stop(grace=1.0)
    if server is not None:
        server.close()
    return 2 if auditor.fatal else 0


async def _sync_metrics(metrics: AuditorMetrics, state: DaemonState) -> None:
    while True:
        metrics.sync_state(state)
        await asyncio.sleep(5)
