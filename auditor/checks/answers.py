"""Ask the bookies of one ledger which of its entries they hold.

Each bookie is asked once per ledger, with GET_LIST_OF_ENTRIES_OF_LEDGER. A bookie that cannot list
entries (DbLedgerStorage never answers that request) is read instead: every expected entry when that
fits the read budget, else a sample (first and last of each run plus evenly spaced entries); a sampled
answer only ever proves absence of the entries it read, so it can never invent a missing copy.

Outcomes stay three-valued: a bookie that did not answer is UNKNOWN, never "holds nothing".
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

from auditor.aio.cooperative import finish
from auditor.bookie.results import Capability, Outcome, ReadEntryResult
from auditor.durability.coverage import UNKNOWN, Answer
from auditor.durability.entry import EntryVerification
from auditor.durability.entrylist import EntryListError, answer_steps
from auditor.durability.findings import Method
from auditor.durability.ledgerend import LacEvidence, LedgerEnd, closed_end, decide_end, judge_read_lac
from auditor.durability.model import LedgerMetadata
from auditor.durability.ranges import RangeSet
from auditor.durability.schedule import StripedSet, expected_by_bookie

from .context import AuditContext, RunStats

READ_SAMPLE = "read-sample"


@dataclass(frozen=True)
class CorruptCopy:
    bookie: str
    entry_id: int
    verification: EntryVerification


@dataclass
class LedgerAnswers:
    answers: dict[str, Answer] = field(default_factory=dict)
    methods: dict[str, str] = field(default_factory=dict)  # bookie -> Method value or READ_SAMPLE
    errors: dict[str, str] = field(default_factory=dict)  # bookie -> why its answer is UNKNOWN
    corrupt: list[CorruptCopy] = field(default_factory=list)

    @property
    def unknown(self) -> list[str]:
        return sorted(b for b, a in self.answers.items() if a is UNKNOWN)


def sample_entries(expected: StripedSet, budget: int) -> list[int]:
    """At most `budget` expected entries: ends of runs first, then evenly spaced ones."""
    if expected.count() <= budget:
        return [e for a, b in expected.iter_runs() for e in range(a, b + 1)]
    picked: set[int] = set()
    for a, b in expected.iter_runs():
        if len(picked) + 2 > budget // 2:
            break
        picked.update((a, b))
    total = expected.count()
    stride = max(1, total // max(1, budget - len(picked)))
    i = 0
    for a, b in expected.iter_runs():
        for e in range(a, b + 1):
            if i % stride == 0 and len(picked) < budget:
                picked.add(e)
            i += 1
        if len(picked) >= budget:
            break
    return sorted(picked)


async def _read_answer(
    ctx: AuditContext,
    md: LedgerMetadata,
    bookie: str,
    expected: StripedSet,
    out: LedgerAnswers,
    stats: RunStats,
    entries: list[int] | None = None,
) -> None:
    client = ctx.bookies.client(bookie)
    if entries is None:
        entries = sample_entries(expected, ctx.options.fallback_read_budget)
    sampled = len(entries) < expected.count()
    results: list[ReadEntryResult] = await client.read_entries(md.ledger_id, entries)
    stats.bookie_requests[bookie] += len(results)
    absent = [r.entry_id for r in results if r.absent]
    unknown = [r for r in results if r.unknown]
    for r in results:
        if r.present:
            v = r.verify(md.digest_type, md.password)
            if v.corrupt:
                out.corrupt.append(CorruptCopy(bookie, r.entry_id, v))
    out.methods[bookie] = READ_SAMPLE if sampled else Method.READ.value
    if unknown:
        stats.bookie_unknown[bookie] += 1
        out.answers[bookie] = UNKNOWN
        out.errors[bookie] = f"{len(unknown)} of {len(results)} reads unanswered: {unknown[0].error}"
        return
    if sampled:
        # Only what was read and found absent is known to be missing; treat the rest as held.
        first, last = expected.first, expected.last
        assert first is not None and last is not None
        out.answers[bookie] = RangeSet.span(first, last) - RangeSet.from_ids(absent)
    else:
        out.answers[bookie] = RangeSet.from_ids(r.entry_id for r in results if r.present)


async def _list_answer(
    ctx: AuditContext,
    md: LedgerMetadata,
    bookie: str,
    expected: StripedSet,
    end: int,
    out: LedgerAnswers,
    stats: RunStats,
) -> None:
    client = ctx.bookies.client(bookie)
    # A bookie not yet known to list entries gets a short first try: DbLedgerStorage stays silent.
    probing = client.entry_list_support is Capability.UNKNOWN
    timeout = client.config.entry_list_probe_timeout if probing else None
    result = await client.get_entry_list(md.ledger_id, timeout=timeout)
    stats.bookie_requests[bookie] += 1
    if result.unsupported:
        await _read_answer(ctx, md, bookie, expected, out, stats)
        return
    out.methods[bookie] = Method.ENTRY_LIST.value
    if result.outcome is Outcome.UNKNOWN or result.entries is None:
        stats.bookie_unknown[bookie] += 1
        out.answers[bookie] = UNKNOWN
        out.errors[bookie] = result.error or "no answer"
        return
    try:
        out.answers[bookie] = await finish(answer_steps(result.entries, end))
    except EntryListError as exc:  # periodic groups expanding past any real bookie's answer
        stats.bookie_unknown[bookie] += 1
        out.answers[bookie] = UNKNOWN
        out.errors[bookie] = f"bookie {bookie} sent a malformed entry list for ledger {md.ledger_id}: {exc}"


async def gather_answers(
    ctx: AuditContext, md: LedgerMetadata, end: int, stats: RunStats, only: Iterable[str] | None = None
) -> LedgerAnswers:
    """One answer per bookie that should hold some entry in [0, end] (or only the bookies named)."""
    expected = expected_by_bookie(md, end)
    wanted = set(only) if only is not None else set(expected)
    out = LedgerAnswers()
    await asyncio.gather(
        *(
            _list_answer(ctx, md, b, expected[b], end, out, stats)
            for b in sorted(wanted)
            if b in expected and expected[b]
        )
    )
    return out


def fragment_sample(
    md: LedgerMetadata, bookie: str, expected: StripedSet, end: int, percentage: float, budget: int
) -> list[int]:
    """Java's LedgerChecker choice: the first and last entry this bookie should hold in each segment,
    plus `percentage` of the rest (evenly spaced), within the read budget."""
    picked: set[int] = set()
    for span in md.spans(end):
        if bookie not in span.ensemble or not span.entries:
            continue
        mine = expected.clip(span.entries.first or 0, span.entries.last or -1)
        if mine:
            picked.update(e for e in (mine.first, mine.last) if e is not None)
    extra = int(expected.count() * min(max(percentage, 0.0), 100.0) / 100.0)
    if extra:
        picked.update(sample_entries(expected, min(extra, max(0, budget - len(picked)))))
    return sorted(picked)


async def gather_read_answers(
    ctx: AuditContext,
    md: LedgerMetadata,
    end: int,
    stats: RunStats,
    only: Iterable[str] | None = None,
    percentage: float = 0.0,
) -> LedgerAnswers:
    """Answers from reads (digests verified): fragment ends plus a sample, per bookie."""
    expected = expected_by_bookie(md, end)
    wanted = set(only) if only is not None else set(expected)
    out = LedgerAnswers()
    await asyncio.gather(
        *(
            _read_answer(
                ctx,
                md,
                b,
                expected[b],
                out,
                stats,
                fragment_sample(md, b, expected[b], end, percentage, ctx.options.fallback_read_budget),
            )
            for b in sorted(wanted)
            if b in expected and expected[b]
        )
    )
    return out


async def ledger_end(
    ctx: AuditContext, md: LedgerMetadata, stats: RunStats, only: Iterable[str] | None = None
) -> LedgerEnd:
    """Where the check of `md` stops: closed, its last entry; open, what the last segment's bookies'
    READ_LAC answers prove (`auditor.durability.ledgerend`: bodies that fail verification are evidence
    against their bookie, never an input to the end). `only`: ask just these bookies (a re-check of
    the ones whose answer was rejected)."""
    if md.is_closed:
        return closed_end(md)
    bookies = sorted(set(md.segments[-1].ensemble))
    if only is not None:
        wanted = set(only)
        bookies = [b for b in bookies if b in wanted]
    results = await asyncio.gather(*(ctx.bookies.client(b).read_lac(md.ledger_id) for b in bookies))
    evidence: list[LacEvidence] = []
    answered = False
    for b, r in zip(bookies, results):
        stats.bookie_requests[b] += 1
        if r.unknown:
            stats.bookie_unknown[b] += 1
            continue
        answered = True
        evidence.extend(judge_read_lac(b, r.lac_body, r.last_entry_body, md))
    return decide_end(md, evidence, answered)
