"""Can bookie X go? `judge_ledger` over the other bookies' answers (unknown is neither missing nor safe)."""

from __future__ import annotations

from auditor.durability.coverage import UNKNOWN
from auditor.durability.decommission import Blocker, judge_ledger
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.ranges import RangeSet
from auditor.durability.schedule import expected_by_bookie


def md(e: int, wq: int, ensemble: list[str], last: int = 8, state: LedgerState = LedgerState.CLOSED) -> LedgerMetadata:
    return LedgerMetadata(LedgerId.of(1), e, wq, wq, state, last, 0, (Segment(0, tuple(ensemble)),), version=1)


def full(m: LedgerMetadata, end: int = 8) -> dict[str, RangeSet]:
    return {b: s.to_rangeset() for b, s in expected_by_bookie(m, end).items()}


def test_complete_copies_elsewhere_is_not_blocking() -> None:
    m = md(3, 2, ["a", "b", "x"])
    v = judge_ledger(m, "x", full(m), 8)
    assert v.blockers == () and not v.lost and not v.thin and not v.unsure


def test_entries_only_on_x_block() -> None:
    m = md(2, 2, ["a", "x"])
    v = judge_ledger(m, "x", {"a": RangeSet.span(0, 4)}, 8)  # a lost 5..8
    assert v.blockers == (Blocker.NO_OTHER_COPY,) and v.lost == RangeSet.span(5, 8)


def test_fewer_copies_but_one_left_is_thin_not_blocking() -> None:
    m = md(3, 3, ["a", "b", "x"])
    answers = {**full(m), "a": RangeSet.span(0, 3)}  # a lacks 4..8, b still has them
    v = judge_ledger(m, "x", answers, 8)
    assert v.blockers == () and v.thin == RangeSet.span(4, 8) and not v.lost


def test_a_silent_bookie_is_unconfirmed_never_lost() -> None:
    m = md(2, 2, ["a", "x"])
    v = judge_ledger(m, "x", {"a": UNKNOWN}, 8)
    assert v.blockers == (Blocker.UNCONFIRMED,) and v.unsure == RangeSet.span(0, 8) and not v.lost
    assert v.unanswered == ("a",)
    m3 = md(3, 3, ["a", "b", "x"])  # b answered and holds everything: a's silence does not matter
    v = judge_ledger(m3, "x", {"a": UNKNOWN, "b": full(m3)["b"]}, 8)
    assert v.blockers == () and not v.unsure


def test_open_ledger_with_x_in_its_last_segment() -> None:
    m = md(3, 2, ["a", "b", "x"], last=-1, state=LedgerState.OPEN)
    v = judge_ledger(m, "x", full(m, 5), 5)
    assert v.blockers == (Blocker.OPEN_LEDGER,)
    v = judge_ledger(m, "y", full(m, 5), 5)  # a bookie it does not name
    assert v.blockers == ()
