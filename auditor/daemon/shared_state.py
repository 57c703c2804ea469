"""What every replica shares through ZooKeeper, so that the operator's view survives a restart or a
failover: the leader's active findings and the cluster-wide pause (our own subtree, written only by the
leader through its guarded writes).

* The leader saves its actionable findings (`auditor.metadata.own.findingstate`) at most every
  SAVE_SECONDS, only when they moved, and once more as it steps down gracefully.
* A standby follows them (and the pause) every time it looks at the election, and holds them as its own
  store: its `findings`, `status` and gauges say what the leader last saved, and say so (FindingsSource).
  Alert rules read the findings gauges across replicas, so a failover neither resolves nor re-fires them.
* A replica taking over reads both once more before it says it leads: its first gauges, and its first
  checks' pause, are the cluster's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from auditor.board.findings import FindingRecord
from auditor.logging import get_logger
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.own.findingstate import SavedFinding, SavedFindings, Snapshot
from auditor.metadata.own.pausestate import PauseNode, PauseState
from auditor.metadata.own.recipe import OwnZnodeStore

from .metrics import AuditorMetrics
from .reporter import SAVE_ERRORS
from .state import DaemonState

log = get_logger("auditor.daemon")

SAVE_SECONDS = 2.0  # at most this often (more when a save takes long: see save_loop)
SAVE_BACKOFF_MAX = 10.0
# Findings only sighted again (no new one, none resolved) are saved at most this often: a pass re-sights
# every finding, and each save then rewrites every shard (and every standby re-reads them).
SIGHTINGS_SAVE_SECONDS = 60.0


def saved(rec: FindingRecord) -> SavedFinding:
    return SavedFinding(rec.finding, rec.check, rec.first_seen, rec.last_seen, rec.times_seen)


def record(s: SavedFinding) -> FindingRecord:
    return FindingRecord(s.finding.dedup_key(), s.finding, s.check, s.first_seen, s.last_seen, s.times_seen)


class SharedState:
    """One replica's side of the shared findings and pause. `zk()`: the replica's ZooKeeper store now."""

    def __init__(self, state: DaemonState, metrics: AuditorMetrics, zk: Callable[[], OwnZnodeStore]) -> None:
        self.state = state
        self.metrics = metrics
        self._zk = zk
        self._held = Snapshot()
        self._saver: SavedFindings | None = None
        self._saved_version: int | None = None
        self._saved_sightings: int | None = None
        self._saved_at = float("-inf")  # monotonic
        self._corrupt_reported: set[str] = set()

    def _findings(self) -> SavedFindings:
        zk = self._zk()
        if self._saver is None or self._saver.store is not zk:
            self._saver = SavedFindings(zk)
        return self._saver

    # ------------------------------------------------------------------------------------ standby
    async def follow(self) -> None:
        """A standby's look: take the leader's saved findings (only the shards that moved) and the pause."""
        await self._take_pause()
        try:
            changed = await self._findings().refresh(self._held)
        except CorruptZnodeError as exc:
            self._corrupt(exc)
            changed = True  # the shards read are held; the corrupt one is left out until it is rewritten
        manifest = self._held.manifest
        src = self.state.findings_source
        if manifest is None:
            src.kind, src.saved_by, src.as_of = "none", "", None
            if changed:
                self.state.findings.replace_all(())
        else:
            src.kind, src.saved_by, src.as_of = "persisted", manifest.saved_by, manifest.saved_at_ms / 1000
            if changed:
                self.state.findings.replace_all(record(s) for s in self._held.findings())
        if changed:
            self.metrics.sync_findings(self.state.findings)

    async def _take_pause(self) -> None:
        node = PauseNode(self._zk())
        try:
            got = await node.get()
        except CorruptZnodeError as exc:
            self._corrupt(exc)
            return
        self.apply_pause(got)

    def apply_pause(self, got: PauseState) -> None:
        pause = self.state.pause
        if got.paused:
            pause.pause(got.reason, got.by, got.since_ms / 1000 if got.since_ms else None)
            self.state.tasks.pause_all()
        elif pause.paused:
            pause.resume()
            self.state.tasks.resume_all()
        self.metrics.set_paused(pause.paused)

    def _corrupt(self, exc: CorruptZnodeError) -> None:
        if exc.path not in self._corrupt_reported:
            self._corrupt_reported.add(exc.path)
            log.warning(
                "shared state unreadable: left out until the leader rewrites it", path=exc.path, problem=exc.problem
            )
            self.metrics.state_replaced(exc.path.rsplit("/bk-auditor/", 1)[-1])

    # ------------------------------------------------------------------------------------ leader
    async def take_over(self) -> None:
        """Before this replica says it leads: the cluster's pause and the findings the last leader saved
        become this leader's (to be confirmed or resolved by its own checks)."""
        self._held = Snapshot()  # read everything again: a standby's copy may lag
        await self.follow()
        self.state.findings_source.kind = "leader"
        self._findings().forget_written()
        self._saved_version = self._saved_sightings = None
        log.info(
            "findings taken over from the last leader",
            savedBy=self.state.findings_source.saved_by or None,
            findings=len(self.state.findings),
            paused=self.state.pause.paused,
        )

    def stepped_down(self) -> None:
        """Back to standing by: the next look reads the saved findings whole."""
        self._held = Snapshot()
        self.state.findings_source.kind = "none"

    async def save(self, guard: WriteGuard, *, sightings_too: bool = False) -> bool:
        """Save the actionable findings if one came or went since the last save, or if they were only
        sighted again and SIGHTINGS_SAVE_SECONDS passed (or `sightings_too`); True if written."""
        store = self.state.findings
        version, sightings = store.actionable_version, store.sightings_version
        if version == self._saved_version:
            if sightings == self._saved_sightings:
                return False
            if not sightings_too and time.monotonic() - self._saved_at < SIGHTINGS_SAVE_SECONDS:
                return False
        await self._findings().save(
            (saved(r) for r in store.actionable_records()),
            self.state.identity,
            int(time.time() * 1000),
            guard,
        )
        self._saved_version, self._saved_sightings = version, sightings
        self._saved_at = time.monotonic()
        return True

    async def save_loop(self, guard: Callable[[], WriteGuard]) -> None:
        """The leader's task: save what moved, at most every SAVE_SECONDS (three times the last save's time
        when that is more, up to SAVE_BACKOFF_MAX: a store of many findings is not re-encoded back to back,
        and a slow ZooKeeper is not written back to back)."""
        while True:
            started = time.monotonic()
            try:
                await self.save(guard())
            except SAVE_ERRORS as exc:
                log.info("findings not saved; retrying", error=str(exc))
            await asyncio.sleep(min(SAVE_BACKOFF_MAX, max(SAVE_SECONDS, 3 * (time.monotonic() - started))))

    async def set_pause(self, paused: bool, reason: str, guard: WriteGuard) -> bool:
        """The operator's pause or resume, written for the whole cluster, then applied here; True if it
        changed the state."""
        was = self.state.pause.paused
        now_ms = int(time.time() * 1000)
        if paused:
            since = int((self.state.pause.since or now_ms / 1000) * 1000) if was else now_ms
            want = PauseState(True, reason, self.state.identity, since)
        else:
            want = PauseState()
        await PauseNode(self._zk()).put(want, guard)
        self.apply_pause(want)
        return was != paused
