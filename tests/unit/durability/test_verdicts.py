"""BP-34 verdicts: risky quorums, UR age, contract findings, triage, metadata re-read, composition."""

from __future__ import annotations

import dataclasses

import pytest

from auditor.durability.coverage import UNKNOWN, Answer, analyze_coverage
from auditor.durability.findings import Category, Finding, Method, Severity
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.placement import PlacementPolicy
from auditor.durability.ranges import RangeSet
from auditor.durability.schedule import expected_by_bookie
from auditor.durability.verdicts import (
    Disposition,
    assess_quorum,
    compare_metadata,
    confirm,
    confirm_damage,
    durability_findings,
    risky_quorum_finding,
    scrutinize_ledger,
    triage,
    underreplicated_finding,
    underreplicated_too_long,
    unreachable_bookie_finding,
)


def ledger(
    e: int = 3,
    wq: int = 3,
    aq: int = 2,
    last: int = 9,
    segments: list[tuple[int, list[str]]] | None = None,
    state: LedgerState = LedgerState.CLOSED,
    version: int | None = 4,
    lid: int = 1,
) -> LedgerMetadata:
    segments = segments or [(0, ["a", "b", "c"][:e] + [f"x{i}" for i in range(e - 3)])]
    return LedgerMetadata(
        LedgerId.of(lid),
        e,
        wq,
        aq,
        state,
        last,
        0,
        tuple(Segment(f, tuple(ens)) for f, ens in segments),
        version=version,
    )


def healthy(md: LedgerMetadata, end: int | None = None) -> dict[str, Answer]:
    return {b: s.to_rangeset() for b, s in expected_by_bookie(md, end).items()}


# --------------------------------------------------------------------------------------------------
# (a) risky quorum


@pytest.mark.parametrize(
    "e,wq,aq,codes",
    [
        (3, 3, 2, None),
        (5, 3, 2, None),
        (4, 3, 2, None),
        (3, 2, 1, ("ack_quorum_one",)),
        (2, 1, 1, ("no_replication", "ack_quorum_one", "single_lost_copy_truncates")),
        (3, 2, 2, ("single_lost_copy_truncates",)),
        (2, 2, 2, ("single_lost_copy_truncates", "all_members_ack")),
        (3, 3, 3, ("single_lost_copy_truncates", "all_members_ack")),
        (3, 2, 3, ("invalid",)),
        (2, 3, 2, ("invalid",)),
        (3, 2, 0, ("invalid",)),
    ],
)
def test_assess_quorum(e: int, wq: int, aq: int, codes: tuple[str, ...] | None) -> None:
    risk = assess_quorum(e, wq, aq)
    if codes is None:
        assert risk is None
    else:
        assert risk is not None and risk.codes == codes


def test_quorum_tolerances_from_seed_003() -> None:
    risk = assess_quorum(3, 2, 1)
    assert risk is not None and risk.tolerated_unreachable == 0 and risk.tolerated_lost_copies == 1
    assert risk.severity is Severity.MAJOR
    risk = assess_quorum(3, 3, 3)
    assert risk is not None and risk.tolerated_unreachable == 2 and risk.tolerated_lost_copies == 0
    assert risk.severity is Severity.INFO  # WQ == AQ alone: informational (the Pulsar default)


def test_too_few_writable_bookies() -> None:
    assert assess_quorum(3, 3, 2, writable_bookies=3) is None
    risk = assess_quorum(3, 3, 2, writable_bookies=2)
    assert risk is not None and risk.codes == ("too_few_writable_bookies",)


def test_risky_quorum_finding() -> None:
    f = risky_quorum_finding(ledger(3, 2, 1))
    assert f is not None and f.category is Category.RISKY_QUORUM and f.method == "metadata"
    assert f.detail["codes"] == ["ack_quorum_one"] and f.severity is Severity.MAJOR
    assert risky_quorum_finding(ledger(3, 3, 2)) is None


# --------------------------------------------------------------------------------------------------
# (b) under-replicated too long (Java: whole seconds elapsed > grace)


def test_underreplicated_too_long_boundaries() -> None:
    ctime = 1_700_000_000_000
    assert not underreplicated_too_long(ctime, 60, ctime + 60_999)  # 60 s elapsed, not > 60
    assert underreplicated_too_long(ctime, 60, ctime + 61_000)
    assert not underreplicated_too_long(None, 60, ctime + 10**9)  # marker without ctime
    assert not underreplicated_too_long(-1, 60, ctime + 10**9)
    assert not underreplicated_too_long(ctime, 0, ctime + 10**9)  # grace 0 disables the check
    assert not underreplicated_too_long(ctime, 60, ctime - 10**6)  # clock behind the marker


