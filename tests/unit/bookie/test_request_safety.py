"""Bookie v3 requests: the spec's framed requests byte for byte (§8.1, START_TLS included), the safety
gate that refuses any write, fencing or long-poll read, smuggled field or odd header, and request ids."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.bookie import (
    Op,
    UnsafeRequestError,
)
from auditor.bookie import protocol as P
from tests.unit.bookie.scripted_peer import _varint

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


@pytest.mark.parametrize("value", [True, 1.0, "1", -2, 2**63])
def test_request_ids_refuse_what_is_not_an_id(value: object) -> None:
    with pytest.raises(ValueError, match="is not in"):
        P.read_entry_frame(1, value, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="is not in"):
        P.read_entry_frame(1, 0, value)  # type: ignore[arg-type]
