"""The checks on local worker processes, no Spark: `bk-auditor check --processes N` and
`bk-auditor sweep --master processes[N]`.

Python runs a scan on one thread, so one process uses one core. Cutting the id space as the Spark planner
does (`plan.py`) and running the partitions on N worker processes (forked by a fork server that has
imported the code once), each with its own event loop, ZooKeeper session and bookie connections
(`worker.run_partitions`, the executors' code), spreads a scan over N cores.

`check_on_processes` is the engine of the one-shot command and of the daemon's scans
(`schedule.scan_processes`). For the command it hands the findings back as each partition ends, in id
order, so the command prints, deduplicates and counts them exactly as it does its own; for the daemon
(`ScanHooks`, auditor/checks/sharded.py) as each partition ends, with the cursor below which every
partition has ended and the ledgers left to re-check, and it starts a partition only when the daemon
allows (pause, time windows). Either way it divides the caller's ZooKeeper and bookie budgets among the
processes, so N processes put no more load on a bookie or on ZooKeeper than one does.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import os
import re
import select
import threading
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from multiprocessing.context import BaseContext
from typing import Any

from auditor.checks.context import RunStats
from auditor.checks.runner import Progress, ProgressSink
from auditor.checks.sharded import FindingSink, PartitionDone, RunHere, ScanHooks, Suspect
from auditor.durability.findings import Finding
from auditor.durability.ids import LedgerId
from auditor.errors import AuditorError
from auditor.processes.cpus import available_cpus
from auditor.settings import Settings

from .capabilities import SharedCapabilityBook
from .partitions import ID_SPACE_END, IdPartition, id_at
from .plan import checked_plan
from .worker import FINDING, STATS, SUSPECT, Row, run_partitions, settings_to_wire, use_capability_book

PARTITIONS_PER_PROCESS = 4  # a slow partition leaves the others' processes busy
# A partition's rows come back in one piece, and the command holds those of the partitions that finished
# before the one it is waiting for: with WQ == AQ (one informational finding per ledger) 25,000-ledger
# partitions took the command from 80 to 237 MB (bench/check_scaling, 200k ledgers, 2 processes).
LEDGERS_PER_PARTITION = 10_000
# Below this many ledgers a one-shot check without an explicit process count runs in its own process:
# starting the worker pool takes seconds (3.3 s measured on 2 cores), in which one process checks a couple
# of thousand ledgers (about 450/s at the shipped defaults), so workers only pay for themselves above it.
IN_PROCESS_BELOW = 2_000


def local_processes(master: str | None) -> int | None:
    """`processes[N]` (or `processes[*]`: one per available CPU): the Spark-free engine with N worker
    processes; None for any other master (Spark's)."""
    if master is None:
        return None
    m = re.fullmatch(r"processes\[(\d+|\*)\]", master.strip())
    if m is None:
        return None
    n = available_cpus() if m.group(1) == "*" else int(m.group(1))
    if n < 1:
        raise ValueError(f"--master {master}: at least one process")
    return n


OWNER_POLL_SECONDS = 1.0


def _wait_for_end(pid: int) -> None:
    """Return once process `pid` has ended (at once if it has already): a pidfd, readable when the process
    exits (never confused with a later process given the same number), or a poll where there is none."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd (an old kernel, another OS): poll the number
        while True:
            try:
                os.kill(pid, 0)
            except (ProcessLookupError, PermissionError):  # gone (or the number is another user's now)
                return
            time.sleep(OWNER_POLL_SECONDS)
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)


def _start_worker(owner: int, book: SharedCapabilityBook | None = None) -> None:
    """A worker's initializer: it ends with its owner (`_end_with_owner`) and shares its owner's capability
    book (`worker.use_capability_book`)."""
    _end_with_owner(owner)
    if book is not None:
        use_capability_book(book)


_book: SharedCapabilityBook | None = None


def capability_book(context: BaseContext) -> SharedCapabilityBook:
    """This process's capability book, made on first use: every pool it starts hands it to its workers, so
    what one learns of a bookie (bookie/capabilities.py) lasts for the owner's life (a daemon's every scan),
    per bookie incarnation."""
    global _book
    if _book is None:
        _book = SharedCapabilityBook(context)
    return _book


def _end_with_owner(owner: int) -> None:
    """A worker's initializer: end the worker once the pool's owner is gone. An owner killed outright
    (SIGKILL, the OOM killer) cannot stop its workers, and they would wait for work forever: each holds both
    ends of the pool's call queue, so no end-of-file ever reaches it (measured: a killed daemon left both
    workers and the resource tracker behind). Nor does the fork server end first: every worker holds its
    end of the pipe that tells the server its owner is gone. So each worker watches the owner itself."""

    def watch() -> None:
        _wait_for_end(owner)
        os._exit(3)

    threading.Thread(target=watch, name="end-with-owner", daemon=True).start()


# What the fork server imports once, before it forks any worker: the partitions' code and everything it
# uses (the settings, kazoo, protobuf, structlog...). A spawned worker imported it all again: about 0.45 s
# of CPU each, a tenth of a 4-process scan of 100,000 ledgers.
PRELOAD = ["auditor.processes.engine"]


def new_pool(processes: int) -> ProcessPoolExecutor:
    """`processes` workers forked by a fork server (one per owner process, started on first use from a
    fresh interpreter, so no worker copies the owner's event loop, threads or sockets, as a plain fork
    would; each forked worker starts with the modules already imported). Each ends within about a second
    of its owner's end, however that came."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return ProcessPoolExecutor(
        processes,
        mp_context=context,
        initializer=_start_worker,
        initargs=(os.getpid(), capability_book(context)),
    )


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """Ctrl-C or a failed partition: queued partitions are dropped and the worker processes (ours, started
    by the pool) end."""
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in list(getattr(pool, "_processes", {}).values()):
        proc.terminate()


