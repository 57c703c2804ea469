"""Bookie v3 replies: the spec's framed responses (§8.2, compared as parsed messages), the frame decoder
and its limits, and replies decoded as protocol errors or untrusted (malformed, unknown fields,
contradictory statuses)."""

from __future__ import annotations

import enum
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.bookie import (
    Op,
    Status,
)
from auditor.bookie import protocol as P
from tests.property.contract import parse_contract
from tests.unit.bookie.scripted_peer import _req, _response, _varint


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
