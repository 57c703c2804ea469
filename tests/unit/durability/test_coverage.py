"""Quorum coverage: spec scenarios, Java-bug regressions, and a brute-force per-entry model."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.durability import coverage as coverage_module
from auditor.durability.coverage import (
    ENTRY_CATEGORIES,
    UNKNOWN,
    Answer,
    analyze_coverage,
    copies_category,
    recovery_negative_threshold,
)
from auditor.durability.findings import Category
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.ranges import RangeSet
from auditor.durability.schedule import expected_by_bookie
from auditor.durability.striped import StripedSet
from auditor.durability.verdicts import durability_findings

NO, ACK, WRITE = Category.ENTRY_NO_REPLICA, Category.ENTRY_BELOW_ACK_QUORUM, Category.ENTRY_BELOW_WRITE_QUORUM


def ids_of(s: StripedSet) -> set[int]:
    return {e for a, b in s.iter_runs() for e in range(a, b + 1)}


def ledger(
    e: int,
    wq: int,
    aq: int,
    last: int,
    segments: list[tuple[int, list[str]]],
    state: LedgerState = LedgerState.CLOSED,
    lid: int = 1,
) -> LedgerMetadata:
    return LedgerMetadata(
        LedgerId.of(lid), e, wq, aq, state, last, 0, tuple(Segment(f, tuple(ens)) for f, ens in segments)
    )


def healthy_answers(md: LedgerMetadata, end: int | None = None) -> dict[str, Answer]:
    return {b: s.to_rangeset() for b, s in expected_by_bookie(md, end).items()}


# --------------------------------------------------------------------------------------------------


def test_copies_category_buckets() -> None:
    assert copies_category(0, 3, 2) is NO
    assert copies_category(1, 3, 2) is ACK
    assert copies_category(2, 3, 2) is WRITE
    assert copies_category(3, 3, 2) is None
    assert copies_category(1, 2, 1) is WRITE  # AQ 1: one copy is not below the ack quorum


def test_recovery_threshold_table_from_seed_003() -> None:
    table = {(2, 1): 2, (2, 2): 1, (3, 1): 3, (3, 2): 2, (3, 3): 1, (4, 2): 3, (4, 3): 2, (4, 4): 1}
    for (wq, aq), n in table.items():
        assert recovery_negative_threshold(wq, aq) == n


def test_healthy_ledger_is_clean() -> None:
    md = ledger(5, 3, 2, 99, [(0, list("abcde")), (40, list("fbcde"))])
    cov = analyze_coverage(md, healthy_answers(md))
    assert cov.is_clean and cov.worst is None and not cov.verdict_may_change
    assert cov.least_copies_at_most == cov.least_copies_at_least == 3
    assert cov.entries == 100 and not cov.gaps and not cov.overreplicated


def test_empty_segments_vector_ledger_2_and_3() -> None:
    # bookie-protocol.md §8.5 (AuditorReplicasCheckTest.testReplicasCheckForLedgersWithEmptySegments)
    contents: dict[str, Answer] = {
        "b0": RangeSet.from_ids([0, 2]),
        "b1": RangeSet.from_ids([0, 1]),
        "b2": RangeSet.from_ids([0, 1, 2]),
        "b3": RangeSet.from_ids([1, 2]),
        "b4": RangeSet(),
    }
    l2 = ledger(4, 3, 2, 2, [(0, ["b0", "b1", "b2", "b3"]), (3, ["b1", "b2", "b3", "b4"])])
    cov2 = analyze_coverage(l2, contents)
    assert cov2.worst is None and cov2.is_clean
    ens = ["b0", "b1", "b2", "b3"]
    l3 = ledger(4, 3, 2, 5, [(0, ens), (4, ens), (6, ens)])
    cov3 = analyze_coverage(l3, contents)
    assert cov3.worst is NO
    assert ids_of(cov3.buckets[NO].confirmed) == {3, 4, 5}
    assert cov3.least_copies_at_most == 0


def test_enoledger_is_an_empty_answer() -> None:
    md = ledger(3, 3, 2, 9, [(0, ["a", "b", "c"])])
    answers = healthy_answers(md)
    answers["b"] = RangeSet()
    cov = analyze_coverage(md, answers)
    assert cov.worst is WRITE and cov.buckets[WRITE].confirmed.to_text() == "0-9"
    assert cov.missing_by_bookie() == {"b": 10}
    assert not cov.verdict_may_change


def test_regression_java_gaps_of_two_or_more_are_not_missing() -> None:
    # E=5, WQ=2: each bookie's runs are separated by gaps of 3; Java's loop reports everything after the
    # first gap as missing (bookie-protocol.md §4.2). A healthy ledger must be clean.
    md = ledger(5, 2, 2, 10, [(0, list("abcde"))])
    answers = healthy_answers(md)
    assert answers["a"] == RangeSet.from_ids([0, 4, 5, 9, 10])
    cov = analyze_coverage(md, answers)
    assert cov.is_clean and not cov.gaps


def test_regression_e3_wq1_every_third() -> None:
    md = ledger(3, 1, 1, 9, [(0, list("abc"))])
    answers = healthy_answers(md)
    assert answers["a"] == RangeSet.from_ids([0, 3, 6, 9])
    assert analyze_coverage(md, answers).is_clean


def test_one_missing_entry_and_one_unknown_bookie() -> None:
    # Java's "third bookie errors" case: it ignores the unreachable bookie and says WQ-1.
    md = ledger(3, 3, 2, 5, [(0, ["a", "b", "c"])])
    answers = healthy_answers(md)
    answers["a"] = RangeSet.from_ids([0, 1, 3, 4, 5])  # lost entry 2
    answers["c"] = UNKNOWN
    cov = analyze_coverage(md, answers)
    assert cov.worst is WRITE  # confirmed: at most 2 copies of entry 2
    assert cov.worst_possible is ACK  # if c lacks it too, only 1 copy
    assert cov.verdict_may_change
    assert cov.unknown_bookies == ("c",)
    assert ids_of(cov.buckets[WRITE].confirmed) == {2}
    assert ids_of(cov.buckets[ACK].possible) == {2}
    assert ids_of(cov.entries_with_unknown_copies) == set(range(6))


def test_bookie_missing_from_answers_is_unknown() -> None:
    md = ledger(3, 2, 2, 5, [(0, ["a", "b", "c"])])
    answers = healthy_answers(md)
    del answers["b"]
    cov = analyze_coverage(md, answers)
    assert cov.unknown_bookies == ("b",)
    assert cov.worst is None and cov.worst_possible is ACK


def test_unknown_bookie_that_should_hold_nothing_is_ignored() -> None:
    md = ledger(5, 2, 2, 1, [(0, list("abcde"))])  # two entries: only a, b, c hold something
    answers = healthy_answers(md)
    answers["e"] = UNKNOWN
    cov = analyze_coverage(md, answers)
    assert cov.unknown_bookies == () and cov.is_clean


def test_overreplicated_and_beyond_end() -> None:
    md = ledger(3, 2, 2, 8, [(0, ["a", "b", "c"])])
    answers = healthy_answers(md)
    answers["a"] = RangeSet.span(0, 12)  # holds everything plus entries past the end
    answers["z"] = RangeSet.from_ids([4])  # not in any ensemble
    cov = analyze_coverage(md, answers)
    assert cov.is_clean
    assert ids_of(cov.overreplicated["a"]) == {e for e in range(9) if e % 3 == 1}
    assert cov.beyond_end["a"] == RangeSet.span(9, 12)
    assert ids_of(cov.overreplicated["z"]) == {4}


def test_segment_switch_bookie_keeps_old_entries() -> None:
    md = ledger(3, 3, 2, 9, [(0, ["a", "b", "c"]), (5, ["a", "d", "c"])])
    answers = healthy_answers(md)
    answers["b"] = RangeSet.span(0, 6)  # in-flight entries 5, 6 reached b before the ensemble change
    cov = analyze_coverage(md, answers)
    assert cov.is_clean and ids_of(cov.overreplicated["b"]) == {5, 6}


def test_large_entry_ids() -> None:
    base = 2**31 - 3
    md = ledger(3, 2, 2, base + 10, [(base - 9, ["a", "b", "c"]), (base, ["d", "b", "c"])])
    answers = healthy_answers(md)
    answers["d"] = RangeSet()
    cov = analyze_coverage(md, answers)
    want = {e for e in range(base, base + 11) if e % 3 in (0, 2)}
    assert ids_of(cov.buckets[ACK].confirmed) == want  # one copy left of WQ 2, AQ 2
    assert cov.worst is ACK and cov.missing_by_bookie() == {"d": len(want)}


def test_duplicate_bookie_in_ensemble_is_one_copy() -> None:
    md = ledger(3, 2, 2, 5, [(0, ["a", "a", "c"])])
    answers = {b: RangeSet.span(0, 5) for b in "ac"}
    cov = analyze_coverage(md, answers)
    assert cov.duplicate_bookies == ((0, "a"),)
    # entries 0 and 3 have write set (a, a): one copy, below the ack quorum of 2
    assert ids_of(cov.buckets[ACK].confirmed) == {0, 3} and cov.worst is ACK


def test_ensemble_of_wrong_size_is_rejected() -> None:
    md = ledger(3, 2, 2, 5, [(0, ["a", "b"])])
    with pytest.raises(ValueError):
        analyze_coverage(md, {})


def test_closed_empty_ledger() -> None:
    md = ledger(3, 2, 2, -1, [(0, ["a", "b", "c"])])
    cov = analyze_coverage(md, {"a": RangeSet()})
    assert cov.entries == 0 and cov.worst is None and cov.least_copies_at_most is None


# --------------------------------------------------------------------------------------------------
# Open ledgers: truncation risk (seed 003)


def test_seed_003_truncation_example() -> None:
    # WQ=3 AQ=2; entry 10 reached only b1 and b3 (ensemble change); then b1 lost it; LAC is 100.
    md = ledger(3, 3, 2, -1, [(0, ["b1", "b2", "b3"])], state=LedgerState.OPEN)
    answers: dict[str, Answer] = {b: RangeSet.span(0, 100) for b in ("b1", "b2", "b3")}
    answers["b1"] = RangeSet.of([(0, 9), (11, 100)])
    answers["b2"] = RangeSet.of([(0, 9), (11, 100)])
    cov = analyze_coverage(md, answers, end=100)
    assert cov.truncation.threshold == 2
    assert cov.truncation.point == 10
    assert ids_of(cov.truncation.confirmed) == {10}
    assert cov.worst is ACK  # and entry 10 has a single copy left
    # With b2 unreachable instead, the risk is only possible.
    answers["b2"] = UNKNOWN
    cov = analyze_coverage(md, answers, end=100)
    assert cov.truncation.point is None and cov.truncation.possible_point == 10
    assert cov.truncation_may_change


def test_wq_equals_aq_one_lost_copy_is_enough() -> None:
    md = ledger(2, 2, 2, -1, [(0, ["a", "b"])], state=LedgerState.OPEN)
    answers: dict[str, Answer] = {"a": RangeSet.span(0, 50), "b": RangeSet.of([(0, 19), (21, 50)])}
    cov = analyze_coverage(md, answers, end=50)
    assert cov.truncation.point == 20


def test_open_ledger_healthy_has_no_truncation() -> None:
    md = ledger(3, 2, 2, -1, [(0, ["a", "b", "c"])], state=LedgerState.OPEN)
    answers = healthy_answers(md, 30)
    answers["a"] = RangeSet.span(0, 40)  # entries past the LAC are in flight: not over-replication
    cov = analyze_coverage(md, answers, end=30)
    assert not cov.truncation.possible and cov.is_clean
    assert "a" in cov.beyond_end


# --------------------------------------------------------------------------------------------------
# Brute-force model


def brute(md: LedgerMetadata, answers: dict[str, Answer], end: int) -> dict[str, object]:
    e_size, wq, aq = md.ensemble_size, md.write_quorum, md.ack_quorum
    conf: dict[Category, set[int]] = {c: set() for c in ENTRY_CATEGORIES}
    poss: dict[Category, set[int]] = {c: set() for c in ENTRY_CATEGORIES}
    tconf: set[int] = set()
    tposs: set[int] = set()
    unk: set[int] = set()
    lmax = lmin = None
    for span in md.spans(end):
        for entry in span.entries:
            members = list(dict.fromkeys(span.ensemble[(entry + w) % e_size] for w in range(wq)))
            p = m = u = 0
            for b in members:
                a = answers.get(b, UNKNOWN)
                if not isinstance(a, RangeSet):
                    u += 1
                elif entry in a:
                    p += 1
                else:
                    m += 1
            lmax = p + u if lmax is None else min(lmax, p + u)
            lmin = p if lmin is None else min(lmin, p)
            c = copies_category(p + u, wq, aq)
            if c:
                conf[c].add(entry)
            c = copies_category(p, wq, aq)
            if c:
                poss[c].add(entry)
            if m >= wq - aq + 1:
                tconf.add(entry)
            if m + u >= wq - aq + 1:
                tposs.add(entry)
            if u:
                unk.add(entry)
    return {"conf": conf, "poss": poss, "tconf": tconf, "tposs": tposs, "unk": unk, "lmax": lmax, "lmin": lmin}


@st.composite
def ledgers_with_answers(draw: st.DrawFn) -> tuple[LedgerMetadata, dict[str, Answer], int | None]:
    e_size = draw(st.integers(1, 5))
    wq = draw(st.integers(1, e_size))
    aq = draw(st.integers(1, wq))
    offset = draw(st.sampled_from([0, 0, 0, 2**31 - 8]))
    pool = [f"b{i}" for i in range(e_size + 3)]
    segments = []
    start = offset
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.integers(0, 19)) == 0:
            ens = tuple(draw(st.lists(st.sampled_from(pool), min_size=e_size, max_size=e_size)))
        else:
            ens = tuple(draw(st.permutations(pool))[:e_size])
        segments.append(Segment(start, ens))
        start += draw(st.integers(0, 14))
    is_open = draw(st.booleans())
    last = offset + draw(st.integers(-1, 40))
    md = LedgerMetadata(
        LedgerId.of(9),
        e_size,
        wq,
        aq,
        LedgerState.OPEN if is_open else LedgerState.CLOSED,
        -1 if is_open else last,
        0,
        tuple(segments),
    )
    end = last if is_open else None
    stop = last
    expected = expected_by_bookie(md, end)
    answers: dict[str, Answer] = {}
    for b in pool:
        kind = draw(st.sampled_from(["exact", "exact", "holes", "random", "unknown", "absent", "enoledger"]))
        exp = sorted(e for a, z in expected[b].iter_runs() for e in range(a, z + 1)) if b in expected else []
        if kind == "exact":
            answers[b] = RangeSet.from_ids(exp)
        elif kind == "holes":
            drop = set(draw(st.lists(st.sampled_from(exp), max_size=4))) if exp else set()
            answers[b] = RangeSet.from_ids(set(exp) - drop)
        elif kind == "random":
            answers[b] = RangeSet.from_ids(draw(st.lists(st.integers(offset, stop + 4), max_size=30)))
        elif kind == "unknown":
            answers[b] = UNKNOWN
        elif kind == "enoledger":
            answers[b] = RangeSet()
    return md, answers, end


@settings(max_examples=600, deadline=None)
@given(ledgers_with_answers())
def test_coverage_matches_brute_force(case: tuple[LedgerMetadata, dict[str, Answer], int | None]) -> None:
    md, answers, end = case
    cov = analyze_coverage(md, answers, end)
    stop = md.last_entry_id if end is None else end
    want = brute(md, answers, stop)
    assert cov.least_copies_at_most == want["lmax"]
    assert cov.least_copies_at_least == want["lmin"]
    for c in ENTRY_CATEGORIES:
        assert ids_of(cov.buckets[c].confirmed) == want["conf"][c]  # type: ignore[index]
        assert ids_of(cov.buckets[c].possible) == want["poss"][c]  # type: ignore[index]
    assert ids_of(cov.truncation.confirmed) == want["tconf"]
    assert ids_of(cov.truncation.possible) == want["tposs"]
    assert ids_of(cov.entries_with_unknown_copies) == want["unk"]
    # worst categories are those of the least copies; may-change iff the views disagree
    assert cov.worst == (
        None
        if want["lmax"] is None
        else copies_category(
            want["lmax"],
            md.write_quorum,  # type: ignore[arg-type]
            md.ack_quorum,
        )
    )
    # per-bookie gaps: expected minus answer, per segment
    expected = expected_by_bookie(md, end)
    missing: dict[str, set[int]] = {}
    for g in cov.gaps:
        missing.setdefault(g.bookie, set()).update(ids_of(g.missing))
    for b, exp in expected.items():
        a = answers.get(b, UNKNOWN)
        if isinstance(a, RangeSet):
            assert missing.get(b, set()) == ids_of(exp) - set(a)
            over = {e for e in a if e <= stop} - ids_of(exp)
            assert ids_of(cov.overreplicated.get(b, StripedSet())) == over
        else:
            assert b in cov.unknown_bookies


@st.composite
def mostly_exact_answers(draw: st.DrawFn) -> tuple[LedgerMetadata, dict[str, Answer], int | None]:
    """What a scan usually meets: only the bookies that should hold something answer, nearly always with
    exactly that; now and then one answer differs (a hole, an entry past the end, unknown, an outsider, a
    read sample that found nothing absent: the whole span asked about, an entry it should not hold)."""
    md, _, end = draw(ledgers_with_answers())
    expected = expected_by_bookie(md, end)
    answers: dict[str, Answer] = {b: s.to_rangeset() for b, s in expected.items()}
    stop = md.last_entry_id if end is None else end
    if answers and draw(st.integers(0, 3)) == 0:
        b = draw(st.sampled_from(sorted(answers)))
        kind = draw(st.sampled_from(["hole", "beyond", "unknown", "outsider", "empty", "span", "extra"]))
        a = answers[b]
        assert isinstance(a, RangeSet)
        if kind == "span" and a:
            assert a.first is not None and a.last is not None
            answers[b] = RangeSet.span(a.first, a.last)
        elif kind == "extra":
            answers[b] = a | RangeSet.from_ids([draw(st.integers(0, max(stop, 0)))])
        elif kind == "hole" and a:
            answers[b] = a - RangeSet.from_ids([draw(st.sampled_from(list(a)))])
        elif kind == "beyond":
            answers[b] = a | RangeSet.from_ids([stop + draw(st.integers(1, 3))])
        elif kind == "unknown":
            answers[b] = UNKNOWN
        elif kind == "outsider":
            answers["outsider"] = RangeSet.from_ids(draw(st.lists(st.integers(0, max(stop, 0)), max_size=3)))
        else:
            answers[b] = RangeSet()
    return md, answers, end


@settings(max_examples=600, deadline=None)
@given(mostly_exact_answers())
def test_the_shortcut_for_exact_answers_gives_what_the_sweep_gives(
    case: tuple[LedgerMetadata, dict[str, Answer], int | None],
) -> None:
    md, answers, end = case
    try:
        slow = analyze_coverage(md, answers, end, shortcut=False)
    except ValueError as exc:
        with pytest.raises(ValueError, match=str(exc)[:20]):
            analyze_coverage(md, answers, end)
        return
    assert analyze_coverage(md, answers, end) == slow


@settings(max_examples=600, deadline=None)
@given(st.one_of(ledgers_with_answers(), mostly_exact_answers()), st.data())
def test_answers_the_caller_found_exact_are_judged_as_the_sweep_judges_them(
    case: tuple[LedgerMetadata, dict[str, Answer], int | None], data: st.DataObject
) -> None:
    """`exact`: bookies whose whole answer the caller found to be exactly their share (a scan, as it
    decoded their lists) are not compared again; the coverage is what the sweep makes of the answers."""
    md, answers, end = case
    try:
        expected = expected_by_bookie(md, end)
        slow = analyze_coverage(md, answers, end, shortcut=False)
    except ValueError:
        return
    exact = [b for b, a in answers.items() if b in expected and a == expected[b].to_rangeset()]
    known = data.draw(st.lists(st.sampled_from(exact), unique=True)) if exact else []
    assert analyze_coverage(md, answers, end, expected, known_exact=known) == slow


@settings(max_examples=400, deadline=None)
@given(st.one_of(ledgers_with_answers(), mostly_exact_answers()), st.booleans())
def test_answers_from_reads_skip_only_what_bookies_hold_beyond_their_shares(
    case: tuple[LedgerMetadata, dict[str, Answer], int | None], shortcut: bool
) -> None:
    """`beyond_share=False` (the verdict's choice for answers from reads) leaves out over-replication and
    entries past the end, and nothing else; a read-based verdict is the same either way."""
    md, answers, end = case
    try:
        full = analyze_coverage(md, answers, end, shortcut=shortcut)
    except ValueError:
        return
    lean = analyze_coverage(md, answers, end, shortcut=shortcut, beyond_share=False)
    assert not lean.overreplicated and not lean.beyond_end
    assert lean == dataclasses.replace(full, overreplicated={}, beyond_end={})
    for method in ("read", "entry-list+read"):
        assert durability_findings(md, lean, method=method) == durability_findings(md, full, method=method)


def test_a_read_sample_that_found_nothing_absent_takes_the_shortcut(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger check's usual answer of an E > WQ ledger's bookie: the whole span it was asked about
    (unscheduled entries included). Judged without the sweep, with the same coverage as the sweep's."""
    md = ledger(5, 2, 2, 199, [(0, ["a", "b", "c", "d", "e"])])
    answers: dict[str, Answer] = {}
    for b, share in expected_by_bookie(md, None).items():
        assert share.first is not None and share.last is not None
        answers[b] = RangeSet.span(share.first, share.last)
    slow = analyze_coverage(md, answers, shortcut=False)
    assert slow.is_clean and slow.least_copies_at_most == 2 and set(slow.overreplicated) == set(answers)

    def no_sweep(*_: object) -> None:
        raise AssertionError("the sweep ran")

    monkeypatch.setattr(coverage_module, "_Sweep", no_sweep)
    assert analyze_coverage(md, answers) == slow
    answers["c"] = answers["c"] - RangeSet.from_ids([7])  # an entry c should hold, read and found absent
    with pytest.raises(AssertionError, match="the sweep ran"):
        analyze_coverage(md, answers)


def test_the_shortcut_is_taken_for_a_healthy_ledger_and_its_coverage_is_clean() -> None:
    md = ledger(5, 2, 2, 99, [(0, ["a", "b", "c", "d", "e"]), (40, ["a", "b", "f", "d", "e"])])
    cov = analyze_coverage(md, healthy_answers(md))
    assert cov.is_clean and cov.least_copies_at_most == cov.least_copies_at_least == 2 and cov.entries == 100
    assert cov.answered == ("a", "b", "c", "d", "e", "f") and not cov.gaps and not cov.overreplicated
    assert cov == analyze_coverage(md, healthy_answers(md), shortcut=False)
