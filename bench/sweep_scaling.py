"""The sweep at 1, 2 and 4 executors on a real Spark standalone cluster (issue 12, docs/benchmarks.md
"The sweep at 1, 2 and 4 executors").

    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.sweep_scaling                       # 1M ledgers: about an hour
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.sweep_scaling --ledgers 20000       # a quick smoke

Starts its own ZooKeeper (bench/memory.py's: "second cluster" ports, a 2 GiB heap, no fsync), plants
`--ledgers` closed E3/WQ2/AQ2 ledgers of 100 entries (bench/planted.py) and starts simulated bookies for
them in a process of their own (bench/simbookie, held byte for byte to a real bookie). Then it starts a
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
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.harness import save_results
from bench.memory import (
    BIN,
    BOOKIES,
    LIMITS_OFF,
    Code,
    JsonLines,
    last_words,
    measured,
    planted_zookeeper,
    start_simulated_bookies,
)
from bench.planted import plant
from tests.realcluster import ports
from tests.realcluster.cluster.sparkstandalone import SparkStandalone

WORKERS = 4


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


def summarize(rows: list[dict[str, Any]], counts: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in counts:
        ok = [r for r in rows if r["executors"] == k and "failed" not in r]
        if ok:
            out[str(k)] = {
                "seconds": statistics.median(r["seconds"] for r in ok),
                "sweep_seconds": statistics.median(r["sweep_seconds"] for r in ok),
                "ledgers_per_s": statistics.median(r["ledgers_per_s"] for r in ok),
                "wall_ledgers_per_s": statistics.median(r["wall_ledgers_per_s"] for r in ok),
                "runs": len(ok),
            }
    one = out.get("1")
    if one:
        for v in out.values():
            v["speedup_over_1"] = round(v["ledgers_per_s"] / one["ledgers_per_s"], 2)
    return out


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
    with planted_zookeeper("bench-sweep-scaling-", args.keep) as (cluster, workdir):
        logs = workdir / "logs"
        uri = cluster.metadata_service_uri
        started = time.monotonic()
        plant(cluster.kazoo, cluster.ledgers_root, args.ledgers, BOOKIES, first=1)
        print(f"planted {args.ledgers} ledgers ({time.monotonic() - started:.0f}s)", flush=True)
        sim = start_simulated_bookies(args.ledgers, uri, logs)
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
                    row = sweep(spark.master_url, uri, k, logs, args.ledgers)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            spark.stop()
            sim.stop()
        summary = {"ledgers": args.ledgers, "workers": WORKERS, "by_executors": summarize(rows, counts)}
        print(json.dumps(summary, indent=2))
        print(f"results: {save_results('sweep_scaling', summary, rows)}")


if __name__ == "__main__":
    main()
