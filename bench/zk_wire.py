"""ZooKeeper reads on the event loop without kazoo, for benchmarks: the product's wire session
(auditor/metadata/zk/wire.py, which reads ledger metadata in bulk) plus the directory listing a scan's walk
needs, which the product leaves to kazoo. Used by bench/metadata_scan.py's `wire` side (what a ZooKeeper
path without kazoo's threads gives, issue 12) and bench/floor_scan.py's metadata reads.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Callable

from auditor.metadata.zk.wire import OP_GET_CHILDREN, OP_GET_DATA, WireSession, decode_get_data

_INT = struct.Struct(">i")


class ZooKeeperError(Exception):
    pass


async def open_session(host: str, port: int, timeout_ms: int = 30_000) -> WireSession:
    loop = asyncio.get_running_loop()
    _, session = await loop.create_connection(lambda: WireSession(loop), host, port)
    await session.establish(timeout_ms)
    return session


async def get_children(session: WireSession, path: str) -> list[str]:
    done: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()

    def reply(_tag: int, err: int, body: memoryview) -> None:
        if err:
            done.set_exception(ZooKeeperError(f"getChildren {path}: error {err}"))
            return
        (count,) = _INT.unpack_from(body)
        names, at = [], 4
        for _ in range(count):
            (n,) = _INT.unpack_from(body, at)
            names.append(bytes(body[at + 4 : at + 4 + n]).decode())
            at += 4 + n
        done.set_result(names)

    session.send(OP_GET_CHILDREN, path, reply, 0)
    return await done


async def ledger_paths(session: WireSession, root: str) -> list[tuple[int, str]]:
    """(ledger id, znode) of every ledger of a hierarchical tree, in id order: two directory levels, then
    the leaves (the walk of metadata_scan.raw_scan)."""
    out: list[tuple[int, str]] = []
    for a in sorted(k for k in await get_children(session, root) if len(k) == 2 and k.isdigit()):
        for b in sorted(await get_children(session, f"{root}/{a}")):
            leaf = f"{root}/{a}/{b}"
            out.extend(
                (int(a + b + n[1:]), f"{leaf}/{n}")
                for n in sorted(await get_children(session, leaf))
                if n.startswith("L")
            )
    return out


async def get_all(
    session: WireSession, paths: list[str], in_flight: int, take: Callable[[int, bytes], None] = lambda i, d: None
) -> int:
    """getData of every path, `in_flight` outstanding at a time; `take(index, data)` gets each answer."""
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    sent = 0
    answered = 0

    def reply(i: int, err: int, body: memoryview) -> None:
        nonlocal sent, answered
        if err:
            if not done.done():
                done.set_exception(ZooKeeperError(f"getData {paths[i]}: error {err}"))
            return
        take(i, decode_get_data(body)[0])
        answered += 1
        if sent < len(paths):
            session.send(OP_GET_DATA, paths[sent], reply, sent)
            sent += 1
        elif answered == len(paths) and not done.done():
            done.set_result(answered)

    if not paths:
        return 0
    while sent < min(in_flight, len(paths)):
        session.send(OP_GET_DATA, paths[sent], reply, sent)
        sent += 1
    return await done


async def wire_scan(host: str, port: int, root: str, in_flight: int) -> int:
    """The same walk and reads as metadata_scan.raw_scan, on one session, answers discarded."""
    session = await open_session(host, port)
    try:
        return await get_all(session, [p for _, p in await ledger_paths(session, root)], in_flight)
    finally:
        session.close()


async def ledgers_in_chunks(
    host: str, port: int, root: str, in_flight: int, chunk: int = 256
) -> AsyncIterator[list[tuple[int, bytes]]]:
    """(ledger id, znode data) of every ledger, in chunks as they are read (the floor's metadata side)."""
    session = await open_session(host, port)
    try:
        found = await ledger_paths(session, root)
        queue: asyncio.Queue[list[tuple[int, bytes]] | None] = asyncio.Queue()
        ready: list[tuple[int, bytes]] = []

        def take(i: int, data: bytes) -> None:
            ready.append((found[i][0], data))
            if len(ready) >= chunk:
                queue.put_nowait(ready.copy())
                ready.clear()

        async def read() -> None:
            await get_all(session, [p for _, p in found], in_flight, take)
            queue.put_nowait(ready.copy())
            queue.put_nowait(None)

        reading = asyncio.ensure_future(read())
        while (got := await queue.get()) is not None:
            yield got
        await reading
    finally:
        session.close()