def test_underreplicated_finding() -> None:
    f = underreplicated_finding(LedgerId.of(3), 1_000_000, 10, 1_000_000 + 3_600_000, missing_replicas=["b", "a"])
    assert f is not None and f.category is Category.UNDERREPLICATED_TOO_LONG
    assert f.detail["age_s"] == 3600 and f.detail["missing_replicas"] == ["a", "b"]
    assert underreplicated_finding(LedgerId.of(3), 1_000_000, 10, 1_000_500) is None


# --------------------------------------------------------------------------------------------------
# (c) durability contract


def test_closed_ledger_reports_only_the_worst_bucket() -> None:
    md = ledger(3, 3, 2, 9)
    answers = healthy(md)
    answers["a"] = RangeSet()  # every entry down to 2 copies
    answers["b"] = RangeSet.span(0, 4)  # entries 5..9 down to 1 copy
    cov = analyze_coverage(md, answers)
    found = durability_findings(md, cov)
    assert [f.category for f in found] == [Category.ENTRY_BELOW_ACK_QUORUM]
    f = found[0]
    assert f.affected_count == 5 and f.affected_ranges == "5-9"
    assert f.detail["buckets"]["entry_below_write_quorum"]["confirmed"] == 5
    assert "least copies 1 of WQ 3" in f.message


def test_overreplication_is_info() -> None:
    md = ledger(3, 2, 2, 9)
    answers = healthy(md)
    answers["a"] = RangeSet.span(0, 12)
    found = durability_findings(md, analyze_coverage(md, answers))
    assert [f.category for f in found] == [Category.OVERREPLICATED]
    assert found[0].severity is Severity.INFO
    assert found[0].detail["bookies"]["a"]["beyond_last_entry"] == 3


@pytest.mark.parametrize("method", [Method.READ, "read-sample", "entry-list+read"])
def test_overreplication_needs_entry_lists_from_every_bookie(method: str | Method) -> None:
    """A read-based answer (a sample taken as holding its whole span above all) says nothing about entries
    outside the schedule: no over-replication finding is made from it."""
    md = ledger(3, 2, 2, 9)
    answers = healthy(md)
    answers["a"] = RangeSet.span(0, 12)
    assert durability_findings(md, analyze_coverage(md, answers), method=method) == []


def test_open_ledger_truncation_and_in_flight_writes() -> None:
    md = ledger(3, 3, 2, -1, state=LedgerState.OPEN)
    answers: dict[str, Answer] = {b: RangeSet.span(0, 100) for b in "abc"}
    answers["c"] = RangeSet.span(0, 98)  # 99, 100 still in flight to c: fine for an open ledger
    cov = analyze_coverage(md, answers, end=100)
    assert durability_findings(md, cov) == []
    assert triage(cov).disposition is Disposition.CLEAN
    answers["a"] = RangeSet.of([(0, 9), (11, 100)])
    answers["b"] = RangeSet.of([(0, 9), (11, 100)])
    cov = analyze_coverage(md, answers, end=100)
    found = {f.category: f for f in durability_findings(md, cov)}
    assert set(found) == {Category.ENTRY_BELOW_ACK_QUORUM, Category.TRUNCATION_RISK}
    t = found[Category.TRUNCATION_RISK]
    assert t.entry_id == 10 and t.detail["entries_lost_if_recovered"] == 91 and t.severity is Severity.CRITICAL


# --------------------------------------------------------------------------------------------------
# (d) triage


def test_triage_clean_report_recheck() -> None:
    md = ledger(3, 3, 2, 9)
    answers = healthy(md)
    assert triage(analyze_coverage(md, answers)).disposition is Disposition.CLEAN
    answers["a"] = RangeSet()
    t = triage(analyze_coverage(md, answers))
    assert t.disposition is Disposition.REPORT and t.unknown_bookies == ()
    answers["b"] = UNKNOWN
    t = triage(analyze_coverage(md, answers))
    assert t.disposition is Disposition.RECHECK and t.unknown_bookies == ("b",)
    assert "could become entry_below_ack_quorum" in t.reasons[0]


def test_triage_unknown_that_cannot_change_the_verdict_is_reportable() -> None:
    md = ledger(3, 3, 2, 9)
    answers: dict[str, Answer] = {"a": RangeSet(), "b": RangeSet(), "c": UNKNOWN}
    # even if c holds everything, entries have at most 1 copy; if not, 0 copies: verdict may change
    assert triage(analyze_coverage(md, answers)).disposition is Disposition.RECHECK
    answers = {"a": RangeSet(), "b": RangeSet(), "c": RangeSet()}
    answers_with_extra_unknown = dict(answers, z=UNKNOWN)  # z is in no ensemble
    t = triage(analyze_coverage(md, answers_with_extra_unknown))
    assert t.disposition is Disposition.REPORT and t.unknown_bookies == ()


