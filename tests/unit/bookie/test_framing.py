"""Bookie v3 framing, request safety, reply decoding, and the client's connection handling.

The client tests talk over real loopback sockets to a small scripted peer (a test server that decodes
each request and answers as the test says) to exercise what a healthy bookie cannot be made to do on
demand: out-of-order and late replies, hostile bytes, unknown txn ids, silence. What real bookies do
is checked in tests/realcluster/test_bookie_client.py.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.aio.adaptive import AdaptivePolicy
from auditor.bookie import (
    BookieClient,
    BookieClientConfig,
    BookiePool,
    Capability,
    Op,
    Outcome,
    Status,
    TokenBucket,
    UnsafeRequestError,
)
from auditor.bookie import protocol as P
from auditor.durability.entrylist import STEP, EntryList, encode_entry_ids, encode_ranges
from auditor.durability.ids import LedgerId
from auditor.durability.ranges import RangeSet
from auditor.durability.varint import encode as _encode_varint
from tests.heartbeat import Heartbeat
from tests.property.contract import parse_contract

# ----- spec §8.1: framed requests, byte for byte ------------------------------------------------------
REQUEST_VECTORS = [
    (lambda: P.read_entry_request(1, 1, 0), "0000000f0a06080310011801a2060408011000"),
    (lambda: P.read_entry_request(2, 1, -1), "000000180a06080310011802a2060d080110ffffffffffffffffff01"),
    (lambda: P.read_lac_request(3, 1), "0000000d0a06080310071803c206020801"),
    (lambda: P.bookie_info_request(4, 3), "0000000d0a06080310081804ca06020803"),
    (lambda: P.entry_list_request(5, 1), "0000000d0a060803100b1805e206020801"),
    (lambda: P.auth_probe_request(7), "000000210a06080310051807b206160a124175746844697361626c6564506c7567696e1200"),
]


@pytest.mark.parametrize("build,hexbytes", REQUEST_VECTORS)
def test_spec_request_vectors(build: Callable[[], Any], hexbytes: str) -> None:
    assert P.encode_request(build()).hex() == hexbytes


def test_start_tls_vector_is_what_the_client_sends() -> None:
    # §8.1's START_TLS frame (txn 6), byte for byte: the one non-read operation the gate lets through,
    # with its empty sub-message present.
    assert P.encode_request(P.start_tls_request(6)).hex() == "0000000b" + "0a06080310091806d20600"
    req = pb.Request()
    req.ParseFromString(bytes.fromhex("0a06080310091806d20600"))
    assert req.header.operation == Op.START_TLS
    assert P.encode_request(req)


def test_start_tls_carrying_anything_is_refused() -> None:
    with pytest.raises(UnsafeRequestError, match="unknown fields"):
        P.encode_request(_raw_request(Op.START_TLS, 106, b"\x08\x01"))
    with pytest.raises(UnsafeRequestError, match="exactly startTLSRequest"):
        P.encode_request(_raw_request(Op.START_TLS))  # the sub-message must be present


def test_start_tls_replies_decode() -> None:
    def reply(status: int, with_sub: bool) -> bytes:
        r = pb.Response()
        r.header.version, r.header.operation, r.header.txnId = 3, 9, 6
        r.status = status
        if with_sub:
            r.startTLSResponse.SetInParent()
        return r.SerializeToString()

    ok = P.decode_response(reply(0, True))
    assert (ok.txn_id, ok.op, ok.status, ok.problem) == (6, Op.START_TLS, Status.EOK, None)
    refused = P.decode_response(reply(404, False))  # a bookie without TLS (§1.5 step 3)
    assert (refused.op, refused.status, refused.sub) == (Op.START_TLS, Status.EBADREQ, None)
    assert P.decode_response(reply(0, False)).status is None  # EOK must carry the sub-message


# ----- spec §8.2: framed responses, compared as parsed messages ------------------------------------
def _decode_framed(hexbytes: str) -> P.Reply:
    bodies = P.FrameDecoder().feed(bytes.fromhex(hexbytes))
    assert len(bodies) == 1
    return P.decode_response(bodies[0])


def test_spec_response_read_enoentry() -> None:
    r = _decode_framed("000000150a06080310011801109303a2060708930310011806")
    assert (r.txn_id, r.op, r.status) == (1, Op.READ_ENTRY, Status.ENOENTRY)
    assert (r.sub.ledgerId, r.sub.entryId, r.sub.HasField("body")) == (1, 6, False)


def test_spec_response_get_list_enoledger() -> None:
    r = _decode_framed("000000130a060803100b1805109203e206050892031001")
    assert (r.txn_id, r.op, r.status, r.sub.ledgerId) == (5, Op.GET_LIST_OF_ENTRIES_OF_LEDGER, Status.ENOLEDGER, 1)


def test_spec_response_read_eok_with_crc32c_entry() -> None:
    r = _decode_framed(
        "000000400a060803100118011000a20633080010011800222900000000000000010000000000000000"
        "ffffffffffffffff0000000000000005e3a5f74d68656c6c6f2800"
    )
    assert (r.txn_id, r.op, r.status) == (1, Op.READ_ENTRY, Status.EOK)
    assert (r.sub.ledgerId, r.sub.entryId, r.sub.maxLAC) == (1, 0, 0)
    assert r.sub.body.endswith(b"hello")
    # The same message serialised by us must parse to an equal message (field order may differ).
    again = pb.Response()
    again.ParseFromString(
        bytes.fromhex(
            "0a060803100118011000a20633080010011800222900000000000000010000000000000000"
            "ffffffffffffffff0000000000000005e3a5f74d68656c6c6f2800"
        )
    )
    assert again.readResponse == r.sub


def test_spec_response_read_lac_enoentry() -> None:
    r = _decode_framed("000000130a06080310071803109303c206050893031001")
    assert (r.txn_id, r.op, r.status, r.sub.ledgerId) == (3, Op.READ_LAC, Status.ENOENTRY, 1)
    assert not r.sub.HasField("lacBody") and not r.sub.HasField("lastEntryBody")


def test_spec_response_auth_gate_rejection() -> None:
    r = _decode_framed("0000000b0a0608031001180910f603")
    assert (r.txn_id, r.op, r.status, r.sub) == (9, Op.READ_ENTRY, Status.EUA, None)


def test_known_values_are_looked_up_not_converted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Known op and status values come from the lookup tables; the Enum conversion (about a microsecond
    per call, twice per reply) is for unknown values only. EOK is 0: a falsy member, easy to miss."""

    convert = enum.EnumType.__call__

    def refuse(cls: type, value: Any, *args: Any, **kwargs: Any) -> Any:
        if cls in (Status, Op):
            raise AssertionError(f"{cls.__name__}({value!r}) converted a known value")
        return convert(cls, value, *args, **kwargs)

    monkeypatch.setattr(enum.EnumType, "__call__", refuse)
    r = _decode_framed(
        "000000400a060803100118011000a20633080010011800222900000000000000010000000000000000"
        "ffffffffffffffff0000000000000005e3a5f74d68656c6c6f2800"
    )
    assert (r.op, r.status) == (Op.READ_ENTRY, Status.EOK)


