"""Benchmark: the bookie client against one real bookie, and the entry-list codec.

    python -m bench.bench_bookie                     # starts its own 3-bookie cluster (second-cluster ports)
    python -m bench.bench_bookie --bookie 127.0.0.1:3181 --ledger 12 [--ledger 13]
    python -m bench.bench_bookie --codec-only

Run from the repository root. The cluster it starts uses the "second cluster" ports of
devcluster/ports.py (BK_TEST_PORT_SLOT; zk 21811, bookies 3281-3283 in slot 0).

Wire part: pipelined GET_LIST_OF_ENTRIES_OF_LEDGER (and, for comparison, READ_ENTRY and ping) requests
per second over ONE connection, at several in-flight windows. Codec part: decode / encode / missing
per second for 1M-entry ledgers of three shapes. Prints a Markdown table (paste into docs/benchmarks.md).
Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from auditor.bookie import BookieClient, BookieClientConfig
from auditor.durability.entrylist import EntryList, encode_ranges
from auditor.durability.ranges import RangeSet

ONE_MILLION = 1_000_000


def timeit(fn: Callable[[], object], min_time: float = 1.0) -> float:
    """Seconds per call (best of a few batches)."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_time / 5:
            break
        n *= 2
    best = dt / n
    for _ in range(4):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def codec_rows() -> list[tuple[str, ...]]:
    shapes = {
        "contiguous 0..999999 (1 run)": RangeSet.span(0, ONE_MILLION - 1),
        # Bookie index 0 of E=5, WQ=2 over 1M entries: runs of 2, gaps of 3.
        "striped E=5 WQ=2 (200,000 runs)": RangeSet(tuple((e, e + 1) for e in range(0, ONE_MILLION, 5))),
        # Worst case for run-based codecs: every other entry.
        "every other entry (500,000 runs)": RangeSet(tuple((e, e) for e in range(0, ONE_MILLION, 2))),
    }
    expected = RangeSet.span(0, ONE_MILLION - 1)
    rows = []
    for name, rs in shapes.items():
        data = encode_ranges(rs)
        el = EntryList.decode(data)
        groups = len(el.records)
        t_dec = timeit(lambda: EntryList.decode(data))
        t_enc = timeit(lambda: encode_ranges(rs))
        # End to end per bookie answer (decode included), as an audit pays it.
        t_miss = timeit(lambda: EntryList.decode(data).missing(expected))
        same = RangeSet(tuple(rs.ranges))  # what the schedule expects of a healthy bookie
        t_same = timeit(lambda: EntryList.decode(data).missing(same))
        t_rs = timeit(lambda: EntryList.decode(data).to_rangeset())
        probe = list(range(0, ONE_MILLION, ONE_MILLION // 1000))
        t_member = timeit(lambda: [e in el for e in probe]) / len(probe)
        rows.append(
            (
                name,
                f"{len(data):,}",
                f"{1 / t_dec:,.1f}",
                f"{t_dec / groups * 1e6:.2f}",
                f"{1 / t_enc:,.1f}",
                f"{1 / t_rs:,.1f}",
                f"{1 / t_miss:,.1f}",
                f"{1 / t_same:,.1f}",
                f"{t_member * 1e6:.2f}",
            )
        )
    return rows


async def pipelined_rate(call: Callable[[], Awaitable[object]], total: int, check: Callable[[object], bool]) -> float:
    t0 = time.perf_counter()
    results = await asyncio.gather(*(call() for _ in range(total)))
    dt = time.perf_counter() - t0
    bad = [r for r in results if not check(r)]
    if bad:
        raise SystemExit(f"{len(bad)} of {total} requests failed, e.g. {bad[0]!r}")
    return total / dt


async def wire_rows(host: str, port: int, ledgers: list[tuple[int, str]], total: int) -> list[tuple[str, ...]]:
    rows = []
    for window in (1, 16, 128):
        cfg = BookieClientConfig(max_in_flight=window, request_timeout=30)
        async with BookieClient(f"{host}:{port}", (host, port), cfg) as c:
            assert (await c.ping()).present, "bookie does not answer"
            n = total if window > 1 else max(500, total // 20)
            for lid, label in ledgers:
                first = await c.get_entry_list(lid)
                if not first.present or first.entries is None:
                    raise SystemExit(f"GET_LIST for ledger {lid} failed: {first}")
                groups = len(first.entries.records)
                rate = await pipelined_rate(lambda: c.get_entry_list(lid), n, lambda r: r.present)  # type: ignore
                rows.append(
                    (
                        f"GET_LIST {label} ({groups:,} groups, {first.entries.total:,} entries)",
                        str(window),
                        f"{n:,}",
                        f"{rate:,.0f}",
                    )
                )
            lid = ledgers[0][0]
            rate = await pipelined_rate(lambda: c.read_entry(lid, 0), n, lambda r: r.present)  # type: ignore
            rows.append(("READ_ENTRY (100-byte payload)", str(window), f"{n:,}", f"{rate:,.0f}"))
            rate = await pipelined_rate(lambda: c.ping(), n, lambda r: r.present)  # type: ignore
            rows.append(("GET_BOOKIE_INFO ping", str(window), f"{n:,}", f"{rate:,.0f}"))
            if c.stats.connects != 1:
                raise SystemExit(f"expected one connection, made {c.stats.connects}")
    return rows


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bookie", help="host:port of a running bookie (default: start a 1-bookie cluster)")
    ap.add_argument(
        "--ledger", type=int, action="append", default=[], help="ledger id the bookie holds (with --bookie)"
    )
    ap.add_argument("--requests", type=int, default=20_000, help="requests per measurement")
    ap.add_argument("--codec-only", action="store_true")
    ap.add_argument("--uvloop", action="store_true", help="run the wire part on uvloop")
    args = ap.parse_args()

    print(
        f"# {platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs\n"
    )
    print("## Entry-list codec, 1M-entry ledger\n")
    print(
        table(
            (
                "bookie holds",
                "encoded bytes",
                "decode/s",
                "decode µs/group",
                "encode/s",
                "decode+to_rangeset/s",
                "decode+missing(all 1M)/s",
                "decode+missing(own schedule)/s",
                "membership µs",
            ),
            codec_rows(),
        )
    )
    print()
    if args.codec_only:
        return 0

    cluster = None
    workdir = None
    try:
        if args.bookie:
            host, _, port_s = args.bookie.rpartition(":")
            port = int(port_s)
            if not args.ledger:
                ap.error("--bookie needs at least one --ledger the bookie holds")
            ledgers = [(lid, f"ledger {lid}") for lid in args.ledger]
        else:
            from devcluster import ports
            from devcluster.cluster import Cluster

            workdir = Path(tempfile.mkdtemp(prefix="bk-bench-"))
            cluster = Cluster(
                workdir,
                num_bookies=3,
                zk_port=ports.SECOND_ZK_PORT,
                port_base=ports.SECOND_PORT_BASE,
                http_base=ports.SECOND_HTTP_BASE,
            )
            t0 = time.monotonic()
            cluster.start()
            print(f"(cluster started in {time.monotonic() - t0:.0f} s)\n", file=sys.stderr)
            b = cluster.bookie(1)
            host, port = b.host, b.port
            ids = [x.bookie_id for x in cluster.bookies]
            contiguous = cluster.create_ledger(
                ensemble=1, write_quorum=1, ack_quorum=1, entries=1000, entry_size=100, bookies=[b.bookie_id]
            )
            # E=3, WQ=1: bookie 1 holds every third entry, one group per entry.
            striped = cluster.create_ledger(
                ensemble=3, write_quorum=1, ack_quorum=1, entries=3000, entry_size=100, bookies=ids
            )
            ledgers = [
                (contiguous["ledgerId"], "1,000 contiguous entries"),
                (striped["ledgerId"], "every 3rd of 3,000 entries"),
            ]
        if args.uvloop:
            import uvloop

            uvloop.install()
        rows = asyncio.run(wire_rows(host, port, ledgers, args.requests))
        print(f"## Pipelined requests over one connection to one real bookie ({host}:{port})\n")
        print(table(("request", "in-flight window", "requests", "requests/s"), rows))
    finally:
        if cluster is not None:
            cluster.stop()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
