"""The digest scrub: read every copy of every closed ledger and verify its digests, within a byte budget
per bookie (the plan, pacing and coverage arithmetic are auditor/durability/scrub.py's).

Two ways verify one bookie's copy of one ledger (`CopyVerifier`):
* `RemoteVerifier`: the entries read from the bookie (its batch reader when the pool offers one, else
  pipelined READ_ENTRY on the bookie client) and their digests checked here;
* `AgentVerifier`: the bookie-side agent checks them where the data is (no entry crosses the network).
`verifier_for` takes the agent where the pool has one for the bookie, else the remote path.

`ScrubRunner` scrubs ledgers in id order with at most `max_concurrent_ledgers` in flight and one ledger at
a time per bookie. A damaged copy is reported only once it is confirmed: the same entries read again after
each re-check delay, the same damage every time (the scrutiny's rule: `verdicts.confirm` and
`confirm_damage` compare the stored and computed digests), and the ledger's metadata read again (a ledger
deleted meanwhile is skipped silently; an entry its bookie no longer should hold is dropped). An entry
that gets no answer is not verified (UNKNOWN, counted as such), never damage; an entry the bookie says
it lacks is the scrutiny's business (counted unverified here).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from auditor.bookie.agent import AgentClient
from auditor.bookie.results import Outcome, ReadEntryResult
from auditor.durability.findings import Category, Finding, Method
from auditor.durability.ids import LedgerId, next_id
from auditor.durability.model import LedgerMetadata
from auditor.durability.ranges import RangeSet
from auditor.durability.schedule import expected_by_bookie
from auditor.durability.scrub import ByteBudget, ScrubProgress, chunks, copies_of, copy_entries
from auditor.logging import get_logger
from auditor.metadata.errors import NoSuchLedgerError
from auditor.metadata.interfaces import CorruptLedger, LedgerRecord

from .context import AuditContext
from .reads import read_copies

log = get_logger("auditor.checks.scrub")

REMOTE, AGENT = "remote", "agent"
# A bookie whose copy got no answer at all is not asked again for this long (its copies meanwhile count
# as unverified): a bookie that is down must not cost each of its ledgers a timeout.
UNANSWERED_BACKOFF_S = 30.0


@dataclass(frozen=True, slots=True)
class DamagedEntry:
    """One entry copy that failed verification, with what identifies the damage (compared across reads)."""

    entry_id: int
    problems: tuple[str, ...]
    why: str
    stored_digest: str = ""
    computed_digest: str = ""

    @property
    def signature(self) -> tuple[Any, ...]:
        return (self.problems, self.stored_digest, self.computed_digest)


@dataclass
class CopyCheck:
    """What one verification of (some of) one bookie's copy of one ledger found."""

    verified: int = 0
    verified_bytes: int = 0
    damaged: list[DamagedEntry] = field(default_factory=list)
    absent: RangeSet = field(default_factory=RangeSet)
    unanswered: RangeSet = field(default_factory=RangeSet)  # UNKNOWN: not verified, never damage
    error: str | None = None

    def add(self, other: CopyCheck) -> None:
        self.verified += other.verified
        self.verified_bytes += other.verified_bytes
        self.damaged += other.damaged
        self.absent = self.absent.union(other.absent)
        self.unanswered = self.unanswered.union(other.unanswered)
        self.error = self.error or other.error


class CopyVerifier(Protocol):
    """Verifies the digests of `entries` of `md` on one bookie, reading at most about `max_bytes`; may stop
    early: what it did not reach is returned in `rest` (empty when done)."""

    method: str

    async def verify(self, md: LedgerMetadata, entries: RangeSet, max_bytes: int) -> tuple[CopyCheck, RangeSet]: ...