def test_unknown_status_is_not_eok() -> None:
    r = P.decode_response(bytes.fromhex("0a0608031001180110fc03"))
    assert r.status is None and r.raw_status == 508 and "unknown status" in (r.problem or "")


# ----- the safety gate ------------------------------------------------------------------------------
def _raw_request(op: int, sub_field: int | None = None, sub: bytes = b"") -> pb.Request:
    """A Request carrying anything, built from bytes (as a hostile caller could)."""
    req = pb.Request()
    req.header.version = 3
    req.header.operation = op
    req.header.txnId = 1
    data = req.SerializeToString()
    if sub_field is not None:
        tag = (sub_field << 3) | 2
        data += _varint(tag) + _varint(len(sub)) + sub
    out = pb.Request()
    out.MergeFromString(data)
    return out


def _varint(n: int) -> bytes:
    return _encode_varint(n)


@pytest.mark.parametrize(
    "op",
    [
        Op.ADD_ENTRY,
        Op.WRITE_LAC,
        Op.FORCE_LEDGER,
        Op.RANGE_READ_ENTRY,
        Op.RANGE_ADD_ENTRY,
        Op.BATCH_READ_ENTRY,
    ],
)
def test_write_and_other_ops_are_refused(op: Op) -> None:
    field = {Op.ADD_ENTRY: 101, Op.WRITE_LAC: 103, Op.FORCE_LEDGER: 107}.get(op)
    with pytest.raises(UnsafeRequestError, match="never be sent"):
        P.encode_request(_raw_request(op, field, b"\x08\x01" if field else b""))
    with pytest.raises(UnsafeRequestError):
        P.encode_request(_raw_request(op))


def test_fence_and_long_poll_reads_are_refused() -> None:
    # The generated ReadRequest has no fields for them at all ...
    rr = pb.ReadRequest()
    for name in ("flag", "masterKey", "previousLAC", "timeOut"):
        assert not hasattr(rr, name)
    # ... and smuggled in as foreign bytes they are caught as unknown fields.
    plain = b"\x08\x01\x10\x00"
    fence = plain + b"\xa0\x06\x01" + b"\x1a\x14" + b"k" * 20  # flag=FENCE_LEDGER, masterKey
    long_poll = plain + b"\x20\x05\x28\x10"  # previousLAC=5, timeOut=16
    piggyback = plain + b"\xa0\x06\x02"
    assert P.encode_request(_raw_request(Op.READ_ENTRY, 100, plain))
    for sub in (fence, long_poll, piggyback):
        with pytest.raises(UnsafeRequestError, match="unknown fields"):
            P.encode_request(_raw_request(Op.READ_ENTRY, 100, sub))


def test_add_request_smuggled_into_a_read_is_refused() -> None:
    req = _raw_request(Op.READ_ENTRY, 100, b"\x08\x01\x10\x00")
    data = req.SerializeToString() + b"\xaa\x06\x04\x08\x01\x10\x00"  # + addRequest (field 101)
    bad = pb.Request()
    bad.MergeFromString(data)
    with pytest.raises(UnsafeRequestError):
        P.encode_request(bad)


def test_header_must_be_plain_v3() -> None:
    req = P.read_entry_request(1, 1, 0)
    req.header.version = pb.VERSION_TWO
    with pytest.raises(UnsafeRequestError, match="version"):
        P.encode_request(req)
    req = P.read_entry_request(1, 1, 0)
    req.header.priority = 100
    with pytest.raises(UnsafeRequestError, match="priority"):
        P.encode_request(req)
    req = P.read_entry_request(1, 1, 0)
    req.readLacRequest.ledgerId = 1
    with pytest.raises(UnsafeRequestError, match="exactly"):
        P.encode_request(req)
    req = P.read_entry_request(1, 1, 0)
    req.header.operation = Op.READ_LAC
    with pytest.raises(UnsafeRequestError, match="exactly"):
        P.encode_request(req)
    with pytest.raises(UnsafeRequestError):
        P.encode_request(pb.Response())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        P.read_entry_request(1, -1, 0)
    with pytest.raises(ValueError):
        P.read_entry_request(1, 1, -2)


