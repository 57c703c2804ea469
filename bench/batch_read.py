"""Benchmark: entries per second read from one real DbLedgerStorage bookie by the v2 batch reader
(BATCH_READ_ENTRY, auditor/bookie/batch.py) and by BookieClient.read_entries (one pipelined v3 READ_ENTRY
per entry), on one ledger written by the real Java client; prints both and the ratio.

    python -m bench.batch_read                       # 5,000 entries of 100 bytes, best of 3
    python -m bench.batch_read --entries 1000 --repeat 1

Starts its own one-bookie cluster on the "second cluster" ports (devcluster/ports.py, BK_TEST_PORT_SLOT).
Both readers use the default client settings (no rate limit, 128 requests in flight) and must return the
same bytes for every entry (checked). Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from auditor.bookie import BookieClient, BookieClientConfig
from auditor.bookie.batch import DEFAULT_MAX_COUNT, BatchReader
from bench.harness import second_cluster, started
from devcluster.cluster import Cluster


async def _timed(read: Any, lid: int, entries: list[int], repeat: int) -> tuple[float, list[bytes | None]]:
    best, bodies = float("inf"), []
    for _ in range(repeat):
        t0 = time.perf_counter()
        results = await read(lid, entries)
        best = min(best, time.perf_counter() - t0)
        bodies = [r.body for r in results]
    return best, bodies


async def measure(
    cluster: Cluster, bookie_index: int, lid: int, entries: int, repeat: int, max_count: int
) -> dict[str, Any]:
    """Both readers over entries 0..entries-1 of `lid` on one bookie: seconds (best of `repeat`), entries/s."""
    b = cluster.bookie(bookie_index)
    config = BookieClientConfig()
    ids = list(range(entries))
    async with BookieClient(b.bookie_id, (b.host, b.port), config) as v3:
        await v3.read_entries(lid, ids[:10])  # connected and warm
        v3_s, v3_bodies = await _timed(v3.read_entries, lid, ids, repeat)
    async with BatchReader(b.bookie_id, lambda _: (b.host, b.port), config) as reader:

        async def batched(lid: int, ids: list[int]) -> Any:
            return await reader.read_entries(lid, ids, max_count=max_count)

        await reader.read_entries(lid, ids[:10])
        batch_s, batch_bodies = await _timed(batched, lid, ids, repeat)
        batches = reader.batches_sent
    if batch_bodies != v3_bodies or any(x is None for x in v3_bodies):
        raise SystemExit("the two readers disagree about the entries' bytes")
    return {
        "entries": entries,
        "v3_read_entry_per_s": round(entries / v3_s),
        "v2_batch_per_s": round(entries / batch_s),
        "ratio": round(v3_s / batch_s, 1),
        "batch_requests": batches,
        "max_count": max_count,
        "repeat": repeat,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=5000)
    ap.add_argument("--entry-size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-count", type=int, default=DEFAULT_MAX_COUNT)
    ap.add_argument("--keep", action="store_true", help="keep the cluster's work directory")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bk-auditor-bench-batch-"))
    with started(second_cluster(workdir, 1, storage={1: "db"}), workdir, args.keep) as c:
        ledger = c.create_ledger(
            ensemble=1, write_quorum=1, ack_quorum=1, entries=args.entries, entry_size=args.entry_size
        )
        row = asyncio.run(measure(c, 1, ledger["ledgerId"], args.entries, args.repeat, args.max_count))
    row["entry_size"] = args.entry_size
    print(
        f"{row['entries']} entries of {args.entry_size} B on one DbLedgerStorage bookie: "
        f"BookieClient.read_entries {row['v3_read_entry_per_s']:,} entries/s, "
        f"BatchReader {row['v2_batch_per_s']:,} entries/s ({row['batch_requests']} batch requests in all), "
        f"ratio {row['ratio']}x"
    )
    print(json.dumps(row))


if __name__ == "__main__":
    main()
