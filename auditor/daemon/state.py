"""What the daemon knows right now, kept in memory and served by the admin API and the metrics.

* `FindingStore`: confirmed findings, deduplicated by `Finding.dedup_key()`, with first/last seen and a
  sighting count; a later full run of the same check that no longer sees a finding resolves it.
* `TaskBoard`: per check task its state, last start / success / error, progress, rate-based ETA and cursor.
* `PauseControl`: the operator's pause switch (with reason) that tasks await between units of work.
* `Leadership`: whether this process leads, and who does.

No I/O here; the clock is injectable so tests control time.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import time
from collections.abc import Callable, Container, Hashable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from auditor.aio import error_text
from auditor.daemon.compact import CompactFindings, LedgerKey, Shape, Sighting, ledger_key, ledger_of
from auditor.durability.findings import Finding, FindingSummary, parse_whole_ledger_key, whole_ledger_key
from auditor.durability.ids import LedgerId

Clock = Callable[[], float]


def category_of(finding: Finding) -> str:
    return str(finding.category)  # Category.__str__ is its stable value


def severity_of(finding: Finding) -> str:
    return str(finding.severity)


# ------------------------------------------------------------------------------------------ findings


@dataclass(frozen=True, slots=True)
class FindingRecord:
    """A finding as the store tracks it. `finding` is the latest sighting."""

    key: Hashable
    finding: Finding
    check: str | None
    first_seen: float
    last_seen: float
    times_seen: int
    resolved_at: float | None = None

    @property
    def active(self) -> bool:
        return self.resolved_at is None

    @property
    def category(self) -> str:
        return category_of(self.finding)

    @property
    def severity(self) -> str:
        return severity_of(self.finding)


@dataclass(frozen=True, slots=True)
class FindingPage:
    """The records a query shows and how many matched."""

    records: list[FindingRecord]
    total: int


class FindingStore:
    """Deduplicating finding store. Active findings are kept until resolved; the newest `keep_resolved`
    resolved ones are kept for the API, the rest dropped. Informational findings about a whole ledger are
    kept compactly (`auditor.daemon.compact`) and come back as records like the others."""

    def __init__(self, clock: Clock = time.time, keep_resolved: int = 1000) -> None:
        self._clock = clock
        self._keep_resolved = keep_resolved
        self._active: dict[Hashable, FindingRecord] = {}
        self._compact = CompactFindings()
        self._resolved: dict[Hashable, FindingRecord] = {}
        # Kept as findings come and go, so the metrics read them without a pass over every finding: a
        # scan of 100,000 WQ == AQ ledgers makes 100,000 informational findings, and one pass per report
        # made the scan quadratic (a 100k-ledger pass did not end in 5 minutes; bench/daemon_scan.py).
        self._counts: dict[str, int] = {}  # active findings per category
        self._ledgers: dict[str, dict[LedgerId, int]] = {}  # per category: active findings per ledger (not compact)
        self._actionable: dict[Hashable, Finding] = {}  # the active findings above informational

    def __len__(self) -> int:
        return len(self._active) + len(self._compact)

    def __contains__(self, key: object) -> bool:
        if key in self._active:
            return True
        whole = parse_whole_ledger_key(key)
        return whole is not None and self._compact.get(whole[0], ledger_key(whole[1])) is not None

    def add(self, finding: Finding, check: str | None = None, now: float | None = None) -> FindingRecord:
        """Record a sighting. A new key starts at times_seen 1; a known one keeps first_seen. A finding
        seen again after it was resolved becomes active again (first_seen restarts)."""
        now = self._clock() if now is None else now
        key = finding.dedup_key()
        category = category_of(finding)
        old = self._active.get(key)
        old_compact: Sighting | None = None
        lkey: LedgerKey | None = None
        if old is None and finding.whole_ledger:
            lkey = ledger_key(finding.ledger)  # type: ignore[arg-type]  # whole_ledger: it has one
            old_compact = self._compact.get(category, lkey)
        if lkey is not None:
            shape = self._compact.shape_of(finding, check or (old_compact.shape.check if old_compact else None))
            if shape is not None:
                return self._add_compact(key, category, lkey, finding, shape, old_compact, now)
        if old_compact is not None:  # kept compactly until now (e.g. no longer informational)
            assert lkey is not None
            self._compact.pop(category, lkey)
            self._uncount_category(category)
            rec = FindingRecord(
                key, finding, check or old_compact.shape.check, old_compact.first_seen, now, old_compact.times_seen + 1
            )
        elif old is None:
            self._resolved.pop(key, None)
            rec = FindingRecord(key, finding, check, now, now, 1)
        else:
            rec = replace(old, finding=finding, check=check or old.check, last_seen=now, times_seen=old.times_seen + 1)
            self._uncount(old)
        self._active[key] = rec
        self._count(rec)
        return rec

    def _add_compact(
        self,
        key: Hashable,
        category: str,
        lkey: LedgerKey,
        finding: Finding,
        shape: Shape,
        old: Sighting | None,
        now: float,
    ) -> FindingRecord:
        pulsar = self._compact.shared_pulsar(finding.pulsar)
        if old is not None:
            old.shape, old.pulsar, old.last_seen = shape, pulsar, now
            old.times_seen += 1
            return FindingRecord(key, finding, shape.check, old.first_seen, now, old.times_seen)
        self._resolved.pop(key, None)
        self._compact.put(category, lkey, Sighting(shape, pulsar, now, now, 1))
        self._counts[category] = self._counts.get(category, 0) + 1
        return FindingRecord(key, finding, shape.check, now, now, 1)

    def _count(self, rec: FindingRecord) -> None:
        category, ledger = rec.category, rec.finding.ledger
        self._counts[category] = self._counts.get(category, 0) + 1
        if ledger is not None:
            per = self._ledgers.setdefault(category, {})
            per[ledger] = per.get(ledger, 0) + 1
        if rec.finding.actionable:
            self._actionable[rec.key] = rec.finding

    def _uncount(self, rec: FindingRecord) -> None:
        category, ledger = rec.category, rec.finding.ledger
        self._uncount_category(category)
        if ledger is not None:
            per = self._ledgers[category]
            if per[ledger] > 1:
                per[ledger] -= 1
            else:
                del per[ledger]
                if not per:
                    del self._ledgers[category]
        self._actionable.pop(rec.key, None)

    def _uncount_category(self, category: str) -> None:
        left = self._counts[category] - 1
        if left:
            self._counts[category] = left
        else:
            del self._counts[category]

    @staticmethod
    def _record(category: str, lkey: LedgerKey, sighting: Sighting) -> FindingRecord:
        ledger = ledger_of(lkey)
        return FindingRecord(
            whole_ledger_key(category, ledger),
            sighting.shape.finding(ledger, sighting.pulsar),
            sighting.shape.check,
            sighting.first_seen,
            sighting.last_seen,
            sighting.times_seen,
        )

    def _compact_record(self, key: Hashable) -> FindingRecord | None:
        whole = parse_whole_ledger_key(key)
        if whole is None:
            return None
        lkey = ledger_key(whole[1])
        sighting = self._compact.get(whole[0], lkey)
        return self._record(whole[0], lkey, sighting) if sighting is not None else None

    def get(self, key: Hashable) -> FindingRecord | None:
        return self._active.get(key) or self._compact_record(key) or self._resolved.get(key)

    def resolve(self, key: Hashable, now: float | None = None) -> FindingRecord | None:
        rec = self._active.pop(key, None)
        if rec is not None:
            self._uncount(rec)
        else:
            rec = self._compact_record(key)
            if rec is None:
                return None
            self._compact.pop(rec.category, ledger_key(rec.finding.ledger))  # type: ignore[arg-type]
            self._uncount_category(rec.category)
        done = replace(rec, resolved_at=self._clock() if now is None else now)
        self._resolved[key] = done
        while len(self._resolved) > self._keep_resolved:
            self._resolved.pop(next(iter(self._resolved)))
        return done

    def resolve_absent(
        self,
        check: str,
        seen: FindingSummary | Iterable[Hashable],
        *,
        ledgers: Container[LedgerId] | None = None,
        categories: Container[str] | None = None,
        now: float | None = None,
    ) -> list[FindingRecord]:
        """After a complete run of `check`: resolve its active findings whose key was not `seen`.
        `ledgers` / `categories` limit the sweep to what the run covered (a partial run passes the
        ledgers it did check, so nothing outside them is resolved). Returns the resolved records."""
        seen_keys: Container[Hashable] = seen if isinstance(seen, (set, frozenset, FindingSummary)) else set(seen)
        out: list[FindingRecord] = []
        for key, rec in list(self._active.items()):
            if rec.check != check or key in seen_keys:
                continue
            if ledgers is not None and (rec.finding.ledger is None or rec.finding.ledger not in ledgers):
                continue
            if categories is not None and rec.category not in categories:
                continue
            done = self.resolve(key, now)
            if done is not None:
                out.append(done)
        for category in self._compact.categories():
            if categories is not None and category not in categories:
                continue
            for lkey, sighting in list(self._compact.ledgers(category).items()):
                if sighting.shape.check != check:
                    continue
                ledger = ledger_of(lkey)
                if ledgers is not None and ledger not in ledgers:
                    continue
                if isinstance(seen_keys, FindingSummary) and type(lkey) is int:
                    if seen_keys.has_whole_ledger(category, lkey):
                        continue  # asked without building the key: most of a pass's findings are seen again
                key = whole_ledger_key(category, ledger)
                if key in seen_keys:
                    continue
                done = self.resolve(key, now)
                if done is not None:
                    out.append(done)
        return out

    def query(
        self,
        *,
        category: str | None = None,
        ledger: LedgerId | None = None,
        bookie: str | None = None,
        check: str | None = None,
        include_resolved: bool = False,
        limit: int | None = None,
    ) -> list[FindingRecord]:
        """Filtered records, most severe first, then oldest first (stable for paging by eye)."""
        return self.page(
            category=category,
            ledger=ledger,
            bookie=bookie,
            check=check,
            include_resolved=include_resolved,
            limit=limit,
        ).records

    def page(
        self,
        *,
        category: str | None = None,
        ledger: LedgerId | None = None,
        bookie: str | None = None,
        check: str | None = None,
        include_resolved: bool = False,
        limit: int | None = None,
    ) -> FindingPage:
        """The first `limit` (all when None or 0) of the filtered records in `query`'s order, and how many
        matched. Compact findings are made records only when they are among those shown: listing a few of
        a million informational findings must not stall the event loop."""

        def matches(f: Finding, rec_check: str | None) -> bool:
            if bookie is not None and f.bookie != bookie and bookie not in (f.ensemble or ()):
                return False
            return check is None or rec_check == check

        pools: list[Iterable[FindingRecord]] = [self._active.values()]
        if include_resolved:
            pools.append(self._resolved.values())
        out = []
        for pool in pools:
            for rec in pool:
                if category is not None and rec.category != category:
                    continue
                if ledger is not None and rec.finding.ledger != ledger:
                    continue
                if matches(rec.finding, rec.check):
                    out.append(rec)
        total = len(out)
        shown: list[tuple[str, LedgerKey, Sighting]] = []
        for c in [category] if category is not None else self._compact.categories():
            if ledger is not None:
                sighting = self._compact.get(c, ledger_key(ledger))
                found = {ledger_key(ledger): sighting} if sighting is not None else {}
            else:
                found = self._compact.ledgers(c)
            if bookie is None and check is None:
                matching: Iterable[tuple[LedgerKey, Sighting]] = found.items()
                total += len(found)
            else:
                kept = [(k, s) for k, s in found.items() if matches(s.shape.template, s.shape.check)]
                matching = kept
                total += len(kept)
            if limit:
                # All of one severity (info): in query order by first seen, then key (category, then id).
                matching = heapq.nsmallest(limit, matching, key=lambda ks: (ks[1].first_seen, _id_order(ks[0])))
            shown.extend((c, k, s) for k, s in matching)
        out.extend(self._record(c, k, s) for c, k, s in shown)
        out.sort(key=lambda r: (r.resolved_at is not None, _severity_rank(r.finding), r.first_seen, str(r.key)))
        return FindingPage(out[:limit] if limit else out, total)

    def actionable_findings(self) -> Iterator[Finding]:
        """The active findings above informational (kept apart: the metrics read them on every report)."""
        return iter(self._actionable.values())

    def counts(self) -> dict[str, int]:
        """Active findings per category."""
        return dict(self._counts)

    def ledger_counts(self) -> dict[str, int]:
        """Distinct ledgers with an active finding, per category (what the Java gauges count)."""
        out: dict[str, int] = {}
        for c in set(self._ledgers) | set(self._compact.categories()):
            compact = self._compact.ledgers(c)
            out[c] = len(compact) + sum(1 for lid in self._ledgers.get(c, ()) if ledger_key(lid) not in compact)
        return out


def _id_order(key: LedgerKey) -> tuple[int, int]:
    """(scope, ledger) of a compact ledger key: the order of their qualified names."""
    return (0, key) if type(key) is int else (key.scope, key.ledger)  # type: ignore[union-attr]


def _severity_rank(finding: Finding) -> int:
    return finding.severity.rank


# ------------------------------------------------------------------------------------------ tasks


class TaskState(str, enum.Enum):
    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"
    DISABLED = "disabled"
    FAILED = "failed"  # the task itself crashed; the supervisor restarts it at `restart_at`

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """A snapshot of one task. Times are epoch seconds (None = never)."""

    name: str
    state: TaskState = TaskState.IDLE
    interval_seconds: float | None = None
    last_start: float | None = None
    last_finish: float | None = None
    last_success: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    done: int = 0
    total: int | None = None
    cursor: str | None = None
    next_run: float | None = None
    runs: int = 0
    failures: int = 0
    eta_seconds: float | None = None
    rate_per_second: float | None = None
    restarts: int = 0  # times the supervisor restarted the task after a crash
    restart_at: float | None = None  # while FAILED: when it is restarted

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(1.0, self.done / self.total)


@dataclass
class _Task:
    info: TaskInfo
    state_before_pause: TaskState | None = None


class TaskBoard:
    """Per-task status for the scheduler to update and the API/metrics to read."""

    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock
        self._tasks: dict[str, _Task] = {}

    def register(self, name: str, *, enabled: bool = True, interval_seconds: float | None = None) -> TaskInfo:
        """Add a task (idempotent: an existing task only gets its enabled state and interval updated)."""
        t = self._tasks.get(name)
        state = TaskState.IDLE if enabled else TaskState.DISABLED
        if t is None:
            t = self._tasks[name] = _Task(TaskInfo(name, state, interval_seconds))
        else:
            new_state = state if t.info.state in (TaskState.IDLE, TaskState.DISABLED) else t.info.state
            t.info = replace(t.info, state=new_state, interval_seconds=interval_seconds)
        return self.get(name)

    def names(self) -> list[str]:
        return list(self._tasks)

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def _task(self, name: str) -> _Task:
        try:
            return self._tasks[name]
        except KeyError:
            raise KeyError(f"unknown task {name!r}; known: {', '.join(self._tasks) or 'none'}") from None

    def _set(self, name: str, **changes: Any) -> TaskInfo:
        t = self._task(name)
        t.info = replace(t.info, **changes)
        return t.info

    def start(self, name: str, *, total: int | None = None, cursor: str | None = None) -> TaskInfo:
        return self._set(
            name,
            state=TaskState.RUNNING,
            last_start=self._clock(),
            done=0,
            total=total,
            cursor=cursor,
            runs=self._task(name).info.runs + 1,
        )

    def progress(self, name: str, done: int, *, total: int | None = None, cursor: str | None = None) -> TaskInfo:
        """Set absolute progress (units done so far in this run)."""
        info = self._task(name).info
        return self._set(
            name,
            done=done,
            total=info.total if total is None else total,
            cursor=info.cursor if cursor is None else cursor,
        )

    def advance(self, name: str, n: int = 1, *, cursor: str | None = None) -> TaskInfo:
        info = self._task(name).info
        return self.progress(name, info.done + n, cursor=cursor)

    def succeed(self, name: str) -> TaskInfo:
        now = self._clock()
        return self._set(name, state=self._finished_state(name), last_finish=now, last_success=now)

    def fail(self, name: str, error: BaseException | str) -> TaskInfo:
        """A run ended with an error (the task goes on)."""
        now = self._clock()
        info = self._task(name).info
        return self._set(
            name,
            state=self._finished_state(name),
            last_finish=now,
            last_error=error_text(error),
            last_error_at=now,
            failures=info.failures + 1,
        )

    def note_error(self, name: str, error: BaseException | str) -> TaskInfo:
        """Something went wrong and was dealt with (e.g. corrupt state replaced): shown as the last error."""
        return self._set(name, last_error=error_text(error), last_error_at=self._clock())

    def crash(self, name: str, error: BaseException | str, *, restart_at: float | None) -> TaskInfo:
        """The task itself died; it is restarted at `restart_at`."""
        now = self._clock()
        info = self._task(name).info
        return self._set(
            name,
            state=TaskState.FAILED,
            last_error=error_text(error),
            last_error_at=now,
            failures=info.failures + 1,
            restart_at=restart_at,
        )

    def stopped(self, name: str) -> TaskInfo:
        """The task was stopped on purpose (stepping down): no longer running, nor waiting for a restart."""
        info = self._task(name).info
        state = TaskState.IDLE if info.state in (TaskState.RUNNING, TaskState.FAILED) else info.state
        return self._set(name, state=state, restart_at=None)

    def restarted(self, name: str) -> TaskInfo:
        info = self._task(name).info
        state = TaskState.IDLE if info.state is TaskState.FAILED else info.state
        return self._set(name, state=state, restarts=info.restarts + 1, restart_at=None)

    def _finished_state(self, name: str) -> TaskState:
        """A run that ends while paused stays paused, and goes back to idle (not running) on resume."""
        t = self._task(name)
        if t.info.state is TaskState.PAUSED:
            t.state_before_pause = TaskState.IDLE
            return TaskState.PAUSED
        return TaskState.IDLE

    def schedule(self, name: str, next_run: float | None) -> TaskInfo:
        return self._set(name, next_run=next_run)

    def set_state(self, name: str, state: TaskState) -> TaskInfo:
        return self._set(name, state=TaskState(state))

    def pause_all(self) -> None:
        """Mark every enabled task paused (remembering what it was doing)."""
        for t in self._tasks.values():
            if t.info.state is not TaskState.DISABLED and t.info.state is not TaskState.PAUSED:
                t.state_before_pause = t.info.state
                t.info = replace(t.info, state=TaskState.PAUSED)

    def resume_all(self) -> None:
        for t in self._tasks.values():
            if t.info.state is TaskState.PAUSED:
                t.info = replace(t.info, state=t.state_before_pause or TaskState.IDLE)
                t.state_before_pause = None

    def get(self, name: str) -> TaskInfo:
        """A snapshot with the rate and ETA computed at the current time."""
        info = self._task(name).info
        now = self._clock()
        rate = eta = None
        if (
            info.state in (TaskState.RUNNING, TaskState.PAUSED)
            and info.last_start is not None
            and (info.last_finish is None or info.last_finish < info.last_start)
        ):
            elapsed = now - info.last_start
            if elapsed > 0 and info.done > 0:
                rate = info.done / elapsed
                if info.total is not None:
                    eta = max(0, info.total - info.done) / rate
        return replace(info, rate_per_second=rate, eta_seconds=eta)

    def snapshot(self) -> list[TaskInfo]:
        return [self.get(n) for n in self._tasks]


# ------------------------------------------------------------------------------------------ pause


class PauseControl:
    """The operator's pause switch. Tasks `await wait_resumed()` between units of work."""

    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock
        self._running = asyncio.Event()
        self._running.set()
        self.reason: str = ""
        self.since: float | None = None

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self, reason: str = "") -> bool:
        """Pause; True if this changed the state (a repeated pause only updates the reason)."""
        changed = not self.paused
        self._running.clear()
        self.reason = reason
        if changed:
            self.since = self._clock()
        return changed

    def resume(self) -> bool:
        changed = self.paused
        self._running.set()
        self.reason = ""
        self.since = None
        return changed

    async def wait_resumed(self) -> None:
        await self._running.wait()


