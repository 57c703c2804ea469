"""Repair throughput, ours vs Java's ReplicationWorker on the same loss (issue 14, docs/benchmarks.md).

    BK_TEST_PORT_SLOT=0 .venv/bin/python -m bench.repair                        # 60 ledgers, 3 runs a side
    .venv/bin/python -m bench.repair --ledgers 6 --runs 1                       # a quick smoke

Starts its own real cluster ("second cluster" ports of devcluster/ports.py): ZooKeeper and six
real 4.17 bookies with their Prometheus stats on. Each run writes `--ledgers` closed ledgers with the real
Java client, in equal thirds E3/WQ3/AQ2, E3/WQ2/AQ2 and E5/WQ2/AQ2 (`--entries` entries of `--entry-size`
bytes), every one naming bookie 1; stops bookie 1 and wipes it; marks every ledger as our auditor marks
a lost bookie's ledgers; reads every live bookie's request and byte counters; starts one side alone (a
real Java ReplicationWorker from the 4.17 jars, or `bk-auditor repair`), waits until every marker is
gone, stops it, reads the counters again; then checks with the Java client's census that nothing is
missing or corrupt, brings bookie 1 back empty and deletes the ledgers. Sides alternate. The time runs
from the worker's start (process start-up included on both sides) to the last marker gone; the bookies'
own counters give what each side sent (adds, reads, other requests, bytes). Not a test: nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from auditor.durability.ids import LedgerId
from auditor.metadata.codecs.paths import MarkerPaths
from bench.harness import JavaProcessSide, Side, save_results, second_cluster
from devcluster.checks_util import bookie_lost
from devcluster.cli_util import BIN
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import mark_lost, open_store

VICTIM = 1
SHAPES = ((3, 3), (3, 2), (5, 2))  # (ensemble, write quorum), ack quorum 2
WAIT_SECONDS = 900.0


def counters(cluster: Cluster, bookies: list[int]) -> Counter[str]:
    """Every live bookie's request counts by operation and its read/write bytes, summed."""
    out: Counter[str] = Counter()
    for n in bookies:
        status, text = cluster.http_get(n, "/metrics", timeout=10)
        if status != 200:
            raise RuntimeError(f"bookie {n}: /metrics answered {status}")
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                name = s.name
                if name.startswith("bookkeeper_server_") and name.endswith("_REQUEST_count"):
                    out[name[len("bookkeeper_server_") : -len("_REQUEST_count")]] += int(s.value)
                elif family.name in ("bookie_WRITE_BYTES", "bookie_READ_BYTES"):  # samples named *_total
                    out[family.name] += int(s.value)
    return out


async def mark(cluster: Cluster, victim: str, lids: list[int]) -> None:
    store = await open_store(cluster.metadata_service_uri)
    try:
        await mark_lost(store, victim, lids)
    finally:
        await store.close()


class JavaSide(JavaProcessSide):
    def start(self) -> None:
        self.proc = self.cluster.start_replication_worker(seconds=3600)


