"""The auditor's read-only client for one bookie (`BookieClient`), on the transport of transport.py.

Its request gate is fixed by the class: `protocol.encode_request` for messages, `protocol.gated_bytes`
for the pre-gated GET_LIST and READ_ENTRY frames. Its operations are READ_ENTRY, READ_LAC,
GET_BOOKIE_INFO, GET_LIST_OF_ENTRIES_OF_LEDGER and the AUTH probe, one at a time or many in one batch;
`send_*` methods return a `Sent` (pending.py): a ledger's requests to all its bookies go out before its
first answer is awaited. A bookie that never answers GET_LIST (DbLedgerStorage) is recognised and its
callers told to read entries instead: while that is not known, one GET_LIST at a time finds it out (the
probe; the others wait for its outcome), and with a `CapabilityBook` (capabilities.py) one per bookie
incarnation in the whole process tree.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Sequence

from google.protobuf.message import Message

from auditor.aio.cooperative import finish
from auditor.durability.entrylist import EntryList, EntryListError
from auditor.durability.ids import LedgerId
from auditor.durability.sharelist import decode_share
from auditor.durability.striped import StripedSet
from auditor.logging import get_logger

from . import protocol as P
from .capabilities import CapabilityBook, Incarnation
from .pending import Build, Sent, _TimedOut
from .protocol import Op, Reply, Status
from .results import (
    ABSENT_STATUSES,
    AuthProbeResult,
    BookieInfoResult,
    Capability,
    EntryListResult,
    Outcome,
    ReadEntryResult,
    ReadLacResult,
)
from .transport import BookieTransport, _LedgerCall

log = get_logger("auditor.bookie.client")

# An entry list of at most this many bytes (about 2,700 runs) is decoded in one go where the caller does
# not await each answer: well under a millisecond. Larger ones take the stepwise, awaited path.
SMALL_ENTRY_LIST = 64 * 1024
# How often a client waiting for another process's probe of the same bookie looks at the book again.
BOOK_POLL_SECONDS = 0.05


class BookieClient(BookieTransport):
    """Read-only client for one bookie. Safe to share between many concurrent tasks.

    Its gate is `protocol.encode_request`, fixed by the class (not a parameter): nothing the auditor
    holds can make it send a write or a fence.
    """

    # Set by BookiePool: where the clients of the process tree share what they learnt of a bookie's GET_LIST
    # support, and how to tell which incarnation of the bookie runs now (capabilities.py).
    capability_book: CapabilityBook | None = None
    incarnation_of: Incarnation | None = None
    _probing: asyncio.Future[None] | None = None  # this client's probe under way
    _incarnation: str | None = None
    _incarnation_read = False
    _ungated_until = 0.0  # after a probe the bookie did not answer at all: no gate until then

    def _encode(self, request: Message | P.GatedFrame) -> bytes:
        if type(request) is P.GatedFrame:  # GET_LIST / READ_ENTRY, proven of the one shape the gate passes
            return P.gated_bytes(request)
        if not isinstance(request, P.Request):
            raise P.UnsafeRequestError(f"not a bookie Request: {type(request).__name__}")
        return P.encode_request(request)  # raises UnsafeRequestError before anything is written

    # ----- public operations ------------------------------------------------------------------------
    async def read_entry(
        self, ledger_id: int | LedgerId, entry_id: int, *, timeout: float | None = None
    ) -> ReadEntryResult:
        """READ_ENTRY without fence or long poll. entry_id -1 reads the bookie's highest entry."""
        lid = _wire_ledger_id(ledger_id)
        P.check_entry_id(entry_id)  # a bad argument raises here, before anything is queued
        reply, elapsed = await self._call(Op.READ_ENTRY, lambda t: P.read_entry_request(t, lid, entry_id), timeout)
        return self._read_entry_result(reply, elapsed, lid, entry_id)

    async def read_last_entry(self, ledger_id: int | LedgerId, *, timeout: float | None = None) -> ReadEntryResult:
        return await self.read_entry(ledger_id, -1, timeout=timeout)

    async def read_entries(
        self, ledger_id: int | LedgerId, entry_ids: list[int], *, timeout: float | None = None
    ) -> list[ReadEntryResult]:
        """Many READ_ENTRYs pipelined on the one connection (bounded by the window and rate limit): all
        queued at once, no task per entry."""
        lid = _wire_ledger_id(ledger_id)
        return await self.read_entries_of([(lid, e) for e in entry_ids], timeout=timeout)

    async def read_entries_of(
        self, items: list[tuple[int, int]] | list[tuple[LedgerId, int]], *, timeout: float | None = None
    ) -> list[ReadEntryResult]:
        """READ_ENTRY of many (ledger, entry) pairs, of any ledgers, in one batch (`_batch`): results in
        order."""
        pairs = [(_wire_ledger_id(lid), e) for lid, e in items]
        for _, e in pairs:
            P.check_entry_id(e)  # a bad argument raises here, before anything is queued
        builds: list[Build] = [functools.partial(_read_entry_request, ledger_id=lid, entry_id=e) for lid, e in pairs]
        values = await self._batch(Op.READ_ENTRY, builds, timeout)
        return [self._read_entry_result(r, elapsed, lid, e) for (r, elapsed), (lid, e) in zip(values, pairs)]

    async def read_lac(self, ledger_id: int | LedgerId, *, timeout: float | None = None) -> ReadLacResult:
        lid = _wire_ledger_id(ledger_id)
        reply, elapsed = await self._call(Op.READ_LAC, lambda t: P.read_lac_request(t, lid), timeout)
        base = _LedgerCall(bookie_id=self.bookie_id, elapsed=elapsed, ledger_id=lid)
        if isinstance(reply, str):
            return ReadLacResult(outcome=Outcome.UNKNOWN, status=None, error=reply, **base)
        sub = reply.sub
        lac_body = sub.lacBody if sub is not None and sub.HasField("lacBody") else None
        last = sub.lastEntryBody if sub is not None and sub.HasField("lastEntryBody") else None
        if sub is not None and sub.ledgerId != lid:
            return ReadLacResult(
                outcome=Outcome.UNKNOWN,
                status=reply.status,
                error=f"bookie {self.bookie_id} answered READ_LAC for ledger {sub.ledgerId}, asked {lid}",
                **base,
            )
        if lac_body is not None or last is not None:
            # Bodies are the bookie's data whatever the status says (one of its two reads may have failed).
            note = None if reply.status is Status.EOK else f"status {self._status_name(reply)} with data"
            return ReadLacResult(
                outcome=Outcome.PRESENT,
                status=reply.status,
                error=note,
                lac_body=lac_body,
                last_entry_body=last,
                **base,
            )
        if reply.status in ABSENT_STATUSES and sub is not None:
            # READ_LAC says ENOENTRY for unknown ledgers and also when its reads failed (spec §3.5).
            return ReadLacResult(
                outcome=Outcome.ABSENT,
                status=reply.status,
                error=None,
                conclusive=reply.status is Status.ENOLEDGER,
                **base,
            )
        return ReadLacResult(outcome=Outcome.UNKNOWN, status=reply.status, error=self._explain(reply), **base)

    async def get_bookie_info(
        self,
        requested: int = int(P.BookieInfoFlags.TOTAL_DISK_CAPACITY | P.BookieInfoFlags.FREE_DISK_SPACE),
        *,
        timeout: float | None = None,
    ) -> BookieInfoResult:
        reply, elapsed = await self._call(Op.GET_BOOKIE_INFO, lambda t: P.bookie_info_request(t, requested), timeout)
        if isinstance(reply, str):
            return BookieInfoResult(self.bookie_id, Outcome.UNKNOWN, None, reply, elapsed)
        if reply.status is not Status.EOK:
            return BookieInfoResult(self.bookie_id, Outcome.UNKNOWN, reply.status, self._explain(reply), elapsed)
        sub = reply.sub
        return BookieInfoResult(
            self.bookie_id,
            Outcome.PRESENT,
            reply.status,
            None,
            elapsed,
            sub.totalDiskCapacity if sub.HasField("totalDiskCapacity") else None,
            sub.freeDiskSpace if sub.HasField("freeDiskSpace") else None,
        )

    async def ping(self, *, timeout: float | None = None) -> BookieInfoResult:
        """GET_BOOKIE_INFO asking for nothing: the cheapest request that proves the bookie answers."""
        return await self.get_bookie_info(0, timeout=timeout)

    async def get_entry_list(self, ledger_id: int | LedgerId, *, timeout: float | None = None) -> EntryListResult:
        """GET_LIST_OF_ENTRIES_OF_LEDGER. On a bookie known not to answer it (DbLedgerStorage) this
        returns UNKNOWN with `unsupported=True` at once, without sending anything."""
        return await self.send_get_entry_list(ledger_id, timeout=timeout).result()

    def send_get_entry_list(self, ledger_id: int | LedgerId, *, timeout: float | None = None) -> Sent[EntryListResult]:
        """`get_entry_list`, sent now and awaited later (`await sent.result()`): a ledger's requests to all
        its bookies go out before the first answer is awaited, with no task per request."""
        lid = _wire_ledger_id(ledger_id)
        if self.entry_list_support is Capability.UNSUPPORTED:
            return Sent.ready(
                EntryListResult(
                    self.bookie_id, Outcome.UNKNOWN, None, self._unsupported_message(), 0.0, lid, None, True
                )
            )
        if self.entry_list_support is Capability.UNKNOWN and time.monotonic() >= self._ungated_until:
            gated = asyncio.ensure_future(self._entry_list_gated(lid, timeout))
            return Sent(gated, functools.partial(self._entry_list_result, lid))
        fut = self._submit(Op.GET_LIST_OF_ENTRIES_OF_LEDGER, lambda t: P.entry_list_request(t, lid), timeout)
        return Sent(fut, functools.partial(self._entry_list_result, lid))

    async def _entry_list_gated(self, lid: int, timeout: float | None) -> tuple[Reply | str, float]:
        """GET_LIST while the bookie's support is unknown: one request at a time finds it out (the probe,
        with the short probe timeout), the others wait for its outcome, then go as it says. A DbLedgerStorage
        bookie thus gets one unanswerable request (one exception in its log), not one per ledger asked."""
        while self.entry_list_support is Capability.UNKNOWN and time.monotonic() >= self._ungated_until:
            if self._probing is not None:
                await asyncio.shield(self._probing)
                continue
            self._probing = probing = asyncio.get_running_loop().create_future()
            try:
                answered = await self._probe(lid, timeout)
            finally:
                self._probing = None
                probing.set_result(None)
            if answered is not None:
                return answered
        if self.entry_list_support is Capability.UNSUPPORTED:
            return self._unsupported_message(), 0.0
        if timeout == self.config.entry_list_probe_timeout:
            timeout = None  # the caller's short first try was for a bookie whose support is known now
        return await self._submit(Op.GET_LIST_OF_ENTRIES_OF_LEDGER, lambda t: P.entry_list_request(t, lid), timeout)

    async def _probe(self, lid: int, timeout: float | None) -> tuple[Reply | str, float] | None:
        """The one GET_LIST that finds out whether the bookie answers it; None when the process tree's book
        already knew (nothing sent). While another process probes the same bookie, wait for its outcome."""
        book, incarnation = self.capability_book, await self._bookie_incarnation()
        if book is not None and incarnation is not None:
            while not book.claim(self.bookie_id, incarnation):
                known = book.lookup(self.bookie_id, incarnation)
                if known is not Capability.UNKNOWN:
                    self.entry_list_support = known
                    return None
                await asyncio.sleep(BOOK_POLL_SECONDS)
        limit = self.config.entry_list_probe_timeout
        learnt = Capability.UNKNOWN
        try:
            reply, elapsed = await self._submit(
                Op.GET_LIST_OF_ENTRIES_OF_LEDGER,
                lambda t: P.entry_list_request(t, lid),
                min(timeout, limit) if timeout is not None else limit,
            )
            if isinstance(reply, str):
                if not (isinstance(reply, _TimedOut) and await self._maybe_unsupported(reply)):
                    # No reply and no proof the bookie is alive: asking one at a time would only queue the
                    # rest behind timeouts; they go as they come for a while, as before any probe.
                    self._ungated_until = time.monotonic() + self.config.request_timeout
            elif reply.status is Status.EOK and reply.sub is not None and reply.sub.ledgerId == lid:
                self.entry_list_support = Capability.SUPPORTED
            learnt = self.entry_list_support
            return reply, elapsed
        finally:
            if book is not None and incarnation is not None:
                book.settle(self.bookie_id, incarnation, learnt)

    async def _bookie_incarnation(self) -> str | None:
        """The bookie's incarnation (read once per client), or None when it cannot be told."""
        if not self._incarnation_read and self.incarnation_of is not None:
            self._incarnation_read = True
            try:
                self._incarnation = await self.incarnation_of(self.bookie_id)
            except Exception as exc:  # ZooKeeper trouble: learn it alone, as without a book
                log.debug("bookie %s: incarnation unknown (%r)", self.bookie_id, exc)
        return self._incarnation

    async def get_entry_lists(
        self,
        ledger_ids: list[int] | list[LedgerId],
        *,
        timeout: float | None = None,
        shares: Sequence[StripedSet | None] | None = None,
    ) -> list[EntryListResult]:
        """`get_entry_list` of many ledgers at once, in order: queued together (bounded by the window and
        the rate limit as ever), one wake-up of the caller when the last answer is in, and small answers
        judged without a coroutine each. Cancelling withdraws every request not answered yet. `shares`:
        per ledger, the entries this bookie should hold; a list that is exactly that is recognised
        without the general decode (`decode_share`: the same EntryList, its `share` set)."""
        lids = [_wire_ledger_id(x) for x in ledger_ids]
        if self.entry_list_support is Capability.UNKNOWN and lids and time.monotonic() >= self._ungated_until:
            # Not known whether it lists: ledgers one at a time until it is (the first, normally), the rest
            # in one batch as it says (a batch of GET_LISTs to a DbLedgerStorage bookie: each one a timeout).
            head: list[EntryListResult] = []
            while len(head) < len(lids) and self.entry_list_support is Capability.UNKNOWN:
                head.append(await self.send_get_entry_list(lids[len(head)], timeout=timeout).result())
                if time.monotonic() < self._ungated_until:
                    break
            if timeout == self.config.entry_list_probe_timeout and self.entry_list_support is not Capability.UNKNOWN:
                timeout = None
            n = len(head)
            rest = await self.get_entry_lists(lids[n:], timeout=timeout, shares=shares[n:] if shares else None)
            return [*head, *rest]
        if self.entry_list_support is Capability.UNSUPPORTED:
            return [await self.send_get_entry_list(lid, timeout=timeout).result() for lid in lids]
        builds: list[Build] = [functools.partial(_entry_list_request, ledger_id=lid) for lid in lids]
        values = await self._batch(Op.GET_LIST_OF_ENTRIES_OF_LEDGER, builds, timeout)
        out: list[EntryListResult] = []
        for i, (lid, (reply, elapsed)) in enumerate(zip(lids, values)):
            judged = self._entry_list_judged(lid, reply, elapsed, shares[i] if shares is not None else None)
            out.append(judged if judged is not None else await self._entry_list_result(lid, reply, elapsed))
        return out

    def _entry_list_judged(
        self, lid: int, reply: Reply | str, elapsed: float, share: StripedSet | None = None
    ) -> EntryListResult | None:
        """`_entry_list_result` without awaiting, for the common answers: an EOK list small enough to decode
        in one step (at once when it is exactly `share`), ENOLEDGER. None: the answer needs the awaited
        path (no reply, a large list, ...)."""
        if isinstance(reply, str) or reply.status is not Status.EOK and reply.status is not Status.ENOLEDGER:
            return None
        sub = reply.sub
        if sub is None or sub.ledgerId != lid:
            return None
        if reply.status is Status.ENOLEDGER:
            return EntryListResult(self.bookie_id, Outcome.ABSENT, reply.status, None, elapsed, lid, EntryList())
        if not sub.HasField("availabilityOfEntriesOfLedger"):
            return None
        raw = sub.availabilityOfEntriesOfLedger
        if len(raw) > SMALL_ENTRY_LIST:
            return None
        entries = decode_share(raw, share) if share is not None else None
        if entries is None:
            try:
                entries = EntryList.decode(raw)
            except EntryListError:
                return None  # the awaited path says what is wrong with it
        self.entry_list_support = Capability.SUPPORTED
        return EntryListResult(self.bookie_id, Outcome.PRESENT, reply.status, None, elapsed, lid, entries)

    async def _entry_list_result(self, lid: int, reply: Reply | str, elapsed: float) -> EntryListResult:
        if isinstance(reply, str):
            # Only silence is evidence; a broken link (e.g. a restart) says nothing about the capability.
            unsupported = self._entry_lists_unsupported() or (
                isinstance(reply, _TimedOut) and await self._maybe_unsupported(reply)
            )
            said = self._unsupported_message()
            error = f"{reply}; {said}" if unsupported and reply != said else reply
            return EntryListResult(self.bookie_id, Outcome.UNKNOWN, None, error, elapsed, lid, None, unsupported)
        sub = reply.sub
        if reply.status is None or sub is None:
            return EntryListResult(self.bookie_id, Outcome.UNKNOWN, reply.status, self._explain(reply), elapsed, lid)
        if sub.ledgerId != lid:
            return EntryListResult(
                self.bookie_id,
                Outcome.UNKNOWN,
                reply.status,
                f"bookie {self.bookie_id} listed ledger {sub.ledgerId}, asked {lid}",
                elapsed,
                lid,
            )
        if reply.status is Status.ENOLEDGER:
            return EntryListResult(self.bookie_id, Outcome.ABSENT, reply.status, None, elapsed, lid, EntryList())
        if reply.status is not Status.EOK:
            return EntryListResult(self.bookie_id, Outcome.UNKNOWN, reply.status, self._explain(reply), elapsed, lid)
        self.entry_list_support = Capability.SUPPORTED
        if not sub.HasField("availabilityOfEntriesOfLedger"):
            return EntryListResult(
                self.bookie_id,
                Outcome.UNKNOWN,
                reply.status,
                f"bookie {self.bookie_id} answered EOK without the entry list",
                elapsed,
                lid,
            )
        try:
            # Stepwise: a large list (up to the frame limit) must not hold the event loop for long.
            entries = await finish(EntryList.decode_steps(sub.availabilityOfEntriesOfLedger))
        except EntryListError as exc:
            return EntryListResult(
                self.bookie_id,
                Outcome.UNKNOWN,
                reply.status,
                f"bookie {self.bookie_id} sent an invalid entry list: {exc}",
                elapsed,
                lid,
            )
        return EntryListResult(self.bookie_id, Outcome.PRESENT, reply.status, None, elapsed, lid, entries)

    async def probe_entry_list_support(self, ledger_id: int | LedgerId, *, timeout: float | None = None) -> Capability:
        """Find out quickly whether this bookie answers GET_LIST for a ledger it is KNOWN to hold.

        A short GET_LIST; an answer means SUPPORTED; silence while a GET_BOOKIE_INFO ping is answered
        means UNSUPPORTED (DbLedgerStorage). ENOLEDGER says nothing (the bookie does not hold that
        ledger), nor does an unreachable bookie: the capability then stays UNKNOWN.
        """
        if self.entry_list_support is not Capability.UNKNOWN:
            return self.entry_list_support
        await self.get_entry_list(ledger_id, timeout=timeout or self.config.entry_list_probe_timeout)
        return self.entry_list_support

    async def auth_probe(self, *, timeout: float | None = None) -> AuthProbeResult:
        """AUTH naming AuthDisabledPlugin: harmless; tells whether the bookie runs without auth."""
        reply, elapsed = await self._call(Op.AUTH, lambda t: P.auth_probe_request(t), timeout)
        if isinstance(reply, str):
            return AuthProbeResult(self.bookie_id, Outcome.UNKNOWN, None, reply, elapsed)
        if reply.status is not Status.EOK:
            return AuthProbeResult(self.bookie_id, Outcome.UNKNOWN, reply.status, self._explain(reply), elapsed)
        return AuthProbeResult(self.bookie_id, Outcome.PRESENT, reply.status, None, elapsed, reply.sub.authPluginName)

    def reset_capabilities(self) -> None:
        """Forget what was learnt about the bookie (e.g. after it was reconfigured and restarted)."""
        self.entry_list_support = Capability.UNKNOWN
        self._incarnation, self._incarnation_read = None, False

    def _entry_lists_unsupported(self) -> bool:
        """Known not to answer GET_LIST (read afresh: another request may have found out meanwhile)."""
        return self.entry_list_support is Capability.UNSUPPORTED

    async def _maybe_unsupported(self, failure: str) -> bool:
        """After a GET_LIST got no reply: if the bookie still answers a ping, it is one that never
        answers GET_LIST (DbLedgerStorage). Returns True when that is now known."""
        if self.entry_list_support is Capability.UNSUPPORTED:
            return True
        if self.entry_list_support is Capability.SUPPORTED:
            return False
        if self._liveness_check is None or self._liveness_check.done():
            self._liveness_check = asyncio.ensure_future(self._alive())
        alive = await asyncio.shield(self._liveness_check)
        if alive and self.entry_list_support is Capability.UNKNOWN:
            self.entry_list_support = Capability.UNSUPPORTED
            log.warning(
                "bookie %s does not answer GET_LIST_OF_ENTRIES_OF_LEDGER (%s); callers must read entries",
                self.bookie_id,
                failure,
            )
        return self.entry_list_support is Capability.UNSUPPORTED

    async def _alive(self) -> bool:
        return (await self.ping(timeout=self.config.liveness_timeout)).present

    def _unsupported_message(self) -> str:
        return (
            f"bookie {self.bookie_id} does not answer GET_LIST_OF_ENTRIES_OF_LEDGER for ledgers it holds "
            "(DbLedgerStorage); read the entries instead"
        )


def _read_entry_request(txn: int, ledger_id: int, entry_id: int) -> P.GatedFrame:
    return P.read_entry_frame(txn, ledger_id, entry_id)


def _entry_list_request(txn: int, ledger_id: int) -> P.GatedFrame:
    return P.entry_list_frame(txn, ledger_id)


def _wire_ledger_id(ledger_id: int | LedgerId) -> int:
    if isinstance(ledger_id, LedgerId):
        if ledger_id.scope != 0:
            raise ValueError(f"ledger {ledger_id} has a scope id; the bookie v3 protocol carries 64-bit ids only")
        return ledger_id.ledger
    if isinstance(ledger_id, bool) or not isinstance(ledger_id, int) or not 0 <= ledger_id <= P.MAX_LONG:
        raise ValueError(f"ledger id {ledger_id!r} is not in 0..2^63-1")
    return ledger_id
