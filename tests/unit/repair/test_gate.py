"""The two request gates: the repair gate lets through only a recovery add its permit allows, the
auditor's gate lets through no add at all (spec repair-and-recovery.md §1.2, §6.4 vectors)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor._proto import bookkeeper_repair_pb2 as rpb
from auditor.bookie import BookieClient, Op, Status, UnsafeRequestError
from auditor.bookie import protocol as P
from auditor.durability.entry import build_entry, master_key
from auditor.durability.model import DigestType
from auditor.repair.gate import (
    LeaseEndedError,
    RecoveryAddPermit,
    RepairGateError,
    check_recovery_add,
    encode_recovery_add,
    recovery_add_request,
)
from auditor.repair.writer import RecoveryAddClient

PW = b"testPasswd"
BOOKIE = "127.0.0.1:3181"
PERMIT = RecoveryAddPermit(1, BOOKIE, master_key(PW), DigestType.CRC32C)


class Lease:
    """A repair lock's lease as the gate sees it: refusing once `refusal` is set."""

    def __init__(self) -> None:
        self.refusal: str | None = None

    def write_refusal(self) -> str | None:
        return self.refusal


HELD = Lease()
# §6.4: the LAC-0 repackaged entry, and the v3 RECOVERY_ADD Java's replicator sends with it (txn 1).
BODY = bytes.fromhex("0000000000000001000000000000000000000000000000000000000000000005f712343568656c6c6f")
JAVA_FRAME = (
    "000000530a06080310021801aa0648080110001a142e2a69d870796fe05c0e77c52a29ce5e4222b75822290000000000000001"
    "000000000000000000000000000000000000000000000005f712343568656c6c6fa00601"
)


def test_recovery_add_is_byte_identical_to_javas_replicator() -> None:
    frame = encode_recovery_add(recovery_add_request(1, PERMIT, 0, BODY), PERMIT, BOOKIE)
    assert frame.hex() == JAVA_FRAME


def _refused(req: Any, match: str, permit: RecoveryAddPermit = PERMIT, dest: str = BOOKIE) -> None:
    with pytest.raises(RepairGateError, match=match):
        encode_recovery_add(req, permit, dest)
    with pytest.raises(RepairGateError, match=match):
        check_recovery_add(req, permit, dest)


def _good() -> rpb.Request:
    return recovery_add_request(1, PERMIT, 0, BODY)


def test_other_destination_ledger_or_key_is_refused() -> None:
    _refused(_good(), "only to bookie", dest="127.0.0.1:3182")
    other_ledger = recovery_add_request(1, RecoveryAddPermit(2, BOOKIE, master_key(PW), DigestType.CRC32C), 0, BODY)
    _refused(other_ledger, "permit is for ledger 1")
    wrong_key = _good()
    wrong_key.addRequest.masterKey = master_key(b"other")
    _refused(wrong_key, "master key")


def test_an_add_without_recovery_flag_or_with_write_flags_or_priority_is_refused() -> None:
    plain = _good()
    plain.addRequest.ClearField("flag")
    _refused(plain, "RECOVERY_ADD")
    flags = _good()
    flags.addRequest.writeFlags = 1
    _refused(flags, "write flags")
    prio = _good()
    prio.header.priority = 100
    _refused(prio, "priority")
    zero_prio = _good()
    zero_prio.header.priority = 0
    _refused(zero_prio, "priority")


@pytest.mark.parametrize("op", [op for op in Op if op is not Op.ADD_ENTRY])
def test_every_other_operation_is_refused(op: Op) -> None:
    req = _good()
    req.header.operation = int(op)  # type: ignore[assignment]
    _refused(req, "may never be sent by the repair gate")


def test_reads_and_auditor_requests_are_not_repair_requests() -> None:
    for req in (P.read_entry_request(1, 1, 0), P.bookie_info_request(1), pb.Request(), b"raw", None):
        _refused(req, "not a recovery-add Request")


def test_body_must_be_a_verified_entry_of_the_requested_ids() -> None:
    corrupt = bytearray(BODY)
    corrupt[-1] ^= 1
    for body, entry in (
        (bytes(corrupt), 0),  # bad digest: a corrupt copy never leaves
        (BODY, 1),  # the bookie would file it under entry 0, the request says 1
        (build_entry(2, 0, 0, 5, b"hello", DigestType.CRC32C, PW), 0),  # another ledger's entry
        (build_entry(1, 0, 0, 5, b"hello", DigestType.CRC32, PW), 0),  # another digest type
        (BODY[:40], 0),
        (b"", 0),
    ):
        _refused(recovery_add_request(1, PERMIT, entry, body), "not a verified stored entry")


