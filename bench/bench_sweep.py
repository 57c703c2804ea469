"""Benchmark of the sweep's planning on the driver. A plain script, not a test:

    python -m bench.bench_sweep [ledgers] [partitions]        (from the repository root)

Builds an in-memory hierarchical ledger tree (ids dense from 0, plus a tail above 2^31 in the long
layout), then times the leaf-directory walk (`walk_leaf_directories`, which lists only the directories
above the leaves) and the partitioner (`plan_partitions`). It reports how many directories the walk
listed against how many a full listing would need, and how even the partitions came out.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from auditor.durability.ids import LedgerId
from auditor.metadata.codecs.paths import LedgerPaths, walk_leaf_directories
from auditor.metadata.location import LedgerManager
from auditor.processes.partitions import Span, check_cover, plan_partitions

LEAF = 10_000


class DirTree:
    """The directories of a tree holding `ledgers` dense ids (leaf names are never materialised)."""

    def __init__(self, paths: LedgerPaths, ledgers: int, long_tail: int) -> None:
        self.children: dict[str, set[str]] = {}
        self.leaf_count: dict[str, int] = {}
        ids = [*range(0, ledgers - long_tail, LEAF), *range(2**31, 2**31 + long_tail, LEAF)]
        for first in ids:
            leaf = paths.path(LedgerId(0, first)).rsplit("/", 1)[0]
            self.leaf_count[leaf] = min(LEAF, ledgers)
            parts = leaf.strip("/").split("/")
            for i in range(len(parts)):
                self.children.setdefault("/" + "/".join(parts[:i]) if i else "/", set()).add(parts[i])
        self.listed = 0

    async def __call__(self, path: str) -> list[str] | None:
        self.listed += 1
        got = self.children.get(path)
        return sorted(got) if got is not None else None


async def walk(paths: LedgerPaths, tree: DirTree) -> list:
    return [d async for d in walk_leaf_directories(paths, tree)]


def main() -> None:
    ap = argparse.ArgumentParser(description="Benchmark of the sweep's planning on the driver.")
    ap.add_argument("ledgers", type=int, nargs="?", default=50_000_000, help="ledgers in the tree")
    ap.add_argument("partitions", type=int, nargs="?", default=1_000, help="partitions wanted")
    args = ap.parse_args()
    ledgers, partitions = args.ledgers, args.partitions
    paths = LedgerPaths("/ledgers", LedgerManager.HIERARCHICAL)
    tree = DirTree(paths, ledgers, long_tail=ledgers // 10)
    t0 = time.perf_counter()
    dirs = asyncio.run(walk(paths, tree))
    t_walk = time.perf_counter() - t0
    spans = [Span(d.first, d.last, tree.leaf_count[d.path], d.path) for d in dirs]
    t0 = time.perf_counter()
    parts = plan_partitions(spans, partitions)
    t_plan = time.perf_counter() - t0
    check_cover(parts)
    weights = [p.weight for p in parts]
    print(
        f"python {sys.version.split()[0]}: {ledgers:,} ledgers in {len(dirs):,} leaf directories, "
        f"{partitions:,} partitions wanted"
    )
    print(
        f"walk: listed {tree.listed:,} directories (a full listing: {tree.listed + len(dirs):,} listings and "
        f"{ledgers:,} names) in {t_walk * 1000:.1f} ms (in memory: ZooKeeper round trips not included)"
    )
    print(
        f"plan: {len(parts):,} partitions in {t_plan * 1000:.1f} ms; ledgers per partition "
        f"min {min(weights):,.0f} median {statistics.median(weights):,.0f} max {max(weights):,.0f}"
    )


if __name__ == "__main__":
    main()
