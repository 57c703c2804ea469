"""`_listed_reply`: the GET_LIST reply of a bookie that found the ledger, recognised from its bytes.

It is an optimisation of `decode_response` only: for every body it recognises, the Reply must be what the
protobuf parse makes of the same bytes (the client reads the same fields of its sub-response), and any
other body must be left to that parse, whatever it then says (a Reply, a problem, a ProtocolError)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.bookie import protocol as P

LISTED = ("status", "ledgerId", "availabilityOfEntriesOfLedger")


def listed_body(txn: int, lid: int, raw: bytes) -> bytes:
    """A GET_LIST reply as a bookie writes it (protobuf's serialisation: fields in number order)."""
    r = pb.Response()
    r.header.version = pb.VERSION_THREE
    r.header.operation = pb.GET_LIST_OF_ENTRIES_OF_LEDGER
    r.header.txnId = txn
    r.status = pb.EOK
    s = r.getListOfEntriesOfLedgerResponse
    s.status = pb.EOK
    s.ledgerId = lid
    s.availabilityOfEntriesOfLedger = raw
    return r.SerializeToString()


def general(body: bytes) -> P.Reply | str:
    """`decode_response` without the recognition: the protobuf parse, or its error."""
    saved = P._listed_reply
    P._listed_reply = lambda _: None  # type: ignore[assignment]
    try:
        return P.decode_response(body)
    except P.ProtocolError as exc:
        return f"ProtocolError: {exc}"
    finally:
        P._listed_reply = saved  # type: ignore[assignment]


def seen(reply: P.Reply) -> tuple[Any, ...]:
    """What the client takes from a reply: the header's values, the statuses, and its list fields."""
    sub = reply.sub
    fields = tuple((f, sub.HasField(f), getattr(sub, f)) for f in LISTED) if sub is not None else None
    return reply.txn_id, reply.op, reply.status, reply.raw_status, reply.problem, fields


def agrees(body: bytes) -> P.Reply | None:
    """`_listed_reply(body)`, held to the general parse."""
    fast = P._listed_reply(body)
    slow = general(body)
    if fast is not None:
        assert isinstance(slow, P.Reply), slow
        assert seen(fast) == seen(slow)
        assert P.decode_response(body) is not None
    return fast


ids = st.one_of(st.integers(0, 300), st.integers(0, 2**63 - 1), st.sampled_from([127, 128, 2**56, 2**63 - 1]))


@settings(max_examples=400, deadline=None)
@given(ids, ids, st.binary(max_size=300))
def test_a_bookies_listed_reply_is_recognised_as_the_general_parse_reads_it(txn: int, lid: int, raw: bytes) -> None:
    assert agrees(listed_body(txn, lid, raw)) is not None


@settings(max_examples=1500, deadline=None)
@given(ids, ids, st.binary(max_size=80), st.data())
def test_any_other_body_is_left_to_the_general_parse(txn: int, lid: int, raw: bytes, data: st.DataObject) -> None:
    """A flipped bit, bytes cut off or added anywhere, another operation or status: either still the
    same reply as protobuf reads it, or not recognised (protobuf then says what it is)."""
    body = bytearray(listed_body(txn, lid, raw))
    kind = data.draw(st.sampled_from(["flip", "cut", "add", "insert"]))
    if kind == "flip":
        at = data.draw(st.integers(0, len(body) - 1))
        body[at] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "cut":
        at = data.draw(st.integers(0, len(body) - 1))
        del body[at : at + data.draw(st.integers(1, 4))]
    elif kind == "add":
        body += data.draw(st.binary(min_size=1, max_size=6))
    else:
        at = data.draw(st.integers(0, len(body)))
        body[at:at] = data.draw(st.binary(min_size=1, max_size=3))
    agrees(bytes(body))


@pytest.mark.parametrize(
    "change",
    [
        "other-status",
        "sub-status",
        "no-list",
        "other-op",
        "priority",
        "unknown-field",
        "long-varint",
        "negative-ledger",
    ],
)
def test_replies_a_bookie_writes_otherwise_are_left_to_the_general_parse(change: str) -> None:
    """Each a body protobuf reads (some as errors, some as other replies) that is not the one shape."""
    r = pb.Response()
    r.ParseFromString(listed_body(7, 42, b"\x00" * 64))
    body: bytes
    if change == "other-status":
        r.status = pb.ENOLEDGER
    elif change == "sub-status":
        r.getListOfEntriesOfLedgerResponse.status = pb.ENOLEDGER
    elif change == "no-list":
        r.getListOfEntriesOfLedgerResponse.ClearField("availabilityOfEntriesOfLedger")
    elif change == "other-op":
        r.header.operation = pb.READ_ENTRY
    elif change == "priority":
        r.header.priority = 1
    elif change == "negative-ledger":
        r.getListOfEntriesOfLedgerResponse.ledgerId = -1
    if change == "unknown-field":
        body = r.SerializeToString() + b"\xf8\x07\x01"  # field 127, a varint the Response does not know
    elif change == "long-varint":  # txnId 7 in ten bytes, but bits past 64 set: protobuf drops them
        plain = r.SerializeToString()
        body = plain[:1] + bytes([plain[1] + 9]) + plain[2:7] + b"\x87" + b"\x80" * 8 + b"\x7e" + plain[8:]
        assert general(body) == general(plain)
    else:
        body = r.SerializeToString()
    assert P._listed_reply(body) is None
    assert agrees(body) is None


def test_a_txn_id_in_more_bytes_than_it_needs_reads_as_protobuf_reads_it() -> None:
    plain = listed_body(7, 42, b"\x00" * 64)
    body = plain[:1] + bytes([plain[1] + 9]) + plain[2:7] + b"\x87" + b"\x80" * 8 + b"\x00" + plain[8:]
    reply = agrees(body)
    assert reply is not None and reply.txn_id == 7


def test_the_recognised_reply_is_what_the_client_judges() -> None:
    """The sub-response stands in for the message where the client reads it."""
    reply = P.decode_response(listed_body(9, 1234, b"abc"))
    assert isinstance(reply.sub, P.ListedEntries)
    assert reply.sub.HasField("availabilityOfEntriesOfLedger") and not reply.sub.HasField("other")
    assert (reply.sub.ledgerId, reply.sub.availabilityOfEntriesOfLedger, reply.sub.status) == (1234, b"abc", pb.EOK)