# ----- frame decoder --------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=20), st.lists(st.integers(1, 50), min_size=1, max_size=30))
def test_frames_survive_any_chunking(bodies: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(P.frame(b) for b in bodies)
    dec = P.FrameDecoder(1024)
    out: list[bytes] = []
    pos = i = 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        out += dec.feed(stream[pos : pos + step])
        pos += step
        i += 1
    assert out == bodies and dec.buffered == 0


def test_frame_limits() -> None:
    dec = P.FrameDecoder(100)
    assert dec.feed(P.frame(b"x" * 96)) == [b"x" * 96]  # 96 + 4 == limit: allowed
    with pytest.raises(P.FrameError, match="limit"):
        dec.feed(P.frame(b"x" * 97))
    with pytest.raises(P.FrameError):
        dec.feed(b"")  # the stream stays failed
    with pytest.raises(P.FrameError, match="negative"):
        P.FrameDecoder().feed(struct.pack(">i", -1))


@pytest.mark.parametrize(
    "body,reason",
    [
        (b"\xff\xff\xff", "not a v3 Response"),
        (b"", "no header"),
        (bytes.fromhex("0a04080310011001"), "misses"),  # header without txnId
        (bytes.fromhex("0a060802100118011000"), "version 2"),
        (bytes.fromhex("0a060803100118 01".replace(" ", "")), "no status"),
        (bytes.fromhex("0a060803100118011000a2060408001001"), "misses required"),  # readResponse w/o entryId
        (bytes.fromhex("0a060803100118011000a2060410011800"), "without status"),
    ],
)
def test_malformed_replies_are_protocol_errors(body: bytes, reason: str) -> None:
    with pytest.raises(P.ProtocolError, match=reason):
        P.decode_response(body)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


@pytest.mark.parametrize("where", ["top", "sub"])
def test_a_frame_of_unknown_fields_without_a_status_is_rejected_cheaply(where: str) -> None:
    """A reply with no known status used to have its unknown fields materialised one Python object per
    field, looking for an unknown status value: 5 MiB of them took 7 s of the event loop and 190 MiB."""
    head = pb.Response()
    head.header.version, head.header.operation, head.header.txnId = 3, Op.READ_ENTRY, 5
    junk = b"\xc0\x3e\x01" * ((P.DEFAULT_MAX_FRAME_SIZE - 100) // 3)  # field 1000 = 1, again and again
    if where == "top":
        body = head.SerializePartialToString() + junk
    else:
        head.status = Status.EOK
        body = head.SerializePartialToString() + b"\xa2\x06" + _varint(len(junk)) + junk  # readResponse
    outcome = parse_contract(
        lambda: P.decode_response(body),
        P.ProtocolError,
        names="unknown fields",
        max_bytes=32 * 1024 * 1024,
        max_seconds=1.0,
    )
    assert not outcome.ok
    # A small unknown status value is still told apart from a missing one.
    small = pb.Response()
    small.header.version, small.header.operation, small.header.txnId = 3, Op.READ_ENTRY, 6
    reply = P.decode_response(small.SerializePartialToString() + b"\x10\x63")
    assert reply.status is None and reply.raw_status == 99


def test_contradictory_statuses_are_not_trusted() -> None:
    resp = _response(_req(Op.READ_ENTRY, 1), Status.ENOENTRY, sub_status=Status.EOK, ledgerId=1, entryId=0)
    r = P.decode_response(resp.SerializeToString())
    assert r.status is None and "contradictory" in (r.problem or "")


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


async def test_basic_operations_and_outcomes() -> None:
    peer = await Peer(answer_ok).start()
    async with await _client(peer) as c:
        r = await c.read_entry(1, 3)
        assert r.outcome is Outcome.PRESENT and r.body == struct.pack(">q", 3) and r.max_lac == 9
        r = await c.read_entry(1, 10)
        assert r.outcome is Outcome.ABSENT and r.status is Status.ENOENTRY and not r.no_such_ledger
        r = await c.read_entry(LedgerId(0, 2), 0)
        assert r.outcome is Outcome.ABSENT and r.no_such_ledger
        info = await c.get_bookie_info()
        assert info.present and (info.total_disk_capacity, info.free_disk_space) == (100, 40)
        assert (await c.ping()).present
        lst = await c.get_entry_list(1)
        assert lst.present and lst.entries is not None and list(lst.entries) == list(range(10))
        assert c.entry_list_support is Capability.SUPPORTED
        lst = await c.get_entry_list(5)
        assert lst.absent and lst.entries is not None and lst.entries.total == 0
        lac = await c.read_lac(1)
        assert lac.absent and not lac.conclusive
        auth = await c.auth_probe()
        assert auth.present and auth.plugin_name == "AuthDisabledPlugin"
        with pytest.raises(ValueError):
            await c.read_entry(LedgerId(1, 1), 0)
    assert peer.connections == 1
    assert all(r.header.version == 3 and r.header.priority == 0 for r in peer.requests)
    await peer.stop()


@pytest.mark.parametrize(
    "status",
    [Status.EIO, Status.ETOOMANYREQUESTS, Status.EUNKNOWNLEDGERSTATE, Status.EUA, Status.EBADREQ, Status.EBADVERSION],
)
async def test_error_statuses_are_unknown(status: Status) -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        send(writer, _response(req, status, **_echo_ids(req)))

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        for r in (await c.read_entry(1, 0), await c.get_entry_list(1), await c.read_lac(1), await c.get_bookie_info()):
            assert r.outcome is Outcome.UNKNOWN and r.status is status and status.name in (r.error or "")
    await peer.stop()


async def test_odd_but_wellformed_replies_are_unknown() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        txn = req.header.txnId
        if txn == 1:  # EOK read without a body
            send(writer, _response(req, Status.EOK, **_echo_ids(req)))
        elif txn == 2:  # answer about another entry
            send(writer, _response(req, Status.ENOENTRY, ledgerId=1, entryId=99))
        elif txn == 3:  # unknown status value 508 at top level
            send(writer, bytes.fromhex("0a0608031001") + b"\x18\x03" + bytes.fromhex("10fc03"))
        elif txn == 4:  # EOK with no sub-response
            resp = pb.Response()
            resp.header.CopyFrom(req.header)
            resp.status = Status.EOK
            send(writer, resp)
        elif txn == 5:  # a list that is not a valid encoding
            send(writer, _response(req, Status.EOK, availabilityOfEntriesOfLedger=b"\x00" * 10, **_echo_ids(req)))
        elif txn == 6:  # READ_LAC: EIO, but a body came back: the body counts
            send(writer, _response(req, Status.EIO, lastEntryBody=b"x" * 40, **_echo_ids(req)))

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        r = await c.read_entry(1, 0)
        assert r.unknown and "without a body" in (r.error or "")
        r = await c.read_entry(1, 0)
        assert r.unknown and "entry 99" in (r.error or "")
        r = await c.read_entry(1, 0)
        assert r.unknown and "508" in (r.error or "")
        r = await c.read_entry(1, 0)
        assert r.unknown
        lst = await c.get_entry_list(1)
        assert lst.unknown and "invalid entry list" in (lst.error or "")
        lac = await c.read_lac(1)
        assert lac.present and lac.status is Status.EIO and lac.last_entry_body == b"x" * 40
        assert c.connected  # none of these is a protocol violation
    await peer.stop()


async def test_pipelined_out_of_order_replies_are_matched() -> None:
    held: list[pb.Request] = []

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        held.append(req)
        if len(held) == 50:  # answer all at once, newest first
            for r in reversed(held):
                e = r.readRequest.entryId
                send(writer, _response(r, Status.EOK, body=struct.pack(">q", e), **_echo_ids(r)))
            await writer.drain()

    peer = await Peer(handler).start()
    async with await _client(peer, max_in_flight=64) as c:
        results = await c.read_entries(1, list(range(50)))
        assert [struct.unpack(">q", r.body or b"")[0] for r in results] == list(range(50))
        assert all(r.present for r in results)
        assert c.stats.sent == 50 and c.stats.replies == 50
    assert peer.connections == 1
    txns = [r.header.txnId for r in peer.requests]
    assert len(set(txns)) == 50
    await peer.stop()


async def test_in_flight_window_is_bounded() -> None:
    outstanding = 0
    peak = 0

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        nonlocal outstanding, peak
        outstanding += 1
        peak = max(peak, outstanding)

        async def later() -> None:
            nonlocal outstanding
            await asyncio.sleep(0.01)
            outstanding -= 1
            send(writer, _response(req, Status.EOK, body=b"b", **_echo_ids(req)))

        asyncio.ensure_future(later())

    peer = await Peer(handler).start()
    async with await _client(peer, max_in_flight=4) as c:
        results = await c.read_entries(1, list(range(40)))
        assert all(r.present for r in results)
    assert peak == 4
    await peer.stop()


async def test_requests_sent_in_one_loop_iteration_go_out_in_one_write_with_no_task_each() -> None:
    peer = await Peer(answer_ok).start()
    async with await _client(peer, max_in_flight=8) as c:
        assert (await c.ping()).present  # connected
        writes: list[int] = []
        conn = c._conn
        assert conn is not None

        class CountingTransport:  # a proxy: uvloop's transports do not let `write` be replaced
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def write(self, data: bytes) -> None:
                writes.append(len(data))
                self.inner.write(data)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.inner, name)

        conn.transport = CountingTransport(conn.transport)  # type: ignore[assignment]
        tasks_before = len(asyncio.all_tasks())
        sent = [c.send_get_entry_list(1) for _ in range(20)]
        assert len(asyncio.all_tasks()) == tasks_before  # queued, no task per request
        results = [await s.result() for s in sent]
        assert all(r.present and r.entries is not None for r in results)
        # 20 requests through a window of 8: a batch of 8 at once, then what each iteration's replies freed.
        assert sum(writes) == 20 * len(P.encode_request(P.entry_list_request(1, 1)))
        assert writes[0] == 8 * len(P.encode_request(P.entry_list_request(1, 1)))
        assert len(writes) < 20
    await peer.stop()


async def test_a_withdrawn_request_frees_its_slot_and_its_late_reply_is_dropped_quietly() -> None:
    held: list[tuple[pb.Request, asyncio.StreamWriter]] = []

    async def hold_first(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if len(peer.requests) == 1:
            held.append((req, writer))  # answered only after the client gave up on it
            return
        await answer_ok(peer, req, writer)

    peer = await Peer(hold_first).start()
    async with await _client(peer, max_in_flight=1) as c:
        first = c.send_get_entry_list(1)
        second = c.send_get_entry_list(1)
        await asyncio.sleep(0.05)
        assert len(peer.requests) == 1  # the window of one is taken by the first
        first.cancel()
        assert (await second.result()).present  # its slot went to the second
        req, writer = held[0]
        send(
            writer,
            _response(req, Status.EOK, availabilityOfEntriesOfLedger=encode_entry_ids(range(10)), **_echo_ids(req)),
        )
        assert (await c.ping()).present  # the late reply did not close the connection
        assert c.stats.late_replies == 1 and c.stats.protocol_errors == 0
    await peer.stop()


def test_token_bucket_arithmetic() -> None:
    b = TokenBucket(rate=10, burst=2)
    assert b.reserve() == 0 and b.reserve() == 0
    waits = [b.reserve() for _ in range(3)]
    assert waits[0] == pytest.approx(0.1, abs=0.02)
    assert waits[1] == pytest.approx(0.2, abs=0.02)
    assert waits[2] == pytest.approx(0.3, abs=0.02)


async def test_rate_limit_spaces_requests() -> None:
    peer = await Peer(answer_ok).start()
    async with await _client(peer, rate_limit=100.0, rate_burst=1.0) as c:
        t0 = time.monotonic()
        results = await c.read_entries(1, [0] * 21)
        elapsed = time.monotonic() - t0
    assert all(r.present for r in results)
    assert elapsed >= 0.18  # 20 waits of 10 ms; an upper bound would be a timing test
    await peer.stop()


async def test_timeout_is_unknown_and_late_reply_is_dropped() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if req.header.txnId == 1:

            async def late() -> None:
                await asyncio.sleep(0.3)
                send(writer, _response(req, Status.EOK, body=b"late", **_echo_ids(req)))

            asyncio.ensure_future(late())
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        r = await c.read_entry(1, 0, timeout=0.1)
        assert r.unknown and "within 0.1 s" in (r.error or "") and "test-bookie" in (r.error or "")
        await asyncio.sleep(0.4)
        assert c.stats.late_replies == 1
        r = await c.read_entry(1, 1)
        assert r.present and c.connected
    assert peer.connections == 1
    await peer.stop()


async def test_reply_with_wrong_operation_is_dropped() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        wrong = _req(Op.READ_LAC, req.header.txnId)
        send(writer, _response(wrong, Status.ENOENTRY, ledgerId=1))
        await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        r = await c.read_entry(1, 2)
        assert r.present and c.stats.mismatched_replies == 1
    await peer.stop()


HOSTILE = {
    "unknown txn": lambda req: P.frame(
        _response(_req(Op.READ_ENTRY, 999_999), Status.EOK, body=b"x", ledgerId=1, entryId=0).SerializeToString()
    ),
    "garbage": lambda req: P.frame(b"\xff\xfe\xfd\xfc"),
    "negative length": lambda req: struct.pack(">i", -5) + b"xxxx",
    "over limit": lambda req: struct.pack(">i", 10_000_000),
    "missing fields": lambda req: P.frame(bytes.fromhex("0a06080310011801") + b"\x10\x00" + b"\xa2\x06\x02\x08\x00"),
    "empty frame": lambda req: P.frame(b""),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
async def test_hostile_reply_closes_the_connection(kind: str) -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if peer.connections == 1:
            writer.write(HOSTILE[kind](req))
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer, max_frame_size=1024 * 1024) as c:
        r1, r2 = await asyncio.gather(c.read_entry(1, 0), c.read_entry(1, 1))
        for r in (r1, r2):
            assert r.unknown, r
            assert "test-bookie" in (r.error or "")
        assert c.stats.protocol_errors == 1
        assert not c.connected
        # It reconnects (after a short backoff) and works again.
        assert (await _eventually(lambda: c.read_entry(1, 2))).present
    assert peer.connections == 2
    await peer.stop()


async def test_connect_refused_backs_off_then_recovers() -> None:
    peer = Peer(answer_ok)
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    c = BookieClient(
        "gone-bookie",
        ("127.0.0.1", port),
        BookieClientConfig(request_timeout=1, connect_timeout=1, backoff_initial=0.2, backoff_max=0.4),
    )
    r = await c.read_entry(1, 0)
    assert r.unknown and "cannot connect" in (r.error or "") and "gone-bookie" in (r.error or "")
    r = await c.read_entry(1, 0)  # within the backoff: fails fast without dialling
    assert r.unknown and "next attempt" in (r.error or "")
    assert c.stats.connect_failures == 1
    await peer.start(port)
    await asyncio.sleep(0.3)
    r = await c.read_entry(1, 0)
    assert r.present
    await c.close()
    await peer.stop()


async def test_silent_connection_is_replaced() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if peer.connections >= 2:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer, dead_after_timeouts=2) as c:
        assert (await c.read_entry(1, 0, timeout=0.05)).unknown
        assert c.connected
        assert (await c.read_entry(1, 0, timeout=0.05)).unknown
        assert not c.connected  # two silent timeouts: presumed dead
        assert (await _eventually(lambda: c.read_entry(1, 0))).present
    await peer.stop()


async def test_a_trickling_peer_that_never_answers_is_replaced() -> None:
    """A peer that keeps sending bytes of a frame it never finishes is as dead as a silent one: bytes
    that are not a reply must not keep the connection alive (every request would wait its full timeout
    forever)."""

    async def trickle(writer: asyncio.StreamWriter) -> None:
        writer.write(struct.pack(">i", 100_000))  # announces a frame, then drips it
        await writer.drain()

        async def drip() -> None:
            while True:
                await asyncio.sleep(0.02)
                writer.write(b"\x00")

        asyncio.ensure_future(drip())

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if peer.connections >= 2:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler, on_connect=lambda w: trickle(w) if peer.connections == 1 else _noop()).start()
    async with await _client(peer, dead_after_timeouts=2) as c:
        assert (await c.read_entry(1, 0, timeout=0.1)).unknown
        assert (await c.read_entry(1, 0, timeout=0.1)).unknown
        assert not c.connected  # two timeouts with no reply at all: presumed dead, bytes or not
        assert (await _eventually(lambda: c.read_entry(1, 0))).present
    await peer.stop()


