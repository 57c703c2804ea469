"""A small scripted bookie on loopback for the bookie client's unit tests, and the message builders they
share: a test server that decodes each framed request and answers as the test says, so that what a
healthy bookie cannot be made to do on demand (out-of-order and late replies, hostile bytes, unknown
txn ids, silence) can be exercised. What real bookies do is checked in
tests/realcluster/bookie/test_bookie_client.py."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.bookie import (
    BookieClient,
    BookieClientConfig,
    Op,
    Status,
)
from auditor.bookie import protocol as P
from auditor.durability.entrylist import encode_entry_ids

# ----- a scripted peer on loopback ---------------------------------------------------------------------
Handler = Callable[["Peer", pb.Request, asyncio.StreamWriter], Awaitable[None]]


class Peer:
    """Test server: decodes each framed Request and lets `handler` answer (or not)."""

    def __init__(
        self, handler: Handler, on_connect: Callable[[asyncio.StreamWriter], Awaitable[None]] | None = None
    ) -> None:
        self.handler = handler
        self.on_connect = on_connect
        self.requests: list[pb.Request] = []
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self, port: int = 0) -> Peer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for w in self.writers:
            w.close()
        await self.server.wait_closed()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            if self.on_connect:
                await self.on_connect(writer)
            while True:
                (n,) = struct.unpack(">i", await reader.readexactly(4))
                req = pb.Request()
                req.ParseFromString(await reader.readexactly(n))
                self.requests.append(req)
                await self.handler(self, req, writer)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, asyncio.CancelledError):
            pass  # the test is over or the client hung up
        finally:
            writer.close()


def _req(op: Op, txn: int) -> pb.Request:
    r = pb.Request()
    r.header.version, r.header.operation, r.header.txnId = 3, op, txn
    return r


def _response(req: pb.Request, status: Status, sub_status: Status | None = None, **fields: Any) -> pb.Response:
    resp = pb.Response()
    resp.header.CopyFrom(req.header)
    resp.status = status
    field = P._RESPONSE_FIELD[Op(req.header.operation)]
    sub = getattr(resp, field)
    if Op(req.header.operation) is not Op.AUTH:
        sub.status = status if sub_status is None else sub_status
    for k, v in fields.items():
        setattr(sub, k, v)
    return resp


def send(writer: asyncio.StreamWriter, msg: pb.Response | bytes) -> None:
    body = msg if isinstance(msg, bytes) else msg.SerializeToString()
    writer.write(P.frame(body))


def _echo_ids(req: pb.Request) -> dict[str, int]:
    op = Op(req.header.operation)
    if op is Op.READ_ENTRY:
        return {"ledgerId": req.readRequest.ledgerId, "entryId": req.readRequest.entryId}
    if op is Op.READ_LAC:
        return {"ledgerId": req.readLacRequest.ledgerId}
    if op is Op.GET_LIST_OF_ENTRIES_OF_LEDGER:
        return {"ledgerId": req.getListOfEntriesOfLedgerRequest.ledgerId}
    return {}


async def answer_ok(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
    """A well-behaved tiny bookie: ledger 1 holds entries 0..9 (body = the entry id as 8 bytes)."""
    op = Op(req.header.operation)
    ids = _echo_ids(req)
    if op is Op.READ_ENTRY:
        e = req.readRequest.entryId
        if req.readRequest.ledgerId != 1:
            send(writer, _response(req, Status.ENOLEDGER, **ids))
        elif 0 <= e < 10:
            send(writer, _response(req, Status.EOK, body=struct.pack(">q", e), maxLAC=9, **ids))
        else:
            send(writer, _response(req, Status.ENOENTRY, **ids))
    elif op is Op.GET_BOOKIE_INFO:
        send(writer, _response(req, Status.EOK, totalDiskCapacity=100, freeDiskSpace=40))
    elif op is Op.GET_LIST_OF_ENTRIES_OF_LEDGER:
        if ids["ledgerId"] == 1:
            send(writer, _response(req, Status.EOK, availabilityOfEntriesOfLedger=encode_entry_ids(range(10)), **ids))
        else:
            send(writer, _response(req, Status.ENOLEDGER, **ids))
    elif op is Op.READ_LAC:
        send(writer, _response(req, Status.ENOENTRY, **ids))
    elif op is Op.AUTH:
        resp = _response(req, Status.EOK, authPluginName="AuthDisabledPlugin", payload=b"")
        send(writer, resp)
    await writer.drain()


async def _eventually(call: Callable[[], Awaitable[Any]], within: float = 3.0) -> Any:
    """Repeat a request until it is PRESENT (reconnects back off first) or time runs out."""
    deadline = time.monotonic() + within
    while True:
        r = await call()
        if r.present or time.monotonic() > deadline:
            return r
        await asyncio.sleep(0.02)


FAST = BookieClientConfig(
    request_timeout=1.0, connect_timeout=1.0, backoff_initial=0.01, backoff_max=0.05, liveness_timeout=0.5
)


async def _client(peer: Peer, **overrides: Any) -> BookieClient:
    cfg = BookieClientConfig(**{**{f: getattr(FAST, f) for f in FAST.__dataclass_fields__}, **overrides})
    return BookieClient("test-bookie", peer.address, cfg)


async def _noop() -> None:
    return None


async def _until(predicate: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "condition never became true"
        await asyncio.sleep(0.01)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)
