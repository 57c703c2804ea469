"""The sweep at 1, 2 and 4 executors on a real Spark standalone cluster (issue 12, docs/benchmarks.md
"The sweep at 1, 2 and 4 executors").

    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.sweep_scaling                       # 1M ledgers: about an hour
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.sweep_scaling --ledgers 20000       # a quick smoke

Starts its own ZooKeeper (bench/memory.py's: "second cluster" ports, a 2 GiB heap, no fsync), plants
`--ledgers` closed E3/WQ2/AQ2 ledgers of 100 entries (devcluster/planted.py) and starts simulated bookies for
them in a process of their own (devcluster/simbookie, held byte for byte to a real bookie). Then it starts a
Spark standalone master and four one-core workers from the pyspark distribution (on loopback, the
slot's Spark ports) and, for each executor count k of `--executors`, runs

    bk-auditor sweep --master spark://... --conf spark.cores.max=k --conf spark.executor.cores=1 \\
        --checks scrutiny --format json

in a child process with the bookie and ZooKeeper rate limits off: k executors of one core each, on k
workers. It records the wall time of the child (start-up included), the sweep's own duration (from its
summary: planning to the aggregated result) and the rate from it, the partitions and the findings, which must be one `risky_quorum` per ledger (WQ == AQ) and nothing else
(exit status 0). Counts alternate over `--runs`. Prints one JSON line per run and a summary (medians,
ledgers/s, speed-up over one executor), saved under bench/results/sweep_scaling/. Not a test: nothing
here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import sys
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
from devcluster import ports
from devcluster.cluster.sparkstandalone import SparkStandalone

WORKERS = 4
FIELDS = ("seconds", "sweep_seconds", "ledgers_per_s", "wall_ledgers_per_s")  # medians in the summary


def sweep(master: str, uri: str, executors: int, logs: Path, ledgers: int) -> dict[str, Any]:
    conf = {
        "spark.cores.max": str(executors),
        "spark.executor.cores": "1",
        "spark.executor.memory": "768m",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.pyspark.python": sys.executable,
    }
    argv = [str(BIN), "sweep", "--metadata-service-uri", uri, "--master", master, "--checks", "scrutiny"]
    for k, v in conf.items():
        argv += ["--conf", f"{k}={v}"]
    argv += ["--format", "json"]
    log = logs / f"sweep-{executors}.log"
    out = JsonLines()
    run = measured(Code("this"), argv, Code("this").env(LIMITS_OFF), log, out.line)
    summary, found, seconds, rc = out.summary, out.found, run.seconds, run.exit
    sw = summary.get("sweep", {})
    row: dict[str, Any] = {
        "executors": executors,
        "ledgers": ledgers,
        "exit": rc,
        "seconds": round(seconds, 1),
        "sweep_seconds": summary.get("durationSeconds"),
        # The sweep's own rate (planning to aggregated result; Spark's and the executors' start-up
        # excluded) and the child's, start-up included.
        "ledgers_per_s": round(ledgers / summary["durationSeconds"], 1) if summary.get("durationSeconds") else None,
        "wall_ledgers_per_s": round(ledgers / seconds, 1),
        "partitions": sw.get("partitionsTotal"),
        "findings": dict(found),
        "checked": out.checked,
    }
    if rc != 0 or found != Counter({"risky_quorum": ledgers}):
        row["failed"] = last_words(log)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledgers", type=int, default=1_000_000)
    ap.add_argument("--executors", default="1,2,4", help="executor counts (comma list, at most 4)")
    ap.add_argument("--runs", type=int, default=1, help="runs per executor count (counts alternate)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = ap.parse_args()
    counts = [int(k) for k in args.executors.split(",")]
    if not counts or min(counts) < 1 or max(counts) > WORKERS:
        ap.error(f"--executors: counts from 1 to {WORKERS}")
    rows: list[dict[str, Any]] = []
    with planted_and_served("bench-sweep-scaling-", args.ledgers, args.keep) as (uri, workdir):
        spark = SparkStandalone(
            workdir / "spark",
            master_port=ports.SPARK_MASTER_PORT,
            ui_port=ports.SPARK_MASTER_UI_PORT,
            worker_ports=ports.SPARK_BENCH_WORKER_PORTS,
            worker_memory="1g",
        )
        try:
            spark.start()
            for _ in range(args.runs):
                for k in counts:
                    row = sweep(spark.master_url, uri, k, workdir / "logs", args.ledgers)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            spark.stop()
        summary = {
            "ledgers": args.ledgers,
            "workers": WORKERS,
            "by_executors": by_count(rows, "executors", counts, FIELDS),
        }
        print(json.dumps(summary, indent=2))
        print(f"results: {save_results('sweep_scaling', summary, rows)}")


if __name__ == "__main__":
    main()
