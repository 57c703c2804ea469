"""`explain`: why is a ledger flagged? Its metadata, and what each ensemble member holds of each segment.

The ledger's end and the bookies' answers come from the checks' own flow (`per_ledger`'s end and ask steps
over `answers.py`): a closed ledger ends at its last entry, an open one at the LAC the bookies' READ_LAC
answers prove, and each bookie is asked once for its entry list (reads where it cannot list). So what
`explain` shows is what the `scrutiny` and `open` checks see now. Works on any replica; writes nothing.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from auditor.durability.coverage import UNKNOWN, analyze_coverage
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata
from auditor.durability.ranges import RangeSet
from auditor.durability.schedule import expected_by_bookie
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.own.repairstate import RepairBlocks
from auditor.metadata.store import ZooKeeperMetadataStore

from .context import AuditContext, RunStats
from .per_ledger import OpenLedgerCheck

MAX_RUNS = 100  # missing runs shown per bookie and segment


@dataclass(frozen=True, slots=True)
class BookieCopies:
    """What one ensemble member holds of one segment. `missing` is a RangeSet or (first, last) pairs."""

    bookie: str
    ensemble_index: int
    status: str  # ok | missing | unreachable | not_checked | error
    expected_entries: int = 0
    present_entries: int | None = None
    missing: RangeSet | Sequence[tuple[int, int]] = ()
    error: str = ""
    registered: bool = True


@dataclass(frozen=True, slots=True)
class SegmentCopies:
    index: int
    first_entry_id: int
    last_entry_id: int
    ensemble: tuple[str, ...]
    bookies: list[BookieCopies] = field(default_factory=list)
    min_copies: int | None = None


@dataclass(frozen=True, slots=True)
class LedgerExplanation:
    """What `explain` answers (the admin API's ExplainLedger)."""

    metadata: LedgerMetadata | None
    segments: list[SegmentCopies] = field(default_factory=list)
    under_replicated: bool = False
    notes: list[str] = field(default_factory=list)


class LedgerExplainer(OpenLedgerCheck):
    """Every ledger, ended and asked as the `open` check does (closed: its last entry; open: the verified
    LAC; entry lists, reads where a bookie cannot list)."""

    name = "explain"

    def wants(self, md: LedgerMetadata) -> bool:
        return True


async def explain_ledger(ctx: AuditContext, ledger: LedgerId) -> LedgerExplanation:
    """The explanation of `ledger` (NoSuchLedgerError when it does not exist)."""
    md = (await ctx.store.read_ledger(ledger)).metadata
    check = LedgerExplainer(ctx)
    stats = RunStats(check.name)
    end = (await check.end_of(md, stats)).end
    notes = [] if md.is_closed else [f"open ledger: checked up to the highest LAC the bookies know ({end})"]
    if end is None:
        end = -1
        notes.append("no bookie answered READ_LAC")
    answers = await check.ask(md, end, stats, None)
    regs = (await ctx.store.registrations()).available
    cov = analyze_coverage(md, answers.answers, end)
    expected = expected_by_bookie(md, end)
    segments = []
    for span in md.spans(end):
        first = span.first_entry_id
        last = span.entries.last if span.entries.last is not None else first - 1  # empty segment: last < first
        rows = []
        for i, b in enumerate(span.ensemble):
            exp = expected.get(b)
            exp_here = exp.clip(first, last) if exp is not None and last >= first else None
            n_exp = exp_here.count() if exp_here is not None else 0
            gaps = [g for g in cov.gaps if g.segment_index == span.index and g.bookie == b]
            a = answers.answers.get(b, UNKNOWN)
            if a is UNKNOWN:
                status = "unreachable" if n_exp else "not_checked"
                rows.append(BookieCopies(b, i, status, n_exp, None, (), answers.errors.get(b, ""), b in regs))
                continue
            n_missing = sum(g.missing.count() for g in gaps)
            runs = [r for g in gaps for r in itertools.islice(g.missing.iter_runs(), MAX_RUNS)][:MAX_RUNS]
            rows.append(
                BookieCopies(b, i, "missing" if n_missing else "ok", n_exp, n_exp - n_missing, runs, "", b in regs)
            )
        segments.append(SegmentCopies(span.index, first, last, span.ensemble, rows, cov.least_copies_at_least))
    marker = await ctx.store.read_marker(ledger)
    methods = sorted(set(answers.methods.values()))
    notes.append(f"bookies asked by: {', '.join(methods) or 'nothing (no entries)'}")
    blocked = await repair_note(ctx, ledger) if marker is not None else None
    if blocked:
        notes.append(blocked)
    return LedgerExplanation(md, segments, marker is not None, notes)


async def repair_note(ctx: AuditContext, ledger: LedgerId) -> str | None:
    """Why the repair role has not repaired `ledger`, from its shared record (None: no record)."""
    if not isinstance(ctx.store, ZooKeeperMetadataStore):
        return None
    try:
        got = await RepairBlocks(ctx.store).get(ledger)
    except CorruptZnodeError as exc:
        return f"repair record unreadable: {exc}"
    if got is None:
        return None
    retry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(got.not_before_ms / 1000))
    return (
        f"repair blocked ({got.reason}): {got.detail}; {got.failures} failed attempt(s), the last by "
        f"{got.holder}; no worker takes it again before {retry}"
    )
