"""The agent's gRPC service (proto/bookie_agent.proto): three questions, no method that writes.

Every call must carry `authorization: Bearer <token>` unless the agent runs `--insecure` (access.py).
Index and entry-log work runs in worker threads (RocksDB and `pread` block); an index that cannot be read
is an UNKNOWN answer with the reason, never ABSENT.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

import grpc
from grpc import aio

from auditor import __version__
from auditor._proto import bookie_agent_pb2 as pb
from auditor._proto import bookie_agent_pb2_grpc as pb_grpc
from auditor.durability.entry import mac_key, verify_entry
from auditor.durability.model import DigestType
from auditor.durability.ranges import RangeSet

from .access import AUTHORIZATION, TokenFile
from .entrylog import EntryLogError, EntryLogReader, names_entry
from .index import BookieIndex, IndexReadError, Located
from .metrics import AgentMetrics

MAX_LEDGERS_PER_CALL = 10_000
_T = TypeVar("_T")


def ranges_to_pb(entries: RangeSet) -> list[pb.EntryRange]:
    return [pb.EntryRange(first=a, last=b) for a, b in entries.ranges]


def ranges_from_pb(ranges: Iterable[pb.EntryRange]) -> RangeSet:
    return RangeSet.of((r.first, r.last) for r in ranges)


@dataclass
class VerifyOutcome:
    """What one VerifyEntries call found (the service turns it into its response)."""

    known: bool
    verified: int = 0
    verified_bytes: int = 0
    corrupt: list[tuple[int, str]] = field(default_factory=list)
    absent: RangeSet = field(default_factory=RangeSet)
    unreadable: RangeSet = field(default_factory=RangeSet)
    next_entry: int | None = None


class AgentServicer(pb_grpc.BookieAgentServicer):
    def __init__(
        self,
        index: BookieIndex,
        logs: EntryLogReader,
        metrics: AgentMetrics,
        *,
        token: TokenFile | None,
        bookie_id: str,
        max_verify_bytes: int,
    ) -> None:
        self.index = index
        self.logs = logs
        self.metrics = metrics
        self.token = token
        self.bookie_id = bookie_id
        self.max_verify_bytes = max_verify_bytes

    async def _admit(self, method: str, context: aio.ServicerContext) -> None:
        if self.token is None:
            return
        values = [v for k, v in context.invocation_metadata() or () if k == AUTHORIZATION]
        value = values[0] if values and isinstance(values[0], str) else None
        if not self.token.admits(value):
            self.metrics.requests.labels(method, "UNAUTHENTICATED").inc()
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "agent: a valid bearer token is required")

    async def _run(self, fn: Callable[[], _T]) -> _T:
        return await asyncio.to_thread(fn)

    async def Describe(self, request: pb.DescribeRequest, context: aio.ServicerContext) -> pb.DescribeResponse:
        await self._admit("Describe", context)
        self.metrics.requests.labels("Describe", "OK").inc()
        return pb.DescribeResponse(
            bookie_id=self.bookie_id,
            storage="db",
            index_as_of=self.index.as_of,
            ledger_dirs=[str(d) for d in self.logs.ledger_dirs],
            index_dirs=[str(d.index_dir) for d in self.index.dirs],
            version=__version__,
        )

    def _list(self, ledger_ids: list[int]) -> list[pb.LedgerEntries]:
        out: list[pb.LedgerEntries] = []
        for lid in ledger_ids:
            try:
                answer = self.index.entries(lid)
            except IndexReadError as exc:
                self.metrics.errors.labels("index").inc()
                self.metrics.ledgers.labels("unknown").inc()
                out.append(pb.LedgerEntries(ledger_id=lid, outcome=pb.OUTCOME_UNKNOWN, error=str(exc)))
                continue
            if answer.known:
                self.metrics.ledgers.labels("present").inc()
                out.append(
                    pb.LedgerEntries(ledger_id=lid, outcome=pb.OUTCOME_PRESENT, entries=ranges_to_pb(answer.entries))
                )
            else:
                self.metrics.ledgers.labels("absent").inc()
                out.append(pb.LedgerEntries(ledger_id=lid, outcome=pb.OUTCOME_ABSENT))
        return out

    async def ListEntries(self, request: pb.ListEntriesRequest, context: aio.ServicerContext) -> pb.ListEntriesResponse:
        await self._admit("ListEntries", context)
        ids = list(request.ledger_ids)
        if len(ids) > MAX_LEDGERS_PER_CALL:
            self.metrics.requests.labels("ListEntries", "INVALID_ARGUMENT").inc()
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"at most {MAX_LEDGERS_PER_CALL} ledgers per call, got {len(ids)}"
            )
        ledgers = await self._run(lambda: self._list(ids))
        self.metrics.requests.labels("ListEntries", "OK").inc()
        return pb.ListEntriesResponse(ledgers=ledgers, index_as_of=self.index.as_of)

    def _read_checked(self, ledger_id: int, loc: Located) -> bytes:
        """The entry's bytes; if they name another entry, once more with a fresh index (compaction may have
        moved it since our view), then as they are (verify_entry calls them corrupt)."""
        data = self.logs.read(loc.dir_index, loc.log_id, loc.offset)
        if names_entry(data, ledger_id, loc.entry_id):
            return data
        self.logs.forget(loc.dir_index, loc.log_id)
        self.index.refresh()
        _, again = self.index.locations(ledger_id, loc.entry_id, loc.entry_id)
        if again:
            loc = again[0]
            data = self.logs.read(loc.dir_index, loc.log_id, loc.offset)
        return data

    def _verify(
        self, ledger_id: int, digest: DigestType, password: bytes, wanted: RangeSet, budget: int
    ) -> VerifyOutcome:
        """Read and check the indexed entries of `wanted`, ascending, until `budget` bytes were read (0: no
        bound). Work follows the index, never the size of `wanted` (a span to 2^63 is fine)."""
        if wanted.first is None or wanted.last is None:
            return VerifyOutcome(known=self.index.entries(ledger_id).known)
        known, found = self.index.locations(ledger_id, wanted.first, wanted.last)
        out = VerifyOutcome(known=known)
        key = mac_key(password) if digest is DigestType.HMAC else None
        unreadable: list[int] = []
        indexed: list[int] = []
        verdicts: Counter[str] = Counter()  # the metrics, updated once per call rather than per entry
        log_errors = 0
        for loc in found:
            if loc.entry_id not in wanted:
                continue
            if budget and out.verified_bytes >= budget:
                out.next_entry = loc.entry_id
                break
            indexed.append(loc.entry_id)
            try:
                data = self._read_checked(ledger_id, loc)
            except (EntryLogError, IndexReadError):
                log_errors += 1
                unreadable.append(loc.entry_id)
                continue
            result = verify_entry(data, ledger_id=ledger_id, entry_id=loc.entry_id, digest_type=digest, key=key)
            out.verified_bytes += len(data)
            verdicts[result.verdict.value] += 1
            if result.ok:
                out.verified += 1
            elif result.corrupt:
                out.corrupt.append((loc.entry_id, result.detail))
            else:
                unreadable.append(loc.entry_id)
        if log_errors:
            self.metrics.errors.labels("entry_log").inc(log_errors)
        self.metrics.verified_bytes.inc(out.verified_bytes)
        for verdict, n in verdicts.items():
            self.metrics.verified_entries.labels(verdict).inc(n)
        covered = wanted if out.next_entry is None else wanted.clip(wanted.first, out.next_entry - 1)
        out.absent = covered.difference(RangeSet.from_ids(indexed))
        out.unreadable = RangeSet.from_ids(unreadable)
        return out

    async def VerifyEntries(
        self, request: pb.VerifyEntriesRequest, context: aio.ServicerContext
    ) -> pb.VerifyEntriesResponse:
        await self._admit("VerifyEntries", context)
        try:
            digest = DigestType(request.digest_type)
        except ValueError:
            self.metrics.requests.labels("VerifyEntries", "INVALID_ARGUMENT").inc()
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown digest type {request.digest_type}")
        wanted = ranges_from_pb(request.entries)
        asked = request.max_bytes if request.max_bytes > 0 else self.max_verify_bytes
        budget = min(asked, self.max_verify_bytes) if self.max_verify_bytes else asked
        lid = request.ledger_id
        try:
            found = await self._run(lambda: self._verify(lid, digest, bytes(request.password), wanted, budget))
        except IndexReadError as exc:
            self.metrics.errors.labels("index").inc()
            self.metrics.requests.labels("VerifyEntries", "OK").inc()
            return pb.VerifyEntriesResponse(
                ledger_id=lid, outcome=pb.OUTCOME_UNKNOWN, error=str(exc), unreadable=ranges_to_pb(wanted)
            )
        self.metrics.requests.labels("VerifyEntries", "OK").inc()
        response = pb.VerifyEntriesResponse(
            ledger_id=lid,
            outcome=pb.OUTCOME_PRESENT if found.known else pb.OUTCOME_ABSENT,
            verified=found.verified,
            verified_bytes=found.verified_bytes,
            corrupt=[pb.CorruptEntry(entry_id=e, detail=d) for e, d in found.corrupt],
            absent=ranges_to_pb(found.absent),
            unreadable=ranges_to_pb(found.unreadable),
            index_as_of=self.index.as_of,
        )
        if found.next_entry is not None:
            response.next_entry = found.next_entry
        return response
