"""The ledger check's choice of entries to read per bookie (`fragment_sample`): its shortcut for a
one-segment ledger picks exactly what the walk over the segments picks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.checks.answers import fragment_sample, segment_ends
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.schedule import expected_by_bookie
from auditor.durability.striped import StripedSet


@st.composite
def ledger_bookie_share(draw: st.DrawFn) -> tuple[LedgerMetadata, str, StripedSet, int]:
    e = draw(st.integers(1, 5))
    wq = draw(st.integers(1, e))
    pool = [f"b{i}" for i in range(e + 2)]
    segments = []
    start = draw(st.sampled_from([0, 0, 3]))
    for _ in range(draw(st.integers(1, 3))):
        segments.append(Segment(start, tuple(draw(st.permutations(pool))[:e])))
        start += draw(st.integers(0, 30))
    last = draw(st.integers(-1, start + 30))
    md = LedgerMetadata(LedgerId.of(1), e, wq, 1, LedgerState.CLOSED, last, 0, tuple(segments))
    end = draw(st.integers(-1, max(last, 0) + 5))
    # The share as the callers compute it (same end), or for another end, or none at all.
    share_end = draw(st.sampled_from([end, last, end + 3, max(-1, end - 3)]))
    shares = expected_by_bookie(md, share_end)
    bookie = draw(st.sampled_from(pool))
    return md, bookie, shares.get(bookie, StripedSet()), end


@settings(max_examples=800, deadline=None)
@given(ledger_bookie_share())
def test_the_one_segment_shortcut_picks_what_the_walk_picks(case: tuple[LedgerMetadata, str, StripedSet, int]) -> None:
    md, bookie, share, end = case
    assert fragment_sample(md, bookie, share, end, 0.0, 100) == sorted(segment_ends(md, bookie, share, end))


def test_a_one_segment_ledger_reads_the_first_and_last_entry_of_each_share() -> None:
    md = LedgerMetadata(LedgerId.of(1), 5, 2, 2, LedgerState.CLOSED, 199, 0, (Segment(0, ("a", "b", "c", "d", "e")),))
    shares = expected_by_bookie(md, 199)
    # Bookie c (index 2) holds the entries written at indexes 1 and 2: 1, 2, 6, 7, ..., 196, 197.
    assert fragment_sample(md, "c", shares["c"], 199, 0.0, 100) == [1, 197]
    assert fragment_sample(md, "a", shares["a"], 199, 0.0, 100) == [0, 199]
