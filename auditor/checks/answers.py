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

from auditor.aio.cooperative import finish
from auditor.bookie.pending import Sent
from auditor.bookie.results import Capability, EntryListResult, Outcome, ReadEntryResult
from auditor.durability.coverage import UNKNOWN
from auditor.durability.entrylist import EntryListError, answer_now, answer_steps
from auditor.durability.findings import Method
from auditor.durability.ledgerend import LacEvidence, LedgerEnd, closed_end, decide_end, judge_read_lac
from auditor.durability.model import LedgerMetadata
from auditor.durability.ranges import RangeSet
from auditor.durability.schedule import expected_by_bookie
from auditor.durability.steps import run_steps
from auditor.durability.striped import StripedSet

from .context import AuditContext, RunStats
from .index_answers import index_answers
from .ledger_answers import READ_SAMPLE, LedgerAnswers, sample_entries, take_copies
from .reads import read_copies

# The methods as recorded per answer (`.value` is an Enum property lookup: once per answer otherwise).
_READ, _ENTRY_LIST = Method.READ.value, Method.ENTRY_LIST.value


async def _read_answer(
    ctx: AuditContext,
    md: LedgerMetadata,
    bookie: str,
    expected: StripedSet,
    out: LedgerAnswers,
    stats: RunStats,
    entries: list[int] | None = None,
) -> None:
    if entries is None:
        entries = sample_entries(expected, ctx.options.fallback_read_budget)
    results = await read_copies(ctx, bookie, md.ledger_id, entries)
    _take_reads(md, bookie, expected, out, stats, results)


def _take_reads(
    md: LedgerMetadata,
    bookie: str,
    expected: StripedSet,
    out: LedgerAnswers,
    stats: RunStats,
    results: list[ReadEntryResult],
) -> None:
    """Record one bookie's answer to reads of (some of) the entries it should hold of `md` in `out`:
    digests verified, a damaged copy kept as corrupt; fewer reads than expected entries is a sample, which
    only proves the absence of what it read."""
    sampled = len(results) < expected.count()
    stats.requests_done(bookie, results)
    absent = [r.entry_id for r in results if r.absent]
    unknown = [r for r in results if r.unknown]
    take_copies(md, bookie, results, out)
    out.methods[bookie] = READ_SAMPLE if sampled else _READ
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


def _send_list(ctx: AuditContext, md: LedgerMetadata, bookie: str) -> Sent[EntryListResult]:
    client = ctx.bookies.client(bookie)
    # A bookie not yet known to list entries gets a short first try: DbLedgerStorage stays silent.
    probing = client.entry_list_support is Capability.UNKNOWN
    timeout = client.config.entry_list_probe_timeout if probing else None
    return client.send_get_entry_list(md.ledger_id, timeout=timeout)


async def _list_answer(
    ctx: AuditContext,
    md: LedgerMetadata,
    bookie: str,
    expected: StripedSet,
    end: int,
    out: LedgerAnswers,
    stats: RunStats,
    sent: Sent[EntryListResult],
    read_unlistable: bool = True,
) -> None:
    result = await sent.result()
    stats.requests_done(bookie, (result,))
    if result.unsupported and not read_unlistable:
        out.answers[bookie] = expected.to_rangeset()
        out.assumed.add(bookie)
        return
    if result.unsupported:
        await _read_answer(ctx, md, bookie, expected, out, stats)
        return
    _take_list(md, bookie, end, result, out, stats, small=False) or await _take_large_list(
        md, bookie, end, result, out, stats
    )


async def gather_answers(
    ctx: AuditContext,
    md: LedgerMetadata,
    end: int,
    stats: RunStats,
    only: Iterable[str] | None = None,
    read_unlistable: bool = True,
) -> LedgerAnswers:
    """One answer per bookie that should hold some entry in [0, end] (or only the bookies named). Every
    bookie's request is sent before the first answer is awaited: one coroutine, no task per bookie.
    `read_unlistable=False` (the repair's lean evidence only): a bookie that cannot list entries is not
    read; its answer is its expected share, named in `assumed`."""
    expected = expected_by_bookie(md, end)
    wanted = set(only) if only is not None else set(expected)
    out = LedgerAnswers(expected=expected)
    asked = [b for b in sorted(wanted) if b in expected and expected[b]]
    remote = await _by_index(ctx, [(md, end)], [out], {b: [0] for b in asked}, stats)
    if len(remote) < len(asked):
        asked = [b for b in asked if b in remote]
        _in_bookie_order([out])  # (the agents' answers came first; the remote ones are recorded below)
    sent: dict[str, Sent[EntryListResult]] = {}
    try:
        for b in asked:
            sent[b] = _send_list(ctx, md, b)
        for b in asked:
            await _list_answer(ctx, md, b, expected[b], end, out, stats, sent[b], read_unlistable)
    finally:
        for s in sent.values():
            s.cancel()  # nothing for those answered; a withdrawn request if this ledger's check ended early
    return out


