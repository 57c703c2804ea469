"""The repair write gate: the one kind of write bk-auditor ever sends to a bookie.

A `RecoveryAddPermit` names one ledger, the one bookie chosen to receive its copies, the ledger's master
key and its digest type and MAC key. `encode_recovery_add` turns an ADD_ENTRY request into framed bytes
only if every field of it is what that permit allows; otherwise it raises `RepairGateError` before a
byte exists to be written. Explicit raises, never `assert`: the gate holds under `python -O` too.

What passes (and why each check is there):
* a v3 `Request` carrying exactly `header` and `addRequest`, no unknown fields anywhere (a smuggled
  write flag or a second sub-message would otherwise be re-serialised and sent);
* operation ADD_ENTRY with `flag = RECOVERY_ADD` (Java's fragment replicator's add, spec
  repair-and-recovery.md §1.2) and no `writeFlags`; no header priority (Java's replicator sends none;
  a priority would let the add land on a read-only bookie, which the repair role must not choose);
* `ledgerId` = the permit's ledger, `masterKey` = the permit's master key (SHA-1("ledger" + password));
* a body that is a stored entry of that ledger and of the request's entry id: the bookie files the entry
  under the ids in the body's first 16 bytes, not the request's (spec §1.2), so they must agree; and
  whose digest verifies with the ledger's digest type and key, so no corrupt copy can ever leave;
* the destination bookie = the permit's bookie;
* and, checked by the clients (writer.py, fencing.py) as each request is encoded, the ledger's repair
  lock still held by the session that took it, the ZooKeeper connection up and the ledger not deleted
  (`WriteLease`): no add or fencing read leaves after the lock is lost.

The auditor's own gate (auditor/bookie/protocol.py `encode_request`) refuses every one of these
requests; this module never touches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast

from google.protobuf.unknown_fields import UnknownFieldSet

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor._proto import bookkeeper_repair_pb2 as rpb
from auditor.bookie import protocol as P
from auditor.durability.entry import verify_entry
from auditor.durability.model import DigestType
from auditor.durability.repackage import LedgerCredentials

MASTER_KEY_LENGTH = 20  # SHA-1


class RepairGateError(P.UnsafeRequestError):
    """The repair path tried to send something its gate does not allow; nothing was written."""


class WriteLease(Protocol):
    """What a bookie write of the repair role needs besides its permit: the ledger's repair lock still
    held (`metadata.repair.lock.LockGuard`). `write_refusal` is asked as each request is encoded, so it must be
    local (flags kept by watches and the connection state), never a ZooKeeper round trip."""

    def write_refusal(self) -> str | None: ...


class LeaseEndedError(RepairGateError):
    """A bookie write refused because the repair lock (or the ledger) is gone; nothing was written."""


def check_lease(lease: WriteLease, what: str) -> None:
    """Raise LeaseEndedError when `lease` no longer allows bookie writes (`what` names the write)."""
    why = lease.write_refusal()
    if why is not None:
        raise LeaseEndedError(f"{what} not sent: {why}")


@dataclass(frozen=True, slots=True)
class RecoveryAddPermit:
    """Recovery adds of `ledger_id`, to `bookie_id`, with these keys: all the repair gate lets through."""

    ledger_id: int
    bookie_id: str
    master_key: bytes
    digest_type: DigestType
    mac_key: bytes | None = None

    def __post_init__(self) -> None:
        if isinstance(self.ledger_id, bool) or not 0 <= self.ledger_id <= P.MAX_LONG:
            raise ValueError(f"ledger id {self.ledger_id!r} is not in 0..2^63-1")
        if not self.bookie_id:
            raise ValueError("a recovery-add permit needs the target bookie id")
        if len(self.master_key) != MASTER_KEY_LENGTH:
            raise ValueError(f"a master key is {MASTER_KEY_LENGTH} bytes, got {len(self.master_key)}")
        if (self.digest_type is DigestType.HMAC) != (self.mac_key is not None):
            raise ValueError("a MAC key is needed for HMAC ledgers and only for them")

    @classmethod
    def for_ledger(cls, ledger_id: int, bookie_id: str, credentials: LedgerCredentials) -> RecoveryAddPermit:
        return cls(ledger_id, bookie_id, credentials.master_key, credentials.digest_type, credentials.mac_key)

    def __repr__(self) -> str:  # never print keys
        return f"RecoveryAddPermit(ledger={self.ledger_id}, bookie={self.bookie_id!r}, {self.digest_type.name})"


def recovery_add_request(txn_id: int, permit: RecoveryAddPermit, entry_id: int, body: bytes) -> rpb.Request:
    """ADD_ENTRY with RECOVERY_ADD, as Java's fragment replicator sends it (no priority, no write flags)."""
    if not 0 <= txn_id <= P.MAX_TXN_ID:
        raise ValueError(f"txn id {txn_id} is not a uint64")
    P.check_entry_id(entry_id)
    req = rpb.Request()
    req.header.version = pb.VERSION_THREE
    req.header.operation = cast("pb.OperationType", int(P.Op.ADD_ENTRY))
    req.header.txnId = txn_id
    add = req.addRequest
    add.ledgerId = permit.ledger_id
    add.entryId = entry_id
    add.masterKey = permit.master_key
    add.body = body
    add.flag = rpb.AddRequest.RECOVERY_ADD
    return req


