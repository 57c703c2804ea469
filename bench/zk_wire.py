"""A minimal ZooKeeper client on the event loop, for benchmarks only: what a ZooKeeper read path without
kazoo's threads would cost (bench/metadata_scan.py's `wire` side, issue 12's "consider what a faster
ZooKeeper client path would give").

One unauthenticated plaintext session; getChildren and getData only, pipelined; the server answers a
session's requests in order, so each reply goes to the oldest callback waiting. No pings (a benchmark
run is far inside the session timeout), no reconnection, no watches, no security: not product code.
The jute encoding follows ZooKeeper's wire protocol (ConnectRequest, RequestHeader, ReplyHeader, Stat).
"""

from __future__ import annotations

import asyncio
import collections
import struct
from collections.abc import Callable

OP_GET_DATA = 4
OP_GET_CHILDREN = 8
OP_CLOSE = -11
_LEN = struct.Struct(">i")
_HEADER = struct.Struct(">ii")  # xid, type
_REPLY = struct.Struct(">iqi")  # xid, zxid, err
_STAT = struct.Struct(
    ">qqqqiiiqiiq"
)  # czxid mzxid ctime mtime version cversion aversion owner dataLength children pzxid

Reply = Callable[[int, memoryview], None]  # (error code, body)


class ZooKeeperError(Exception):
    pass


class ZkWire(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._waiting: collections.deque[Reply] = collections.deque()
        self._connected: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._xid = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._connected.done():
            self._connected.set_exception(ZooKeeperError(f"connection lost before the session: {exc}"))
        for reply in self._waiting:
            reply(-4, memoryview(b""))  # CONNECTIONLOSS
        self._waiting.clear()

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        at = 0
        view = memoryview(buf)  # frames are slices of it, released before the buffer shrinks
        while len(buf) - at >= 4:
            (size,) = _LEN.unpack_from(buf, at)
            if len(buf) - at - 4 < size:
                break
            frame = view[at + 4 : at + 4 + size]
            at += 4 + size
            if not self._connected.done():
                (_proto, _timeout, session) = struct.unpack_from(">iiq", frame)
                self._connected.set_result(session)
            else:
                xid, _zxid, err = _REPLY.unpack_from(frame)
                if xid >= 0:  # -1 watch event, -2 ping: not ours
                    self._waiting.popleft()(err, frame[_REPLY.size :])
            del frame
        view.release()
        del buf[:at]

    async def session(self, timeout_ms: int = 30_000) -> int:
        request = struct.pack(">iqiq", 0, 0, timeout_ms, 0) + _LEN.pack(16) + bytes(16) + b"\0"
        self._write(request)
        return await self._connected

    def _write(self, payload: bytes) -> None:
        assert self.transport is not None
        self.transport.write(_LEN.pack(len(payload)) + payload)

    def send(self, op: int, path: str, reply: Reply) -> None:
        self._xid += 1
        raw = path.encode()
        self._write(_HEADER.pack(self._xid, op) + _LEN.pack(len(raw)) + raw + b"\0")
        self._waiting.append(reply)

    async def get_children(self, path: str) -> list[str]:
        done: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()

        def reply(err: int, body: memoryview) -> None:
            if err:
                done.set_exception(ZooKeeperError(f"getChildren {path}: error {err}"))
                return
            (count,) = _LEN.unpack_from(body)
            names, at = [], 4
            for _ in range(count):
                (n,) = _LEN.unpack_from(body, at)
                names.append(bytes(body[at + 4 : at + 4 + n]).decode())
                at += 4 + n
            done.set_result(names)

        self.send(OP_GET_CHILDREN, path, reply)
        return await done

    def close(self) -> None:
        if self.transport is not None:
            self._xid += 1
            self._write(_HEADER.pack(self._xid, OP_CLOSE))
            self.transport.close()


def parse_get_data(body: memoryview) -> tuple[bytes, tuple[int, ...]]:
    """A getData reply body: the data and the Stat's eleven fields."""
    (n,) = _LEN.unpack_from(body)
    data = bytes(body[4 : 4 + max(n, 0)])
    return data, _STAT.unpack_from(body, 4 + max(n, 0))


async def get_all(zk: ZkWire, paths: list[str], in_flight: int) -> int:
    """getData of every path, `in_flight` outstanding at a time; answers parsed and discarded."""
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    pending = iter(paths)
    answered = 0

    def reply(err: int, body: memoryview) -> None:
        nonlocal answered
        if err:
            if not done.done():
                done.set_exception(ZooKeeperError(f"getData: error {err}"))
            return
        parse_get_data(body)
        answered += 1
        nxt = next(pending, None)
        if nxt is not None:
            zk.send(OP_GET_DATA, nxt, reply)
        elif answered == len(paths) and not done.done():
            done.set_result(answered)

    if not paths:
        return 0
    for p in paths[:in_flight]:
        zk.send(OP_GET_DATA, p, reply)
    for _ in range(min(in_flight, len(paths))):
        next(pending)
    return await done


async def wire_scan(host: str, port: int, root: str, in_flight: int) -> int:
    """The same walk as metadata_scan.raw_scan (two directory levels, then the leaves; every ledger znode
    read), on one session of this client."""
    loop = asyncio.get_running_loop()
    _, zk = await loop.create_connection(ZkWire, host, port)
    try:
        await zk.session()
        paths: list[str] = []
        for a in sorted(k for k in await zk.get_children(root) if len(k) == 2 and k.isdigit()):
            for b in sorted(await zk.get_children(f"{root}/{a}")):
                leaf = f"{root}/{a}/{b}"
                paths.extend(f"{leaf}/{n}" for n in sorted(await zk.get_children(leaf)) if n.startswith("L"))
        return await get_all(zk, paths, in_flight)
    finally:
        zk.close()
