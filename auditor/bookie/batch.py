"""The auditor's v2 batch reader for one bookie (`BatchReader`): many entries of a ledger in one
BATCH_READ_ENTRY request (BP-62, BookKeeper 4.17+), on the shared transport (transport.py: window, rate
limit, adaptive rate, timeouts, reconnects, withdrawal on cancel) with the v2 codec and gate (v2.py).

A bookie picks v2 or v3 for a connection from its first request, so the reader has a connection of its own
beside the bookie's BookieClient. v2 has no START_TLS of ours: a reader is never made for a bookie the
settings say is TLS (fail closed: nothing in plaintext to it); `BookiePool.batch_reader` then gives None.

A bookie before 4.17 does not know operation 7: it closes the connection. The reader learns that once
(UNSUPPORTED; forgotten when a connection is lost, so a bookie upgraded meanwhile is asked again) and then
answers `read_entries` with pipelined v2 READENTRYs, one request per entry.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass

from google.protobuf.message import Message

from auditor.durability.ids import LedgerId
from auditor.logging import get_logger

from . import protocol as P
from . import v2
from .client import _wire_ledger_id
from .config import BookieClientConfig, Resolver
from .connection import LATE_REPLY_MEMORY, WireCodec, _Connection
from .pending import Build, _TimedOut
from .protocol import Op, Reply, Status
from .results import ABSENT_STATUSES, BatchReadResult, Capability, Outcome, ReadEntryResult
from .transport import BookieTransport

log = get_logger("auditor.bookie.batch")

DEFAULT_MAX_COUNT = 1000  # entries per batch
DEFAULT_MAX_SIZE = 1024 * 1024  # bytes of reply frame per batch (a bookie caps it at maxBatchReadSize, 5 MiB)
# Statuses about the batch request as a whole, not its first entry: every entry it asked is UNKNOWN.
_REQUEST_LEVEL = frozenset({Status.EBADREQ, Status.ETOOMANYREQUESTS, Status.EBADVERSION, Status.EUA})


@dataclass(slots=True)
class _Chunk:
    """One batch of a `read_entries` call: entries first..last (inclusive), consecutive ids."""

    first: int
    last: int


class BatchReader(BookieTransport):
    """Read-only v2 reader for one bookie: BATCH_READ_ENTRY, and READENTRY where batches are unsupported.

    Its gate is `v2.gated_bytes`, fixed by the class: a plain READENTRY or BATCH_READ_ENTRY of exactly the
    builders' shape (no flag, no master key), nothing else. `batch_support` is what was learnt of the bookie;
    `batches_sent` / `reads_sent` count the requests written (one batch of N entries is one request).
    """

    def __init__(self, bookie_id: str, resolver: Resolver, config: BookieClientConfig) -> None:
        if config.tls is not None:
            raise ValueError(
                f"bookie {bookie_id}: TLS is configured, and v2 batch reads have no TLS here (they would go in "
                "plaintext): read through BookieClient"
            )
        super().__init__(bookie_id, resolver, config)
        self.batch_support = Capability.UNKNOWN
        self.batches_sent = 0
        self.reads_sent = 0
        self._learning: asyncio.Future[None] | None = None
        self._probing = False

    # ----- the gate and the codec --------------------------------------------------------------------
    def _encode(self, request: Message | P.GatedFrame) -> bytes:
        frame = v2.gated_bytes(request)  # raises UnsafeRequestError before anything is written
        if v2.request_key(frame) is None:
            self.batches_sent += 1
        else:
            self.reads_sent += 1
        return frame

    def _new_codec(self) -> WireCodec:
        return v2.V2Codec(LATE_REPLY_MEMORY + self.config.max_in_flight)

    def _on_connection_failed(self, conn: _Connection, message: str) -> None:
        super()._on_connection_failed(conn, message)
        if not self._probing and self.batch_support is not Capability.UNKNOWN:
            self.batch_support = Capability.UNKNOWN  # the next connection may reach an upgraded bookie

    # ----- public operations ---------------------------------------------------------------------------
    async def read_batch(
        self,
        ledger_id: int | LedgerId,
        first_entry: int,
        *,
        max_count: int = DEFAULT_MAX_COUNT,
        max_size: int = DEFAULT_MAX_SIZE,
        timeout: float | None = None,
    ) -> BatchReadResult:
        """One BATCH_READ_ENTRY: entries `first_entry`, `first_entry + 1`, ... up to `max_count` entries and
        `max_size` bytes of reply (capped by our frame limit). On a bookie known not to support it: UNKNOWN
        at once, nothing sent; the first call to an unknown bookie finds out."""
        lid = _wire_ledger_id(ledger_id)
        build = self._batch_build(lid, first_entry, max_count, max_size)
        if self.batch_support is Capability.UNKNOWN:
            learnt = await self._learn_with(lid, first_entry, max_count, build, timeout)
            if learnt is not None:
                return learnt
        if self._unsupported():
            return self._batch_result(lid, first_entry, max_count, self._unsupported_message(), 0.0)
        reply, elapsed = await self._call(Op.BATCH_READ_ENTRY, build, timeout)
        return self._batch_result(lid, first_entry, max_count, reply, elapsed)

    async def read_entries(
        self,
        ledger_id: int | LedgerId,
        entry_ids: list[int],
        *,
        max_count: int = DEFAULT_MAX_COUNT,
        max_size: int = DEFAULT_MAX_SIZE,
        timeout: float | None = None,
    ) -> list[ReadEntryResult]:
        """One `ReadEntryResult` per asked entry, in the order asked (as `BookieClient.read_entries`).

        Runs of consecutive ids are read in batches of at most `max_count` entries, all pipelined; an entry a
        batch stopped before (the bookie could not read it, or the size limit) is asked again by a batch
        starting at it, whose answer for its first entry is that entry's own (ENOENTRY: ABSENT; EIO: UNKNOWN).
        ENOLEDGER for any entry answers every entry asked (the bookie does not know the ledger). A batch that
        gets no answer (timeout, lost connection) leaves all its entries UNKNOWN. On a bookie without batch
        reads (before 4.17) every entry is asked by a v2 READENTRY, pipelined: the answers are the same.
        """
        lid = _wire_ledger_id(ledger_id)
        for e in entry_ids:
            v2.check_ids(lid, e)  # a bad argument raises here, before anything is queued
        if max_count < 1 or max_size < 1:
            raise ValueError("max_count and max_size must be >= 1")
        done: dict[int, ReadEntryResult] = {}
        wanted = sorted(set(entry_ids))
        chunks = _chunks(wanted, max_count)
        if chunks and self.batch_support is Capability.UNKNOWN:
            first = chunks[0]
            count = first.last - first.first + 1
            learnt = await self._learn_with(
                lid, first.first, count, self._batch_build(lid, first.first, count, max_size), timeout
            )
            if learnt is not None and not self._unsupported():
                chunks = self._take(lid, first, learnt, done) + chunks[1:]
        while chunks and Status.ENOLEDGER not in {r.status for r in done.values() if not r.present}:
            if self._unsupported():
                rest = [e for e in wanted if e not in done]
                builds: list[Build] = [functools.partial(_read_build, ledger_id=lid, entry_id=e) for e in rest]
                values = await self._batch(Op.READ_ENTRY, builds, timeout)
                for e, (reply, elapsed) in zip(rest, values):
                    done[e] = self._read_entry_result(reply, elapsed, lid, e)
                break
            builds = [self._batch_build(lid, c.first, c.last - c.first + 1, max_size) for c in chunks]
            values = await self._batch(Op.BATCH_READ_ENTRY, builds, timeout)
            following: list[_Chunk] = []
            for c, (reply, elapsed) in zip(chunks, values):
                judged = self._batch_result(lid, c.first, c.last - c.first + 1, reply, elapsed)
                following += self._take(lid, c, judged, done)
            chunks = _chunks([e for c in following for e in range(c.first, c.last + 1)], max_count)
        self._no_such_ledger(lid, wanted, done)
        return [done[e] for e in entry_ids]

    def _unsupported(self) -> bool:
        """Known not to support batches (read afresh: a call may have found out while another waited)."""
        return self.batch_support is Capability.UNSUPPORTED

    def reset_capabilities(self) -> None:
        """Forget what was learnt about the bookie (e.g. after it was upgraded and restarted)."""
        self.batch_support = Capability.UNKNOWN

    # ----- learning ------------------------------------------------------------------------------------
    async def _learn_with(
        self, lid: int, first: int, count: int, build: Build, timeout: float | None
    ) -> BatchReadResult | None:
        """While the capability is UNKNOWN: the first caller's batch finds it out (its result returned);
        the others wait for that, then go on (None)."""
        if self._learning is not None and not self._learning.done():
            await asyncio.shield(self._learning)
            return None
        self._learning = learning = asyncio.get_running_loop().create_future()
        try:
            return await self._learn(lid, first, count, build, timeout)
        finally:
            learning.set_result(None)

    async def _learn(self, lid: int, first: int, count: int, build: Build, timeout: float | None) -> BatchReadResult:
        """Send the batch alone. A reply of any status: SUPPORTED. The link closed under it with no reply:
        once a v2 READENTRY is answered on a new connection (the bookie speaks v2 and is up) and the batch is
        dropped the same way again, UNSUPPORTED (a bookie before 4.17 closes the connection at an operation
        it does not know). A timeout or a bookie not reachable teaches nothing: UNKNOWN stays."""
        self._probing = True
        try:
            result = await self._probe_batch(lid, first, count, build, timeout)
            if not isinstance(result, str):
                return result
            await self._after_backoff()
            read_reply, _ = await self._call(
                Op.READ_ENTRY, functools.partial(_read_build, ledger_id=lid, entry_id=first), timeout
            )
            if not isinstance(read_reply, Reply):
                return self._batch_result(lid, first, count, result, 0.0)
            await self._after_backoff()
            again = await self._probe_batch(lid, first, count, build, timeout)
            if not isinstance(again, str):
                return again
            self.batch_support = Capability.UNSUPPORTED
            log.warning(
                "bookie %s closes the connection at BATCH_READ_ENTRY but answers READENTRY (BookKeeper before "
                "4.17): reading its entries one request each",
                self.bookie_id,
            )
            return self._batch_result(lid, first, count, f"{again}; {self._unsupported_message()}", 0.0)
        finally:
            self._probing = False

    async def _probe_batch(
        self, lid: int, first: int, count: int, build: Build, timeout: float | None
    ) -> BatchReadResult | str:
        """The batch's result, or why the link closed under it without a reply (the UNSUPPORTED sign)."""
        losses, errors = self.stats.connection_losses, self.stats.protocol_errors
        reply, elapsed = await self._call(Op.BATCH_READ_ENTRY, build, timeout)
        if isinstance(reply, Reply):
            self.batch_support = Capability.SUPPORTED
        elif (
            not isinstance(reply, _TimedOut)
            and self.stats.connection_losses > losses
            and self.stats.protocol_errors == errors  # closed by the bookie, not by us at bytes we refused
        ):
            return reply
        return self._batch_result(lid, first, count, reply, elapsed)

    async def _after_backoff(self) -> None:
        """A link that closed before any reply makes the transport back off: wait for the next attempt."""
        wait = self._retry_at - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)

    # ----- judging -------------------------------------------------------------------------------------
    def _batch_build(self, lid: int, first: int, count: int, max_size: int) -> Build:
        size = min(max_size, self.config.max_frame_size)
        v2.batch_read_frame(0, lid, first, count, size)  # a bad argument raises here, before anything is queued
        return functools.partial(_batch_frame, ledger_id=lid, first=first, count=count, size=size)

    def _batch_result(self, lid: int, first: int, count: int, reply: Reply | str, elapsed: float) -> BatchReadResult:
        """A BATCH_READ_ENTRY reply judged: PRESENT with its entries, ABSENT, or UNKNOWN naming why."""

        def result(
            outcome: Outcome, status: Status | None, error: str | None, entries: list[tuple[int, bytes]]
        ) -> BatchReadResult:
            return BatchReadResult(self.bookie_id, outcome, status, error, elapsed, lid, first, entries)

        if isinstance(reply, str):
            return result(Outcome.UNKNOWN, None, reply, [])
        if reply.status is None:
            return result(Outcome.UNKNOWN, None, self._explain(reply), [])
        sub = reply.sub
        if not isinstance(sub, v2.V2BatchResponse) or sub.ledgerId != lid or sub.entryId != first:
            asked = f"asked {lid}/{first}"
            got = f"ledger {sub.ledgerId} entry {sub.entryId}" if isinstance(sub, v2.V2BatchResponse) else "nothing"
            return result(Outcome.UNKNOWN, reply.status, f"bookie {self.bookie_id} answered for {got}, {asked}", [])
        if reply.status in ABSENT_STATUSES:
            return result(Outcome.ABSENT, reply.status, None, [])
        if reply.status is not Status.EOK:
            return result(Outcome.UNKNOWN, reply.status, self._explain(reply), [])
        if not sub.entries or len(sub.entries) > count:
            return result(
                Outcome.UNKNOWN,
                reply.status,
                f"bookie {self.bookie_id} answered EOK with {len(sub.entries)} entries, asked at most {count}",
                [],
            )
        return result(Outcome.PRESENT, reply.status, None, list(enumerate(sub.entries, first)))

    def _take(self, lid: int, chunk: _Chunk, judged: BatchReadResult, done: dict[int, ReadEntryResult]) -> list[_Chunk]:
        """Record what one batch says of its entries; the chunk left to ask again (the entries after the
        last one returned; after a first entry's own error, the entries after it)."""

        def entry(e: int, body: bytes | None = None) -> ReadEntryResult:
            return ReadEntryResult(
                self.bookie_id, judged.outcome, judged.status, judged.error, judged.elapsed, lid, e, body
            )

        if judged.present:
            for e, body in judged.entries:
                done[e] = entry(e, body)
            nxt = judged.entries[-1][0] + 1
            return [_Chunk(nxt, chunk.last)] if nxt <= chunk.last else []
        if judged.outcome is Outcome.UNKNOWN and (judged.status is None or judged.status in _REQUEST_LEVEL):
            for e in range(chunk.first, chunk.last + 1):  # no answer about any of its entries
                done[e] = entry(e)
            return []
        done[chunk.first] = entry(chunk.first)  # the first entry's own answer (ENOENTRY, EIO, ...)
        return [_Chunk(chunk.first + 1, chunk.last)] if chunk.first < chunk.last else []

    def _no_such_ledger(self, lid: int, wanted: list[int], done: dict[int, ReadEntryResult]) -> None:
        """ENOLEDGER answers for the whole ledger: every entry not judged yet (those asked after it) gets it."""
        source = next((r for r in done.values() if r.status is Status.ENOLEDGER), None)
        if source is None:
            return
        for e in wanted:
            if e not in done:
                done[e] = ReadEntryResult(
                    self.bookie_id, Outcome.ABSENT, Status.ENOLEDGER, None, source.elapsed, lid, e
                )

    def _unsupported_message(self) -> str:
        return f"bookie {self.bookie_id} does not support BATCH_READ_ENTRY (BookKeeper before 4.17)"


def _chunks(entry_ids: list[int], max_count: int) -> list[_Chunk]:
    """Sorted distinct ids as runs of consecutive ids, each cut into chunks of at most `max_count`."""
    out: list[_Chunk] = []
    i, n = 0, len(entry_ids)
    while i < n:
        j = i
        while j + 1 < n and entry_ids[j + 1] == entry_ids[j] + 1 and j + 1 - i < max_count:
            j += 1
        out.append(_Chunk(entry_ids[i], entry_ids[j]))
        i = j + 1
    return out


def _batch_frame(txn: int, ledger_id: int, first: int, count: int, size: int) -> v2.V2Frame:
    return v2.batch_read_frame(txn, ledger_id, first, count, size)  # the request id is the txn id


def _read_build(txn: int, ledger_id: int, entry_id: int) -> v2.V2Frame:
    return v2.read_entry_frame(ledger_id, entry_id)  # matched by (ledger, entry): v2 READENTRY has no txn