class OurSide(Side):
    name = "ours"

    def __init__(self, cluster: Cluster, workdir: Path) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
        env["BKAUDIT_METRICS__ENABLED"] = "false"
        env["BKAUDIT_REPAIR__POLL_SECONDS"] = "1"
        log = (self.workdir / f"ours-{self.runs}.log").open("wb")
        self.proc = subprocess.Popen(
            [str(BIN), "repair", "--metadata-service-uri", self.cluster.metadata_service_uri, "--log-format", "json"],
            stdout=subprocess.DEVNULL,
            stderr=log,
            stdin=subprocess.DEVNULL,
            env=env,
        )

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def one_run(cluster: Cluster, side: Side, args: argparse.Namespace) -> dict[str, Any]:
    per_shape = max(1, args.ledgers // len(SHAPES))
    made: list[dict[str, Any]] = []
    for e, wq in SHAPES:
        ensemble = [cluster.bookie(n).bookie_id for n in range(1, e + 1)]
        made += cluster.create_ledgers(
            per_shape,
            ensemble=e,
            write_quorum=wq,
            ack_quorum=2,
            entries=args.entries,
            entry_size=args.entry_size,
            bookies=ensemble,
        )
    lids = [r["ledgerId"] for r in made]
    # What a perfect repair must write: every lost copy once (the victim's stripe of each ledger).
    lost_copies = sum(args.entries * r["writeQuorum"] // r["ensembleSize"] for r in made)
    markers = MarkerPaths(cluster.ledgers_root)
    victim = cluster.bookie(VICTIM).bookie_id
    live = [n for n in range(1, 7) if n != VICTIM]
    with bookie_lost(cluster, VICTIM, made):
        cluster.wait_unregistered(VICTIM)
        asyncio.run(mark(cluster, victim, lids))
        before = counters(cluster, live)
        side.start()
        t0 = time.monotonic()
        try:
            deadline = t0 + WAIT_SECONDS
            left = list(lids)
            while left and time.monotonic() < deadline:
                time.sleep(0.2)
                left = [lid for lid in left if cluster.kazoo.exists(markers.marker(LedgerId.of(lid)))]
            seconds = time.monotonic() - t0
        finally:
            side.stop()
        if left:
            raise TimeoutError(f"{side.name}: {len(left)} ledgers still marked after {WAIT_SECONDS:.0f}s")
        after = counters(cluster, live)
        census = cluster.copies([str(lid) for lid in lids])
        bad = [r for r in census if r["missing"] or r["corrupt"] or r["unreadable"]]
        if bad:
            raise RuntimeError(f"{side.name}: {len(bad)} ledgers not whole after the repair: {bad[:2]}")
    delta = after - before
    return {
        "side": side.name,
        "ledgers": len(lids),
        "lost_copies": lost_copies,
        "seconds": round(seconds, 2),
        "adds": delta["ADD_ENTRY"],
        "reads": delta["READ_ENTRY"],
        "other_requests": sum(v for k, v in delta.items() if k not in ("ADD_ENTRY", "READ_ENTRY") and "BYTES" not in k),
        "write_bytes": delta["bookie_WRITE_BYTES"],
        "read_bytes": delta["bookie_READ_BYTES"],
        "requests_by_op": {k: v for k, v in sorted(delta.items()) if "BYTES" not in k},
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side in ("java", "ours"):
        mine = [r for r in rows if r["side"] == side]
        if not mine:
            continue
        med = lambda key: statistics.median(r[key] for r in mine)  # noqa: E731
        out[side] = {
            "runs": len(mine),
            "seconds_median": med("seconds"),
            "ledgers_per_s_median": statistics.median(r["ledgers"] / r["seconds"] for r in mine),
            "lost_copies_per_s_median": statistics.median(r["lost_copies"] / r["seconds"] for r in mine),
            "adds_median": med("adds"),
            "reads_median": med("reads"),
            "other_requests_median": med("other_requests"),
            "write_mb_median": med("write_bytes") / 1e6,
            "adds_per_lost_copy_median": statistics.median(r["adds"] / r["lost_copies"] for r in mine),
        }
    if "java" in out and "ours" in out:
        j, o = out["java"], out["ours"]
        out["ours_over_java"] = {
            "time": o["seconds_median"] / j["seconds_median"],
            "adds": o["adds_median"] / j["adds_median"] if j["adds_median"] else None,
            "reads": o["reads_median"] / j["reads_median"] if j["reads_median"] else None,
            "write_bytes": o["write_mb_median"] / j["write_mb_median"] if j["write_mb_median"] else None,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledgers", type=int, default=60, help="ledgers per run (equal thirds of the 3 shapes)")
    ap.add_argument("--entries", type=int, default=100)
    ap.add_argument("--entry-size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3, help="runs per side (alternating)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-repair-"))
    cluster = second_cluster(workdir, num_bookies=6)
    rows: list[dict[str, Any]] = []
    try:
        cluster.start()
        sides: list[Side] = [JavaSide(cluster), OurSide(cluster, workdir)]
        for i in range(args.runs):
            for side in sides if i % 2 == 0 else sides[::-1]:
                row = one_run(cluster, side, args)
                rows.append(row)
                print(json.dumps(row), flush=True)
        summary = {
            "ledgers": args.ledgers,
            "entries": args.entries,
            "entry_size": args.entry_size,
            **summarize(rows),
        }
        print(json.dumps(summary, indent=2))
        print(f"results: {save_results('repair', summary, rows)}")
    finally:
        cluster.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