# ------------------------------------------------------------------------------------------ leadership


class Leadership:
    """Whether we lead, who leads (identity, when known) and since when; listeners hear every change.

    `is_leader` is what the election told us. `confirmed` is what we tell others (admin status, the
    `leader` health, the is_leader metric) and what guards our writes: a process whose event loop did not
    run for longer than `stall_limit` seconds (SIGSTOP, a VM or container frozen, swapping) may have lost
    its ZooKeeper session meanwhile and a standby may lead by now, so from the moment such a stall is
    visible leadership is unconfirmed until a ZooKeeper round trip shows our vote still exists
    (`confirm()`). `beat()` is called by the loop watchdog; `stall_limit` None turns the check off.
    """

    def __init__(self, identity: str, clock: Clock = time.time, monotonic: Clock = time.monotonic) -> None:
        self.identity = identity
        self._clock = clock
        self._monotonic = monotonic
        self.is_leader = False
        self.leader: str | None = None
        self.since: float | None = None
        self.vote_path: str | None = None
        self.changes = 0
        self.stall_limit: float | None = None
        self.unconfirmed_since: float | None = None
        self._last_beat = monotonic()
        self._listeners: list[Callable[[bool], object]] = []

    def add_listener(self, callback: Callable[[bool], object]) -> None:
        self._listeners.append(callback)

    def set(self, is_leader: bool, leader: str | None = None, vote_path: str | None = None) -> bool:
        """Record the current state; True if our own leadership flipped. Becoming leader is confirmed
        (the election just read our vote as the first one)."""
        flipped = is_leader != self.is_leader
        self.is_leader = is_leader
        self.leader = self.identity if is_leader else leader
        self.vote_path = vote_path if is_leader else None
        if flipped:
            self.unconfirmed_since = None
            self.since = self._clock()
            self.changes += 1
            for cb in list(self._listeners):
                cb(is_leader)
        return flipped

    # ----------------------------------------------------------------------------- stalls
    def beat(self) -> float:
        """The loop ran now; returns the seconds since the previous beat."""
        now = self._monotonic()
        gap, self._last_beat = now - self._last_beat, now
        return gap

    @property
    def stalled(self) -> bool:
        """The loop has not beaten for longer than the stall limit (seen before the watchdog runs again)."""
        return self.stall_limit is not None and self._monotonic() - self._last_beat > self.stall_limit

    def suspect(self) -> bool:
        """Leadership unconfirmed until `confirm()`; True if this changed anything."""
        if not self.is_leader or self.unconfirmed_since is not None:
            return False
        self.unconfirmed_since = self._clock()
        return True

    def confirm(self) -> None:
        self.unconfirmed_since = None

    @property
    def confirmed(self) -> bool:
        return self.is_leader and self.unconfirmed_since is None and not self.stalled

    @property
    def status(self) -> str:
        """`leader` (confirmed), `unconfirmed` (elected, but a stall since: being checked) or `standby`."""
        if not self.is_leader:
            return "standby"
        return "leader" if self.confirmed else "unconfirmed"


# ------------------------------------------------------------------------------------------ all of it


@dataclass
class DaemonState:
    """Everything above, for one daemon process."""

    identity: str
    findings: FindingStore = field(default_factory=FindingStore)
    tasks: TaskBoard = field(default_factory=TaskBoard)
    pause: PauseControl = field(default_factory=PauseControl)
    leadership: Leadership | None = None
    started_at: float = field(default_factory=time.time)
    recheck_depth: Callable[[], int] = lambda: 0

    def __post_init__(self) -> None:
        if self.leadership is None:
            self.leadership = Leadership(self.identity)
