"""The repair role's connection to the one bookie chosen to receive a ledger's copies.

`RecoveryAddClient` is the bookie transport of auditor/bookie/transport.py (pipelining, timeouts,
reconnects, TLS) with the repair gate (gate.py) as its request encoder, bound to one permit: one ledger,
one target bookie, that ledger's keys, and to the lease of its repair lock (`gate.WriteLease`: asked as
each request is encoded). Its only operation is `recovery_add`. Reads for repair go through
the auditor's read-only `BookieClient`; nothing here can send them, nor anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import Message

from auditor.bookie.config import Address, BookieClientConfig, Resolver
from auditor.bookie.protocol import Op, Status
from auditor.bookie.transport import BookieTransport

from .gate import (
    RecoveryAddPermit,
    WriteLease,
    check_lease,
    check_recovery_add,
    encode_recovery_add,
    recovery_add_request,
)


@dataclass(frozen=True, slots=True)
class RecoveryAddResult:
    """One recovery add. `status` is the bookie's answer (None: no usable answer, see `error`)."""

    bookie_id: str
    ledger_id: int
    entry_id: int
    status: Status | None
    error: str | None
    elapsed: float

    @property
    def ok(self) -> bool:
        return self.status is Status.EOK and self.error is None

    @property
    def answered(self) -> bool:
        """The bookie gave a known status for this add (as opposed to a timeout or a broken link)."""
        return self.status is not None


class RecoveryAddClient(BookieTransport):
    """Sends RECOVERY_ADDs of `permit.ledger_id` to `permit.bookie_id`, and nothing else."""

    def __init__(
        self,
        permit: RecoveryAddPermit,
        address: Address | Resolver | None = None,
        config: BookieClientConfig | None = None,
        *,
        lease: WriteLease,
    ) -> None:
        super().__init__(permit.bookie_id, address, config)
        self.permit = permit
        self.lease = lease

    def _encode(self, request: Message) -> bytes:
        # Asked again here, as the request is encoded: it may have waited in the queue meanwhile.
        check_lease(self.lease, f"recovery add of ledger {self.permit.ledger_id} to {self.bookie_id}")
        return encode_recovery_add(request, self.permit, self.bookie_id)

    async def recovery_add(self, entry_id: int, body: bytes, *, timeout: float | None = None) -> RecoveryAddResult:
        """Re-add one entry. A request the gate refuses raises RepairGateError before connecting;
        LeaseEndedError (one) when the repair lock or the ledger is gone."""
        check_lease(self.lease, f"recovery add of ledger {self.permit.ledger_id} entry {entry_id} to {self.bookie_id}")
        check_recovery_add(recovery_add_request(0, self.permit, entry_id, body), self.permit, self.bookie_id)
        lid = self.permit.ledger_id
        reply, elapsed = await self._call(
            Op.ADD_ENTRY, lambda t: recovery_add_request(t, self.permit, entry_id, body), timeout
        )

        def result(status: Status | None, error: str | None) -> RecoveryAddResult:
            return RecoveryAddResult(self.bookie_id, lid, entry_id, status, error, elapsed)

        if isinstance(reply, str):
            return result(None, reply)
        if reply.status is None:
            return result(None, self._explain(reply))
        sub = reply.sub
        if sub is not None and (sub.ledgerId != lid or sub.entryId != entry_id):
            return result(
                None,
                f"bookie {self.bookie_id} answered the add of ledger {sub.ledgerId} entry {sub.entryId}, "
                f"sent {lid}/{entry_id}",
            )
        if reply.status is not Status.EOK:
            return result(reply.status, self._explain(reply))
        return result(Status.EOK, None)