class RemoteVerifier:
    """Reads one chunk (`durability.scrub.CHUNK_ENTRIES`) per call from the bookie (`reads.read_copies`:
    batched on v2 where it can) and verifies each body here."""

    method = REMOTE

    def __init__(self, ctx: AuditContext, bookie: str) -> None:
        self.ctx = ctx
        self.bookie = bookie

    async def verify(self, md: LedgerMetadata, entries: RangeSet, max_bytes: int) -> tuple[CopyCheck, RangeSet]:
        first = next(chunks(entries), RangeSet())
        rest = entries.difference(first)
        results = await read_copies(self.ctx, self.bookie, md.ledger_id, list(first))
        return judge_reads(md, results), rest


def judge_reads(md: LedgerMetadata, results: Sequence[ReadEntryResult]) -> CopyCheck:
    """One bookie's answers to reads of `md`'s entries: digests verified, three-valued."""
    out = CopyCheck()
    absent: list[int] = []
    unanswered: list[int] = []
    for r in results:
        if r.outcome is Outcome.ABSENT:
            absent.append(r.entry_id)
        elif r.outcome is Outcome.UNKNOWN or r.body is None:
            unanswered.append(r.entry_id)
            out.error = out.error or r.error
        else:
            v = r.verify(md.digest_type, md.password)
            if v.corrupt:
                out.damaged.append(
                    DamagedEntry(
                        r.entry_id,
                        tuple(p.value for p in v.problems),
                        v.detail,
                        (v.stored_digest or b"").hex(),
                        (v.computed_digest or b"").hex(),
                    )
                )
            elif v.ok:
                out.verified += 1
                out.verified_bytes += len(r.body)
            else:  # UNVERIFIABLE (no password for an HMAC digest): not verified
                unanswered.append(r.entry_id)
                out.error = out.error or v.detail
    out.absent = RangeSet.from_ids(absent)
    out.unanswered = RangeSet.from_ids(unanswered)
    return out


class AgentVerifier:
    """The bookie-side agent's verification (auditor/bookie/agent.py): no entry crosses the network."""

    method = AGENT

    def __init__(self, agent: AgentClient) -> None:
        self.agent = agent

    async def verify(self, md: LedgerMetadata, entries: RangeSet, max_bytes: int) -> tuple[CopyCheck, RangeSet]:
        if md.digest_type is None:  # nothing to verify against: not verified (as a remote read would say)
            return CopyCheck(unanswered=entries, error="no digest type known"), RangeSet()
        got = await self.agent.verify_entries(
            md.ledger_id.ledger, md.digest_type, md.password or b"", entries, max_bytes=max_bytes
        )
        out = CopyCheck(
            verified=got.verified,
            verified_bytes=got.verified_bytes,
            # The agent says what is wrong in words: the same words on every read confirm the damage.
            damaged=[DamagedEntry(e, ("digest mismatch",), why, "", why) for e, why in got.corrupt],
            absent=got.absent,
            unanswered=got.unreadable,
            error=got.error,
        )
        nxt = got.next_entry
        if got.outcome is Outcome.UNKNOWN and got.verified == 0 and not got.corrupt:
            # Nothing answered: everything asked is unanswered (the agent may not say so entry by entry).
            out.unanswered = entries.difference(out.absent)
            return out, RangeSet()
        if nxt is None or entries.last is None or nxt > entries.last:
            return out, RangeSet()
        return out, entries.difference(RangeSet.span(entries.first or 0, nxt - 1))


def verifier_for(ctx: AuditContext, bookie: str) -> CopyVerifier:
    """The agent beside `bookie` when the pool has one, else the remote path."""
    agent = ctx.bookies.agent(bookie)
    return AgentVerifier(agent) if agent is not None else RemoteVerifier(ctx, bookie)


