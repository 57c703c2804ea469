"""Bulk ZooKeeper reads on the event loop: a second, read-only session of our own, without kazoo's threads.

Why: a scan reads one znode per ledger. Through kazoo every read costs a request object, a lock, a
thread hop and a callback on kazoo's threads, about 95 µs of CPU per ledger on this project's benchmark
machine; this client spends about 13 µs (bench/metadata_scan.py, docs/benchmarks.md). Everything else
(leadership, watches, writes, single reads) stays on the kazoo session.

What it is: one plaintext, unauthenticated session (ZooKeeperConnection uses it only when the connection
has no TLS and no credentials, so nothing a security setting asks for is ever skipped), speaking the
jute wire protocol for getData, sync and ping only. The server answers a session's requests in order, so
each reply goes to the oldest waiting callback. The session is opened when first needed and again after
it is lost; it holds no watches or ephemeral nodes, so nothing depends on its continuity.

Each batch starts with a sync, so its server is at least as current as whatever listed the paths (the
kazoo session may be on another server); the batch's reads follow it without waiting for its answer, as
the server serves a session's requests in order. Any failure (no server reachable, connection lost, an
answer overdue) is WireUnavailable: the caller reads that batch through kazoo instead.
"""

from __future__ import annotations

import asyncio
import collections
import random
import struct
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.exceptions import EXCEPTIONS, ZookeeperError
from kazoo.protocol.states import ZnodeStat

from auditor.aio.ratelimit import TokenBucket
from auditor.logging import get_logger
from auditor.metadata.errors import MetadataError

log = get_logger("auditor.metadata.zkwire")

OP_GET_DATA = 4
OP_GET_CHILDREN = 8  # benchmarks only (bench/zk_wire.py): the product lists through kazoo
OP_SYNC = 9
OP_PING = 11
OP_CLOSE = -11
XID_PING = -2
ERR_CONNECTION_LOSS = -4
ERR_NO_NODE = -101
# A frame larger than this is no ZooKeeper answer we asked for (the server's jute.maxbuffer is 1 MiB).
MAX_FRAME = 16 << 20

_INT = struct.Struct(">i")
_HEADER = struct.Struct(">ii")  # RequestHeader: xid, type
_REPLY = struct.Struct(">iqi")  # ReplyHeader: xid, zxid, err
_CONNECT = struct.Struct(">iqiq")  # ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId
_CONNECTED = struct.Struct(">iiq")  # ConnectResponse: protocolVersion, timeOut, sessionId
_STAT = struct.Struct(">qqqqiiiqiiq")  # Stat, in ZnodeStat's field order

Answer = tuple[bytes, ZnodeStat] | None | Exception
Reply = Callable[[int, int, memoryview], None]  # (tag, error code, reply body)


class WireUnavailable(MetadataError):
    """The wire session cannot serve this batch; read it another way (never seen outside the bridge)."""


def encode_connect(timeout_ms: int) -> bytes:
    body = _CONNECT.pack(0, 0, timeout_ms, 0) + _INT.pack(16) + bytes(16) + b"\0"  # new session, not read-only
    return _INT.pack(len(body)) + body


def encode_request(xid: int, op: int, path: str | None = None) -> bytes:
    body = _HEADER.pack(xid, op)
    if path is not None:
        raw = path.encode()
        body += _INT.pack(len(raw)) + raw
        if op in (OP_GET_DATA, OP_GET_CHILDREN):
            body += b"\0"  # no watch
    return _INT.pack(len(body)) + body


def decode_get_data(body: memoryview) -> tuple[bytes, ZnodeStat]:
    """A GetDataResponse: the data (a null buffer reads as b"") and the Stat."""
    (n,) = _INT.unpack_from(body)
    size = max(n, 0)
    return bytes(body[4 : 4 + size]), ZnodeStat._make(_STAT.unpack_from(body, 4 + size))


def error_for(code: int, path: str) -> Exception:
    """kazoo's exception for a ZooKeeper error code, so both read paths fail alike."""
    # kazoo ships no types: EXCEPTIONS maps codes to exception classes (ZookeeperError's subclasses).
    cls: type[Exception] = EXCEPTIONS[code] if code in EXCEPTIONS else ZookeeperError
    return cls(f"{path}: ZooKeeper error {code}")


