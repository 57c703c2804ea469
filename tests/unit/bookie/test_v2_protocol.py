"""The v2 wire protocol of the batch reader (auditor/bookie/v2.py): frames laid out as BookKeeper's
`RequestEnDeCoderPreV3` reads them, a gate as strict as the v3 one (no add, no other operation, no
fencing or recovery-add flag, no master key, nothing but the builders' two shapes; a forged frame never
reaches the socket), reply decoding, and reply matching by (ledger, entry) and request id."""

from __future__ import annotations

import asyncio
import ssl
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from auditor.bookie import BookieClient, BookieClientConfig, BookiePool, BookieTls, Op, Status, UnsafeRequestError, v2
from auditor.bookie import protocol as P
from auditor.bookie.batch import BatchReader, _chunks

from .counting_listener import CountingListener

MAX_LONG = 2**63 - 1
KEY = bytes(range(20))


def _forged(frame: bytes) -> v2.V2Frame:
    """What a careless or hostile caller could still make: an instance whose slot holds foreign bytes."""
    forged = object.__new__(v2.V2Frame)
    forged.frame = frame
    return forged


def _frame(op: int, flags: int, *fields: tuple[str, int], key: bytes = b"", version: int = 2) -> bytes:
    body = struct.pack(">i", v2.packet_header(op, flags, version))
    for fmt, value in fields:
        body += struct.pack(">" + fmt, value)
    body += key
    return struct.pack(">i", len(body)) + body


READ = (("q", 7), ("q", 0))
BATCH = (("q", 7), ("q", 0), ("q", 1), ("i", 10), ("q", 4096))


def test_frames_are_laid_out_as_the_bookie_reads_them() -> None:
    assert v2.read_entry_frame(7, 3).frame == struct.pack(">iiqq", 20, 0x02020000, 7, 3)
    assert v2.batch_read_frame(9, 7, 3, 100, 4096).frame == struct.pack(">iiqqqiq", 40, 0x02070000, 7, 3, 9, 100, 4096)
    parsed = v2.parse_request(v2.batch_read_frame(9, 7, 3, 100, 4096).frame[4:])
    assert parsed == v2.V2Request(int(v2.V2Op.BATCH_READ_ENTRY), 0, 7, 3, 9, 100, 4096, None)


@pytest.mark.parametrize(
    "frame",
    [
        _frame(1, 0, ("q", 7), ("q", 0), key=KEY),  # ADDENTRY
        _frame(1, 0x2, ("q", 7), ("q", 0), key=KEY),  # recovery add
        _frame(2, 0x1, *READ, key=KEY),  # fencing read with its master key
        _frame(2, 0x1, *READ),  # fencing flag without the key
        _frame(2, 0x2, *READ),
        _frame(2, 0x4, *READ),  # high priority: the auditor must not compete with recovery
        _frame(2, 0, *READ, key=KEY),  # a master key without the flag (the bookie ignores it; we refuse it)
        _frame(7, 0x1, *BATCH, key=KEY),  # fencing batch
        _frame(7, 0x2, *BATCH),
        _frame(7, 0, *BATCH, key=KEY),
        _frame(7, 0, ("q", 7), ("q", 0), ("q", 1), ("i", 0), ("q", 4096)),  # max count 0: no limit
        _frame(7, 0, ("q", -7), ("q", 0), ("q", 1), ("i", 1), ("q", 4096)),  # negative ledger id
        _frame(3, 0, *READ),  # AUTH
        _frame(4, 0, *READ),  # READ_LAC
        _frame(5, 0, *READ, key=KEY),  # WRITE_LAC
        _frame(6, 0, *READ),  # GET_BOOKIE_INFO
        _frame(2, 0, *READ, version=3),
        _frame(2, 0, *READ, version=0),
        v2.read_entry_frame(7, 0).frame + b"\x00",
        v2.read_entry_frame(7, 0).frame[:-1],
        v2.batch_read_frame(1, 7, 0, 1, 1).frame[:-1],
        P.read_entry_frame(1, 7, 0).frame,  # a v3 frame
        b"",
    ],
)
def test_the_gate_refuses_every_unsafe_shape(frame: bytes) -> None:
    with pytest.raises(UnsafeRequestError):
        v2.gated_bytes(_forged(frame))