# --------------------------------------------------------------------------------------------------
# (e) metadata re-read


def test_compare_metadata() -> None:
    first = ledger()
    assert compare_metadata(first, first).action == "report"
    assert compare_metadata(first, None).action == "drop"
    cases = {
        "znode version": dataclasses.replace(first, version=5),
        "state": dataclasses.replace(first, state=LedgerState.IN_RECOVERY),
        "last entry": dataclasses.replace(first, last_entry_id=20),
        "length": dataclasses.replace(first, length=100),
        "segments": dataclasses.replace(first, segments=first.segments + (Segment(5, ("a", "d", "c")),)),
        "quorum sizes": dataclasses.replace(first, ack_quorum=3),
    }
    for word, changed in cases.items():
        c = compare_metadata(first, changed)
        assert c.changed and c.action == "redo" and any(word in r for r in c.reasons), word
    # an unknown version (not read from ZooKeeper) does not count as a change by itself
    assert compare_metadata(first, dataclasses.replace(first, version=None)).action == "report"


def test_confirm_keeps_what_the_recheck_saw_again() -> None:
    md = ledger(3, 3, 2, 9)
    answers = healthy(md)
    answers["a"] = RangeSet()
    first = durability_findings(md, analyze_coverage(md, answers))
    second = durability_findings(md, analyze_coverage(md, answers))
    fixed = durability_findings(md, analyze_coverage(md, healthy(md)))
    confirmed = confirm(first, second)
    assert len(confirmed) == 1 and confirmed[0].confirmed
    assert confirm(first, fixed) == []


def digest_mismatch(md: LedgerMetadata, entry: int, stored: str, computed: str) -> list[Finding]:
    """A read's finding that entry `entry` on bookie a fails verification with these digests."""
    return [
        Finding.of(
            Category.DIGEST_MISMATCH,
            f"entry {entry} on a fails verification",
            metadata=md,
            bookie="a",
            entry_id=entry,
            method="read",
            detail={"problems": ["digest mismatch"], "storedDigest": stored, "computedDigest": computed},
        )
    ]


def test_a_digest_mismatch_is_confirmed_only_when_the_same_bytes_are_read_again() -> None:
    """Found by the chaos campaign: over a corrupting link both reads of one entry failed verification
    (differently) and a healthy copy was reported as corrupt and marked under-replicated."""
    md = ledger(3, 3, 2, 9)

    def corrupt(stored: str, computed: str) -> list[Finding]:
        return digest_mismatch(md, 4, stored, computed)

    stored_damage = confirm(corrupt("ad49e26e", "14da3899"), corrupt("ad49e26e", "14da3899"))
    assert len(stored_damage) == 1 and stored_damage[0].confirmed
    assert confirm(corrupt("ad49e26e", "14da3899"), corrupt("ad49e26e", "0866975c")) == []
    assert confirm(corrupt("ad49e26e", "14da3899"), corrupt("2bc07a7b", "4523a965")) == []


def test_damage_needs_a_third_identical_read() -> None:
    """Found by the chaos campaign (seed 12, round 50): a corrupting link flipped the same bit of a small
    READ_ENTRY reply on two reads one second apart, so the 'same bytes' rule confirmed a healthy copy."""
    md = ledger(3, 3, 2, 9)

    def corrupt(stored: str, computed: str) -> list[Finding]:
        return digest_mismatch(md, 0, stored, computed)

    other = Finding.of(Category.ENTRY_BELOW_WRITE_QUORUM, "entry 0 has 2 copies", metadata=md, method="read")
    twice = confirm(corrupt("4aa6648b", "2e7e8ec1") + [other], corrupt("4aa6648b", "2e7e8ec1") + [other])
    assert [f.category for f in twice] == [Category.DIGEST_MISMATCH, other.category]
    assert confirm_damage(twice, corrupt("4aa6648b", "2e7e8ec1")) == twice  # held by the bookie
    assert confirm_damage(twice, corrupt("4aa6648b", "97c1d2e0")) == [twice[1]]  # damaged on the way
    assert confirm_damage(twice, []) == [twice[1]]  # healthy on the third read


def test_unreachable_bookie_finding() -> None:
    assert unreachable_bookie_finding("b1", registered=False, attempts=3) is None
    f = unreachable_bookie_finding(
        "b1", registered=True, attempts=3, ledgers=[LedgerId.of(1), LedgerId.of(2)], error="timeout"
    )
    assert f is not None and f.category is Category.BOOKIE_UNREACHABLE and f.bookie == "b1"
    assert f.detail["ledgers"] == 2 and "timeout" in f.message


# --------------------------------------------------------------------------------------------------
# composition


