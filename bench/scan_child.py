"""One timed scrutiny scan, as `bk-auditor check --checks scrutiny --format json` runs it (limits off).

Used two ways by `bench/profile_scan.py`:
* in-process: `measure(...)` with the `auditor` package of this tree;
* as a script against another tree, so two versions of the code are compared on one cluster in one run:
  `PYTHONPATH=OTHER_TREE python bench/scan_child.py URI LOOP MAX_IN_FLIGHT MAX_LEDGERS LOGFILE [CHECK]` prints
  the same row as JSON; `... scan_child.py --processes N URI MAX_IN_FLIGHT MAX_LEDGERS LOOP`: the same
  scrutiny on N local worker processes (`sweep --master processes[N]`). Run as a file, this module imports
  nothing of `bench` or `tests`, only `auditor`, which then comes from OTHER_TREE.
Environment (bench/replicas_check.py, bench/db_storage.py): BENCH_SHIPPED_LIMITS=1 keeps the bookie and
ZooKeeper limits as shipped; BENCH_SETTINGS='{"agent": {...}}' adds settings; BENCH_FALLBACK_READ_BUDGET=N
sets the checks' `fallback_read_budget` (as `bookie_client.fallback_read_budget` does, but in trees from
before that setting too).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import resource
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any


def settings_for(uri: str, max_in_flight: int, max_concurrent_ledgers: int, loop: str = "asyncio") -> Any:
    from auditor.settings import load_settings

    overrides: dict[str, Any] = {
        "metadata_service_uri": uri,
        "event_loop": loop,  # in-process runs choose theirs per run below; sweep workers use this
        "bookie_client": {"requests_per_second": 0, "max_in_flight": max_in_flight},
        "zookeeper": {"reads_per_second": 0},
        "max_concurrent_ledgers": max_concurrent_ledgers,
        "log": {"format": "json", "level": "info"},
    }
    if os.environ.get("BENCH_SHIPPED_LIMITS") == "1":  # the bookie and ZooKeeper limits as shipped, not off
        del overrides["bookie_client"], overrides["zookeeper"]
    if os.environ.get("BENCH_SETTINGS"):  # more settings (JSON, merged section by section): e.g. the agents
        merge(overrides, json.loads(os.environ["BENCH_SETTINGS"]))
    return load_settings(None, overrides=overrides)


def merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    """`more`'s settings into `into`, sections merged key by key rather than replaced."""
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


@contextmanager
def read_budget() -> Iterator[None]:
    """With BENCH_FALLBACK_READ_BUDGET=N: the checks' `fallback_read_budget` (reads per bookie per ledger
    where a bookie cannot list its entries; the setting `bookie_client.fallback_read_budget` in newer trees) is N, so a remote scrutiny reads every
    expected entry instead of sampling."""
    raw = os.environ.get("BENCH_FALLBACK_READ_BUDGET")
    if not raw:
        yield
        return
    import dataclasses

    from auditor.checks import build

    original = build.check_options

    def raised(settings: Any, *, one_shot: bool = False) -> Any:
        return dataclasses.replace(original(settings, one_shot=one_shot), fallback_read_budget=int(raw))

    build.check_options = raised
    try:
        yield
    finally:
        build.check_options = original


def run_loop(loop: str, coro_fn: Callable[[], Any]) -> Any:
    """Run a coroutine on the chosen loop, as `auditor.cli.common.run_with_loop` does (the collector tuned first,
    in trees that tune it)."""
    try:
        from auditor.processes.gctune import tune_gc
    except ImportError:  # a tree from before auditor/processes/gctune.py
        pass
    else:
        tune_gc()
    if loop == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(coro_fn())
    return asyncio.run(coro_fn())