async def gather_answers_many(
    ctx: AuditContext, ledgers: list[tuple[LedgerMetadata, int]], stats: RunStats
) -> list[LedgerAnswers]:
    """`gather_answers` of many ledgers (each with the end to check) at once: one batch of GET_LISTs per
    bookie for all of them, so a scan wakes once per bookie per batch instead of once per request, and
    every small answer is judged without a coroutine of its own. A bookie that cannot list entries is read
    instead, ledger by ledger, exactly as `gather_answers` does. Answers in the order of `ledgers`."""
    outs: list[LedgerAnswers] = []
    wanted: dict[str, list[int]] = {}  # bookie -> indexes into `ledgers`
    for i, (md, end) in enumerate(ledgers):
        expected = expected_by_bookie(md, end)
        outs.append(LedgerAnswers(expected=expected))
        for b, share in expected.items():  # (bookies are asked, and judged, in bookie order below)
            if share:
                wanted.setdefault(b, []).append(i)

    async def ask(bookie: str, idxs: list[int]) -> list[EntryListResult]:
        client = ctx.bookies.client(bookie)
        probing = client.entry_list_support is Capability.UNKNOWN
        timeout = client.config.entry_list_probe_timeout if probing else None
        results = await client.get_entry_lists(
            [ledgers[i][0].ledger_id for i in idxs], timeout=timeout, shares=[_expected(outs[i], bookie) for i in idxs]
        )
        stats.requests_done(bookie, results)
        return results

    remote = await _by_index(ctx, ledgers, outs, wanted, stats)
    indexed = remote != wanted
    # Judged bookie by bookie in bookie order once all have answered: each ledger's answers then come in
    # that order as they are recorded (no re-sorting per ledger, unless agents answered some first).
    asking = sorted(remote.items())
    unlisted: list[tuple[str, int]] = []
    for (bookie, idxs), results in zip(asking, await asyncio.gather(*(ask(b, idxs) for b, idxs in asking))):
        for i, result in zip(idxs, results):
            md, end = ledgers[i]
            if result.unsupported:
                unlisted.append((bookie, i))
            elif not _take_list(md, bookie, end, result, outs[i], stats, small=True):
                await _take_large_list(md, bookie, end, result, outs[i], stats)
    if unlisted:  # bookies that cannot list (DbLedgerStorage): read, these ledgers at once
        await asyncio.gather(
            *(_read_answer(ctx, ledgers[i][0], b, _expected(outs[i], b), outs[i], stats) for b, i in unlisted)
        )
    if unlisted or indexed:
        _in_bookie_order(outs)
    return outs


async def _by_index(
    ctx: AuditContext,
    ledgers: list[tuple[LedgerMetadata, int]],
    outs: list[LedgerAnswers],
    wanted: dict[str, list[int]],
    stats: RunStats,
) -> dict[str, list[int]]:
    """Ask the agent beside each wanted bookie that has one (all its ledgers in one request) and record
    its confirmed answers in `outs`. Returns what is left for the remote path: the bookies without an
    agent, and the ledgers an agent could not answer (`wanted` itself when no bookie has an agent)."""
    agents = {b: a for b in wanted if (a := ctx.bookies.agent(b)) is not None}
    if not agents:
        return wanted

    async def ask(bookie: str, idxs: list[int]) -> list[int]:
        asks = [(ledgers[i][0], _expected(outs[i], bookie), outs[i]) for i in idxs]
        return [idxs[k] for k in await index_answers(ctx, bookie, agents[bookie], asks, stats)]

    lefts = await asyncio.gather(*(ask(b, wanted[b]) for b in agents))
    remote = {b: idxs for b, idxs in wanted.items() if b not in agents}
    remote.update({b: left for b, left in zip(agents, lefts) if left})
    return remote


def _in_bookie_order(outs: list[LedgerAnswers]) -> None:
    """Each ledger's answers in one order (by bookie), whatever order they were recorded in (the reads of
    bookies that cannot list come in after every list)."""
    for out in outs:
        out.answers = dict(sorted(out.answers.items()))
        out.methods = dict(sorted(out.methods.items()))
        out.errors = dict(sorted(out.errors.items()))
        out.corrupt.sort(key=lambda c: (c.bookie, c.entry_id))


def _expected(out: LedgerAnswers, bookie: str) -> StripedSet:
    assert out.expected is not None
    return out.expected[bookie]


