"""The floor of a scrutiny scan (issue 12): the same ZooKeeper reads and bookie requests, answers discarded.

    PYTHONPATH=. .venv/bin/python bench/floor_scan.py ZK_HOSTS LEDGERS_ROOT MAX_IN_FLIGHT asyncio|uvloop [wire|kazoo]

What no scan can beat on the same cluster. It lists the hierarchical ledger tree and gets every ledger
znode, 64 reads in flight: on the event loop with the wire session our scan uses (bench/zk_wire.py, the
default), or with raw kazoo in a thread (`kazoo`, the floor of the kazoo-based scans before it). Each
answer is cut down to what addressing needs: the v3 header, then the protobuf's bookies of its non-empty
segments. The event loop sends one GET_LIST_OF_ENTRIES_OF_LEDGER per ledger and bookie as ledgers arrive,
`MAX_IN_FLIGHT` per bookie connection like ours (one pre-encoded frame each), and counts the reply
frames without decoding them. As the scan's `confirm_settled` does for the informational finding of a
closed WQ == AQ ledger, it reads each such ledger's znode a second time (wire path only; on a session of
its own, 64 in flight). It prints one JSON line: ledgers, requests, ZooKeeper reads, seconds, ledgers/s,
CPU.
Used as the "floor" side of bench/replicas_check.py.
"""

from __future__ import annotations

import asyncio
import collections
import json
import resource
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from kazoo.client import KazooClient

from auditor._proto import bookkeeper_formats_pb2 as pb
from auditor.bookie import protocol as P
from bench.zk_wire import get_all, ledgers_in_chunks, open_session

ZK_IN_FLIGHT = 64
HEADER = b"BookieMetadataFormatVersion\t3\n"


def bookies_of(data: bytes) -> set[str]:
    """The bookies of a v3 znode's non-empty segments (the ones a scan asks)."""
    return addressed(data)[0]


def addressed(data: bytes) -> tuple[set[str], bool]:
    """The bookies of a v3 znode's non-empty segments, and whether its write quorum equals its ack quorum
    (a closed WQ == AQ ledger gets an informational finding, which a scan confirms with one more read)."""
    body = data[len(HEADER) :]
    size, shift, i = 0, 0, 0
    while True:  # the message's varint length prefix
        b = body[i]
        size |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            break
        shift += 7
    msg = pb.LedgerMetadataFormat()
    msg.ParseFromString(body[i : i + size])
    last = msg.lastEntryId
    out: set[str] = set()
    for n, seg in enumerate(msg.segment):
        end = msg.segment[n + 1].firstEntryId - 1 if n + 1 < len(msg.segment) else last
        if end >= seg.firstEntryId:
            out.update(seg.ensembleMember)
    return out, msg.quorumSize == msg.ackQuorumSize


def read_metadata(zk: KazooClient, root: str, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any]) -> None:
    """In a thread: list, get and cut down every ledger znode; hand them to the loop in chunks."""
    paths: list[tuple[int, str]] = []
    for a in sorted(k for k in zk.get_children(root) if len(k) == 2 and k.isdigit()):
        for b in sorted(zk.get_children(f"{root}/{a}")):
            leaf = f"{root}/{a}/{b}"
            for n in sorted(zk.get_children(leaf)):
                if n.startswith("L"):
                    paths.append((int(a + b + n[1:]), f"{leaf}/{n}"))
    window: collections.deque[Any] = collections.deque()
    chunk: list[tuple[int, set[str]]] = []

    def take() -> None:
        lid, got = window.popleft()
        chunk.append((lid, bookies_of(got.get(timeout=30)[0])))
        if len(chunk) >= 256:
            loop.call_soon_threadsafe(queue.put_nowait, list(chunk))
            chunk.clear()

    for lid, path in paths:
        if len(window) >= ZK_IN_FLIGHT:
            take()
        window.append((lid, zk.get_async(path)))
    while window:
        take()
    loop.call_soon_threadsafe(queue.put_nowait, list(chunk))
    loop.call_soon_threadsafe(queue.put_nowait, None)