def thread_schedstat() -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable but waiting for one) of the calling thread, from Linux's
    /proc/thread-self/schedstat; None where it does not exist."""
    try:
        on_cpu, waiting, _ = Path("/proc/thread-self/schedstat").read_text().split()
    except (OSError, ValueError):
        return None
    return int(on_cpu) / 1e9, int(waiting) / 1e9


@contextmanager
def first_progress(marks: list[float]) -> Iterator[None]:
    """Appends the time (perf_counter) of the scan's first progress report, its first ledger done, to
    `marks`: through the progress callback `check` shows its bar with (trees without it: nothing)."""
    from auditor.checks import oneshot

    display = getattr(oneshot, "ProgressDisplay", None)
    original = getattr(display, "update", None)
    if display is None or original is None:
        yield
        return

    def update(self: Any, p: Any) -> None:
        if not marks:
            marks.append(time.perf_counter())
        original(self, p)

    display.update = update
    try:
        yield
    finally:
        display.update = original


def rusage_cpu() -> tuple[float, float]:
    """(user, system) CPU seconds of this process, every thread."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def measure(
    uri: str,
    loop: str,
    max_in_flight: int,
    max_concurrent_ledgers: int,
    logs: Path,
    profiler: AbstractContextManager[Any] | None = None,
    check: str = "scrutiny",
) -> dict[str, Any]:
    """One scan of `check`: wall time, process CPU (every thread), the loop thread's CPU, per ledger."""
    from auditor.checks import oneshot
    from auditor.logging import configure_logging

    settings = settings_for(uri, max_in_flight, max_concurrent_ledgers)
    out = io.StringIO()
    with logs.open("a") as log_stream:
        configure_logging(settings.log.level, settings.log.format, stream=log_stream)
        thread_cpu: list[float] = []

        sched: list[tuple[float, float] | None] = []
        first: list[float] = []

        async def go() -> int:
            t0 = time.thread_time()
            sched.append(thread_schedstat())
            try:
                return await oneshot.main(settings, [check], "json", out=out, err=log_stream)
            finally:
                thread_cpu.append(time.thread_time() - t0)
                sched.append(thread_schedstat())

        threads_before = threading.active_count()
        wall, (user, system) = time.perf_counter(), rusage_cpu()
        started = wall
        with profiler if profiler is not None else nullcontext(), first_progress(first), read_budget():
            code = run_loop(loop, go)
        (user_end, system_end), wall = rusage_cpu(), time.perf_counter() - wall
        user, system = user_end - user, system_end - system
        cpu = user + system
    lines = [json.loads(x) for x in out.getvalue().splitlines() if x.strip()]
    summary = next((x["summary"] for x in lines if "summary" in x), None)
    if summary is None:
        raise RuntimeError(f"the check printed no summary (exit {code}); logs in {logs}")
    stats = next(c for c in summary["checks"] if c["check"] == check)
    checked = stats["ledgersChecked"]
    categories = Counter(x["category"] for x in lines if "category" in x)
    return {
        "loop": loop,
        "check": check,
        "exit": code,
        "ledgers_seen": stats["ledgersSeen"],
        "ledgers_checked": checked,
        "bookie_requests": stats["bookieRequests"],
        "index_answers": sum(
            stats.get("indexAnswersByBookie", {}).values()
        ),  # (ledger, bookie) pairs an agent answered
        "findings": dict(sorted(categories.items())),
        "wall_s": round(wall, 3),
        "check_s": stats["durationSeconds"],
        "ledgers_per_s": round(checked / wall, 1),
        "cpu_s": round(cpu, 3),
        "system_cpu_share": round(system / cpu, 2) if cpu else None,
        "loop_thread_cpu_s": round(thread_cpu[0], 3),
        "cpu_us_per_ledger": round(cpu / checked * 1e6, 1),
        "loop_thread_cpu_us_per_ledger": round(thread_cpu[0] / checked * 1e6, 1),
        "cpu_share_of_one_core": round(cpu / wall, 2),
        "threads": threads_before,
        **phases(wall, checked, first[0] - started if first else None, sched),
    }


def phases(wall: float, checked: int, first_s: float | None, sched: list[tuple[float, float] | None]) -> dict[str, Any]:
    """Where the scan's wall time went: before its first ledger was done (start-up, listing, the first
    metadata reads) and after, and the event-loop thread's time on a CPU, runnable but waiting for one
    (the bookies and ZooKeeper share the CPUs), and blocked (waiting for answers)."""
    out: dict[str, Any] = {}
    if first_s is not None:
        out["first_ledger_s"] = round(first_s, 3)
        if wall > first_s:
            out["after_first_ledgers_per_s"] = round(checked / (wall - first_s), 1)
    if len(sched) == 2 and sched[0] is not None and sched[1] is not None:
        on_cpu, waiting = sched[1][0] - sched[0][0], sched[1][1] - sched[0][1]
        out["loop_thread_on_cpu_s"] = round(on_cpu, 3)
        out["loop_thread_runqueue_wait_s"] = round(waiting, 3)
        out["loop_thread_blocked_s"] = round(max(0.0, wall - on_cpu - waiting), 3)
    return out


def measure_processes(
    uri: str, processes: int, max_in_flight: int, max_concurrent_ledgers: int, loop: str
) -> dict[str, Any]:
    """The scrutiny as `bk-auditor sweep --master processes[N] --checks scrutiny` runs it (limits off): wall
    time from planning to the aggregated result (the worker processes' start-up included), CPU of this
    process and of the workers (reaped children)."""
    from auditor.spark.sweep import SweepOptions, run_sweep_on_processes

    settings = settings_for(uri, max_in_flight, max_concurrent_ledgers, loop)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, (user, system) = time.perf_counter(), rusage_cpu()
    result = run_sweep_on_processes(settings, processes, SweepOptions(checks=["scrutiny"]))
    (user_end, system_end), wall = rusage_cpu(), time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (user_end - user) + (system_end - system)
    cpu += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run = next(r for r in result.runs if r["check"] == "scrutiny")
    checked = run["ledgersChecked"]
    return {
        "processes": processes,
        "loop": loop,
        "partitions": len(result.plan.partitions),
        "failed_partitions": len(result.failed),
        "ledgers_checked": checked,
        "bookie_requests": run["bookieRequests"],
        "findings": result.summary.as_dict()["byCategory"],
        "wall_s": round(wall, 3),
        "ledgers_per_s": round(checked / wall, 1),
        "cpu_s": round(cpu, 3),
        "cpu_us_per_ledger": round(cpu / checked * 1e6, 1) if checked else None,
    }


if __name__ == "__main__":
    if sys.argv[1] == "--processes":
        n_, uri_, in_flight_, ledgers_, loop_ = sys.argv[2:7]
        print(json.dumps(measure_processes(uri_, int(n_), int(in_flight_), int(ledgers_), loop_)))
    else:
        uri_, loop_, in_flight_, ledgers_, logs_ = sys.argv[1:6]
        check_ = sys.argv[6] if len(sys.argv) > 6 else "scrutiny"
        print(json.dumps(measure(uri_, loop_, int(in_flight_), int(ledgers_), Path(logs_), check=check_)))