def test_only_v2_frames_pass_and_the_v3_gate_refuses_them() -> None:
    with pytest.raises(UnsafeRequestError, match="made only by"):
        v2.V2Frame(v2.read_entry_frame(7, 0).frame)
    with pytest.raises(UnsafeRequestError, match="not a v2 read frame"):
        v2.gated_bytes(P.read_entry_frame(1, 7, 0))  # a v3 pre-gated frame is not a v2 one
    with pytest.raises(UnsafeRequestError, match="not a v2 read frame"):
        v2.gated_bytes(P.read_entry_request(1, 7, 0))
    client = BookieClient("b", ("127.0.0.1", 1))
    with pytest.raises(UnsafeRequestError):
        client._encode(v2.read_entry_frame(7, 0))  # never on a v3 connection


@pytest.mark.parametrize(
    "args",
    [(-1, 0, 0, 1, 1), (0, -1, 0, 1, 1), (0, 0, -1, 1, 1), (0, 0, 0, 0, 1), (0, 0, 0, 2**31, 1), (0, 0, 0, 1, 0)],
)
def test_builders_refuse_values_out_of_range(args: tuple[int, int, int, int, int]) -> None:
    with pytest.raises(ValueError):
        v2.batch_read_frame(*args)


def _valid_frames() -> list[bytes]:
    out = []
    for v in (0, 1, 2**31 - 1, 2**32, MAX_LONG):
        out.append(v2.read_entry_frame(v, v).frame)
        out.append(v2.batch_read_frame(v, v, v, max(1, v % (2**31 - 1)), max(1, v)).frame)
    return out


@given(
    st.sampled_from(_valid_frames()),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 255)), min_size=1, max_size=4),
    st.sampled_from(["flip", "insert", "delete", "append"]),
)
def test_whatever_the_gate_passes_is_a_plain_read_as_the_bookie_parses_it(
    frame: bytes, edits: list[tuple[int, int]], how: str
) -> None:
    """A mutated frame is refused, or the bookie reads it as a plain READENTRY / BATCH_READ_ENTRY: no flag,
    no master key, and no byte it would not read."""
    data = bytearray(frame)
    for at, value in edits:
        i = at % (len(data) + 1)
        if how == "flip" and i < len(data):
            data[i] = value
        elif how == "insert":
            data.insert(i, value)
        elif how == "delete" and i < len(data):
            del data[i]
        elif how == "append":
            data.append(value)
    try:
        sent = v2.gated_bytes(_forged(bytes(data)))
    except UnsafeRequestError:
        return
    parsed = v2.parse_request(sent[4:])
    assert parsed is not None and parsed.op in (v2.V2Op.READENTRY, v2.V2Op.BATCH_READ_ENTRY)
    assert parsed.flags == 0 and parsed.master_key is None
    assert struct.unpack_from(">i", sent)[0] == len(sent) - 4 == (16 if parsed.op == v2.V2Op.READENTRY else 36) + 4


@given(st.integers(0, 255), st.integers(0, 255), st.integers(0, 0xFFFF), st.binary(max_size=48))
def test_any_header_but_a_plain_v2_read_is_refused(version: int, op: int, flags: int, rest: bytes) -> None:
    body = struct.pack(">i", v2.packet_header(op, flags, version)) + rest
    frame = struct.pack(">i", len(body)) + body
    try:
        v2.gated_bytes(_forged(frame))
    except UnsafeRequestError:
        return
    assert version == 2 and flags == 0 and op in (2, 7)


@pytest.mark.parametrize(
    "frame",
    [_frame(1, 0, ("q", 7), ("q", 0), key=KEY), _frame(2, 0x1, *READ, key=KEY), _frame(7, 0x1, *BATCH, key=KEY)],
    ids=["add", "fencing-read", "fencing-batch"],
)
async def test_a_forged_frame_through_the_batch_reader_never_reaches_the_socket(frame: bytes) -> None:
    listener = CountingListener()
    async with listener as address:
        cfg = BookieClientConfig(request_timeout=1.0, connect_timeout=1.0)
        async with BatchReader("test-bookie", lambda _: address, cfg) as reader:
            with pytest.raises(UnsafeRequestError):
                await reader._submit(Op.BATCH_READ_ENTRY, lambda txn: _forged(frame), 1.0)
            with pytest.raises(UnsafeRequestError):
                await reader._submit(Op.READ_ENTRY, lambda txn: P.read_entry_frame(txn, 7, 0), 1.0)
            await asyncio.sleep(0.2)
    assert listener.received == 0