@dataclass
class LedgerScrub:
    """One ledger's scrub: its counts and its confirmed findings."""

    ledger: LedgerId
    copies: int = 0
    entries: int = 0
    bytes: int = 0
    unverified: int = 0
    findings: list[Finding] = field(default_factory=list)
    deleted: bool = False
    methods: dict[str, str] = field(default_factory=dict)  # bookie -> REMOTE / AGENT


Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class ScrubRunner:
    """Scrubs ledgers: per bookie one ledger at a time within its byte budget, ledgers in flight bounded."""

    def __init__(
        self,
        ctx: AuditContext,
        *,
        bytes_per_second: float,
        max_concurrent_ledgers: int = 4,
        confirm_delays: Sequence[float] = (2.0, 5.0),
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        verifier: Callable[[AuditContext, str], CopyVerifier] = verifier_for,
    ) -> None:
        if max_concurrent_ledgers < 1:
            raise ValueError(f"max_concurrent_ledgers must be >= 1, got {max_concurrent_ledgers}")
        self.ctx = ctx
        self.bytes_per_second = bytes_per_second
        self.burst = max(bytes_per_second, 64 * 1024.0)  # one second of budget saved up, at least 64 KiB
        self.max_concurrent_ledgers = max_concurrent_ledgers
        self.confirm_delays = tuple(confirm_delays[:2]) + (0.0,) * max(0, 2 - len(confirm_delays))
        self.clock = clock
        self.sleep = sleep
        self._verifier = verifier
        self._budgets: dict[str, ByteBudget] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._unanswering_until: dict[str, float] = {}
        self.bytes_by_bookie: dict[str, int] = {}  # bytes verified per bookie (the pacing's own count)
        self.slept_by_bookie: dict[str, float] = {}  # seconds each bookie's reads waited for its budget

    def _budget(self, bookie: str) -> ByteBudget:
        b = self._budgets.get(bookie)
        if b is None:
            b = self._budgets[bookie] = ByteBudget(self.bytes_per_second, self.burst, self.clock())
        return b

    async def _paced(self, bookie: str, wait: float) -> None:
        if wait > 0:
            self.slept_by_bookie[bookie] = self.slept_by_bookie.get(bookie, 0.0) + wait
            await self.sleep(wait)

    async def verify_copy(self, md: LedgerMetadata, bookie: str, entries: RangeSet) -> tuple[CopyCheck, str]:
        """Every entry of `entries` on `bookie`, chunk by chunk within its byte budget."""
        verifier = self._verifier(self.ctx, bookie)
        budget = self._budget(bookie)
        total = CopyCheck()
        rest = entries
        while rest:
            await self._paced(bookie, budget.wait(self.clock()))
            got, rest = await verifier.verify(md, rest, int(max(self.burst, 1)))
            total.add(got)
            spent = got.verified_bytes
            self.bytes_by_bookie[bookie] = self.bytes_by_bookie.get(bookie, 0) + spent
            await self._paced(bookie, budget.charge(spent, self.clock()))
        return total, verifier.method

    async def _copy(self, md: LedgerMetadata, bookie: str, entries: RangeSet) -> tuple[CopyCheck, str]:
        """One bookie's copy, one ledger at a time per bookie; a bookie that did not answer a moment ago is
        not asked (its copy counts as unanswered)."""
        if self._unanswering_until.get(bookie, float("-inf")) > self.clock():
            return CopyCheck(unanswered=entries, error="bookie did not answer a moment ago"), REMOTE
        lock = self._locks.setdefault(bookie, asyncio.Lock())
        async with lock:
            got, method = await self.verify_copy(md, bookie, entries)
        if got.unanswered and not got.verified and not got.damaged and not got.absent:
            self._unanswering_until[bookie] = self.clock() + UNANSWERED_BACKOFF_S
        return got, method

    async def scrub_ledger(self, md: LedgerMetadata) -> LedgerScrub:
        """Every copy of one ledger verified; damage confirmed before it is reported."""
        out = LedgerScrub(md.ledger_id)
        plans = copies_of(md)
        if not plans:
            return out
        got = await asyncio.gather(*(self._copy(md, p.bookie, p.entries) for p in plans))
        damaged: dict[str, list[DamagedEntry]] = {}
        for plan, (check, method) in zip(plans, got):
            out.copies += 1
            out.methods[plan.bookie] = method
            out.entries += check.verified
            out.bytes += check.verified_bytes
            out.unverified += len(check.unanswered) + len(check.absent)
            if check.unanswered:
                log.info(
                    "scrub: copy not fully answered (not verified)",
                    ledgerId=str(md.ledger_id),
                    bookie=plan.bookie,
                    entries=check.unanswered.to_text(20),
                    error=check.error,
                )
            if check.damaged:
                damaged[plan.bookie] = check.damaged
        if damaged:
            confirmed = await self._confirm(md, damaged)
            if confirmed is None:
                out.deleted = True
                return out
            out.findings = [
                self._finding(confirmed[1], b, d, out.methods.get(b, REMOTE))
                for b, ds in sorted(confirmed[0].items())
                for d in ds
            ]
            out.unverified += sum(len(ds) for ds in damaged.values())
        return out

    async def _confirm(
        self, md: LedgerMetadata, damaged: dict[str, list[DamagedEntry]]
    ) -> tuple[dict[str, list[DamagedEntry]], LedgerMetadata] | None:
        """The damage seen again, identically, after each confirmation delay; None: the ledger is gone."""
        kept = {b: list(ds) for b, ds in damaged.items()}
        for delay in self.confirm_delays:
            if not kept:
                break
            await self.sleep(delay)
            again: dict[str, list[DamagedEntry]] = {}
            for bookie, ds in kept.items():
                entries = RangeSet.from_ids(d.entry_id for d in ds)
                check, _ = await self.verify_copy(md, bookie, entries)
                seen = {d.entry_id: d for d in check.damaged}
                same = [d for d in ds if d.entry_id in seen and seen[d.entry_id].signature == d.signature]
                if same:
                    again[bookie] = same
            kept = again
        try:
            record = await self.ctx.store.read_ledger(md.ledger_id)
        except NoSuchLedgerError:
            return None
        now = record.metadata
        shares = expected_by_bookie(now) if now.is_closed else {}
        kept = {b: [d for d in ds if b in shares and d.entry_id in shares[b]] for b, ds in kept.items()}
        return {b: ds for b, ds in kept.items() if ds}, now

    @staticmethod
    def _finding(md: LedgerMetadata, bookie: str, d: DamagedEntry, method: str) -> Finding:
        return Finding.of(
            Category.DIGEST_MISMATCH,
            f"ledger {md.ledger_id}: entry {d.entry_id} on bookie {bookie} fails verification "
            f"({', '.join(d.problems)}; found by the digest scrub)",
            metadata=md,
            bookie=bookie,
            entry_id=d.entry_id,
            method=Method.READ,
            detail={
                "problems": list(d.problems),
                "why": d.why,
                "storedDigest": d.stored_digest,
                "computedDigest": d.computed_digest,
                "scrub": method,
            },
        ).confirm()

    async def run(
        self,
        batches: AsyncIterator[list[LedgerRecord | CorruptLedger]],
        progress: ScrubProgress,
        *,
        report: Callable[[Finding], None],
        advanced: Callable[[ScrubProgress], Awaitable[None]] | None = None,
        gate: Callable[[], Awaitable[None]] | None = None,
    ) -> ScrubProgress:
        """Scrub every ledger `batches` yields (in id order), from `progress`; `advanced` is called each time
        the cursor moves (every ledger up to it finished), `gate` before each ledger starts. Returns the
        progress at the end (the caller finishes the pass)."""
        window = asyncio.Semaphore(self.max_concurrent_ledgers)
        order: list[LedgerId] = []
        done: dict[LedgerId, LedgerScrub] = {}
        tasks: set[asyncio.Task[None]] = set()
        state = [progress]
        moved = asyncio.Event()
        failure: list[BaseException] = []

        async def one(md: LedgerMetadata) -> None:
            try:
                result = await self.scrub_ledger(md)
                for f in result.findings:
                    report(f)
                done[md.ledger_id] = result
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # a bug: stop the pass, do not move the cursor past it
                failure.append(exc)
            finally:
                window.release()
                moved.set()

        async def advance() -> None:
            p = state[0]
            while order and order[0] in done:
                lid = order.pop(0)
                r = done.pop(lid)
                p = p.ledger_done(
                    lid,
                    copies=r.copies,
                    entries=r.entries,
                    nbytes=r.bytes,
                    unverified=r.unverified,
                    corrupt=len(r.findings),
                )
            if p is not state[0]:
                state[0] = p
                if advanced is not None:
                    await advanced(p)

        try:
            async for batch in batches:
                for rec in batch:
                    if failure:
                        raise failure[0]
                    if gate is not None:
                        await gate()
                    await window.acquire()
                    lid = rec.ledger_id if isinstance(rec, CorruptLedger) else rec.metadata.ledger_id
                    order.append(lid)
                    if isinstance(rec, CorruptLedger) or not rec.metadata.is_closed or lid.scope != 0:
                        # Unreadable metadata or an open ledger: nothing to verify yet; a scoped (128-bit)
                        # ledger's entries cannot be asked for over the v3 protocol.
                        done[lid] = LedgerScrub(lid)
                        window.release()
                    else:
                        t = asyncio.ensure_future(one(rec.metadata))
                        tasks.add(t)
                        t.add_done_callback(tasks.discard)
                    await advance()
            while order:
                if failure:
                    raise failure[0]
                moved.clear()
                await advance()
                if order:
                    await moved.wait()
            if failure:
                raise failure[0]
        finally:
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        return state[0]


