"""`bk-auditor check --processes N` at N = 1, 2, ... on one machine (issue 12: use the cores you are given;
docs/benchmarks.md "`check` on 1 and 2 processes").

    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.check_scaling                          # 200k ledgers, 3 runs
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.check_scaling --ledgers 20000 --runs 1 # a quick smoke
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.check_scaling --processes 1 --shape 5/2/2 --entries 10,50,100,200
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.check_scaling --processes 1 --baseline ../old-checkout  # before/after

Starts its own ZooKeeper (bench/memory.py's: "second cluster" ports, a 2 GiB heap, no fsync), plants
`--ledgers` closed ledgers of `--shape` (default E3/WQ2/AQ2) with `--entries` entries (default 100; a
list is cycled over the ledgers) (bench/planted.py) and starts simulated bookies for them in a process of
their own (bench/simbookie, held byte for byte to a real bookie). Then, for each process count of
`--processes`, alternating over `--runs`, it runs

    bk-auditor check --processes N --checks scrutiny --format json

in a child process with the bookie and ZooKeeper rate limits off, under GNU time: wall time (start-up and
planning included), the command's own duration (from its summary), CPU time of the command and its worker
processes, peak RSS of the command itself, and the findings, which must be one `risky_quorum` per ledger
when WQ == AQ, none otherwise (exit status 0). Prints one JSON line per run and a summary (medians,
ledgers/s, speed-up over one process, CPU per ledger: the whole command's, start-up included), saved under
bench/results/check_scaling/. With `--baseline TREE` every run is made a second time with TREE's `auditor`
(PYTHONPATH), the two alternating, and summarised apart. Not a test: nothing
here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

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
from bench.planted import Shape

# medians in the summary
FIELDS = ("seconds", "check_seconds", "ledgers_per_s", "wall_ledgers_per_s", "cpu_us_per_ledger")


def check(uri: str, processes: int, logs: Path, ledgers: int, shape: Shape, code: Code) -> dict[str, Any]:
    argv = [str(BIN), "check", "--metadata-service-uri", uri, "--checks", "scrutiny", "--format", "json"]
    argv += ["--processes", str(processes)]
    log = logs / f"check-{code.label}-{processes}.log"
    out = JsonLines()
    run = measured(code, argv, code.env(LIMITS_OFF), log, out.line)
    seconds = out.summary.get("durationSeconds")
    row: dict[str, Any] = {
        "code": code.label,
        "processes": processes,
        "ledgers": ledgers,
        "exit": run.exit,
        "seconds": round(run.seconds, 1),
        "check_seconds": seconds,
        # The command's own rate (its summary's duration: connecting, planning, the scan and its workers'
        # start-up) and the child's, interpreter start-up included.
        "ledgers_per_s": round(ledgers / seconds, 1) if seconds else None,
        "wall_ledgers_per_s": round(ledgers / run.seconds, 1),
        "cpu_s": round(run.cpu_seconds, 1),
        "cpu_us_per_ledger": round(run.cpu_seconds / ledgers * 1e6, 1),
        "peak_rss_mb": round(run.peak / 2**20, 1),  # the command's process (a worker's own is not in it)
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
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = ap.parse_args()
    shape = Shape.from_arguments(ap, args)
    counts = [int(k) for k in args.processes.split(",")]
    if not counts or min(counts) < 1:
        ap.error("--processes: counts of at least 1")
    codes = [Code("this")] + ([Code("baseline", args.baseline.resolve())] if args.baseline is not None else [])
    rows: list[dict[str, Any]] = []
    with planted_and_served("bench-check-scaling-", args.ledgers, args.keep, shape) as (uri, workdir):
        for i in range(args.runs):
            for k in counts:
                for code in codes if i % 2 == 0 else codes[::-1]:
                    row = check(uri, k, workdir / "logs", args.ledgers, shape, code)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        summary = {
            "ledgers": args.ledgers,
            "shape": shape.label,
            "cpus": len(os.sched_getaffinity(0)),
            "by_processes": by_count([r for r in rows if r["code"] == "this"], "processes", counts, FIELDS),
        }
        if args.baseline is not None:
            baseline = [r for r in rows if r["code"] == "baseline"]
            summary["baseline"] = str(args.baseline)
            summary["baseline_by_processes"] = by_count(baseline, "processes", counts, FIELDS)
        print(json.dumps(summary, indent=2))
        print(f"results: {save_results('check_scaling', summary, rows)}")


if __name__ == "__main__":
    main()
