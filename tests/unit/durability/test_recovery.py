"""Ledger recovery's decisions (auditor.durability.recovery) against the rules of seed 003 and Java's
RRQuorumCoverageSet / sequential recovery reads (spec repair-and-recovery.md §4)."""

from __future__ import annotations

from itertools import combinations

import pytest

from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.recovery import (
    EntryFate,
    FenceAnswer,
    Reply,
    close_length,
    closed_metadata_segments,
    entry_fate,
    fencing_covered,
    lac_from_fencing,
    read_order,
    truncation_refusal,
    write_back_segment,
)

P, N, U = Reply.POSITIVE, Reply.NEGATIVE, Reply.UNKNOWN


def md(e: int, wq: int, aq: int, segments: tuple[Segment, ...]) -> LedgerMetadata:
    return LedgerMetadata(LedgerId.of(7), e, wq, aq, LedgerState.IN_RECOVERY, -1, 0, segments, version=3)


def min_definitive(e: int, wq: int, aq: int) -> int:
    for k in range(e + 1):
        for answered in combinations(range(e), k):
            if fencing_covered(e, wq, aq, dict.fromkeys(answered, N)):
                return k
    raise AssertionError("never covered")


@pytest.mark.parametrize(
    ("e", "wq", "aq", "least"),
    [(3, 3, 2, 2), (3, 2, 2, 2), (3, 2, 1, 3), (4, 2, 2, 2), (5, 3, 2, 4), (6, 3, 2, 4), (5, 5, 3, 3)],
)
def test_fencing_coverage_needs_the_spec_tables_least_definitive_answers(e: int, wq: int, aq: int, least: int) -> None:
    assert min_definitive(e, wq, aq) == least


def test_fencing_coverage_is_per_window_not_a_count() -> None:
    # E4 WQ2 AQ2: {0,2} answering leaves every window {i,i+1} one unknown; {0,1} leaves {2,3} unfenced.
    assert fencing_covered(4, 2, 2, {0: P, 2: N})
    assert not fencing_covered(4, 2, 2, {0: P, 1: N})
    # An answer that is not definitive counts as none.
    assert not fencing_covered(3, 3, 2, {0: P, 1: U, 2: U})
    assert fencing_covered(3, 3, 2, {0: P, 1: N, 2: U})


def test_reading_starts_at_the_highest_verified_lac_or_the_last_segments_floor() -> None:
    m = md(3, 2, 2, (Segment(0, ("a", "b", "c")), Segment(10, ("a", "d", "c"))))
    answers = [
        FenceAnswer(0, "a", P, entry_id=14, lac=13, length=150),
        FenceAnswer(1, "d", P, entry_id=15, lac=13, length=160),  # same LAC: the first in ensemble order stays
        FenceAnswer(2, "c", U),
    ]
    start = lac_from_fencing(m, answers)
    assert start.lac == 13 and start.source is not None and start.source.bookie == "a"
    # Nothing verified beyond the previous segments: the entry before the last segment's first.
    assert lac_from_fencing(m, [FenceAnswer(0, "a", P, entry_id=11, lac=8, length=120)]).lac == 9
    assert lac_from_fencing(m, [FenceAnswer(0, "a", N)]).lac == 9
    assert lac_from_fencing(md(3, 2, 2, (Segment(0, ("a", "b", "c")),)), []).lac == -1


@pytest.mark.parametrize(
    ("wq", "aq", "replies", "fate"),
    [
        (3, 2, [N], None),  # one denial of three: AQ 2 could still hold it
        (3, 2, [N, N], EntryFate.ABSENT),  # WQ - AQ + 1 = 2 denials
        (3, 2, [N, P], EntryFate.PRESENT),  # one verified copy is enough
        (3, 2, [U, N, U], EntryFate.UNKNOWN),  # below the threshold with everyone asked: unknown
        (3, 2, [U, U], None),
        (2, 2, [N], EntryFate.ABSENT),  # WQ == AQ: one denial
        (2, 1, [N, U], EntryFate.UNKNOWN),  # AQ 1: every member must deny it
        (2, 1, [N, N], EntryFate.ABSENT),
        (3, 3, [U, U, P], EntryFate.PRESENT),
    ],
)
def test_entry_fate_follows_javas_sequential_recovery_read(
    wq: int, aq: int, replies: list[Reply], fate: EntryFate | None
) -> None:
    assert entry_fate(wq, aq, replies) is fate


def test_unregistered_members_are_asked_last_in_write_set_order_otherwise() -> None:
    m = md(3, 2, 2, (Segment(0, ("a", "b", "c")),))
    assert read_order(m, 10, {"a", "b", "c"}) == [(1, "b"), (2, "c")]
    assert read_order(m, 10, {"a", "c"}) == [(2, "c"), (1, "b")]
    assert read_order(m, 11, {"b", "c"}) == [(2, "c"), (0, "a")]


def test_truncation_is_refused_below_the_proven_end_only() -> None:
    assert (
        truncation_refusal(9, 9) is None and truncation_refusal(12, 9) is None and truncation_refusal(3, None) is None
    )
    why = truncation_refusal(8, 10)
    assert why is not None and "9..10" in why


def test_length_is_the_close_points_own() -> None:
    assert close_length(12, 1300, {}) == 1300  # the last recovered entry's header length
    assert close_length(-1, None, {}) == 0
    assert close_length(9, None, {9: 1000, 10: 1100}) == 1000
    # Java would keep 1100 (the LAC answer's own entry 10, past the close point); ours reads entry 9.
    assert close_length(9, None, {10: 1100}) is None


def test_write_back_segment_replaces_unregistered_members_from_the_first_recovered_entry() -> None:
    m = md(3, 2, 2, (Segment(0, ("a", "b", "c")),))
    assert write_back_segment(m, 10, {}) is None
    new = write_back_segment(m, 10, {1: "d"})
    assert new == Segment(10, ("a", "d", "c"))
    assert closed_metadata_segments(m.segments, new) == (Segment(0, ("a", "b", "c")), new)
    # A last segment starting where recovery writes is replaced, not followed (Java does the same).
    same = write_back_segment(m, 0, {1: "d"})
    assert closed_metadata_segments(m.segments, same) == (Segment(0, ("a", "d", "c")),)
    with pytest.raises(ValueError, match="precedes"):
        closed_metadata_segments((Segment(0, ("a",)), Segment(5, ("b",))), Segment(3, ("c",)))