def check_envelope(req: rpb.Request, op: P.Op, sub: str, *, gate: str, what: str, no_priority: str) -> None:
    """What every request of the repair role's gates must be: initialized, v3, operation `op`, no header
    priority, exactly `sub` beside the header, and no unknown field in the request, the header or `sub`
    (a smuggled flag or second sub-message would otherwise be re-serialised and sent)."""
    if not req.IsInitialized():
        raise RepairGateError(f"request misses required fields: {req.FindInitializationErrors()}")
    header = req.header
    if header.version != pb.VERSION_THREE:
        raise RepairGateError(f"protocol version {header.version} (only 3 may be sent)")
    if header.operation != int(op):
        try:
            name = P.Op(header.operation).name
        except ValueError:
            name = f"unknown operation {header.operation}"
        raise RepairGateError(f"operation {name} may never be sent by {gate}")
    if header.HasField("priority"):
        raise RepairGateError(no_priority)
    present = [fd.name for fd, _ in req.ListFields() if fd.name != "header"]
    if present != [sub]:
        raise RepairGateError(f"{op.name} must carry exactly {sub}, has {present}")
    for part in (req, header, getattr(req, sub)):
        if len(UnknownFieldSet(part)):
            raise RepairGateError(f"{what} carries unknown fields")


def check_recovery_add(req: object, permit: RecoveryAddPermit, destination: str) -> None:
    """Raise RepairGateError unless `req` is a recovery add `permit` allows, going to `destination`."""
    if not isinstance(req, rpb.Request):
        raise RepairGateError(f"not a recovery-add Request: {type(req).__name__}")
    if destination != permit.bookie_id:
        raise RepairGateError(
            f"ledger {permit.ledger_id} may be re-added only to bookie {permit.bookie_id}, not {destination}"
        )
    check_envelope(
        req,
        P.Op.ADD_ENTRY,
        "addRequest",
        gate="the repair gate (only RECOVERY_ADD)",
        what="recovery add",
        no_priority="recovery adds carry no priority (it would let them onto a read-only bookie)",
    )
    add = req.addRequest
    if not add.HasField("flag") or add.flag != rpb.AddRequest.RECOVERY_ADD:
        raise RepairGateError("an add without the RECOVERY_ADD flag is a client write, never a repair")
    if add.HasField("writeFlags"):
        raise RepairGateError("recovery adds carry no write flags")
    if add.ledgerId != permit.ledger_id:
        raise RepairGateError(f"add for ledger {add.ledgerId}, the permit is for ledger {permit.ledger_id}")
    if add.masterKey != permit.master_key:
        raise RepairGateError(f"add for ledger {add.ledgerId} does not carry the ledger's master key")
    check = verify_entry(
        add.body, ledger_id=permit.ledger_id, entry_id=add.entryId, digest_type=permit.digest_type, key=permit.mac_key
    )
    if add.entryId < 0 or not check.ok or check.header is None or check.header.format_version != 1:
        raise RepairGateError(
            f"body of entry {add.entryId} of ledger {add.ledgerId} is not a verified stored entry of it: {check.detail}"
        )


def encode_recovery_add(req: object, permit: RecoveryAddPermit, destination: str) -> bytes:
    """The framed bytes of a recovery add, after `check_recovery_add`."""
    check_recovery_add(req, permit, destination)
    if not isinstance(req, rpb.Request):  # checked above; narrows the type
        raise RepairGateError(f"not a recovery-add Request: {type(req).__name__}")
    return P.frame(req.SerializeToString())