async def _noop() -> None:
    return None


async def test_a_peer_that_stops_reading_cannot_hold_a_request_past_its_timeout() -> None:
    """A peer that stops reading fills the socket buffers and the transport pauses writing; a request
    waiting to be written must still end (UNKNOWN) within its timeout instead of waiting forever for the
    link to drain. Loopback send buffers take megabytes (~150k requests), so the transport's own
    flow-control callback (`pause_writing`, what it calls when its buffer is full) stands for them."""

    async def silent(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        return None

    peer = await Peer(silent).start()
    async with await _client(peer, dead_after_timeouts=10**9) as c:
        assert (await c.read_entry(1, 0, timeout=0.05)).unknown  # connected
        conn = c._conn
        assert conn is not None
        conn.pause_writing()
        try:
            async with asyncio.timeout(10):  # a guard against the stall itself, not a speed goal
                r = await c.read_entry(1, 1, timeout=0.2)
        finally:
            conn.resume_writing()
        assert r.unknown and "0.2 s" in (r.error or ""), r
        assert len(peer.requests) == 1  # it was never written
    await peer.stop()


async def test_a_replayed_reply_closes_the_connection() -> None:
    """Each request gets one reply. A peer replaying one (endlessly, it costs the loop ~0.1 s per 256 KiB
    of frames) is not a bookie: the first duplicate closes the connection."""

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if peer.connections == 1:
            reply = _response(req, Status.ENOENTRY, **_echo_ids(req)).SerializeToString()
            writer.write(P.frame(reply) * 50_000)
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        r = await c.read_entry(1, 42)
        assert r.absent  # the first copy is the answer
        await _until(lambda: not c.connected)
        assert c.stats.protocol_errors == 1 and c.stats.replies == 1 and c.stats.late_replies == 0
        assert (await _eventually(lambda: c.read_entry(1, 2))).present
    await peer.stop()


async def test_repeated_wrong_operation_replies_close_the_connection() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if peer.connections == 1:
            wrong = _response(_req(Op.READ_LAC, req.header.txnId), Status.ENOENTRY, ledgerId=1)
            writer.write(P.frame(wrong.SerializeToString()) * 1000)
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        r = await c.read_entry(1, 2)
        assert r.unknown and "wrong operation" in (r.error or ""), r
        assert c.stats.mismatched_replies == 1 and c.stats.protocol_errors == 1
        assert (await _eventually(lambda: c.read_entry(1, 2))).present
    await peer.stop()


async def test_one_late_reply_per_expired_request_is_dropped_quietly() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if req.header.txnId == 1:

            async def late() -> None:
                await asyncio.sleep(0.2)
                reply = P.frame(_response(req, Status.EOK, body=b"late", **_echo_ids(req)).SerializeToString())
                writer.write(reply)
                await asyncio.sleep(0.5)
                writer.write(reply)  # and again: no request is waiting for it any more

            asyncio.ensure_future(late())
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        assert (await c.read_entry(1, 0, timeout=0.1)).unknown
        await _until(lambda: c.stats.late_replies == 1)
        assert c.connected and c.stats.protocol_errors == 0
        await _until(lambda: not c.connected)
        assert c.stats.protocol_errors == 1 and c.stats.late_replies == 1
    await peer.stop()


async def _until(predicate: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "condition never became true"
        await asyncio.sleep(0.01)


async def test_a_frame_limit_entry_list_is_decoded_without_holding_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 10, defect 3: the client decodes a large (legitimate) answer in steps; a heartbeat task gets
    a turn between every step of the decoding (ticks counted while the decoder runs, not time)."""
    n = (P.DEFAULT_MAX_FRAME_SIZE - 300) // 24
    listing = encode_ranges(RangeSet(tuple((3 * i, 3 * i + 1) for i in range(n))))

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        ids = _echo_ids(req)
        send(writer, _response(req, Status.EOK, availabilityOfEntriesOfLedger=listing, **ids))
        await writer.drain()

    beat = Heartbeat()
    during: list[int] = []
    real_steps = EntryList.decode_steps.__func__  # type: ignore[attr-defined]

    def counted(cls: type[EntryList], data: bytes, step: int = STEP) -> Any:
        start = beat.ticks
        result = yield from real_steps(cls, data, step)
        during.append(beat.ticks - start)
        return result

    monkeypatch.setattr(EntryList, "decode_steps", classmethod(counted))

    peer = await Peer(handler).start()
    try:
        async with beat, await _client(peer, request_timeout=10.0) as c:
            got = await c.get_entry_list(1)
    finally:
        await peer.stop()
    assert got.present and got.entries is not None and got.entries.total == 2 * n
    assert during and during[0] >= -(-n // STEP) - 1, during


async def test_entry_list_unsupported_is_detected_without_poisoning() -> None:
    """A DbLedgerStorage-like peer: never answers GET_LIST for ledger 1, answers everything else."""

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if (
            req.header.operation == Op.GET_LIST_OF_ENTRIES_OF_LEDGER
            and req.getListOfEntriesOfLedgerRequest.ledgerId == 1
        ):
            return
        await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        reads = asyncio.gather(*(c.read_entry(1, e) for e in range(10)))
        cap = await c.probe_entry_list_support(1, timeout=0.2)
        assert cap is Capability.UNSUPPORTED
        assert all(r.present for r in await reads)
        sent = len(peer.requests)
        r = await c.get_entry_list(1)
        assert r.unknown and r.unsupported and "DbLedgerStorage" in (r.error or "")
        assert len(peer.requests) == sent  # not even sent
        assert (await c.read_entry(1, 1)).present and c.connected
    await peer.stop()


async def test_slow_entry_list_answer_restores_the_capability() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if req.header.operation == Op.GET_LIST_OF_ENTRIES_OF_LEDGER:

            async def late() -> None:
                await asyncio.sleep(0.4)
                await answer_ok(peer, req, writer)

            asyncio.ensure_future(late())
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        assert await c.probe_entry_list_support(1, timeout=0.1) is Capability.UNSUPPORTED
        await asyncio.sleep(0.5)
        assert c.stats.late_replies == 1
        assert c.entry_list_support is Capability.SUPPORTED
        assert (await c.get_entry_list(1)).present
    await peer.stop()


async def test_entry_list_lost_connection_is_not_evidence() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if req.header.operation == Op.GET_LIST_OF_ENTRIES_OF_LEDGER and peer.connections == 1:
            writer.transport.abort()  # e.g. the bookie restarted
            return
        await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        assert (await c.ping()).present
        r = await c.get_entry_list(1)
        assert r.unknown and not r.unsupported
        assert c.entry_list_support is Capability.UNKNOWN
        assert (await _eventually(lambda: c.get_entry_list(1))).present
        assert c.entry_list_support is Capability.SUPPORTED
    await peer.stop()


async def test_entry_list_capability_stays_unknown_when_bookie_is_silent() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        return  # answers nothing (a SIGSTOPped bookie)

    peer = await Peer(handler).start()
    async with await _client(peer, liveness_timeout=0.1) as c:
        r = await c.get_entry_list(1, timeout=0.1)
        assert r.unknown and not r.unsupported
        assert c.entry_list_support is Capability.UNKNOWN
        # ENOLEDGER for a ledger the bookie does not hold says nothing about the capability either.
    await peer.stop()


async def test_pool_hands_out_one_client_per_bookie() -> None:
    peer = await Peer(answer_ok).start()
    calls: list[str] = []

    async def resolver(bookie_id: str) -> tuple[str, int]:
        calls.append(bookie_id)
        return peer.address

    async with BookiePool(resolver, FAST) as pool:
        a, b = pool.client("bk-a"), pool.client("bk-b")
        assert pool.client("bk-a") is a and pool["bk-b"] is b and len(pool) == 2
        assert (await a.read_entry(1, 0)).present and (await b.read_entry(1, 0)).present
        assert (await a.read_entry(1, 1)).present
    assert calls == ["bk-a", "bk-b"]
    assert peer.connections == 2
    with pytest.raises(RuntimeError):
        pool.client("bk-c")
    await peer.stop()


async def test_resolver_failure_is_unknown() -> None:
    def resolver(bookie_id: str) -> tuple[str, int]:
        raise LookupError(f"{bookie_id} is not registered")

    c = BookieClient("bk-x", resolver, FAST)
    r = await c.read_entry(1, 0)
    assert r.unknown and "not registered" in (r.error or "")
    await c.close()


async def test_closed_client_answers_unknown() -> None:
    peer = await Peer(answer_ok).start()
    c = await _client(peer)
    assert (await c.read_entry(1, 0)).present
    await c.close()
    r = await c.read_entry(1, 0)
    assert r.unknown and "closed" in (r.error or "")
    await peer.stop()


# ----- fuzz: a peer that answers with random bytes --------------------------------------------------
async def _fuzz_once(payload: bytes, chunks: int, then_close: bool) -> list[Any]:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        step = max(1, len(payload) // chunks)
        for i in range(0, len(payload), step):
            writer.write(payload[i : i + step])
            await writer.drain()
        if then_close:
            writer.close()

    peer = await Peer(handler).start()
    cfg = BookieClientConfig(
        request_timeout=0.3,
        connect_timeout=0.5,
        backoff_initial=0.01,
        backoff_max=0.02,
        liveness_timeout=0.1,
        max_frame_size=4096,
    )
    c = BookieClient("fuzz-bookie", peer.address, cfg)
    try:
        async with asyncio.timeout(5):  # a hang is a failure
            return list(
                await asyncio.gather(c.read_entry(1, 0), c.get_entry_list(1), c.read_lac(1), c.get_bookie_info())
            )
    finally:
        await c.close()
        await peer.stop()


def _check_fuzz_results(results: list[Any]) -> None:
    for r in results:
        # Random bytes can never make a bookie "answer": anything but UNKNOWN would be a bug here,
        # except an astronomically unlikely valid frame (then ABSENT/PRESENT must carry a status).
        assert r.outcome in (Outcome.UNKNOWN, Outcome.ABSENT, Outcome.PRESENT)
        if r.outcome is not Outcome.UNKNOWN:
            assert r.status is not None
        else:
            assert r.error


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600), st.integers(1, 8), st.booleans())
def test_fuzz_random_bytes(payload: bytes, chunks: int, then_close: bool) -> None:
    _check_fuzz_results(asyncio.run(_fuzz_once(payload, chunks, then_close)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=80), max_size=6), st.integers(1, 4), st.booleans())
def test_fuzz_well_framed_random_bodies(bodies: list[bytes], chunks: int, then_close: bool) -> None:
    _check_fuzz_results(asyncio.run(_fuzz_once(b"".join(P.frame(b) for b in bodies), chunks, then_close)))


@st.composite
def plausible_responses(draw: st.DrawFn) -> bytes:
    """Structurally valid Responses with random txn ids, operations, statuses and sub-fields."""
    resp = pb.Response()
    resp.header.version = draw(st.sampled_from([1, 2, 3, 3, 3]))
    resp.header.operation = draw(st.sampled_from(list(Op)))
    resp.header.txnId = draw(st.integers(0, 8))
    if draw(st.booleans()):
        resp.status = draw(st.sampled_from(list(Status)))
    which = draw(
        st.sampled_from(
            ["readResponse", "readLacResponse", "getBookieInfoResponse", "getListOfEntriesOfLedgerResponse", None]
        )
    )
    data = resp.SerializePartialToString()
    if which:
        sub = getattr(pb.Response(), which).__class__()
        if draw(st.booleans()):
            sub.status = draw(st.sampled_from(list(Status)))
        for name in ("ledgerId", "entryId"):
            if name in sub.DESCRIPTOR.fields_by_name and draw(st.booleans()):
                setattr(sub, name, draw(st.integers(-1, 3)))
        if which == "getListOfEntriesOfLedgerResponse" and draw(st.booleans()):
            sub.availabilityOfEntriesOfLedger = draw(
                st.one_of(st.binary(max_size=100), st.just(encode_entry_ids([0, 1, 5])))
            )
        if which == "readResponse" and draw(st.booleans()):
            sub.body = draw(st.binary(max_size=50))
        field = pb.Response.DESCRIPTOR.fields_by_name[which].number
        raw = sub.SerializePartialToString()
        data += _varint(field << 3 | 2) + _varint(len(raw)) + raw
    return P.frame(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(plausible_responses(), min_size=1, max_size=6), st.booleans())
def test_fuzz_plausible_but_wrong_responses(frames: list[bytes], then_close: bool) -> None:
    results = asyncio.run(_fuzz_once(b"".join(frames), 1, then_close))
    _check_fuzz_results(results)
    for r in results:
        if r.outcome is Outcome.ABSENT:
            assert r.status in (Status.ENOENTRY, Status.ENOLEDGER)


# ----- the same scenarios on uvloop (the daemon's event loop) --------------------------------------
UVLOOP_SCENARIOS: dict[str, Callable[[], Awaitable[None]]] = {
    "basic": test_basic_operations_and_outcomes,
    "pipelined": test_pipelined_out_of_order_replies_are_matched,
    "window": test_in_flight_window_is_bounded,
    "one write": test_requests_sent_in_one_loop_iteration_go_out_in_one_write_with_no_task_each,
    "withdrawn": test_a_withdrawn_request_frees_its_slot_and_its_late_reply_is_dropped_quietly,
    "late reply": test_timeout_is_unknown_and_late_reply_is_dropped,
    "hostile": lambda: test_hostile_reply_closes_the_connection("unknown txn"),
    "garbage": lambda: test_hostile_reply_closes_the_connection("garbage"),
    "silent": test_silent_connection_is_replaced,
    "db-like": test_entry_list_unsupported_is_detected_without_poisoning,
    "refused": test_connect_refused_backs_off_then_recovers,
}


@pytest.mark.parametrize("name", list(UVLOOP_SCENARIOS))
def test_scenarios_on_uvloop(name: str) -> None:
    import uvloop  # a dependency of the daemon, which runs on it

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(UVLOOP_SCENARIOS[name]())


async def test_closing_the_client_is_logged_at_debug_only(caplog: pytest.LogCaptureFixture) -> None:
    # The per-bookie "client closed" line came at info at the end of every check.
    peer = await Peer(answer_ok).start()
    with caplog.at_level(logging.DEBUG, logger="auditor.bookie.client"):
        async with await _client(peer) as c:
            assert (await c.ping()).present
    closed = [r for r in caplog.records if "client closed" in r.getMessage()]
    assert closed and all(r.levelno == logging.DEBUG for r in closed)
    await peer.stop()


@pytest.mark.parametrize(
    "failure, has_cert, meaning",
    [
        ("TLS alert: [SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad certificate", False, "the bookie demands"),
        ("TLS alert: [SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED]", True, "the bookie rejected our client certificate"),
        # Under load the bookie's close can overtake its alert (the CI failure of test_bookie_tls).
        ("connection lost ([Errno 104] Connection reset by peer)", False, "most likely the bookie demands"),
        ("connection lost ([Errno 104] Connection reset by peer)", True, "most likely the bookie rejected"),
        ("timed out after 10s", False, None),
    ],
)
def test_a_refused_tls_session_names_the_likely_reason(failure: str, has_cert: bool, meaning: str | None) -> None:
    import ssl

    from auditor.bookie.client import BookieTls, _alert_meaning

    text = _alert_meaning(failure, BookieTls(ssl.create_default_context(), client_certificate=has_cert))
    assert (meaning in text) if meaning else text == ""


async def test_adaptive_rate_rises_on_a_fast_bookie_and_halves_when_it_refuses() -> None:
    refusing = False

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if refusing:
            send(writer, _response(req, Status.ETOOMANYREQUESTS, **_echo_ids(req)))
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    policy = AdaptivePolicy(start=100, floor=10, hold_s=0.05)
    async with await _client(peer, rate_limit=400.0, rate_burst=1.0, adaptive=policy) as c:
        assert c._bucket is not None and c._bucket.rate == 100
        for _ in range(40):  # a scan's bounded fan-out, held back by the limiter, answered at once
            await c.read_entries(1, [0] * 8)
        assert c._bucket.rate == 400  # up to the cap
        refusing = True
        results = await c.read_entries(1, [0] * 30)
        assert all(r.unknown for r in results)
        assert c._bucket.rate <= 200  # halved (at least once) by the refusals
    await peer.stop()


async def test_without_adaptive_the_rate_stays_fixed() -> None:
    peer = await Peer(answer_ok).start()
    async with await _client(peer, rate_limit=300.0, rate_burst=1.0) as c:
        await c.read_entries(1, [0] * 60)
        assert c._bucket is not None and c._bucket.rate == 300 and c._adaptive is None
    await peer.stop()


async def test_a_new_pool_starts_each_bookie_where_an_earlier_pool_left_its_rate() -> None:
    peer = await Peer(answer_ok).start()

    async def resolver(bookie_id: str) -> tuple[str, int]:
        return peer.address

    adaptive = replace(FAST, rate_limit=400.0, rate_burst=1.0, adaptive=AdaptivePolicy(start=50, hold_s=0.05))
    async with BookiePool(resolver, adaptive) as first:
        c = first.client("bk-a")
        for _ in range(40):
            await c.read_entries(1, [0] * 8)
        reached = first.adapted_rates()
    assert reached["bk-a"] > 50  # it rose from the start
    async with BookiePool(resolver, adaptive, start_rates=reached) as second:
        again, fresh = second.client("bk-a"), second.client("bk-b")
        assert again.adapted_rate == reached["bk-a"] and again._bucket is not None
        assert again._bucket.rate == reached["bk-a"]
        assert fresh.adapted_rate == 50  # a bookie with no rate carried starts at the policy's start
    async with BookiePool(resolver, replace(FAST, rate_limit=400.0), start_rates=reached) as fixed:
        assert fixed.client("bk-a").adapted_rate is None and fixed.adapted_rates() == {}  # not adaptive: fixed
    await peer.stop()


@pytest.mark.parametrize("value", [True, 1.0, "1", -2, 2**63])
def test_request_ids_refuse_what_is_not_an_id(value: object) -> None:
    with pytest.raises(ValueError, match="is not in"):
        P.read_entry_frame(1, value, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="is not in"):
        P.read_entry_frame(1, 0, value)  # type: ignore[arg-type]
