"""Round-robin schedule and striped entry sets: spec vectors and brute-force properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.ranges import RangeSet
from auditor.durability.schedule import (
    expected_by_bookie,
    expected_for_index,
    holds,
    index_residues,
    segment_bookie_residues,
    write_set,
    write_set_bookies,
)
from auditor.durability.striped import Stripe, StripedSet, clip_rangeset


def ids_of(s: StripedSet | Stripe | None) -> list[int]:
    if s is None:
        return []
    return [e for a, b in s.iter_runs() for e in range(a, b + 1)]


def ledger(
    e: int, wq: int, aq: int, last: int, segments: list[tuple[int, list[str]]], state: LedgerState = LedgerState.CLOSED
) -> LedgerMetadata:
    return LedgerMetadata(
        LedgerId.of(1), e, wq, aq, state, last, 0, tuple(Segment(f, tuple(ens)) for f, ens in segments)
    )


# --------------------------------------------------------------------------------------------------
# bookie-protocol.md §6 / §8.5


def test_write_sets_e3_wq2() -> None:
    assert [write_set(e, 3, 2) for e in range(5)] == [(0, 1), (1, 2), (2, 0), (0, 1), (1, 2)]


def test_bookie2_of_e3_wq2_single_entry_ranges() -> None:
    assert expected_for_index(0, 0, 2, 3, 2) is None
    assert expected_for_index(3, 3, 2, 3, 2) is None
    s = expected_for_index(4, 4, 2, 3, 2)
    assert s is not None and s.count() == 1 and ids_of(s) == [4]


def test_write_set_e5_wq3_entry1() -> None:
    assert write_set(1, 5, 3) == (1, 2, 3)


def test_e3_wq3_every_bookie_holds_everything() -> None:
    for i in range(3):
        s = expected_for_index(3, 5, i, 3, 3)
        assert s is not None and ids_of(s) == [3, 4, 5]
        assert s.period == 1  # canonical: a full residue set is a plain range


E5_WQ3_100_122 = {
    0: [100, 103, 104, 105, 108, 109, 110, 113, 114, 115, 118, 119, 120],
    1: [100, 101, 104, 105, 106, 109, 110, 111, 114, 115, 116, 119, 120, 121],
    2: [100, 101, 102, 105, 106, 107, 110, 111, 112, 115, 116, 117, 120, 121, 122],
    3: [101, 102, 103, 106, 107, 108, 111, 112, 113, 116, 117, 118, 121, 122],
    4: [102, 103, 104, 107, 108, 109, 112, 113, 114, 117, 118, 119, 122],
}


@pytest.mark.parametrize("index", range(5))
def test_e5_wq3_100_122(index: int) -> None:
    s = expected_for_index(100, 122, index, 5, 3)
    assert ids_of(s) == E5_WQ3_100_122[index]
    assert s is not None and s.count() == len(E5_WQ3_100_122[index])


def test_holds_matches_write_set_exhaustively() -> None:
    for e_size in range(1, 7):
        for wq in range(1, e_size + 1):
            for entry in range(40):
                ws = write_set(entry, e_size, wq)
                for i in range(e_size):
                    assert holds(i, entry, e_size, wq) == (i in ws)
                    assert (entry % e_size in index_residues(i, e_size, wq)) == (i in ws)


@pytest.mark.parametrize("entry", [2**31 - 1, 2**31, 2**31 + 7, 2**32 + 3, 2**62 + 11, 2**63 - 2])
def test_large_entry_ids_use_exact_arithmetic(entry: int) -> None:
    # Java's hasEntry casts (e + w) to int first and is wrong from 2^31; we must not be.
    for e_size, wq in [(3, 2), (5, 3), (7, 7), (4, 1)]:
        ws = write_set(entry, e_size, wq)
        assert ws == tuple((entry + w) % e_size for w in range(wq))
        for i in range(e_size):
            assert holds(i, entry, e_size, wq) == (i in ws)
            s = expected_for_index(entry - 3, entry + 3, i, e_size, wq)
            assert ids_of(s) == [x for x in range(entry - 3, entry + 4) if holds(i, x, e_size, wq)]


def test_write_set_bookies() -> None:
    assert write_set_bookies(("a", "b", "c", "d"), 3, 3) == ("d", "a", "b")


def test_replicas_check_empty_segments_vector() -> None:
    # AuditorReplicasCheckTest ledger 2: E=4 WQ=3, lastEntryId=2, second (last) segment empty.
    md = ledger(4, 3, 2, 2, [(0, ["b0", "b1", "b2", "b3"]), (3, ["b1", "b2", "b3", "b4"])])
    exp = expected_by_bookie(md)
    assert {b: ids_of(s) for b, s in exp.items()} == {"b0": [0, 2], "b1": [0, 1], "b2": [0, 1, 2], "b3": [1, 2]}


def test_expected_groups_a_bookie_across_segments_and_indexes() -> None:
    md = ledger(3, 2, 2, 11, [(0, ["a", "b", "c"]), (6, ["c", "d", "a"])])
    exp = expected_by_bookie(md)
    want: dict[str, list[int]] = {}
    for e in range(12):
        ens = ("a", "b", "c") if e < 6 else ("c", "d", "a")
        for b in write_set_bookies(ens, e, 2):
            want.setdefault(b, []).append(e)
    assert {b: ids_of(s) for b, s in exp.items()} == want
    assert len(exp["a"].pieces) == 2  # one stripe per segment, different residues


def test_bookie_listed_twice_gets_both_indexes() -> None:
    assert segment_bookie_residues(("a", "b", "a"), 1) == {"a": (0, 2), "b": (1,)}


def test_ledger_of_ten_million_entries_costs_no_enumeration() -> None:
    md = ledger(5, 2, 2, 9_999_999, [(0, ["a", "b", "c", "d", "e"])])
    exp = expected_by_bookie(md)
    assert sum(s.count() for s in exp.values()) == 2 * 10_000_000
    assert exp["a"].run_count() == 2_000_001  # 0 | 4-5 | 9-10 | ... | 9999999
    wiped = exp["a"].difference(RangeSet())
    assert wiped.count() == 4_000_000
    assert wiped.to_text(3) == "0,4-5,9-10,...(+1999998 runs)"


# --------------------------------------------------------------------------------------------------
# Java getUnavailableEntries regressions (bookie-protocol.md §4.2, §8.3): gaps >= 2 between runs


def test_regression_e5_wq2_bookie0_gap_of_three() -> None:
    expected = StripedSet((expected_for_index(0, 10, 0, 5, 2),))  # type: ignore[arg-type]
    assert ids_of(expected) == [0, 4, 5, 9, 10]
    available = RangeSet.from_ids([0, 4, 5, 9, 10])
    assert not expected.difference(available)  # Java reports [4, 5, 9, 10]


def test_regression_1_2_6() -> None:
    expected = StripedSet.from_rangeset(RangeSet.from_ids([1, 2, 6]))
    assert not expected.difference(RangeSet.from_ids([1, 2, 6]))  # Java reports [6]
    striped = StripedSet((expected_for_index(0, 6, 2, 5, 2),))  # type: ignore[arg-type]
    assert ids_of(striped) == [1, 2, 6]
    assert not striped.difference(RangeSet.from_ids([1, 2, 6]))


def test_regression_every_third() -> None:
    expected = StripedSet((expected_for_index(0, 9, 0, 3, 1),))  # type: ignore[arg-type]
    assert ids_of(expected) == [0, 3, 6, 9]
    assert not expected.difference(RangeSet.from_ids([0, 3, 6, 9]))  # Java reports [3, 6, 9]


def test_gaps_of_one_were_always_fine() -> None:
    expected = StripedSet((expected_for_index(0, 4, 0, 2, 1),))  # type: ignore[arg-type]
    assert not expected.difference(RangeSet.from_ids([0, 2, 4]))


def test_difference_reports_the_real_hole_after_wide_gaps() -> None:
    expected = StripedSet((expected_for_index(0, 24, 0, 5, 2),))  # type: ignore[arg-type]
    have = [e for e in ids_of(expected) if e != 15]
    assert ids_of(expected.difference(RangeSet.from_ids(have))) == [15]


# --------------------------------------------------------------------------------------------------
# Stripe / StripedSet basics


def test_stripe_make_is_canonical() -> None:
    assert Stripe.make(0, 9, 3, [0, 1, 2]) == Stripe(0, 9)
    assert Stripe.make(1, 9, 5, [0]) == Stripe(5, 5, 5, (0,))
    assert Stripe.make(1, 3, 5, [0]) is None
    assert Stripe.make(5, 4) is None
    assert Stripe.make(0, 20, 5, [7]) == Stripe(2, 17, 5, (2,))  # residues are taken mod the period


def test_text_and_limits() -> None:
    s = StripedSet.striped(0, 99, 10, [0, 1, 5])
    assert s.to_text(3) == "0-1,5,10-11,...(+17 runs)"
    assert s.run_count() == 20
    assert s.to_rangeset().to_text() == ",".join(f"{a}-{a + 1},{a + 5}" for a in range(0, 100, 10))
    with pytest.raises(ValueError):
        s.to_rangeset(max_runs=5)
    assert StripedSet().to_text() == ""


def test_pieces_that_touch_merge_runs() -> None:
    s = StripedSet.of([Stripe(0, 4), Stripe.make(5, 9, 2, [1])])
    assert list(s.iter_runs()) == [(0, 5), (7, 7), (9, 9)]
    assert s.run_count() == 3


def test_overlapping_pieces_are_rejected() -> None:
    with pytest.raises(ValueError):
        StripedSet.of([Stripe(0, 5), Stripe(5, 9)])


def test_adjacent_compatible_pieces_merge() -> None:
    a = Stripe.make(0, 9, 5, [0, 1])
    b = Stripe.make(10, 19, 5, [0, 1])
    assert StripedSet.of([a, b]).pieces == (Stripe(0, 16, 5, (0, 1)),)


def test_wrapping_run() -> None:
    s = Stripe.make(0, 14, 5, [4, 0])
    assert s is not None
    assert list(s.iter_runs()) == [(0, 0), (4, 5), (9, 10), (14, 14)]
    assert s.run_count() == 4


def test_clip_rangeset_matches_rangeset_clip() -> None:
    rs = RangeSet.of([(0, 4), (8, 9), (15, 30)])
    for a in range(-2, 33):
        for b in range(a - 1, 33):
            assert clip_rangeset(rs, a, b) == rs.clip(a, b)


# --------------------------------------------------------------------------------------------------
# Properties against a brute-force model


@st.composite
def striped_sets(draw: st.DrawFn) -> tuple[StripedSet, set[int], int]:
    pos = draw(st.integers(0, 5))
    offset = draw(st.sampled_from([0, 0, 2**31 - 20, 2**40]))
    pieces = []
    ids: set[int] = set()
    for _ in range(draw(st.integers(0, 4))):
        p = draw(st.integers(1, 7))
        res = draw(st.sets(st.integers(0, p - 1), min_size=1, max_size=p))
        a = pos + offset
        b = a + draw(st.integers(0, 30))
        pos = b - offset + draw(st.integers(1, 4))
        s = Stripe.make(a, b, p, res)
        if s is not None:
            pieces.append(s)
            ids |= {e for e in range(a, b + 1) if e % p in res}
    return StripedSet.of(pieces), ids, offset


@st.composite
def sets_with_answers(draw: st.DrawFn) -> tuple[StripedSet, set[int], RangeSet, set[int]]:
    ss, ids, offset = draw(striped_sets())
    hi = (max(ids) if ids else offset) + 6
    lo = max(0, (min(ids) if ids else offset) - 6)
    mode = draw(st.sampled_from(["exact", "holes", "random", "superset"]))
    if mode == "exact":
        avail = set(ids)
    elif mode == "holes":
        avail = set(ids) - set(draw(st.lists(st.sampled_from(sorted(ids)), max_size=3))) if ids else set()
    elif mode == "superset":
        avail = set(ids) | set(draw(st.lists(st.integers(lo, hi), max_size=10)))
    else:
        avail = set(draw(st.lists(st.integers(lo, hi), max_size=40)))
    return ss, ids, RangeSet.from_ids(avail), avail


@settings(max_examples=400, deadline=None)
@given(striped_sets())
def test_striped_set_model(case: tuple[StripedSet, set[int], int]) -> None:
    ss, ids, _ = case
    assert ss.count() == len(ids)
    runs = list(ss.iter_runs())
    assert [e for a, b in runs for e in range(a, b + 1)] == sorted(ids)
    assert all(c > b + 1 for (_, b), (c, _) in zip(runs, runs[1:]))  # maximal runs
    assert ss.run_count() == len(runs)
    assert ss.to_rangeset() == RangeSet.from_ids(ids)
    if ids:
        lo, hi = min(ids), max(ids)
        for e in range(lo - 2, hi + 3):
            assert (e in ss) == (e in ids)
        assert (ss.first, ss.last) == (lo, hi)
        mid = (lo + hi) // 2
        assert ids_of(ss.clip(lo, mid)) == sorted(e for e in ids if e <= mid)


@settings(max_examples=500, deadline=None)
@given(sets_with_answers())
def test_difference_intersection_excess_model(case: tuple[StripedSet, set[int], RangeSet, set[int]]) -> None:
    ss, ids, rs, avail = case
    assert ids_of(ss.difference(rs)) == sorted(ids - avail)
    assert ss.difference(rs).count() == len(ids - avail)
    assert ids_of(ss.intersection(rs)) == sorted(ids & avail)
    assert ss.count_present(rs) == len(ids & avail)
    assert ids_of(ss.subtract_from(rs)) == sorted(avail - ids)
    if ss.equals_rangeset(rs):
        assert ids == avail


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 8).flatmap(lambda e: st.tuples(st.just(e), st.integers(1, e), st.integers(0, e - 1))),
    st.integers(0, 2**63 - 200),
    st.integers(0, 60),
)
def test_equals_rangeset_recognises_the_exact_answer(params: tuple[int, int, int], first: int, length: int) -> None:
    e, wq, i = params
    s = expected_for_index(first, first + length, i, e, wq)
    if s is None:
        return
    ss = StripedSet((s,))
    assert ss.equals_rangeset(ss.to_rangeset())
    assert not ss.difference(ss.to_rangeset())
    assert not ss.subtract_from(ss.to_rangeset())


def test_equals_rangeset_with_touching_segments() -> None:
    # A bookie at different indexes in consecutive segments: its runs merge across the boundary in the
    # RangeSet; the healthy-answer shortcut must still recognise the answer.
    pool = [f"b{i}" for i in range(8)]
    md = ledger(5, 3, 2, 9_999, [(k * 200, pool[k % 4 : k % 4 + 5]) for k in range(50)])
    for bookie, exp in expected_by_bookie(md).items():
        answer = exp.to_rangeset()
        assert exp.equals_rangeset(answer), bookie
        assert not exp.difference(answer) and not exp.subtract_from(answer)
        damaged = answer.difference(RangeSet.span(5_000, 5_010))
        assert exp.equals_rangeset(damaged) == (damaged == answer)
        assert exp.difference(damaged).count() == len(answer) - len(damaged)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 6).flatmap(lambda e: st.tuples(st.just(e), st.integers(1, e))),
    st.sampled_from([0, 3, 2**31 - 4, 2**62]),
    st.integers(-2, 40),
    st.one_of(st.none(), st.integers(-1, 45)),
    st.booleans(),
    st.data(),
)
def test_one_segment_shares_are_the_schedule_entry_by_entry(
    quorum: tuple[int, int], base: int, length: int, end: int | None, closed: bool, data: st.DataObject
) -> None:
    """`expected_by_bookie` of a one-segment ledger (its own quick path): every entry in [first, end] on
    exactly its write set's bookies, a bookie listed twice once, nothing past the end, nothing empty."""
    e, wq = quorum
    pool = [f"b{i}" for i in range(e + 2)]
    ensemble = data.draw(st.lists(st.sampled_from(pool), min_size=e, max_size=e))
    first = base + data.draw(st.integers(0, 3))
    last = base + length
    md = ledger(
        e, wq, wq, last if closed else -1, [(first, ensemble)], LedgerState.CLOSED if closed else LedgerState.OPEN
    )
    stop = md.last_entry_id if end is None else base + end
    got = expected_by_bookie(md, None if end is None else stop)
    want: dict[str, set[int]] = {}
    for entry in range(first, stop + 1):
        for b in write_set_bookies(tuple(ensemble), entry, wq):
            want.setdefault(b, set()).add(entry)
    assert {b: set(s.to_rangeset()) for b, s in got.items()} == want
    assert all(len(s.pieces) == 1 for s in got.values())
