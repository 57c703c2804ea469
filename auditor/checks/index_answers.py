"""Answers from a bookie's own entry index, read by the agent that runs beside it (docs/agent.md).

The agent answers, for many ledgers in one request and without reading any entry data, exactly which
entries a DbLedgerStorage bookie has in its `locations` index. The index can lag the bookie: entries
still in its write cache are served but not indexed yet. So the index never proves an absence on its
own: every expected entry it lacks is read from the bookie before the answer stands (an entry that comes
back is a held copy, its digest verified; NOENTRY or NOLEDGER is a confirmed absence). A ledger the index
does not know is confirmed with one read: NOLEDGER means the bookie holds none of it. More lacking
entries than the read budget are sampled, and a sample only proves the absence of what it read.

An agent that does not answer leaves the bookie to the remote path (entry lists, reads), exactly as if it
had none: the caller gets those ledgers back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from auditor.bookie.agent import AgentClient, AgentEntries
from auditor.bookie.results import Outcome, ReadEntryResult
from auditor.durability.coverage import UNKNOWN
from auditor.durability.findings import Method
from auditor.durability.model import LedgerMetadata
from auditor.durability.ranges import RangeSet
from auditor.durability.striped import StripedSet

from .context import AuditContext, RunStats
from .ledger_answers import LedgerAnswers, sample_entries, take_copies
from .reads import read_copies

_INDEX = Method.INDEX.value
INDEX_SAMPLE = "index-sample"  # the index lacked more entries than the read budget: those were sampled


@dataclass
class _Ask:
    """One ledger's question to one bookie's agent, and what is known of its answer so far."""

    md: LedgerMetadata
    share: StripedSet  # the entries this bookie should hold
    out: LedgerAnswers
    held: RangeSet = RangeSet()  # what the index lists, plus what reads found
    lacking: StripedSet | None = None  # expected, not indexed: to be read


async def index_answers(
    ctx: AuditContext,
    bookie: str,
    agent: AgentClient,
    asks: Sequence[tuple[LedgerMetadata, StripedSet, LedgerAnswers]],
    stats: RunStats,
) -> list[int]:
    """Record in each `LedgerAnswers` what `bookie` holds of its ledger, from the agent's index with every
    absence confirmed by a read. Returns the positions in `asks` the agent could not answer (left to the
    remote path)."""
    replies = await agent.list_entries([md.ledger_id.ledger for md, _, _ in asks])
    stats.index_answers[bookie] += sum(1 for r in replies if r.outcome is not Outcome.UNKNOWN)
    left: list[int] = []
    pending: list[_Ask] = []
    unindexed: list[_Ask] = []
    for i, ((md, share, out), reply) in enumerate(zip(asks, replies)):
        if reply.outcome is Outcome.UNKNOWN or md.ledger_id.scope != 0:
            left.append(i)
            continue
        ask = _Ask(md, share, out)
        if reply.outcome is Outcome.ABSENT:
            unindexed.append(ask)
            continue
        _take_index(ask, reply, bookie)
        if ask.lacking:
            pending.append(ask)
    # A ledger the index does not know: one read of its first expected entry tells whether the bookie
    # holds any of it (NOLEDGER: none; anything else: it does, and the index lags: read what it lacks).
    firsts = await asyncio.gather(*(_read(ctx, bookie, a, [_first(a.share)], stats) for a in unindexed))
    for ask, (got,) in zip(unindexed, firsts):
        if got.unknown:
            _unknown(ask, bookie, stats, f"index does not list ledger {ask.md.ledger_id}; reading it: {got.error}")
        elif got.no_such_ledger:
            _record(ask, bookie, RangeSet(), _INDEX)
        else:
            ask.lacking = ask.share
            _took(ask, bookie, [got])
            ask.lacking = ask.share.difference(ask.held)
            if ask.lacking:
                pending.append(ask)
            else:
                _record(ask, bookie, ask.held, _INDEX)
    await asyncio.gather(*(_confirm(ctx, bookie, a, stats) for a in pending))
    return left


def _take_index(ask: _Ask, reply: AgentEntries, bookie: str) -> None:
    assert reply.entries is not None
    ask.held = reply.entries
    ask.lacking = ask.share.difference(reply.entries)
    if not ask.lacking:
        _record(ask, bookie, reply.entries, _INDEX)
        if ask.share.equals_rangeset(reply.entries):
            ask.out.exact.add(bookie)


async def _confirm(ctx: AuditContext, bookie: str, ask: _Ask, stats: RunStats) -> None:
    """Read the expected entries the index lacks (within the read budget) and record the answer."""
    assert ask.lacking is not None
    budget = ctx.options.fallback_read_budget
    entries = sample_entries(ask.lacking, budget)
    got = await _read(ctx, bookie, ask, entries, stats)
    unknown = [r for r in got if r.unknown]
    if unknown:
        why = f"{len(unknown)} of {len(got)} reads of entries the index lacks unanswered: {unknown[0].error}"
        _unknown(ask, bookie, stats, why)
        return
    _took(ask, bookie, got)
    if len(entries) < ask.lacking.count():
        # Sampled: only what was read and found absent is known to be missing; treat the rest as held.
        absent = RangeSet.from_ids(r.entry_id for r in got if r.absent)
        _record(ask, bookie, ask.held.union(ask.lacking.to_rangeset().difference(absent)), INDEX_SAMPLE)
    else:
        _record(ask, bookie, ask.held, _INDEX)


def _took(ask: _Ask, bookie: str, got: list[ReadEntryResult]) -> None:
    """Reads that found copies: held (whatever their digest says: a damaged copy is its own finding)."""
    present = take_copies(ask.md, bookie, got, ask.out)
    if present:
        ask.held = ask.held.union(RangeSet.from_ids(r.entry_id for r in present))


async def _read(
    ctx: AuditContext, bookie: str, ask: _Ask, entries: list[int], stats: RunStats
) -> list[ReadEntryResult]:
    got = await read_copies(ctx, bookie, ask.md.ledger_id, entries)
    stats.requests_done(bookie, got)
    return got


def _record(ask: _Ask, bookie: str, held: RangeSet, method: str) -> None:
    ask.out.answers[bookie] = held
    ask.out.methods[bookie] = method


def _unknown(ask: _Ask, bookie: str, stats: RunStats, why: str) -> None:
    stats.bookie_unknown[bookie] += 1
    ask.out.answers[bookie] = UNKNOWN
    ask.out.methods[bookie] = _INDEX
    ask.out.errors[bookie] = why


def _first(share: StripedSet) -> int:
    first = share.first
    assert first is not None  # only bookies with a non-empty share are asked
    return first
