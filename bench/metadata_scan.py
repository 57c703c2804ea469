"""Metadata scan rate: ours against raw pipelined kazoo, a kazoo-free ZooKeeper client on the event loop and
Java's BookieLedgerIndexer, on the same ZooKeeper (issue 12, docs/benchmarks.md).

    BK_TEST_PORT_SLOT=0 .venv/bin/python -m bench.metadata_scan               # 30,000 ledgers, 3 runs each
    .venv/bin/python -m bench.metadata_scan --ledgers 5000 --runs 1 --profile # + where our time goes

Starts its own ZooKeeper and one real bookie ("second cluster" ports), plants `--ledgers` closed ledgers
(devcluster/planted.py), then rotates, `--runs` times:
* raw:  kazoo alone lists the leaf directories and gets every ledger znode with 64 requests in flight,
        discarding the answers (the floor: the same ZooKeeper reads, nothing done with them);
* wire: the same walk and reads on bench/zk_wire.py, a minimal ZooKeeper client on the event loop with
        no threads (what a ZooKeeper read path of our own would give);
* ours: `scan_ledgers()` of our store (listing, reading, parsing into LedgerRecords), with the same 64
        in flight and no rate limit;
* java-indexer: BookieLedgerIndexer.getBookieToLedgerIndex() of the 4.17.3 jars, the metadata walk of
        every Java bookie check, in a fresh JVM (bench/java/JavaAuditorChecks.java; its own time, JVM and
        client start-up excluded; CPU not measured).
Prints ledgers/s and process CPU per ledger for each (CPU includes kazoo's own threads), and the ratios.
Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import json
import pstats
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from auditor.metadata.store import ZooKeeperMetadataStore
from bench.harness import save_results, second_cluster
from bench.replicas_check import RUNNER, java_run
from bench.zk_wire import wire_scan
from devcluster import ports
from devcluster.cluster.javatools import BK_HOME, BK_VERSION, classpath, compile_once
from devcluster.planted import plant

IN_FLIGHT = 64


def raw_scan(zk: KazooClient, root: str) -> int:
    """List like the hierarchical layout walk (two directory levels, then the leaves) and get every
    ledger znode, `IN_FLIGHT` at a time; answers discarded."""
    paths: list[str] = []
    for a in sorted(k for k in zk.get_children(root) if len(k) == 2 and k.isdigit()):
        for b in sorted(zk.get_children(f"{root}/{a}")):
            leaf = f"{root}/{a}/{b}"
            paths.extend(f"{leaf}/{n}" for n in sorted(zk.get_children(leaf)) if n.startswith("L"))
    window: collections.deque[Any] = collections.deque()
    for p in paths:
        if len(window) >= IN_FLIGHT:
            window.popleft().get(timeout=30)
        window.append(zk.get_async(p))
    while window:
        window.popleft().get(timeout=30)
    return len(paths)


async def our_scan(uri: str) -> int:
    store = await ZooKeeperMetadataStore.connect(uri, max_in_flight=IN_FLIGHT, reads_per_second=None)
    try:
        n = 0
        async for batch in store.scan_ledgers(include_scoped=False):
            n += len(batch)
        return n
    finally:
        await store.close()


def timed(side: str, fn: Any) -> dict[str, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    n = fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"side": side, "ledgers": n, "seconds": wall, "ledgers_per_s": n / wall, "cpu_us_per_ledger": cpu / n * 1e6}


def java_indexer(cluster: Any, classes: Path) -> dict[str, Any]:
    got = java_run(cluster, "indexer", classes)
    n, wall = got["ledgers"], got["seconds"]
    return {"side": "java-indexer", "ledgers": n, "seconds": wall, "ledgers_per_s": n / wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledgers", type=int, default=30000)
    ap.add_argument("--runs", type=int, default=3, help="runs per side (alternating)")
    ap.add_argument("--profile", action="store_true", help="profile one more run of ours and print the top")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-metadata-scan-"))
    cluster = second_cluster(workdir)
    rows: list[dict[str, Any]] = []
    try:
        cluster.start()
        bookies = [f"127.0.0.{i + 1}:{ports.SECOND_PORT_BASE + 60 + i}" for i in range(6)]
        plant(cluster.kazoo, cluster.ledgers_root, args.ledgers, bookies)
        print(f"planted {args.ledgers} ledgers")
        classes = compile_once(RUNNER, classpath(), BK_HOME, BK_VERSION)
        zk = KazooClient(hosts=cluster.zk_hosts)
        zk.start(timeout=15)
        try:
            sides = {
                "raw": lambda: timed("raw", lambda: raw_scan(zk, cluster.ledgers_root)),
                "wire": lambda: timed(
                    "wire",
                    lambda: asyncio.run(wire_scan("127.0.0.1", cluster.zk_port, cluster.ledgers_root, IN_FLIGHT)),
                ),
                "ours": lambda: timed("ours", lambda: asyncio.run(our_scan(cluster.metadata_service_uri))),
                "java-indexer": lambda: java_indexer(cluster, classes),
            }
            order = list(sides)
            for i in range(args.runs):
                for side in order[i % len(order) :] + order[: i % len(order)]:  # rotate who goes first
                    row = sides[side]()
                    if row["ledgers"] != args.ledgers:
                        raise RuntimeError(f"{side} saw {row['ledgers']} ledgers of {args.ledgers}")
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            zk.stop()
            zk.close()
        summary: dict[str, Any] = {"ledgers": args.ledgers}
        for side in sides:
            mine = [r for r in rows if r["side"] == side]
            summary[side] = {"ledgers_per_s_median": statistics.median(r["ledgers_per_s"] for r in mine)}
            if "cpu_us_per_ledger" in mine[0]:
                summary[side]["cpu_us_per_ledger_median"] = statistics.median(r["cpu_us_per_ledger"] for r in mine)
        rate = {side: summary[side]["ledgers_per_s_median"] for side in sides}
        summary["ours_over_raw"] = round(rate["ours"] / rate["raw"], 2)
        summary["ours_over_java_indexer"] = round(rate["ours"] / rate["java-indexer"], 2)
        summary["raw_over_java_indexer"] = round(rate["raw"] / rate["java-indexer"], 2)
        summary["wire_over_raw"] = round(rate["wire"] / rate["raw"], 2)
        summary["wire_over_java_indexer"] = round(rate["wire"] / rate["java-indexer"], 2)
        print(json.dumps(summary, indent=2))
        save_results("metadata_scan", summary, rows)
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            asyncio.run(our_scan(cluster.metadata_service_uri))
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