def test_scrutinize_marked_ledger_skipped_or_too_long() -> None:
    md = ledger()
    s = scrutinize_ledger(
        md, healthy(md), marked_underreplicated=True, marker_ctime_ms=0, grace_period_s=100, now_ms=50_000
    )
    assert s.disposition is Disposition.SKIP and not s.findings
    s = scrutinize_ledger(
        md, healthy(md), marked_underreplicated=True, marker_ctime_ms=0, grace_period_s=100, now_ms=500_000
    )
    assert s.disposition is Disposition.REPORT
    assert [f.category for f in s.findings] == [Category.UNDERREPLICATED_TOO_LONG]


def test_scrutinize_clean_and_metadata_findings() -> None:
    md = ledger(3, 3, 2, 9)
    racks = {"a": "/r1", "b": "/r2", "c": "/r3"}
    s = scrutinize_ledger(md, healthy(md), policy=PlacementPolicy(), locations=racks)
    assert s.disposition is Disposition.CLEAN and not s.findings and s.coverage is not None
    s = scrutinize_ledger(md, healthy(md), policy=PlacementPolicy(), locations={"a": "/r1", "b": "/r1", "c": "/r1"})
    assert s.disposition is Disposition.REPORT
    assert [f.category for f in s.findings] == [Category.PLACEMENT_VIOLATION]
    assert s.findings[0].segment_index == 0 and "write quorum at index 0" in s.findings[0].message
    md_risky = ledger(3, 2, 1, 9)
    s = scrutinize_ledger(md_risky, healthy(md_risky))
    assert [f.category for f in s.findings] == [Category.RISKY_QUORUM]


def test_scrutinize_holds_coverage_findings_for_recheck() -> None:
    md = ledger(3, 3, 2, 9)
    answers = healthy(md)
    answers["a"] = RangeSet()
    answers["b"] = UNKNOWN
    s = scrutinize_ledger(md, answers, policy=PlacementPolicy(), locations={"a": "/r1", "b": "/r1", "c": "/r1"})
    assert s.disposition is Disposition.RECHECK and s.recheck_bookies == ("b",)
    assert [f.category for f in s.pending] == [Category.ENTRY_BELOW_WRITE_QUORUM]
    assert [f.category for f in s.findings] == [Category.PLACEMENT_VIOLATION]  # metadata-only: reportable


def test_scrutinize_open_ledger_needs_lac() -> None:
    md = ledger(3, 3, 2, -1, state=LedgerState.OPEN)
    answers: dict[str, Answer] = {
        "a": RangeSet.of([(0, 9), (11, 50)]),
        "b": RangeSet.of([(0, 9), (11, 50)]),
        "c": RangeSet.span(0, 50),
    }
    s = scrutinize_ledger(md, answers)  # no LAC given: no coverage
    assert s.coverage is None and s.disposition is Disposition.CLEAN
    s = scrutinize_ledger(md, answers, end=50, policy=PlacementPolicy(), locations={})
    assert s.placement is None  # open ledgers: no placement verdict (Java parity)
    assert Category.TRUNCATION_RISK in {f.category for f in s.findings}


def test_scrutinize_inconsistent_metadata() -> None:
    md = ledger(3, 3, 2, 9, segments=[(0, ["a", "b"])])
    s = scrutinize_ledger(md, {})
    assert s.disposition is Disposition.REPORT
    assert [f.category for f in s.findings] == [Category.METADATA_UNREADABLE]
    bad = ledger(2, 3, 2, 9, segments=[(0, ["a", "b"])])
    s = scrutinize_ledger(bad, {})
    assert [f.category for f in s.findings] == [Category.RISKY_QUORUM]
    assert s.findings[0].detail["codes"] == ["invalid"]


def test_marked_verdict_broken_stale_and_unknown_never_missing() -> None:
    from auditor.durability.verdicts import MarkedState, marked_verdict

    md = ledger(3, 2, 2, 8)  # E3/WQ2: c holds the entries whose write set has index 2 (entry % 3 in {1, 2})
    answers = healthy(md)
    assert marked_verdict(scrutinize_ledger(md, answers)).state is MarkedState.STALE
    lost_c = {**answers, "c": RangeSet()}
    v = marked_verdict(scrutinize_ledger(md, lost_c))
    assert (v.state, v.worst, v.entries) == (MarkedState.BROKEN, Category.ENTRY_BELOW_ACK_QUORUM, 6)
    # b silent: nothing it could hold is called missing, but the ledger is not declared healthy either.
    v = marked_verdict(scrutinize_ledger(md, {**answers, "b": UNKNOWN}))
    assert v.state is MarkedState.UNKNOWN and v.worst is None
    v = marked_verdict(scrutinize_ledger(md, {**lost_c, "b": UNKNOWN}))
    assert v.state is MarkedState.UNKNOWN
