"""Simulated bookies as a process of their own (bench/memory.py runs them so).

    .venv/bin/python -m devcluster.simbookie planted --ledgers 100000 --bookies 127.0.0.1:5261,127.0.0.2:5262,... \\
        [--shape 3/2/2] [--entries 100] [--register zk+hierarchical://127.0.0.1:21911/ledgers] \\
        [--missing BOOKIE/LEDGER/FIRST-LAST]... [--silent BOOKIE]...
    .venv/bin/python -m devcluster.simbookie zookeeper --metadata-service-uri URI [--serve ID=HOST:PORT]... \\
        [--ledger-ids 3,4,9]

`planted`: ledgers 1..N as devcluster/planted.py lays them out over `--bookies` (the same list, in the same
order, and the same `--shape` and `--entries` as the planting); each id must be HOST:PORT, where it
listens. `zookeeper`: the closed ledgers under URI when it starts; `--serve` puts a bookie id elsewhere
(default: every id of those ledgers at its own HOST:PORT). `--register` creates each bookie's registration (`<root>/available/<id>`, ephemeral,
empty: resolved as HOST:PORT) for as long as the process runs. Prints one JSON line when every bookie
listens, and a summary of the requests answered when stopped (SIGTERM or SIGINT).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from kazoo.client import KazooClient

from auditor.metadata.location import join, parse_service_uri
from devcluster.planted import Shape

from .replies import Faults
from .server import Address, SimBookies
from .sources import LedgerSource, PlantedSource, SnapshotSource


def host_port(text: str) -> Address:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def missing_entries(text: str) -> tuple[str, int, frozenset[int]]:
    """BOOKIE/LEDGER/FIRST[-LAST]"""
    try:
        bookie, ledger, span = text.rsplit("/", 2)
        first, _, last = span.partition("-")
        return bookie, int(ledger), frozenset(range(int(first), int(last or first) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not BOOKIE/LEDGER/FIRST[-LAST]") from None


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m devcluster.simbookie", description=__doc__)
    ap.add_argument("--register", metavar="URI", help="register the bookies under this metadata service URI")
    ap.add_argument("--missing", type=missing_entries, action="append", default=[], help="BOOKIE/LEDGER/FIRST[-LAST]")
    ap.add_argument("--silent", action="append", default=[], help="a bookie id that never answers")
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop")
    sub = ap.add_subparsers(dest="source", required=True)
    p = sub.add_parser("planted", help="ledgers 1..N of devcluster/planted.py")
    p.add_argument("--ledgers", type=int, required=True)
    p.add_argument("--bookies", required=True, help="comma-separated HOST:PORT ids, the planting's list")
    p.add_argument("--shape", default="3/2/2", help="E/WQ/AQ, the planting's (default %(default)s)")
    p.add_argument("--entries", default="100", help="entry counts, the planting's (default %(default)s)")
    z = sub.add_parser("zookeeper", help="the closed ledgers under a metadata service URI")
    z.add_argument("--metadata-service-uri", required=True)
    z.add_argument("--serve", action="append", default=[], metavar="ID=HOST:PORT")
    z.add_argument("--ledger-ids", help="comma-separated: only these ledgers")
    return ap.parse_args(argv)


async def source_and_addresses(args: argparse.Namespace) -> tuple[LedgerSource, dict[str, Address]]:
    if args.source == "planted":
        bookies = args.bookies.split(",")
        shape = Shape.parse(args.shape, args.entries)
        return PlantedSource(args.ledgers, bookies, shape), {b: host_port(b) for b in bookies}
    ids = [int(i) for i in args.ledger_ids.split(",")] if args.ledger_ids else None
    snapshot = await SnapshotSource.read(args.metadata_service_uri, ids)
    addresses = {b: host_port(b) for w in snapshot.ledgers.values() for _, _, ens in w.spans for b in ens}
    for item in args.serve:
        bookie, _, where = item.partition("=")
        addresses[bookie] = host_port(where)
    return snapshot, addresses


@contextmanager
def registered(uri: str | None, bookies: list[str]) -> Iterator[None]:
    """Each bookie's ephemeral registration, held by this process's ZooKeeper session."""
    if uri is None:
        yield
        return
    location = parse_service_uri(uri)
    zk = KazooClient(hosts=location.connect_string)
    zk.start(timeout=30)
    try:
        for b in bookies:
            zk.create(join(location.ledgers_root, "available", b), b"", ephemeral=True, makepath=True)
        yield
    finally:
        zk.stop()
        zk.close()


async def serve(args: argparse.Namespace) -> dict[str, object]:
    source, addresses = await source_and_addresses(args)
    lost: dict[tuple[str, int], frozenset[int]] = {}
    for bookie, ledger, ids in args.missing:
        lost[(bookie, ledger)] = lost.get((bookie, ledger), frozenset()) | ids
    faults = Faults(missing=lost, silent=frozenset(args.silent))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with SimBookies(source, addresses, faults) as sim:
        with registered(args.register, sorted(addresses)):
            print(json.dumps({"ready": True, "pid": os.getpid(), "bookies": addresses}), flush=True)
            await stop.wait()
        return {"requests": sim.requests, "refused": {b: v.refused for b, v in sim.views.items()}}


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    if args.loop == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            summary = runner.run(serve(args))
    else:
        summary = asyncio.run(serve(args))
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
