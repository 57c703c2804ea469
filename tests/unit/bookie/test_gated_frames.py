"""The read-only gate holds by construction for pre-gated frames (issue 35, item 5): nobody outside
`protocol` can make a `GatedFrame`, and the client's gate sends one only when its bytes are exactly a
GET_LIST or READ_ENTRY of the builders' shape. A forged frame carrying a RECOVERY_ADD, a fence flag or a
master key is refused before the socket: the loopback listener below counts every byte it receives.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor._proto import bookkeeper_repair_pb2 as rpb
from auditor.bookie import BookieClient, BookieClientConfig, Op, UnsafeRequestError
from auditor.bookie import protocol as P
from auditor.durability.entry import master_key
from auditor.durability.model import DigestType
from auditor.repair.gate import RecoveryAddPermit, recovery_add_request

from .counting_listener import CountingListener

MAX_LONG = 2**63 - 1


def _recovery_add_frame() -> bytes:
    """A well-formed RECOVERY_ADD frame, as the repair role's gate would send it."""
    permit = RecoveryAddPermit(7, "127.0.0.1:3181", master_key(b"pw"), DigestType.CRC32C, None)
    req = recovery_add_request(1, permit, 0, b"x" * 16)
    body = req.SerializeToString()
    return struct.pack(">i", len(body)) + body


def _fenced_read_frame() -> bytes:
    req = rpb.Request()
    req.header.version = pb.VERSION_THREE
    req.header.operation = int(Op.READ_ENTRY)  # type: ignore[assignment]
    req.header.txnId = 1
    req.readRequest.ledgerId, req.readRequest.entryId = 7, 0
    req.readRequest.flag = rpb.ReadRequest.FENCE_LEDGER
    req.readRequest.masterKey = master_key(b"pw")
    body = req.SerializeToString()
    return struct.pack(">i", len(body)) + body


def _forged(frame: bytes) -> P.GatedFrame:
    """What a careless or hostile caller could still make: an instance whose slot holds foreign bytes."""
    forged = object.__new__(P.GatedFrame)
    forged.frame = frame
    return forged


def test_a_gated_frame_cannot_be_built_from_foreign_bytes() -> None:
    with pytest.raises(UnsafeRequestError, match="made only by"):
        P.GatedFrame(_recovery_add_frame())
    with pytest.raises(UnsafeRequestError, match="made only by"):
        P.GatedFrame(P.entry_list_frame(1, 2).frame, object())


@pytest.mark.parametrize(
    "frame",
    [
        _recovery_add_frame(),
        _fenced_read_frame(),
        P.encode_request(P.read_lac_request(1, 7)),  # gate-legal, but not one of the two pre-gated shapes
        P.read_entry_frame(1, 7, 0).frame + b"\x00",  # trailing byte
        P.read_entry_frame(1, 7, 0).frame[:-1],  # cut short
        b"",
    ],
    ids=["recovery-add", "fenced-read", "read-lac", "trailing", "short", "empty"],
)
def test_forged_frames_are_refused_by_the_check_at_send(frame: bytes) -> None:
    with pytest.raises(UnsafeRequestError, match="not a GET_LIST or READ_ENTRY"):
        P.gated_bytes(_forged(frame))


@pytest.mark.parametrize("frame", [_recovery_add_frame(), _fenced_read_frame()], ids=["recovery-add", "fenced-read"])
async def test_a_forged_frame_through_the_auditors_client_never_reaches_the_socket(frame: bytes) -> None:
    listener = CountingListener()
    async with listener as address:
        cfg = BookieClientConfig(request_timeout=1.0, connect_timeout=1.0)
        async with BookieClient("test-bookie", address, cfg) as client:
            with pytest.raises(UnsafeRequestError):
                await client._submit(Op.READ_ENTRY, lambda txn: _forged(frame), 1.0)
            await asyncio.sleep(0.2)
    assert listener.received == 0


def _valid_frames() -> Iterator[bytes]:
    for v in (0, 1, 127, 128, 2**31 - 1, 2**32, MAX_LONG):
        yield P.entry_list_frame(v, v).frame
        yield P.read_entry_frame(v, v, -1).frame
        yield P.read_entry_frame(v, 3, v).frame


@given(
    st.sampled_from(list(_valid_frames())),
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1, max_size=4),
    st.sampled_from(["flip", "insert", "delete"]),
)
def test_whatever_the_check_at_send_passes_also_passes_the_message_gate(
    frame: bytes, edits: list[tuple[int, int]], how: str
) -> None:
    """A mutated frame is either refused, or it is a GET_LIST / READ_ENTRY the full message gate passes."""
    data = bytearray(frame)
    for at, value in edits:
        i = at % (len(data) + 1)
        if how == "flip" and i < len(data):
            data[i] = value
        elif how == "insert":
            data.insert(i, value)
        elif how == "delete" and i < len(data):
            del data[i]
    mutated = bytes(data)
    try:
        sent = P.gated_bytes(_forged(mutated))
    except UnsafeRequestError:
        return
    req = pb.Request()
    req.ParseFromString(sent[4:])
    assert Op(req.header.operation) in (Op.READ_ENTRY, Op.GET_LIST_OF_ENTRIES_OF_LEDGER)
    assert P.encode_request(req) == sent  # the gate passes it, and re-encodes it to the same bytes
