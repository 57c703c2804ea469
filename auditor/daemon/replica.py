"""`Auditor`: one replica of the daemon. Every replica takes part in the election; the one elected leads.

The leader runs, as independent tasks under its own supervisor (supervisor.py): the bookie watch
(bookie_watch.py), one loop per scheduled check (check_loops.py) and the under-replication watch
(under_replication.py); a task that fails is restarted alone with backoff, its siblings and the
leadership untouched. On losing leadership or the ZooKeeper session every leader task is cancelled at
once; writes are guarded by the leader's vote in any case, and by the loop watchdog's confirmation after a
freeze (watchdog.py). ZooKeeper blinking never ends the process: it steps down and rejoins.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

from auditor.admin.errors import StandbyError
from auditor.admin.server import AdminServer
from auditor.bookie.results import Outcome
from auditor.checks.build import Locations, audit_context
from auditor.checks.context import AuditContext
from auditor.checks.per_ledger import CHECKS as CHECK_CLASSES
from auditor.checks.runner import CheckRun
from auditor.checks.sharded import ShardedChecks
from auditor.durability.findings import Category, Finding, FindingSummary
from auditor.durability.ids import LedgerId
from auditor.logging import get_logger
from auditor.metadata.bookkeeper.election import LeaderElection
from auditor.metadata.errors import (
    LayoutMismatchError,
    MetadataConfigError,
    UnsupportedLayoutError,
)
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.own.checkstate import CheckStateStore
from auditor.metadata.own.scrubstate import ScrubStateStore
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.settings import Settings

from .bookie_watch import BookieWatch
from .check_loops import REFERENCES, CheckLoops, intervals
from .deletion_watch import DeletionWatch
from .ledger_index import LedgerIndex
from .metrics import AuditorMetrics
from .reporter import CheckStates, Reporter, count_replaced
from .resolution_watch import RESOLUTION, ResolutionWatch
from .scrub_loop import SCRUB, ScrubLoop
from .shared_state import SharedState
from .state import DaemonState
from .supervisor import Supervisor
from .under_replication import UNDERREPLICATION, UnderReplication
from .watchdog import ConfirmedGuard

log = get_logger("auditor.daemon")

BOOKIE_WATCH = "bookies"
FINDINGS_SAVE = "findings-save"
# The findings that say a copy is missing or bad: while one is active on a ledger naming a reincarnated
# bookie, that bookie's finding stays.
COPY_LOSS = frozenset(
    {
        Category.ENTRY_NO_REPLICA,
        Category.ENTRY_BELOW_ACK_QUORUM,
        Category.ENTRY_BELOW_WRITE_QUORUM,
        Category.TRUNCATION_RISK,
        Category.DIGEST_MISMATCH,
    }
)
TAKE_OVER_SECONDS = 10.0  # to read the saved findings and pause before leading (else lead without them)


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
        # (schedule.scan_processes > 1; the engine is made by `service.scan_engine`).
        self.sharded = sharded
        self.scan_processes = scan_processes if sharded is not None else 1
        self.state = state
        self.metrics = metrics
        self.reporter = Reporter(state, metrics)
        self.ctx: AuditContext | None = None
        self.locations: Locations | None = None
        self.election: LeaderElection | None = None
        self.index: LedgerIndex | None = None
        self.bookie_watch: BookieWatch | None = None
        self.deletion_watch: DeletionWatch | None = None  # the leader's, after its first references pass
        self.check_states: CheckStates | None = None
        self.tasks: Supervisor | None = None  # the leader's tasks (None while standing by)
        self.checks: CheckLoops | None = None  # the leader's check loops (None while standing by)
        self.under_replication = UnderReplication(settings, state, metrics, self.reporter, lambda: self.zk)
        self.shared = SharedState(state, metrics, lambda: self.zk)  # saved findings and the pause
        self.resolution: ResolutionWatch | None = None  # the leader's prompt re-checks
        self._triggers: dict[str, asyncio.Event] = {n: asyncio.Event() for n in CHECK_CLASSES}
        self._runs: dict[str, CheckRun] = {}  # the runs in progress (a scan on worker processes too)
        self.fatal: str | None = None  # why the configuration cannot work with this cluster (exit 2)
        for name, every in intervals(settings).items():
            state.tasks.register(name, enabled=every > 0, interval_seconds=every or None)
            metrics.register_check(name)
        state.tasks.register(BOOKIE_WATCH, interval_seconds=settings.schedule.bookie_check_seconds or None)
        metrics.register_check(BOOKIE_WATCH)
        state.tasks.register(SCRUB, enabled=settings.scrub.enabled, interval_seconds=settings.scrub.period_days * 86400)
        state.recheck_depth = lambda: sum(len(r.queue) for r in self._runs.values())

    def report(self, check: str, finding: Finding, seen: FindingSummary | None = None) -> None:
        """`finding` of `check` into the store (reporter.py)."""
        self.reporter.report(check, finding, seen)

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

    async def _watch_bookies(self, checks: CheckLoops) -> None:
        """The bookie watch, fresh at each (re)start: nothing half-done is carried over from a failure."""
        assert self.ctx is not None and self.tasks is not None
        self.index = LedgerIndex(self.zk)
        watch = BookieWatch(
            self.zk,
            self.index,
            self._guard,
            lambda f: self.report(BOOKIE_WATCH, f),
            checks.priority,
            metrics=self.metrics,
            default_delay=self.settings.schedule.lost_bookie_delay_seconds,
            periodic_seconds=self.settings.schedule.bookie_check_seconds,
            spawn=self.tasks.fire,
            on_corrupt_state=count_replaced(self.state, self.metrics, BOOKIE_WATCH, "bookies"),
            probe=self._answers,
            on_returned=self._bookies_returned,
            settle=self._settle_reincarnations,
        )
        self.bookie_watch = watch
        self.state.tasks.start(BOOKIE_WATCH)
        await watch.run()

    def _after_recheck(self) -> None:
        self.under_replication.wake()
        self._settle_reincarnations()

    def _settle_reincarnations(self) -> None:
        """Resolve a `bookie_reincarnated` finding once its cause is gone: the bookie's ledgers were
        scrutinised after it came back (by this leader; one taking over from another scrutinises them
        first) and none of the ledgers that still name it misses a copy, whether nothing was lost or the
        repair has put it back (the repair's re-checks call this too)."""
        watch, checks = self.bookie_watch, self.checks
        if watch is None or checks is None:
            return
        store = self.state.findings
        missing = {
            rec.finding.ledger
            for rec in store.actionable_records()
            if rec.finding.category in COPY_LOSS and rec.finding.ledger is not None
        }
        for rec in list(store.actionable_records()):
            bookie = rec.finding.bookie
            if rec.finding.category is not Category.BOOKIE_REINCARNATED or bookie is None:
                continue
            ledgers = watch.index.ledgers_on(bookie)
            if bookie not in watch.scrutinised:
                watch.scrutinised[bookie] = 0.0  # once: a failed run leaves it to the next leader's pass
                self._fire("priority-scrutiny", self._scrutinise_then_settle(bookie, ledgers))
                continue
            if watch.scrutinised[bookie] and not ledgers & missing:
                if store.resolve(rec.key) is not None:
                    self.metrics.finding_resolved(rec.category)
                    self.reporter.sync_findings()
                    log.info("reincarnated bookie settled: no ledger naming it misses a copy", bookieId=bookie)

    async def _scrutinise_then_settle(self, bookie: str, ledgers: set[LedgerId]) -> None:
        checks, watch = self.checks, self.bookie_watch
        if checks is None or watch is None:
            return
        if await checks.priority(ledgers, f"bookie {bookie} reincarnated (taken over)"):
            watch.scrutinised[bookie] = time.time()
        self._settle_reincarnations()

    def _bookies_returned(self, bookies: set[str]) -> None:
        if self.resolution is not None:
            self.resolution.bookies_returned(bookies)

    async def _answers(self, bookie: str) -> bool:
        """Whether `bookie` answers a read-only GET_BOOKIE_INFO now (the bookie watch's probe of an
        unregistered bookie); a timeout or a refused connection is no answer."""
        assert self.ctx is not None
        pool = self.ctx.bookies
        got = await pool.client(bookie).ping(timeout=pool.config.liveness_timeout)
        return got.outcome is Outcome.PRESENT

    async def _lead(self) -> None:
        """Everything the leader does, as independent supervised tasks (one failing is restarted alone);
        cancelled as a whole on losing leadership."""
        assert self.ctx is not None and self.check_states is not None
        tasks = self.tasks = Supervisor(metrics=self.metrics, board=self.state.tasks)
        refs = self.settings.references
        self.deletion_watch = DeletionWatch(
            self.zk,
            lambda f: self.report(REFERENCES, f),
            enabled=refs.deletion_watch,
            confirm_seconds=refs.confirm_seconds,
            on_deletion=self.metrics.listed_ledger_deletions.inc,
        )
        checks = self.checks = CheckLoops(
            self.settings,
            self.state,
            self.metrics,
            self.reporter,
            self.check_states,
            ctx=self.ctx,
            locations=self.locations,
            deletion_watch=self.deletion_watch,
            guard=self._guard,
            fire=self._fire,
            triggers=self._triggers,
            runs=self._runs,
            sharded=self.sharded,
            scan_processes=self.scan_processes,
        )
        self.resolution = ResolutionWatch(
            self.zk,
            self.state.findings,
            checks.recheck,
            after_recheck=self._after_recheck,
            checks=set(checks.recheckable()),
        )
        self.reporter.on_new_actionable = self.resolution.finding_new
        try:
            tasks.keep(FINDINGS_SAVE, functools.partial(self.shared.save_loop, self._guard))
            tasks.keep(RESOLUTION, self.resolution.run)
            tasks.keep(BOOKIE_WATCH, functools.partial(self._watch_bookies, checks))
            tasks.keep(UNDERREPLICATION, self.under_replication.loop)
            for name, every in intervals(self.settings).items():
                if every > 0:
                    tasks.keep(name, functools.partial(checks.loop, name, every))
            if self.settings.scrub.enabled:
                scrub = ScrubLoop(
                    self.settings,
                    self.state,
                    self.metrics,
                    self.reporter,
                    ctx=self.ctx,
                    store=ScrubStateStore(self.zk),
                    guard=self._guard,
                    gate=checks.gate,
                )
                tasks.keep(SCRUB, scrub.run)
            await asyncio.Event().wait()  # until cancelled
        finally:
            self.tasks = None
            self.checks = None
            self.bookie_watch = None
            self.resolution = None
            self.reporter.on_new_actionable = None
            await self._last_save()
            if self.deletion_watch is not None:
                self.deletion_watch.close()
                self.deletion_watch = None
            await tasks.close()

    async def _last_save(self) -> None:
        """Stepping down: save the findings once more if the vote still holds (a graceful stop or a
        rollout), so the next leader starts from this one's last word."""
        if self.election is None or self.state.leadership is None:
            return
        try:
            async with asyncio.timeout(2.0):
                await self.shared.save(self._guard(), sightings_too=True)
        except Exception as exc:  # deposed, or ZooKeeper gone: the last periodic save stands
            log.info("findings not saved on stepping down", error=str(exc) or type(exc).__name__)

    # ----------------------------------------------------------------------------- admin backend
    async def set_pause(self, paused: bool, reason: str) -> bool:
        """The operator's pause or resume, for the whole cluster (kept in ZooKeeper by the leader only)."""
        guard = self.leader_guard()
        lead = self.state.leadership
        assert lead is not None
        if guard is None or not lead.confirmed:
            raise StandbyError(lead.leader if not lead.is_leader else None)
        return await self.shared.set_pause(paused, reason, guard)

    async def recheck(self, ledgers: set[LedgerId], checks: set[str] | None) -> dict[str, int] | None:
        """Re-check `ledgers` now with `checks` (None: every check this daemon schedules), for the admin
        API's trigger of one ledger or finding; None on a standby."""
        if self.checks is None:
            return None
        every = set(self.checks.recheckable()) if checks is None else checks
        return await self.checks.recheck(ledgers, "operator's trigger", every)

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
                    self.check_states = CheckStates(CheckStateStore(self.zk), self._guard, self.state, self.metrics)
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
            try:
                await self.shared.follow()  # the leader's saved findings and the cluster's pause
            except Exception as exc:
                log.info("cannot read the leader's saved findings", error=str(exc) or type(exc).__name__)
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
                try:
                    async with asyncio.timeout(TAKE_OVER_SECONDS):
                        await self.shared.take_over()
                except Exception as exc:  # lead with what was followed; the checks rebuild the rest
                    log.error("cannot read the last leader's findings and pause", error=str(exc) or type(exc).__name__)
                    self.state.findings_source.kind = "leader"
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
                self.shared.stepped_down()
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
