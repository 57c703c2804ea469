"""The checks on local worker processes, no Spark: `bk-auditor check --processes N` and
`bk-auditor sweep --master processes[N]`.

Python runs a scan on one thread, so one process uses one core. Cutting the id space as the Spark planner
does (`plan.py`) and running the partitions on N spawned processes, each with its own event loop,
ZooKeeper session and bookie connections (`worker.run_partitions`, the executors' code), spreads a scan
over N cores.

`check_on_processes` is the one-shot command's engine: it hands the findings back to the command as each
partition ends, in id order, so the command prints, deduplicates and counts them exactly as it does its
own, and it divides the command's ZooKeeper and bookie budgets among the processes, so N processes put no
more load on a bookie or on ZooKeeper than one does.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from auditor.checks.runner import Progress, ProgressSink
from auditor.cpus import available_cpus
from auditor.durability.findings import Finding
from auditor.errors import AuditorError
from auditor.settings import Settings

from .output import merge_run_stats
from .partitions import IdPartition
from .plan import checked_plan
from .worker import FINDING, STATS, Row, run_partitions, settings_to_wire

PARTITIONS_PER_PROCESS = 4  # a slow partition leaves the others' processes busy
# A partition's rows come back in one piece, and the command holds those of the partitions that finished
# before the one it is waiting for: with WQ == AQ (one informational finding per ledger) 25,000-ledger
# partitions took the command from 80 to 237 MB (bench/check_scaling, 200k ledgers, 2 processes).
LEDGERS_PER_PARTITION = 10_000

FindingSink = Callable[[Finding, str], None]


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


def new_pool(processes: int) -> ProcessPoolExecutor:
    """`processes` spawned workers: a fork would copy the parent's event loop, threads and sockets."""
    return ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """Ctrl-C or a failed partition: queued partitions are dropped and the worker processes (ours, started
    by the pool) end."""
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in list(getattr(pool, "_processes", {}).values()):
        proc.terminate()


def partition_rows(
    settings_wire: dict[str, Any], checks: list[str], trace: bool, log_level: str, part: Any
) -> list[Row]:
    """One partition in a worker process (a top-level function: it is pickled by name)."""
    return list(run_partitions(settings_wire, checks, trace, log_level, [part]))


def shared_budget(wire: dict[str, Any], processes: int) -> dict[str, Any]:
    """Settings (wire form) for one of `processes` workers: the per-bookie request rates and requests in
    flight, and ZooKeeper's read rate and concurrent reads, divided among them (0, unlimited, stays 0; a
    count never below 1), so together they stay within what the settings allow one process."""
    out = copy.deepcopy(wire)
    bookie, zk = out["bookie_client"], out["zookeeper"]
    for key in ("requests_per_second", "start_requests_per_second", "min_requests_per_second"):
        bookie[key] = bookie[key] / processes
    bookie["max_in_flight"] = max(1, bookie["max_in_flight"] // processes)
    zk["reads_per_second"] = zk["reads_per_second"] / processes
    zk["max_concurrent_reads"] = max(1, zk["max_concurrent_reads"] // processes)
    return out


class PartitionFailed(AuditorError):
    """A partition's worker raised: the id range and the worker's error, in one line."""


class Interrupted(AuditorError):
    """The caller set `stop`: the run was given up."""


STOP_POLL_SECONDS = 0.2


def _result(job: Future[list[Row]], stop: threading.Event | None) -> list[Row]:
    if stop is None:
        return job.result()
    while True:
        try:
            return job.result(timeout=STOP_POLL_SECONDS)
        except FutureTimeout:
            if stop.is_set():
                raise Interrupted("stopped") from None


def check_on_processes(
    settings: Settings,
    processes: int,
    checks: list[str],
    sink: FindingSink,
    progress: ProgressSink | None = None,
    stop: threading.Event | None = None,
    *,
    log_level: str = "warning",
) -> list[dict[str, Any]]:
    """Run the per-ledger `checks` over the whole cluster on `processes` worker processes; every finding
    goes to `sink` (with the check that found it) partition by partition, in id order; returns each
    check's run counters summed over the partitions (`durationSeconds`: wall time of the whole run).
    Blocks (run it on a thread from async code). The first failing partition stops the others and
    raises `PartitionFailed`; planning errors (ZooKeeper unreachable, bad layout) are raised as they are.
    `stop` set: the workers are stopped and `Interrupted` raised."""
    started = time.monotonic()
    plan = checked_plan(settings, processes * PARTITIONS_PER_PROCESS, max_ledgers=LEDGERS_PER_PARTITION)
    wire = shared_budget(settings_to_wire(settings), processes)
    stats: dict[str, list[dict[str, Any]]] = {c: [] for c in checks}
    visited = dict.fromkeys(checks, 0)
    pool = new_pool(processes)
    try:
        # In id order; the pool runs them in the order submitted. A partition's rows are let go once
        # handed on (a future holds its result for as long as it is referenced).
        jobs: deque[tuple[IdPartition, Future[list[Row]]]] = deque(
            (p, pool.submit(partition_rows, wire, checks, False, log_level, p.to_wire())) for p in plan.partitions
        )
        while jobs:
            part, job = jobs.popleft()
            try:
                rows = _result(job, stop)
            except Interrupted:
                raise
            except Exception as exc:
                raise PartitionFailed(f"ledger ids {part.describe()}: {type(exc).__name__}: {exc}") from exc
            del job
            for kind, _part, check, _seq, payload in rows:  # already in the order they were produced
                doc = json.loads(payload)
                if kind == FINDING:
                    sink(Finding.from_wire(doc["finding"]), check)
                elif kind == STATS:
                    stats[check].append(doc["stats"])
                    visited[check] += int(doc.get("ledgersVisited", 0))
            del rows
            if progress is not None:
                for check in checks:
                    progress(Progress(check, visited[check], plan.ledgers_estimate, started=started))
    except BaseException:
        stop_workers(pool)
        raise
    pool.shutdown(wait=True)
    seconds = round(time.monotonic() - started, 3)
    return [
        {
            **merge_run_stats(c, stats[c]),
            "durationSeconds": seconds,
            "processes": processes,
            "ledgersVisited": visited[c],
        }
        for c in checks
    ]