class Connection:
    """One bookie connection: pre-encoded GET_LIST frames out, `window` at a time, each iteration's frames
    in one write (no task per request); replies counted, not decoded."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, window: int) -> None:
        self.reader, self.writer, self.window = reader, writer, window
        self.queue: collections.deque[int] = collections.deque()
        self.in_flight = 0
        self.txn = 0
        self.sent = 0
        self.replies = 0
        self.done = asyncio.get_running_loop().create_future()
        self.closing = False
        self.reading = asyncio.ensure_future(self._read())

    def send(self, lid: int) -> None:
        self.queue.append(lid)
        self._pump()

    def _pump(self) -> None:
        frames = []
        while self.queue and self.in_flight < self.window:
            self.txn += 1
            self.in_flight += 1
            frames.append(P.entry_list_frame(self.txn, self.queue.popleft()).frame)
        if frames:
            self.writer.write(b"".join(frames))
            self.sent += len(frames)

    async def _read(self) -> None:
        while True:
            head = await self.reader.readexactly(4)
            await self.reader.readexactly(int.from_bytes(head, "big"))
            self.replies += 1
            self.in_flight -= 1
            self._pump()
            if self.closing and not self.queue and self.in_flight == 0 and not self.done.done():
                self.done.set_result(None)

    async def drained(self) -> None:
        self.closing = True
        if self.queue or self.in_flight:
            await self.done


async def kazoo_chunks(zk: KazooClient, root: str) -> AsyncIterator[list[tuple[int, set[str]]]]:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    reader = threading.Thread(target=read_metadata, args=(zk, root, asyncio.get_running_loop(), queue), daemon=True)
    reader.start()
    while (chunk := await queue.get()) is not None:
        yield chunk


async def wire_chunks(hosts: str, root: str, confirm: list[int]) -> AsyncIterator[list[tuple[int, set[str]]]]:
    """The ledgers with their bookies; the ids of those a scan confirms with a second read go to `confirm`."""
    host, port = hosts.split(",")[0].rsplit(":", 1)
    async for chunk in ledgers_in_chunks(host, int(port), root, ZK_IN_FLIGHT):
        out = []
        for lid, data in chunk:
            bookies, informational = addressed(data)
            out.append((lid, bookies))
            if informational:
                confirm.append(lid)
        yield out


def ledger_path(root: str, lid: int) -> str:
    """The hierarchical layout's znode of a ledger id below 10^10 (what the benches plant)."""
    digits = f"{lid:010d}"
    return f"{root}/{digits[:2]}/{digits[2:6]}/L{digits[6:]}"


async def confirm_reads(hosts: str, root: str, ids: list[int], more: asyncio.Event, done: asyncio.Event) -> int:
    """A second read of each WQ == AQ ledger's znode, as the scan's `confirm_settled` sends for its
    informational finding (one getData, answer discarded), 64 in flight on a session of its own, taken as
    `ids` grows until `done`."""
    host, port = hosts.split(",")[0].rsplit(":", 1)
    session = await open_session(host, int(port))
    sent = 0
    try:
        while True:
            if sent < len(ids):
                batch = ids[sent:]
                sent += len(batch)
                await get_all(session, [ledger_path(root, lid) for lid in batch], ZK_IN_FLIGHT)
            elif done.is_set():
                return sent
            else:
                more.clear()
                await more.wait()
    finally:
        session.close()


async def floor(hosts: str, root: str, window: int, zk_path: str = "wire") -> dict[str, Any]:
    zk: KazooClient | None = None
    if zk_path == "kazoo":
        zk = KazooClient(hosts=hosts)
        zk.start(timeout=15)
    conns: dict[str, Connection] = {}
    ledgers = 0
    t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    confirm: list[int] = []  # the wire path only: the kazoo path is the old floor, without them
    more, done = asyncio.Event(), asyncio.Event()
    confirming = asyncio.ensure_future(confirm_reads(hosts, root, confirm, more, done)) if zk is None else None
    chunks = kazoo_chunks(zk, root) if zk is not None else wire_chunks(hosts, root, confirm)
    async for chunk in chunks:
        for lid, bookies in chunk:
            ledgers += 1
            for b in sorted(bookies):
                if b not in conns:
                    host, port = b.rsplit(":", 1)
                    conns[b] = Connection(*await asyncio.open_connection(host, int(port)), window)
                conns[b].send(lid)
        more.set()
    done.set()
    more.set()
    for c in conns.values():
        await c.drained()
    confirmed = await confirming if confirming is not None else 0
    seconds = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    for c in conns.values():
        c.reading.cancel()
        c.writer.close()
    if zk is not None:
        zk.stop()
        zk.close()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    requests = sum(c.sent for c in conns.values())
    return {
        "ledgers": ledgers,
        "bookie_requests": requests,
        "zk_reads": ledgers + confirmed,  # getData: each ledger's znode, and again for each WQ == AQ ledger
        "seconds": round(seconds, 3),
        "ledgers_per_s": round(ledgers / seconds, 1),
        "cpu_us_per_ledger": round(cpu / ledgers * 1e6, 1) if ledgers else None,
    }


if __name__ == "__main__":
    coro = floor(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[5] if len(sys.argv) > 5 else "wire")
    if sys.argv[4] == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            print(json.dumps(runner.run(coro)))
    else:
        print(json.dumps(asyncio.run(coro)))