async def planned_entries(ctx: AuditContext, start: LedgerId | None = None) -> int:
    """The entry copies a pass from `start` verifies (one metadata read of every ledger, no bookie I/O)."""
    total = 0
    async for batch in ctx.store.scan_ledgers(start):
        for rec in batch:
            if isinstance(rec, LedgerRecord):
                total += copy_entries(rec.metadata)
    return total


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _records_of(
    ctx: AuditContext, ledgers: Sequence[LedgerId]
) -> AsyncIterator[list[LedgerRecord | CorruptLedger]]:
    """Just these ledgers, in id order (a one-shot scrub of named ledgers); deleted ones left out."""
    got = await ctx.store.read_ledgers(sorted(ledgers))
    yield [r for r in got if r is not None]


async def scrub_pass(
    ctx: AuditContext,
    runner: ScrubRunner,
    progress: ScrubProgress,
    *,
    report: Callable[[Finding], None],
    advanced: Callable[[ScrubProgress], Awaitable[None]] | None = None,
    gate: Callable[[], Awaitable[None]] | None = None,
    ledgers: Sequence[LedgerId] | None = None,
    now_ms: Callable[[], int] = _now_ms,
) -> ScrubProgress:
    """One pass to its end: begun afresh (its copies counted first) unless `progress` is in one, resumed
    after its cursor otherwise; `ledgers`: only these (a one-shot scrub; resuming does not apply)."""
    if not progress.in_pass:
        if ledgers is not None:
            got = await ctx.store.read_ledgers(sorted(ledgers))
            planned = sum(copy_entries(r.metadata) for r in got if isinstance(r, LedgerRecord))
        else:
            planned = await planned_entries(ctx)
        progress = progress.begin(now_ms(), planned)
        if advanced is not None:
            await advanced(progress)
    if ledgers is not None:
        batches = _records_of(ctx, [lid for lid in ledgers if progress.cursor is None or lid > progress.cursor])
    else:
        start = next_id(progress.cursor) if progress.cursor is not None else None
        if progress.cursor is not None and start is None:
            return progress.finish(now_ms())
        batches = ctx.store.scan_ledgers(start)
    progress = await runner.run(batches, progress, report=report, advanced=advanced, gate=gate)
    return progress.finish(now_ms())