def _take_list(
    md: LedgerMetadata, bookie: str, end: int, result: EntryListResult, out: LedgerAnswers, stats: RunStats, small: bool
) -> bool:
    """Record one bookie's entry list of `md` in `out`; False when it is too large to convert without
    yielding to the loop (`small`), left to `_take_large_list`."""
    out.methods[bookie] = _ENTRY_LIST
    if result.outcome is Outcome.UNKNOWN or result.entries is None:
        stats.bookie_unknown[bookie] += 1
        out.answers[bookie] = UNKNOWN
        out.errors[bookie] = result.error or "no answer"
        return True
    known = answer_now(result.entries, end)
    if known is not None:
        out.answers[bookie] = known
        share = result.entries.share
        if share is not None and out.expected is not None and share is out.expected.get(bookie):
            out.exact.add(bookie)
        return True
    if small and len(result.entries.records) > SMALL_ANSWER_RECORDS:
        return False
    try:
        out.answers[bookie] = run_steps(answer_steps(result.entries, end))
    except EntryListError as exc:  # periodic groups expanding past any real bookie's answer
        _malformed(md, bookie, exc, out, stats)
    return True


async def _take_large_list(
    md: LedgerMetadata, bookie: str, end: int, result: EntryListResult, out: LedgerAnswers, stats: RunStats
) -> bool:
    assert result.entries is not None
    try:
        out.answers[bookie] = await finish(answer_steps(result.entries, end))
    except EntryListError as exc:
        _malformed(md, bookie, exc, out, stats)
    return True


def _malformed(md: LedgerMetadata, bookie: str, exc: EntryListError, out: LedgerAnswers, stats: RunStats) -> None:
    stats.bookie_unknown[bookie] += 1
    out.answers[bookie] = UNKNOWN
    out.errors[bookie] = f"bookie {bookie} sent a malformed entry list for ledger {md.ledger_id}: {exc}"


# An entry list of at most this many records (and no periodic group, which `answer_steps` bounds) is
# converted without yielding to the loop: a few hundred microseconds at most.
SMALL_ANSWER_RECORDS = 2048


def segment_ends(md: LedgerMetadata, bookie: str, expected: StripedSet, end: int) -> set[int]:
    """The first and last entry of `expected` within each segment (up to `end`) that has `bookie`."""
    picked: set[int] = set()
    for span in md.spans(end):
        first, last = span.entries.first, span.entries.last
        if bookie not in span.ensemble or first is None or last is None:
            continue
        mine = expected.clip(first, last)  # (not `last or -1`: a segment ending at entry 0 holds entry 0)
        if mine:
            picked.update(e for e in (mine.first, mine.last) if e is not None)
    return picked


def fragment_sample(
    md: LedgerMetadata, bookie: str, expected: StripedSet, end: int, percentage: float, budget: int
) -> list[int]:
    """Java's LedgerChecker choice: the first and last entry this bookie should hold in each segment,
    plus `percentage` of the rest (evenly spaced), within the read budget."""
    lo, hi, segments = expected.first, expected.last, md.segments
    if (
        len(segments) == 1
        and lo is not None
        and hi is not None
        and segments[0].first_entry_id <= lo
        and hi <= end
        and bookie in segments[0].ensemble
    ):
        picked = {lo, hi}  # the usual ledger: one segment, whose span holds all of this bookie's share
    else:
        picked = segment_ends(md, bookie, expected, end)
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
    out = LedgerAnswers(expected=expected)
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


async def gather_read_answers_many(
    ctx: AuditContext, ledgers: list[tuple[LedgerMetadata, int]], stats: RunStats, percentage: float = 0.0
) -> list[LedgerAnswers]:
    """`gather_read_answers` of many ledgers at once: one batch of reads per bookie for all of them (the
    same entries each ledger's own reads would be). Answers in the order of `ledgers`."""
    outs: list[LedgerAnswers] = []
    wanted: dict[str, list[tuple[int, list[int]]]] = {}  # bookie -> (index into `ledgers`, entries to read)
    budget = ctx.options.fallback_read_budget
    for i, (md, end) in enumerate(ledgers):
        expected = expected_by_bookie(md, end)
        outs.append(LedgerAnswers(expected=expected))
        for b in sorted(expected):
            if expected[b]:
                wanted.setdefault(b, []).append((i, fragment_sample(md, b, expected[b], end, percentage, budget)))

    async def ask(bookie: str, asks: list[tuple[int, list[int]]]) -> None:
        items = [(ledgers[i][0].ledger_id, e) for i, entries in asks for e in entries]
        results = await ctx.bookies.client(bookie).read_entries_of(items)
        at = 0
        for i, entries in asks:
            out = outs[i]
            assert out.expected is not None
            _take_reads(ledgers[i][0], bookie, out.expected[bookie], out, stats, results[at : at + len(entries)])
            at += len(entries)

    await asyncio.gather(*(ask(b, asks) for b, asks in wanted.items()))
    _in_bookie_order(outs)
    return outs


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
        stats.requests_done(b, (r,))
        if r.unknown:
            stats.bookie_unknown[b] += 1
            continue
        answered = True
        evidence.extend(judge_read_lac(b, r.lac_body, r.last_entry_body, md))
    return decide_end(md, evidence, answered)
