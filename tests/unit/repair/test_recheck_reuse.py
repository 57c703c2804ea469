"""The re-check after a repair asks again only what the repair touched (`evidence._kept`): an earlier
answer stands for a bookie that is registered now, was not written, met no corrupt copy, answered, and
for the same end of the ledger; every other bookie is asked again."""

from __future__ import annotations

from auditor.durability.coverage import UNKNOWN
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.ranges import RangeSet
from auditor.durability.repairplan import BookieState, Evidence
from auditor.repair.evidence import Assessment, _kept

W, R, G, A = BookieState.WRITABLE, BookieState.READ_ONLY, BookieState.GONE, BookieState.ABSENT


def earlier(end: int = 9) -> Assessment:
    md = LedgerMetadata(LedgerId.of(1), 4, 2, 2, LedgerState.CLOSED, end, 0, (Segment(0, ("a", "b", "c", "d")),))
    answers = {"a": RangeSet.span(0, end), "b": RangeSet.span(0, end), "c": UNKNOWN, "d": RangeSet.span(0, end)}
    return Assessment(md, end, Evidence({b: W for b in "abcd"}, answers, {}), None)


def test_untouched_registered_answered_bookies_keep_their_answers() -> None:
    now = {"a": W, "b": R, "c": W, "d": W, "t": W}
    # c did not answer (asked again), d was written, t is new (never answered).
    assert _kept(earlier(), 9, now, {"d"}) == {"a", "b"}


def test_a_bookie_gone_or_absent_since_is_asked_again() -> None:
    assert _kept(earlier(), 9, {"a": G, "b": A, "c": W, "d": W}, set()) == {"d"}


def test_nothing_stands_without_an_earlier_assessment_or_for_another_end() -> None:
    now = {b: W for b in "abcd"}
    assert _kept(None, 9, now, set()) == set()
    assert _kept(earlier(), 12, now, set()) == set()
