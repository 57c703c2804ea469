"""The daemon's bookie index built once, in a process of its own, and what it costs in memory (run by
bench/memory.py; prints one JSON line).

    .venv/bin/python -m bench.memory_index URI [--trace]

Connects to the metadata store as the daemon does (`checks.build.connect_store`, ZooKeeper rate limit
off), then runs `LedgerIndex.rebuild()` as the bookie watch does at start. Reports the process's resident
set before and after the build (after a full collection: what the index keeps) and its peak (VmHWM), and with
`--trace` the bytes tracemalloc sees allocated and still held after the build (the index's own objects,
exactly; tracemalloc slows the build, so its run is separate from the RSS one).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc
from typing import Any

from auditor.checks.build import connect_store
from auditor.daemon.bookie_watch import LedgerIndex
from auditor.settings import load_settings
from bench.scan_child import run_loop


def rss_bytes() -> int:
    """This process's resident set now (VmRSS)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def peak_rss_bytes() -> int:
    """This process image's peak resident set (VmHWM). Not ru_maxrss: Linux counts the resident set of
    the process that spawned us in that (bench/memory.py `measured`)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


async def build(uri: str, trace: bool) -> dict[str, Any]:
    settings = load_settings(None, overrides={"metadata_service_uri": uri, "zookeeper": {"reads_per_second": 0}})
    store = await connect_store(settings)
    try:
        index = LedgerIndex(store)
        gc.collect()
        before = rss_bytes()
        if trace:
            tracemalloc.start()
        t0 = time.monotonic()
        n = await index.rebuild()
        seconds = time.monotonic() - t0
        gc.collect()
        after = rss_bytes()
        row: dict[str, Any] = {
            "ledgers": n,
            "bookies": len(index.bookies),
            "seconds": round(seconds, 1),
            "rss_before_mb": round(before / 2**20, 1),
            "rss_after_mb": round(after / 2**20, 1),
            "vm_hwm_mb": round(peak_rss_bytes() / 2**20, 1),
            "rss_bytes_per_ledger": round((after - before) / n, 1) if n else None,
        }
        if trace:
            held, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            row |= {
                "traced_bytes_per_ledger": round(held / n, 1) if n else None,
                "traced_peak_mb": round(peak / 2**20, 1),
            }
        assert len(index) == n  # the index is alive until here: what was measured is what it holds
        return row
    finally:
        await store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("uri")
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop")
    args = ap.parse_args()
    print(json.dumps(run_loop(args.loop, lambda: build(args.uri, args.trace))), flush=True)


if __name__ == "__main__":
    main()