def partition_rows(
    settings_wire: dict[str, Any],
    checks: list[str],
    trace: bool,
    log_level: str,
    part: Any,
    leader_rechecks: bool = False,
) -> list[Row]:
    """One partition in a worker process (a top-level function: it is pickled by name)."""
    return list(run_partitions(settings_wire, checks, trace, log_level, [part], leader_rechecks))


def shared_budget(wire: dict[str, Any], processes: int) -> dict[str, Any]:
    """Settings (wire form) for one of `processes` workers: the per-bookie request rates and requests in
    flight, and ZooKeeper's read rate and concurrent reads, divided among them (0, unlimited, stays 0; a
    count never below 1), so together they stay within what the settings allow one process."""
    out = copy.deepcopy(wire)
    bookie, zk = out["bookie_client"], out["zookeeper"]
    for key in ("requests_per_second", "start_requests_per_second", "min_requests_per_second"):
        bookie[key] = bookie[key] / processes
    for key in ("max_in_flight", "max_in_flight_cap"):
        bookie[key] = max(1, bookie[key] // processes)
    zk["reads_per_second"] = zk["reads_per_second"] / processes
    zk["max_concurrent_reads"] = max(1, zk["max_concurrent_reads"] // processes)
    return out


def merge_run_stats(check: str, parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Sum one check's RunStats dicts over partitions (durationSeconds: summed partition time)."""
    total = RunStats(check)
    partitions, seconds = 0, 0.0
    for p in parts:
        total.absorb(p)
        partitions += 1
        seconds += float(p.get("durationSeconds", 0.0))
    return {**total.as_dict(), "partitions": partitions, "durationSeconds": round(seconds, 3)}


class PartitionFailed(AuditorError):
    """A partition's worker raised: the id range and the worker's error, in one line."""


class Interrupted(AuditorError):
    """The caller set `stop`: the run was given up."""


STOP_POLL_SECONDS = 0.2


def _result(job: Future[Any], stop: threading.Event | None) -> Any:
    """`job`'s result; `Interrupted` (and `job` cancelled) soon after `stop` is set."""
    if stop is None:
        return job.result()
    while True:
        try:
            return job.result(timeout=STOP_POLL_SECONDS)
        except FutureTimeout:
            if stop.is_set():
                job.cancel()
                raise Interrupted("stopped") from None


def _next_done(running: dict[Future[list[Row]], Any], stop: threading.Event | None) -> set[Future[list[Row]]]:
    while True:
        done, _ = wait(running, timeout=STOP_POLL_SECONDS, return_when=FIRST_COMPLETED)
        if done:
            return done
        if stop is not None and stop.is_set():
            raise Interrupted("stopped")


def _held_back(stop: threading.Event | None) -> None:
    """Nothing running and no new partition may start yet (paused, outside the time windows)."""
    if stop is None:
        time.sleep(STOP_POLL_SECONDS)
    elif stop.wait(STOP_POLL_SECONDS):
        raise Interrupted("stopped")


class _Cursor:
    """The end of the run of partitions, from the first, that have all ended: what a resumed pass may
    skip. Partitions end out of order; the cursor only moves over an unbroken run of ended ones."""

    def __init__(self, partitions: list[IdPartition]) -> None:
        self._parts = partitions
        self._ended: set[int] = set()
        self._next = 0  # position of the first partition not ended

    def end(self, position: int) -> LedgerId | None:
        """Partition `position` ended: the new cursor, or None when it did not move (or would be past the
        last id)."""
        self._ended.add(position)
        before = self._next
        while self._next in self._ended:
            self._ended.discard(self._next)
            self._next += 1
        if self._next == before:
            return None
        end = self._parts[self._next - 1].end
        return id_at(end - 1) if end < ID_SPACE_END else None


class _Delivery:
    """Hands a partition's rows on: findings to the sink, counters summed, suspects and the cursor to the
    hooks, progress to the display."""

    def __init__(
        self,
        checks: list[str],
        sink: FindingSink,
        progress: ProgressSink | None,
        hooks: ScanHooks | None,
        stop: threading.Event | None,
        partitions: list[IdPartition],
        estimate: int,
    ) -> None:
        self.checks = checks
        self.sink = sink
        self.progress = progress
        self.hooks = hooks
        self.stop = stop
        self.cursor = _Cursor(partitions)
        self.estimate = estimate
        self.started = time.monotonic()
        self.stats: dict[str, list[dict[str, Any]]] = {c: [] for c in checks}
        self.visited = dict.fromkeys(checks, 0)

    def __call__(self, position: int, rows: list[Row]) -> None:
        part_stats: dict[str, dict[str, Any]] = {}
        part_visited = dict.fromkeys(self.checks, 0)
        suspects: list[Suspect] = []
        for kind, _part, check, _seq, payload in rows:  # already in the order they were produced
            doc = json.loads(payload)
            if kind == FINDING:
                self.sink(Finding.from_wire(doc["finding"]), check)
            elif kind == STATS:
                part_stats[check] = doc["stats"]
                part_visited[check] = int(doc.get("ledgersVisited", 0))
            elif kind == SUSPECT:
                suspects.append(Suspect(check, LedgerId.parse(doc["ledger"]), int(doc["attempt"])))
        for check in self.checks:
            if check in part_stats:
                self.stats[check].append(part_stats[check])
            self.visited[check] += part_visited[check]
        cursor = self.cursor.end(position)
        if self.hooks is not None and self.hooks.partition_done is not None:
            taken = self.hooks.partition_done(PartitionDone(cursor, part_stats, part_visited, suspects))
            if taken is not None:
                _result(taken, self.stop)
        if self.progress is not None:
            for check in self.checks:
                self.progress(Progress(check, self.visited[check], self.estimate, started=self.started))


def check_on_processes(
    settings: Settings,
    processes: int,
    checks: list[str],
    sink: FindingSink,
    progress: ProgressSink | None = None,
    stop: threading.Event | None = None,
    *,
    hooks: ScanHooks | None = None,
    max_ledgers: int = LEDGERS_PER_PARTITION,
    log_level: str = "warning",
    in_process_below: int = 0,
) -> list[dict[str, Any]]:
    """Run the per-ledger `checks` over the whole cluster (from `hooks.start`) on `processes` worker
    processes; every finding goes to `sink` (with the check that found it) partition by partition, in id
    order (the one-shot command's), or as each partition ends when `hooks` are given (the daemon's); returns
    each check's run counters summed over the partitions (`durationSeconds`: wall time of the whole run).
    Blocks (run it on a thread from async code). At most `processes + 1` partitions of at most `max_ledgers`
    ledgers are handed to the workers at a time. The first failing partition stops the others and raises
    `PartitionFailed`; planning errors (ZooKeeper unreachable, bad layout) are raised as they are. `stop`
    set: the workers are stopped and `Interrupted` raised. A plan of fewer than `in_process_below` ledgers
    raises `RunHere` before any worker starts."""
    started = time.monotonic()
    start = hooks.start if hooks is not None else None
    may_start = hooks.may_start if hooks is not None else None
    leader_rechecks = hooks is not None and hooks.leader_rechecks
    plan = checked_plan(settings, processes * PARTITIONS_PER_PROCESS, start=start, max_ledgers=max_ledgers)
    if plan.ledgers_estimate < in_process_below:
        raise RunHere(plan.ledgers_estimate)
    wire = shared_budget(settings_to_wire(settings), processes)
    parts = plan.partitions
    deliver = _Delivery(checks, sink, progress, hooks, stop, parts, plan.ledgers_estimate)
    in_order = hooks is None
    pool = new_pool(processes)
    try:
        waiting = deque(enumerate(parts))
        running: dict[Future[list[Row]], tuple[int, IdPartition]] = {}  # with its position in `parts`
        held: dict[int, list[Row]] = {}  # in id order: ended, waiting for an earlier partition
        next_out = 0
        while waiting or running:
            # Handed out lazily: a pause holds back what is not running yet, and rows are held only for
            # what has ended (a future holds its result for as long as it is referenced).
            while waiting and len(running) <= processes and (may_start is None or may_start()):
                position, part = waiting.popleft()
                job = pool.submit(partition_rows, wire, checks, False, log_level, part.to_wire(), leader_rechecks)
                running[job] = position, part
            if not running:
                _held_back(stop)
                continue
            for job in sorted(_next_done(running, stop), key=lambda j: running[j][0]):
                position, part = running.pop(job)
                try:
                    rows = job.result()
                except Exception as exc:
                    raise PartitionFailed(f"ledger ids {part.describe()}: {type(exc).__name__}: {exc}") from exc
                del job
                if not in_order:
                    deliver(position, rows)
                    continue
                held[position] = rows
                while next_out in held:
                    deliver(next_out, held.pop(next_out))
                    next_out += 1
                del rows
    except BaseException:
        stop_workers(pool)
        raise
    pool.shutdown(wait=True)
    seconds = round(time.monotonic() - started, 3)
    return [
        {
            **merge_run_stats(c, deliver.stats[c]),
            "durationSeconds": seconds,
            "processes": processes,
            "ledgersVisited": deliver.visited[c],
        }
        for c in checks
    ]