def test_replies_decode_and_match() -> None:
    codec = v2.V2Codec(memory=4)
    codec.sent(5, v2.read_entry_frame(7, 3).frame)
    codec.sent(6, v2.read_entry_frame(7, 3).frame)
    codec.sent(8, v2.batch_read_frame(8, 7, 0, 10, 4096).frame)
    first = codec.decode(v2.read_reply(0, 7, 3, b"entry"))
    assert (first.txn_id, first.op, first.status, first.sub.body) == (5, Op.READ_ENTRY, Status.EOK, b"entry")
    missing = codec.decode(v2.read_reply(2, 7, 3))
    assert (missing.txn_id, missing.status, missing.sub.HasField("body")) == (6, Status.ENOENTRY, False)
    batch = codec.decode(v2.batch_reply(0, 7, 0, 8, [b"a", b"", b"ccc"]))
    assert (batch.txn_id, batch.op, batch.sub.entries) == (8, Op.BATCH_READ_ENTRY, [b"a", b"", b"ccc"])
    assert codec.decode(v2.batch_reply(1, 7, 0, 9, [])).status is Status.ENOLEDGER
    unknown = codec.decode(v2.batch_reply(55, 7, 0, 9, []))
    assert unknown.status is None and unknown.raw_status == 55 and "unknown v2 error code" in (unknown.problem or "")
    with pytest.raises(P.ProtocolError, match="never asked"):
        codec.decode(v2.read_reply(0, 7, 3, b"entry"))  # a third reply for two reads


def test_the_codec_forgets_the_oldest_reads_beyond_its_memory() -> None:
    codec = v2.V2Codec(memory=2)
    for txn in (1, 2, 3):
        codec.sent(txn, v2.read_entry_frame(7, txn).frame)
    with pytest.raises(P.ProtocolError, match="never asked"):
        codec.decode(v2.read_reply(0, 7, 1))
    assert codec.decode(v2.read_reply(0, 7, 3)).txn_id == 3


@pytest.mark.parametrize(
    "body",
    [
        b"",
        v2.read_reply(0, 7, 3)[:-1],
        struct.pack(">iiqq", v2.packet_header(1), 0, 7, 3),  # an ADDENTRY reply: never asked
        struct.pack(">iiqq", v2.packet_header(2, version=3), 0, 7, 3),
        v2.batch_reply(0, 7, 0, 8, [b"abc"])[:-1],  # an entry running past the frame
        v2.batch_reply(0, 7, 0, 8, [b"abc"]) + b"\x00\x00",  # stray bytes
        v2.batch_reply(0, 7, 0, 8, [])[:-1],  # no whole request id
    ],
)
def test_malformed_replies_are_protocol_errors(body: bytes) -> None:
    with pytest.raises(P.ProtocolError):
        v2.decode_reply(body)


def test_no_batch_reader_where_bookies_are_tls() -> None:
    tls = BookieTls(ssl.create_default_context())
    with pytest.raises(ValueError, match="TLS is configured"):
        BatchReader("b", lambda _: ("127.0.0.1", 1), BookieClientConfig(tls=tls))
    pool = BookiePool(config=BookieClientConfig(tls=tls))
    assert pool.batch_reader("127.0.0.1:3181") is None
    plain = BookiePool(overrides={"127.0.0.1:3181": BookieClientConfig(tls=tls)})
    assert plain.batch_reader("127.0.0.1:3181") is None
    assert plain.batch_reader("127.0.0.1:3182") is plain.batch_reader("127.0.0.1:3182") is not None


def test_runs_are_cut_into_chunks() -> None:
    assert [(c.first, c.last) for c in _chunks([0, 2, 3, 5, 6, 7, 8, 9], 3)] == [(0, 0), (2, 3), (5, 7), (8, 9)]
    assert _chunks([], 3) == []
