"""`bk-auditor check --processes N` at N = 1, 2, ... on one machine (issue 12: use the cores you are given;
docs/benchmarks.md "`check` on 1 and 2 processes").

    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.check_scaling                          # 200k ledgers, 3 runs
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.check_scaling --ledgers 20000 --runs 1 # a quick smoke
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.check_scaling --processes 1 --shape 5/2/2 --entries 10,50,100,200
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.check_scaling --processes 1 --baseline ../old-checkout  # before/after
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.check_scaling --ledgers 100000 --processes 1,2,4 \
        --cpu-quota 0.15 --budget shared,per-process    # N processes held to N x 0.15 CPU (root)

Starts its own ZooKeeper (bench/memory.py's: "second cluster" ports, a 2 GiB heap, no fsync), plants
`--ledgers` closed ledgers of `--shape` (default E3/WQ2/AQ2) with `--entries` entries (default 100; a
list is cycled over the ledgers) (devcluster/planted.py) and starts simulated bookies for them in a process of
their own (devcluster/simbookie, held byte for byte to a real bookie). Then, for each process count of
`--processes`, alternating over `--runs`, it runs

    bk-auditor check --processes N --checks scrutiny --format json

in a child process with the bookie and ZooKeeper rate limits off, under GNU time: wall time (start-up and
planning included), the command's own duration (from its summary), CPU time of the command and its worker
processes (counted by a cgroup of the run's own where one can be made, as root; else GNU time's, which
misses the workers: they are the children of a fork server, not of the command), peak RSS of the
command itself, and the findings, which must be one `risky_quorum` per ledger when WQ == AQ, none
otherwise (exit status 0). Prints one JSON line per run and a summary (medians,
ledgers/s, speed-up over one process, CPU per ledger: the whole command's, start-up included), saved under
bench/results/check_scaling/. With `--baseline TREE` every run is made a second time with TREE's `auditor`
(PYTHONPATH), the two alternating, and summarised apart.

`--cpu-quota F` holds each run's N processes (the command and its workers) to N x F CPUs together, in a
cgroup of their own (bench/cpuquota.py): on a machine whose few CPUs the bookies and ZooKeeper share,
what N cores of speed F would give. Each row then has the quota, the time the group was held back by it,
and the machine's busy CPUs over the run (`machine_busy_cpus`; `others_cpus`: what was not the
command's): a quota that binds with the machine short of busy measures the processes, not the machine.
`--budget per-process` gives each of N processes the in-flight windows of one process (N x
`bookie_client.max_in_flight` and `zookeeper.max_concurrent_reads`, which `check` divides among its
processes); `shared` (the default) runs the command as configured. Not a test: nothing here asserts a
time.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from auditor.settings.model import BookieClientSettings, ZooKeeperSettings
from bench.cpuquota import cpu_group, machine_busy, unavailable
from bench.harness import by_count, save_results
from bench.memory import (
    BIN,
    LIMITS_OFF,
    Code,
    JsonLines,
    last_words,
    measured,
    planted_and_served,
)
from devcluster.planted import Shape

# medians in the summary
FIELDS = (
    "seconds",
    "check_seconds",
    "ledgers_per_s",
    "wall_ledgers_per_s",
    "cpu_us_per_ledger",
    "machine_busy_cpus",
    "others_cpus",
)


BUDGETS = ("shared", "per-process")


def per_process_budget(processes: int) -> dict[str, str]:
    """Settings that give each of `processes` workers the in-flight windows one process has by default
    (`check` divides them among its processes: N processes load a bookie no more than one)."""
    return {
        "BKAUDIT_BOOKIE_CLIENT__MAX_IN_FLIGHT": str(BookieClientSettings().max_in_flight * processes),
        "BKAUDIT_ZOOKEEPER__MAX_CONCURRENT_READS": str(ZooKeeperSettings().max_concurrent_reads * processes),
    }


def check(
    uri: str,
    processes: int,
    logs: Path,
    ledgers: int,
    shape: Shape,
    code: Code,
    cpu_quota: float | None,
    budget: str = "shared",
    accounting: bool = False,
) -> dict[str, Any]:
    argv = [str(BIN), "check", "--metadata-service-uri", uri, "--checks", "scrutiny", "--format", "json"]
    argv += ["--processes", str(processes)]
    env = code.env(LIMITS_OFF | (per_process_budget(processes) if budget == "per-process" else {}))
    log = logs / f"check-{code.label}-{processes}.log"
    out = JsonLines()
    quota: dict[str, Any] = {}
    busy0, total0 = machine_busy()
    with contextlib.ExitStack() as stack:
        group = None
        if accounting:
            # The command, its fork server and the workers it forks, counted (and held) together: the
            # workers are not the command's children, so its rusage (GNU time's) misses them.
            group = stack.enter_context(cpu_group(f"bk-auditor-bench-{os.getpid()}"))
        if cpu_quota is not None:
            # N processes held to N x F CPUs together: what N cores of speed F would give them
            assert group is not None
            group.set_cpus(processes * cpu_quota)
            quota["cpu_quota"] = round(processes * cpu_quota, 3)
        run = measured(code, argv, env, log, out.line, group.joiner() if group else None)
        if group is not None:
            quota["command_cpu_s"] = round(run.cpu_seconds, 2)  # GNU time's: the command and what it waited for
            run = dataclasses.replace(run, cpu_seconds=group.final_cpu_seconds())
            quota["throttled_s"] = round(group.throttled_seconds(), 1)
    busy1, total1 = machine_busy()
    cpus = len(os.sched_getaffinity(0))
    seconds = out.summary.get("durationSeconds")
    row: dict[str, Any] = {
        "code": code.label,
        "processes": processes,
        "budget": budget,
        "ledgers": ledgers,
        "exit": run.exit,
        "seconds": round(run.seconds, 1),
        "check_seconds": seconds,
        # The command's own rate (its summary's duration: connecting, planning, the scan and its workers'
        # start-up) and the child's, interpreter start-up included.
        "ledgers_per_s": round(ledgers / seconds, 1) if seconds else None,
        "wall_ledgers_per_s": round(ledgers / run.seconds, 1),
        "cpu_s": round(run.cpu_seconds, 1),
        "cpu_from": "cgroup" if accounting else "rusage",
        "cpu_us_per_ledger": round(run.cpu_seconds / ledgers * 1e6, 1),
        "peak_rss_mb": round(run.peak / 2**20, 1),  # the command's process (a worker's own is not in it)
        # the whole machine's busy CPUs over the run (check, bookies, ZooKeeper and anything else), and what
        # was left after the command's own: what the peers used
        "machine_busy_cpus": round((busy1 - busy0) / (total1 - total0) * cpus, 2),
        "others_cpus": round((busy1 - busy0) / (total1 - total0) * cpus - run.cpu_seconds / run.seconds, 2),
        **quota,
        "partitions": next((c.get("partitions") for c in out.summary.get("checks", [])), None),
        "findings": dict(out.found),
        "checked": out.checked,
    }
    # The scrutiny's one finding on healthy planted ledgers: WQ == AQ is a risky quorum (informational).
    expected = Counter(shape.expected_findings(ledgers))
    if run.exit != 0 or out.found != expected:
        row["failed"] = last_words(log)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledgers", type=int, default=200_000)
    ap.add_argument("--processes", default="1,2", help="process counts (comma list)")
    ap.add_argument("--runs", type=int, default=3, help="runs per process count (counts alternate)")
    Shape.add_arguments(ap)
    ap.add_argument("--baseline", type=Path, help="also measure the code of this checkout (e.g. before a change)")
    ap.add_argument(
        "--cpu-quota",
        type=float,
        metavar="F",
        help="hold N processes to N x F CPUs together (a cgroup of their own; needs root): scaling with the CPU given",
    )
    ap.add_argument(
        "--budget",
        default="shared",
        help="comma list of shared (the default in-flight windows divided among the processes, as `check` "
        "does) and per-process (each process gets one process's windows); one process runs once either way",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = ap.parse_args()
    if args.cpu_quota is not None and not 0.01 <= args.cpu_quota <= 64:
        ap.error("--cpu-quota: a fraction of a CPU per process, 0.01 or more")
    shape = Shape.from_arguments(ap, args)
    counts = [int(k) for k in args.processes.split(",")]
    if not counts or min(counts) < 1:
        ap.error("--processes: counts of at least 1")
    budgets = args.budget.split(",")
    if not budgets or not set(budgets) <= set(BUDGETS):
        ap.error(f"--budget: a comma list of {', '.join(BUDGETS)}")
    codes = [Code("this")] + ([Code("baseline", args.baseline.resolve())] if args.baseline is not None else [])
    why_not = unavailable()  # before planting: without a cgroup, --cpu-quota fails in a second
    if why_not is not None and args.cpu_quota is not None:
        print(f"bench.check_scaling: --cpu-quota: {why_not}", file=sys.stderr)
        sys.exit(2)
    if why_not is not None:  # CPU from GNU time: the command and what it waited for, not a fork server's workers
        print(f"bench.check_scaling: CPU of the command alone (GNU time): {why_not}", file=sys.stderr)
    accounting = why_not is None
    rows: list[dict[str, Any]] = []
    with planted_and_served("bench-check-scaling-", args.ledgers, args.keep, shape) as (uri, workdir):
        for i in range(args.runs):
            for k in counts:
                for budget in budgets if k > 1 else budgets[:1]:
                    for code in codes if i % 2 == 0 else codes[::-1]:
                        row = check(
                            uri, k, workdir / "logs", args.ledgers, shape, code, args.cpu_quota, budget, accounting
                        )
                        rows.append(row)
                        print(json.dumps(row), flush=True)
        summary = {
            "ledgers": args.ledgers,
            "shape": shape.label,
            "cpus": len(os.sched_getaffinity(0)),
            "cpu_quota_per_process": args.cpu_quota,
        }
        for budget in budgets:
            # one process's runs are each budget's base (the two are the same for one process)
            mine = [r for r in rows if r["budget"] == budget or r["processes"] == 1]
            key = "by_processes" if budget == "shared" else f"by_processes_{budget.replace('-', '_')}"
            summary[key] = by_count([r for r in mine if r["code"] == "this"], "processes", counts, FIELDS)
            if args.baseline is not None:
                summary["baseline"] = str(args.baseline)
                summary[f"baseline_{key}"] = by_count(
                    [r for r in mine if r["code"] == "baseline"], "processes", counts, FIELDS
                )
        print(json.dumps(summary, indent=2))
        print(f"results: {save_results('check_scaling', summary, rows)}")


if __name__ == "__main__":
    main()
