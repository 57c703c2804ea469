"""The fencing gate: the one read that changes a bookie, sent only by opt-in open-ledger recovery.

A fencing read is a READ_ENTRY with `flag = FENCE_LEDGER` and the ledger's master key: the bookie marks
the ledger fenced (no client add is accepted after it) and then answers as a plain read (spec
repair-and-recovery.md §4.2, §4.3). The auditor's read-only gate refuses it; the repair role's add gate
(gate.py) refuses it too. This module is the third gate, and `FencingClient` its only transport.

A `FencePermit` names one ledger, one bookie of that ledger's last ensemble and the master key; the
gate lets a request through only if it is exactly a fencing READ_ENTRY of that ledger, to that bookie,
with that key: v3, exactly `header` and `readRequest`, no priority, no unknown fields anywhere, entry
id >= -1; and only while the repair lock's lease allows it (`gate.WriteLease`). Permits are made by
ledger recovery (recover.py) for a ledger it holds the repair lock of and that the repair queue marked,
and only when `repair.recover_open_ledgers` is on. Explicit raises,
never `assert`: the gate holds under `python -O` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from google.protobuf.message import Message

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor._proto import bookkeeper_repair_pb2 as rpb
from auditor.bookie import protocol as P
from auditor.bookie.config import Address, BookieClientConfig, Resolver
from auditor.bookie.results import ReadEntryResult
from auditor.bookie.transport import BookieTransport

from .gate import MASTER_KEY_LENGTH, RepairGateError, WriteLease, check_envelope, check_lease


@dataclass(frozen=True, slots=True)
class FencePermit:
    """Fencing reads of `ledger_id` sent to `bookie_id` with `master_key`: all the fencing gate allows."""

    ledger_id: int
    bookie_id: str
    master_key: bytes

    def __post_init__(self) -> None:
        if isinstance(self.ledger_id, bool) or not 0 <= self.ledger_id <= P.MAX_LONG:
            raise ValueError(f"ledger id {self.ledger_id!r} is not in 0..2^63-1")
        if not self.bookie_id:
            raise ValueError("a fence permit needs the bookie id")
        if len(self.master_key) != MASTER_KEY_LENGTH:
            raise ValueError(f"a master key is {MASTER_KEY_LENGTH} bytes, got {len(self.master_key)}")

    def __repr__(self) -> str:  # never print the key
        return f"FencePermit(ledger={self.ledger_id}, bookie={self.bookie_id!r})"


def fencing_read_request(txn_id: int, permit: FencePermit, entry_id: int) -> rpb.Request:
    """READ_ENTRY with FENCE_LEDGER and the master key (entry -1: the bookie's highest entry)."""
    if not 0 <= txn_id <= P.MAX_TXN_ID:
        raise ValueError(f"txn id {txn_id} is not a uint64")
    P.check_entry_id(entry_id)
    req = rpb.Request()
    req.header.version = pb.VERSION_THREE
    req.header.operation = cast("pb.OperationType", int(P.Op.READ_ENTRY))
    req.header.txnId = txn_id
    read = req.readRequest
    read.flag = rpb.ReadRequest.FENCE_LEDGER
    read.ledgerId = permit.ledger_id
    read.entryId = entry_id
    read.masterKey = permit.master_key
    return req


def check_fencing_read(req: object, permit: FencePermit, destination: str) -> None:
    """Raise RepairGateError unless `req` is a fencing read `permit` allows, going to `destination`."""
    if not isinstance(req, rpb.Request):
        raise RepairGateError(f"not a fencing-read Request: {type(req).__name__}")
    if destination != permit.bookie_id:
        raise RepairGateError(f"ledger {permit.ledger_id} may be fenced only on {permit.bookie_id}, not {destination}")
    check_envelope(
        req,
        P.Op.READ_ENTRY,
        "readRequest",
        gate="the fencing gate (only a fencing READ_ENTRY)",
        what="fencing read",
        no_priority="fencing reads carry no priority",
    )
    read = req.readRequest
    if not read.HasField("flag") or read.flag != rpb.ReadRequest.FENCE_LEDGER:
        raise RepairGateError("a read without FENCE_LEDGER is the auditor's, never sent through the fencing gate")
    if read.ledgerId != permit.ledger_id:
        raise RepairGateError(f"fencing read of ledger {read.ledgerId}, the permit is for ledger {permit.ledger_id}")
    if read.masterKey != permit.master_key:
        raise RepairGateError(f"fencing read of ledger {read.ledgerId} does not carry the ledger's master key")
    P.check_entry_id(read.entryId)


def encode_fencing_read(req: object, permit: FencePermit, destination: str) -> bytes:
    """The framed bytes of a fencing read, after `check_fencing_read`."""
    check_fencing_read(req, permit, destination)
    if not isinstance(req, rpb.Request):  # checked above; narrows the type
        raise RepairGateError(f"not a fencing-read Request: {type(req).__name__}")
    return P.frame(req.SerializeToString())


class FencingClient(BookieTransport):
    """Sends fencing reads of `permit.ledger_id` to `permit.bookie_id`, and nothing else."""

    def __init__(
        self,
        permit: FencePermit,
        address: Address | Resolver | None = None,
        config: BookieClientConfig | None = None,
        *,
        lease: WriteLease,
    ) -> None:
        super().__init__(permit.bookie_id, address, config)
        self.permit = permit
        self.lease = lease

    def _encode(self, request: Message) -> bytes:
        # The repair lock must still be ours as the request is encoded (it may have waited in the queue).
        check_lease(self.lease, f"fencing read of ledger {self.permit.ledger_id} on {self.bookie_id}")
        return encode_fencing_read(request, self.permit, self.bookie_id)

    async def fenced_read(self, entry_id: int, *, timeout: float | None = None) -> ReadEntryResult:
        """Fence the ledger on this bookie and read `entry_id` (-1: its highest entry). A request the gate
        refuses raises RepairGateError before connecting (LeaseEndedError: the repair lock is gone)."""
        check_lease(self.lease, f"fencing read of ledger {self.permit.ledger_id} on {self.bookie_id}")
        check_fencing_read(fencing_read_request(0, self.permit, entry_id), self.permit, self.bookie_id)
        lid = self.permit.ledger_id
        reply, elapsed = await self._call(
            P.Op.READ_ENTRY, lambda t: fencing_read_request(t, self.permit, entry_id), timeout
        )
        return self._read_entry_result(reply, elapsed, lid, entry_id)
