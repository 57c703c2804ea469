"""The fencing gate: a fencing READ_ENTRY of one ledger to one bookie with its master key, nothing else;
and neither of the other two gates lets a fencing read through."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.protobuf.unknown_fields import UnknownFieldSet

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor._proto import bookkeeper_repair_pb2 as rpb
from auditor.bookie import BookieClient, Op, UnsafeRequestError
from auditor.bookie import protocol as P
from auditor.durability.entry import master_key
from auditor.durability.model import DigestType
from auditor.repair.fencing import (
    FencePermit,
    FencingClient,
    check_fencing_read,
    encode_fencing_read,
    fencing_read_request,
)
from auditor.repair.gate import (
    LeaseEndedError,
    RecoveryAddPermit,
    RepairGateError,
    encode_recovery_add,
    recovery_add_request,
)
from tests.unit.repair.test_gate import HELD, Lease

PW = b"pw"
BOOKIE = "127.0.0.1:3181"
PERMIT = FencePermit(5, BOOKIE, master_key(PW))


def _refused(req: Any, match: str, permit: FencePermit = PERMIT, dest: str = BOOKIE) -> None:
    with pytest.raises(RepairGateError, match=match):
        encode_fencing_read(req, permit, dest)
    with pytest.raises(RepairGateError, match=match):
        check_fencing_read(req, permit, dest)


def test_a_fencing_read_carries_the_flag_the_key_and_nothing_else() -> None:
    frame = encode_fencing_read(fencing_read_request(9, PERMIT, -1), PERMIT, BOOKIE)
    (body,) = P.FrameDecoder().feed(frame)
    req = rpb.Request.FromString(body)
    assert req.header.operation == int(Op.READ_ENTRY) and not req.header.HasField("priority")
    assert (req.readRequest.flag, req.readRequest.ledgerId, req.readRequest.entryId) == (
        rpb.ReadRequest.FENCE_LEDGER,
        5,
        -1,
    )
    assert req.readRequest.masterKey == master_key(PW)
    # The bookie reads the same bytes as its own ReadRequest with FENCE_LEDGER (field 100) and masterKey (3).
    as_bookie = pb.Request.FromString(body)
    assert as_bookie.readRequest.ledgerId == 5 and len(UnknownFieldSet(as_bookie.readRequest)) == 2


def test_other_bookie_ledger_key_or_a_plain_read_is_refused() -> None:
    good = fencing_read_request(1, PERMIT, 3)
    _refused(good, "only on", dest="127.0.0.1:3182")
    _refused(fencing_read_request(1, FencePermit(6, BOOKIE, master_key(PW)), 3), "permit is for ledger 5")
    wrong_key = fencing_read_request(1, PERMIT, 3)
    wrong_key.readRequest.masterKey = master_key(b"other")
    _refused(wrong_key, "master key")
    plain = fencing_read_request(1, PERMIT, 3)
    plain.readRequest.ClearField("flag")
    _refused(plain, "FENCE_LEDGER")
    prio = fencing_read_request(1, PERMIT, 3)
    prio.header.priority = 100
    _refused(prio, "priority")


@pytest.mark.parametrize("op", [op for op in Op if op is not Op.READ_ENTRY])
def test_every_other_operation_is_refused(op: Op) -> None:
    req = fencing_read_request(1, PERMIT, 0)
    req.header.operation = int(op)  # type: ignore[assignment]
    _refused(req, "may never be sent by the fencing gate")


def test_adds_smuggled_fields_and_auditor_requests_are_refused() -> None:
    add = recovery_add_request(1, RecoveryAddPermit(5, BOOKIE, master_key(PW), DigestType.CRC32C), 0, b"x" * 40)
    add.header.operation = int(Op.READ_ENTRY)  # type: ignore[assignment]
    _refused(add, "exactly readRequest")
    both = fencing_read_request(1, PERMIT, 0)
    both.addRequest.ledgerId = 5
    both.addRequest.entryId = 0
    both.addRequest.masterKey = master_key(PW)
    both.addRequest.body = b""
    _refused(both, "exactly readRequest")
    unknown = rpb.Request()
    unknown.MergeFromString(fencing_read_request(1, PERMIT, 0).SerializeToString() + b"\xb2\x06\x00")
    _refused(unknown, "unknown fields")
    for req in (P.read_entry_request(1, 5, 0), pb.Request(), b"raw", None):
        _refused(req, "not a fencing-read Request")


def test_the_other_gates_refuse_a_fencing_read() -> None:
    fence = fencing_read_request(1, PERMIT, -1)
    as_auditor = pb.Request()
    as_auditor.MergeFromString(fence.SerializeToString())
    with pytest.raises(UnsafeRequestError, match="unknown fields"):
        P.encode_request(as_auditor)
    add_permit = RecoveryAddPermit(5, BOOKIE, master_key(PW), DigestType.CRC32C)
    with pytest.raises(RepairGateError):
        encode_recovery_add(fence, add_permit, BOOKIE)


async def test_the_fencing_client_sends_only_fencing_reads_and_checks_before_connecting() -> None:
    client = FencingClient(PERMIT, ("127.0.0.1", 9), lease=HELD)
    with pytest.raises(RepairGateError):
        client._encode(P.read_entry_request(1, 5, 0))
    with pytest.raises(ValueError):
        await client.fenced_read(-2)
    assert client.stats.connects == client.stats.connect_failures == client.stats.sent == 0
    assert not hasattr(client, "read_entry") and not hasattr(client, "recovery_add")
    assert not hasattr(BookieClient(BOOKIE, ("127.0.0.1", 9)), "fenced_read")
    await asyncio.gather(client.close())


def test_permit_checks_its_fields_and_hides_the_key() -> None:
    with pytest.raises(ValueError, match="20 bytes"):
        FencePermit(1, BOOKIE, b"short")
    with pytest.raises(ValueError, match="bookie id"):
        FencePermit(1, "", master_key(PW))
    assert master_key(PW).hex() not in repr(PERMIT)


def test_the_repair_gates_refuse_the_auditors_pre_gated_frames() -> None:
    """A read-only client's pre-encoded GET_LIST / READ_ENTRY frame is no message of either repair gate."""
    add_permit = RecoveryAddPermit(5, BOOKIE, master_key(PW), DigestType.CRC32C)
    fencing = FencingClient(PERMIT, ("127.0.0.1", 9), lease=HELD)
    for frame in (P.entry_list_frame(1, 5), P.read_entry_frame(2, 5, 0)):
        with pytest.raises(RepairGateError):
            encode_recovery_add(frame, add_permit, BOOKIE)  # type: ignore[arg-type]
        with pytest.raises(RepairGateError):
            fencing._encode(frame)  # type: ignore[arg-type]


async def test_no_fencing_read_leaves_once_the_lease_refuses() -> None:
    lease = Lease()
    client = FencingClient(PERMIT, ("127.0.0.1", 9), lease=lease)
    client._encode(fencing_read_request(1, PERMIT, -1))
    lease.refusal = "the lock znode was deleted while our session lives"
    with pytest.raises(LeaseEndedError, match="lock znode was deleted"):
        client._encode(fencing_read_request(1, PERMIT, -1))
    with pytest.raises(LeaseEndedError):
        await client.fenced_read(-1)
    assert client.stats.connects == client.stats.connect_failures == client.stats.sent == 0
    await client.close()