def test_unknown_fields_and_version_are_refused() -> None:
    smuggled = rpb.Request()
    smuggled.MergeFromString(_good().SerializeToString() + b"\xa2\x06\x04\x08\x01\x10\x00")  # + readRequest (100)
    _refused(smuggled, "must carry exactly addRequest")
    unknown = rpb.Request()
    unknown.MergeFromString(_good().SerializeToString() + b"\xb2\x06\x00")  # + authRequest (102): not in rpb
    _refused(unknown, "unknown fields")
    add = _good().addRequest.SerializeToString() + b"\x30\x01"  # + an unknown field 6 inside the add
    inner = rpb.Request()
    inner.header.CopyFrom(_good().header)
    inner.MergeFromString(b"\xaa\x06" + bytes([len(add)]) + add)
    _refused(inner, "unknown fields")
    v2 = _good()
    v2.header.version = pb.VERSION_TWO
    _refused(v2, "version")
    missing = _good()
    missing.addRequest.ClearField("masterKey")
    _refused(missing, "required")


def test_permit_checks_its_own_fields() -> None:
    with pytest.raises(ValueError, match="20 bytes"):
        RecoveryAddPermit(1, BOOKIE, b"short", DigestType.CRC32)
    with pytest.raises(ValueError, match="MAC key"):
        RecoveryAddPermit(1, BOOKIE, master_key(PW), DigestType.HMAC)
    with pytest.raises(ValueError, match="ledger id"):
        RecoveryAddPermit(-1, BOOKIE, master_key(PW), DigestType.CRC32)
    assert PW.hex() not in repr(PERMIT) and master_key(PW).hex() not in repr(PERMIT)


def test_the_auditors_gate_refuses_every_recovery_add() -> None:
    # The same bytes, parsed as the auditor's own Request type: ADD_ENTRY is never safe there.
    as_auditor = pb.Request()
    as_auditor.MergeFromString(_good().SerializeToString())
    with pytest.raises(UnsafeRequestError, match="never be sent"):
        P.encode_request(as_auditor)
    with pytest.raises(UnsafeRequestError):
        P.encode_request(_good())  # type: ignore[arg-type]
    assert Op.ADD_ENTRY not in P.SAFE_OPERATIONS
    assert not hasattr(pb, "AddRequest")  # the auditor's messages cannot even express an add


async def test_the_auditor_client_cannot_send_an_add_and_the_writer_cannot_send_a_read() -> None:
    reader = BookieClient(BOOKIE, ("127.0.0.1", 9))
    writer = RecoveryAddClient(PERMIT, ("127.0.0.1", 9), lease=HELD)
    with pytest.raises(UnsafeRequestError):
        reader._encode(_good())
    with pytest.raises(RepairGateError):
        writer._encode(P.read_entry_request(1, 1, 0))
    # A refused add raises before any connection is attempted.
    with pytest.raises(RepairGateError):
        await writer.recovery_add(1, BODY)
    assert writer.stats.connects == writer.stats.connect_failures == writer.stats.sent == 0
    assert not hasattr(reader, "recovery_add") and not hasattr(writer, "read_entry")
    await asyncio.gather(reader.close(), writer.close())


@pytest.mark.parametrize(
    ("frame", "status"),
    [
        ("000000130a060803100218011000aa0606080010011800", Status.EOK),
        ("000000150a0608031002180110f803aa060708f80310011800", Status.EFENCED),
        ("000000150a0608031002180110f603aa060708f60310011800", Status.EUA),
    ],
)
def test_add_replies_decode(frame: str, status: Status) -> None:
    (body,) = P.FrameDecoder().feed(bytes.fromhex(frame))
    reply = P.decode_response(body)
    assert (reply.op, reply.status, reply.sub.ledgerId, reply.sub.entryId) == (Op.ADD_ENTRY, status, 1, 0)


def test_no_third_gate_can_be_defined_outside_the_two_modules() -> None:
    with pytest.raises(TypeError, match="may not define its own request gate"):

        class Sneaky(BookieClient):
            def _encode(self, request: Any) -> bytes:
                return b""

    class Harmless(BookieClient):  # subclassing without touching the gate stays possible
        pass

    with pytest.raises(UnsafeRequestError):
        Harmless(BOOKIE, ("127.0.0.1", 9))._encode(_good())


async def test_no_add_leaves_once_the_lease_refuses() -> None:
    """The lease is asked before queueing and again as the request is encoded (it may have waited)."""
    lease = Lease()
    writer = RecoveryAddClient(PERMIT, ("127.0.0.1", 9), lease=lease)
    assert writer._encode(recovery_add_request(1, PERMIT, 0, BODY)) == bytes.fromhex(JAVA_FRAME)
    lease.refusal = "the ZooKeeper session that took it has ended"
    with pytest.raises(LeaseEndedError, match="session that took it has ended"):
        writer._encode(recovery_add_request(1, PERMIT, 0, BODY))
    with pytest.raises(LeaseEndedError, match="entry 0"):
        await writer.recovery_add(0, BODY)
    assert writer.stats.connects == writer.stats.connect_failures == writer.stats.sent == 0
    await writer.close()
