"""Properties of the repair planner against a per-entry brute force on small ledgers:

* every entry it copies has a live, verified source on another member of its write set;
* every copy a member lacks is either planned or blocked (nothing silently dropped);
* data loss is declared only when no member of the write set could hold the entry: never because a
  bookie did not answer (unknown is never missing);
* a replacement copies only the entries striped to its index.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from auditor.durability.coverage import UNKNOWN
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.ranges import RangeSet
from auditor.durability.repairplan import BlockReason, BookieState, Evidence, plan_repair
from auditor.durability.schedule import write_set

POOL = ["b0", "b1", "b2", "b3", "b4", "b5", "b6"]


@st.composite
def cases(draw: st.DrawFn) -> tuple[LedgerMetadata, Evidence]:
    e = draw(st.integers(1, 5))
    wq = draw(st.integers(1, e))
    aq = draw(st.integers(1, wq))
    last = draw(st.integers(-1, 30))
    nseg = draw(st.integers(1, 3))
    keys = sorted({0, *draw(st.lists(st.integers(0, max(0, last + 1)), max_size=nseg - 1))})
    segs = tuple(Segment(k, tuple(draw(st.permutations(POOL))[:e])) for k in keys)
    md = LedgerMetadata(LedgerId.of(7), e, wq, aq, LedgerState.CLOSED, last, 0, segs)
    states, answers, corrupt = {}, {}, {}
    for b in md.bookies:
        states[b] = draw(st.sampled_from(list(BookieState)))
        if draw(st.integers(0, 5)) == 0:
            answers[b] = UNKNOWN
        else:
            answers[b] = RangeSet.from_ids(draw(st.sets(st.integers(0, max(last, 0)), max_size=32)))
        if draw(st.booleans()):
            corrupt[b] = RangeSet.from_ids(draw(st.sets(st.integers(0, max(last, 0)), max_size=3)))
    return md, Evidence(states, answers, corrupt)


def _members(md: LedgerMetadata, entry: int) -> list[tuple[int, int, str]]:
    """(segment index, ensemble index, bookie) of the entry's write set."""
    seg = max(i for i, s in enumerate(md.segments) if s.first_entry_id <= entry)
    ens = md.segments[seg].ensemble
    return [(seg, i, ens[i]) for i in write_set(entry, md.ensemble_size, md.write_quorum)]


def _live_copy(ev: Evidence, bookie: str, entry: int) -> bool:
    state, answer = ev.states[bookie], ev.answers[bookie]
    return (
        state in (BookieState.WRITABLE, BookieState.READ_ONLY)
        and isinstance(answer, RangeSet)
        and entry in answer
        and entry not in ev.corrupt.get(bookie, RangeSet())
    )


def _maybe_copy(ev: Evidence, bookie: str) -> bool:
    return ev.states[bookie] is BookieState.ABSENT or (
        ev.states[bookie] is not BookieState.GONE and not isinstance(ev.answers[bookie], RangeSet)
    )


@given(cases())
def test_plan_agrees_with_brute_force(case: tuple[LedgerMetadata, Evidence]) -> None:
    md, ev = case
    plan = plan_repair(md, ev)
    planned: dict[tuple[int, int], set[int]] = {}
    for a in plan.actions:
        assert md.segments[a.segment_index].ensemble[a.index] == a.bookie
        got = set(a.entries.to_rangeset())
        planned.setdefault((a.segment_index, a.index), set()).update(got)
        for entry in got:
            members = _members(md, entry)
            assert (a.segment_index, a.index, a.bookie) in members, "copies only the index's own stripe"
            # (a read-only bookie being replaced is a source of its own copies)
            assert any(_live_copy(ev, b, entry) for _, _, b in members)
    lost = set(plan.lost.to_rangeset())
    blocked = set()
    for blk in plan.blocks:
        blocked |= set(blk.entries.to_rangeset())
    for entry in range(md.last_entry_id + 1):
        members = _members(md, entry)
        live = [b for _, _, b in members if _live_copy(ev, b, entry)]
        maybe = [b for _, _, b in members if _maybe_copy(ev, b)]
        assert (entry in lost) == (not live and not maybe), f"entry {entry}: loss only when nothing could hold it"
        for seg, i, b in members:
            if _live_copy(ev, b, entry):
                continue
            assert entry in planned.get((seg, i), set()) or entry in blocked, f"entry {entry} on {b} dropped"
    assert all(b.reason is not BlockReason.OPEN_SEGMENT for b in plan.blocks)  # every ledger here is closed