class WireSession(asyncio.Protocol):
    """One ZooKeeper session over one connection; requests pipelined, answers in order."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.timeout_s = 0.0  # as negotiated
        self.last_sent = loop.time()
        self._buf = bytearray()
        self._waiting: collections.deque[tuple[Reply, int]] = collections.deque()
        self._established: asyncio.Future[None] = loop.create_future()
        self._xid = 0
        self._out: list[bytes] = []  # frames queued in this loop iteration (`_flush` writes them)

    # ------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not an isinstance check: uvloop's transports (the daemon's loop) do not derive from asyncio.Transport.
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self._established.done():
            self._established.set_exception(WireUnavailable(f"connection closed before the session began ({exc})"))
        waiting, self._waiting = self._waiting, collections.deque()
        for reply, tag in waiting:
            reply(tag, ERR_CONNECTION_LOSS, memoryview(b""))

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        at = 0
        view = memoryview(buf)  # frames are slices of it, all released before the buffer shrinks
        try:
            while len(buf) - at >= 4:
                (size,) = _INT.unpack_from(buf, at)
                if not 0 <= size <= MAX_FRAME:
                    self._abort(f"a frame of {size} bytes")
                    return
                if len(buf) - at - 4 < size:
                    break
                frame = view[at + 4 : at + 4 + size]
                at += 4 + size
                self._frame(frame)
                del frame
                if self.closed:
                    return
        finally:
            view.release()
            del buf[:at]

    def _frame(self, frame: memoryview) -> None:
        if not self._established.done():
            if len(frame) < _CONNECTED.size:
                self._abort("a short connect response")
                return
            _version, timeout_ms, session_id = _CONNECTED.unpack_from(frame)
            if timeout_ms <= 0 or session_id == 0:
                self._abort("the server refused the session")
                return
            self.timeout_s = timeout_ms / 1000.0
            self._established.set_result(None)
            return
        if len(frame) < _REPLY.size:
            self._abort("a short reply")
            return
        xid, _zxid, err = _REPLY.unpack_from(frame)
        if xid < 0:  # a ping's answer (we set no watches, so there are no events)
            return
        if not self._waiting:
            self._abort(f"an answer (xid {xid}) to no request")
            return
        reply, tag = self._waiting.popleft()
        reply(tag, err, frame[_REPLY.size :])

    def _abort(self, what: str) -> None:
        log.warning("ZooKeeper wire session: %s; closing it", what)
        if self.transport is not None:
            self.transport.abort()  # connection_lost fails whatever waits

    # ------------------------------------------------------------ requests
    async def establish(self, timeout_ms: int) -> None:
        self._write(encode_connect(timeout_ms))
        await self._established

    def _write(self, frame: bytes) -> None:
        """Queue a frame; every frame queued in one loop iteration leaves in one write (one system call
        for a window refilled by a burst of replies, not one per request)."""
        self._out.append(frame)
        if len(self._out) == 1:
            self.loop.call_soon(self._flush)
        self.last_sent = self.loop.time()

    def _flush(self) -> None:
        out, self._out = self._out, []
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))

    def send(self, op: int, path: str, reply: Reply, tag: int) -> None:
        if self.closed:
            reply(tag, ERR_CONNECTION_LOSS, memoryview(b""))
            return
        self._xid = (self._xid + 1) & 0x7FFFFFFF
        self._waiting.append((reply, tag))
        self._write(encode_request(self._xid, op, path))

    def ping(self) -> None:
        if not self.closed:
            self._write(encode_request(XID_PING, OP_PING))

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self._write(encode_request(self._xid + 1, OP_CLOSE))
            self._flush()
            self.transport.close()
        self.closed = True


class WireReader:
    """Bulk getData over a session of our own, opened on demand, for one ZooKeeper ensemble."""

    def __init__(
        self,
        hosts: Sequence[tuple[str, int]],
        chroot: str,
        session_timeout_s: float,
        connect_timeout_s: float = 5.0,
        retry_after_s: float = 30.0,
    ) -> None:
        self.hosts = list(hosts)
        self.chroot = chroot.rstrip("/")
        self.session_timeout_s = session_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.retry_after_s = retry_after_s  # after a failure, kazoo serves until this has passed
        self._session: WireSession | None = None
        self._opening: asyncio.Lock | None = None
        self._failed_at: float | None = None
        self.batches = 0  # batches served, and batches handed back to kazoo: for tests and logs
        self.handed_back = 0

    def usable(self, loop: asyncio.AbstractEventLoop) -> bool:
        return self._failed_at is None or loop.time() - self._failed_at >= self.retry_after_s

    def failed(self, loop: asyncio.AbstractEventLoop, why: Exception) -> None:
        if self._failed_at is None:
            log.warning("bulk ZooKeeper reads go through kazoo for %.0f s: %s", self.retry_after_s, why)
        self._failed_at = loop.time()
        self.handed_back += 1
        self.close()

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    async def _live_session(self, loop: asyncio.AbstractEventLoop) -> WireSession:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            s = self._session
            # A session idle for most of its timeout may be expiring on the server: start afresh.
            if s is not None and not s.closed and loop.time() - s.last_sent < s.timeout_s * 0.6:
                return s
            self.close()
            problems = []
            for host, port in random.sample(self.hosts, len(self.hosts)):
                try:
                    async with asyncio.timeout(self.connect_timeout_s):
                        _, s = await loop.create_connection(lambda: WireSession(loop), host, port)
                        await s.establish(int(self.session_timeout_s * 1000))
                except (OSError, TimeoutError, WireUnavailable) as exc:
                    problems.append(f"{host}:{port}: {exc or type(exc).__name__}")
                    continue
                if self._failed_at is not None:
                    log.info("bulk ZooKeeper reads are back on the wire session (%s:%d)", host, port)
                    self._failed_at = None
                self._session = s
                return s
            raise WireUnavailable("no ZooKeeper server took a session: " + "; ".join(problems))

    async def get_many(
        self,
        paths: Sequence[str],
        max_in_flight: int,
        rate: TokenBucket | None,
        op_timeout: float | None,
    ) -> list[Answer]:
        """Data and Stat of each znode (None: it does not exist; an exception: that read failed), in order,
        with at most `max_in_flight` outstanding; `rate` releases reads in slices of that window. Paths
        are absolute inside the chroot. WireUnavailable when the session cannot serve the whole batch."""
        loop = asyncio.get_running_loop()
        n = len(paths)
        results: list[Answer] = [None] * n
        if n == 0:
            return results
        session = await self._live_session(loop)
        prefix = self.chroot
        finished: asyncio.Future[None] = loop.create_future()
        cursor = {"next": 0, "released": 0, "outstanding": 0, "done": 0}

        def on_sync(_tag: int, err: int, _body: memoryview) -> None:
            if err and not finished.done():
                finished.set_exception(WireUnavailable(f"sync failed with ZooKeeper error {err}"))

        # The reads go out right behind the sync, without waiting for its answer: the server serves a
        # session's requests in order, so they are served after it all the same (a round trip less per
        # batch), and the sync's answer comes before any of theirs.
        session.send(OP_SYNC, self.chroot or "/", on_sync, 0)

        def pump() -> None:
            while cursor["outstanding"] < max_in_flight and cursor["next"] < cursor["released"]:
                i = cursor["next"]
                cursor["next"] += 1
                cursor["outstanding"] += 1
                session.send(OP_GET_DATA, prefix + paths[i], on_reply, i)

        def on_reply(i: int, err: int, body: memoryview) -> None:
            if finished.done():
                return
            cursor["outstanding"] -= 1
            if err == 0:
                try:
                    results[i] = decode_get_data(body)
                except struct.error:
                    finished.set_exception(WireUnavailable(f"{paths[i]}: a malformed getData answer"))
                    return
            elif err == ERR_CONNECTION_LOSS:
                finished.set_exception(WireUnavailable("the connection was lost"))
                return
            elif err != ERR_NO_NODE:
                results[i] = error_for(err, paths[i])
            cursor["done"] += 1
            if cursor["done"] == n:
                finished.set_result(None)
            else:
                pump()

        try:
            step = max(1, max_in_flight) if rate is not None else n
            for start in range(0, n, step):
                stop = min(n, start + step)
                if rate is not None:
                    await _wait_pinging(session, rate.reserve(stop - start))
                cursor["released"] = stop
                pump()
                if finished.done():
                    break
            seen = -1
            while not finished.done():
                try:
                    async with asyncio.timeout(op_timeout):
                        await asyncio.shield(finished)
                except TimeoutError:
                    if cursor["done"] == seen:
                        raise WireUnavailable(f"no answer within {op_timeout} s") from None
                    seen = cursor["done"]
            finished.result()
        finally:
            cursor["released"] = cursor["next"]  # cancelled or failed: send nothing more
            if not finished.done():
                finished.cancel()
        self.batches += 1
        return results


async def _wait_pinging(session: WireSession, wait: float) -> None:
    """Sleep `wait` seconds (a rate limit's), pinging every third of the session timeout meanwhile: a
    slow rate must not let the server expire the session between two slices of reads."""
    loop = session.loop
    deadline = loop.time() + wait
    while (left := deadline - loop.time()) > 0:
        await asyncio.sleep(min(left, session.timeout_s / 3))
        if loop.time() - session.last_sent >= session.timeout_s / 3:
            session.ping()


def reader_for(client: Any, session_timeout_s: float, connect_timeout_s: float) -> WireReader:
    """A reader for the servers and chroot a kazoo client was given."""
    return WireReader(client.hosts, client.chroot or "", session_timeout_s, connect_timeout_s)
