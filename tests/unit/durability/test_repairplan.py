"""The repair planner: per segment and index, re-add in place / heal / replace / blocked; order; backoff."""

from __future__ import annotations

from dataclasses import replace

from auditor.durability.coverage import UNKNOWN
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.placement import PlacementPolicy, check_ledger
from auditor.durability.ranges import RangeSet
from auditor.durability.repairplan import (
    ActionKind,
    Backoff,
    BlockReason,
    BookieState,
    Evidence,
    WorkClass,
    WorkItem,
    bookie_state,
    metadata_work_class,
    move_action,
    plan_repair,
    segment_change,
    with_member,
    work_order,
)
from auditor.durability.schedule import expected_by_bookie

W = BookieState.WRITABLE


def md(
    e: int,
    wq: int,
    aq: int,
    segments: list[tuple[int, list[str]]],
    last: int = 9,
    state: LedgerState = LedgerState.CLOSED,
    ledger: int = 1,
) -> LedgerMetadata:
    segs = tuple(Segment(k, tuple(ens)) for k, ens in segments)
    return LedgerMetadata(LedgerId.of(ledger), e, wq, aq, state, last if state is LedgerState.CLOSED else -1, 0, segs)


def full(m: LedgerMetadata, end: int | None = None) -> dict[str, RangeSet]:
    return {b: s.to_rangeset() for b, s in expected_by_bookie(m, end).items()}


def evidence(m: LedgerMetadata, answers=None, states=None, corrupt=None) -> Evidence:
    st = {b: W for b in m.bookies}
    st.update(states or {})
    return Evidence(st, answers if answers is not None else full(m), corrupt or {})


def test_whole_ledger_is_clean() -> None:
    m = md(3, 2, 2, [(0, ["a", "b", "c"])])
    plan = plan_repair(m, evidence(m))
    assert plan.is_clean and plan.work_class is WorkClass.NOTHING


def test_gone_bookie_with_e_greater_than_wq_replaces_only_its_stripe() -> None:
    m = md(5, 2, 2, [(0, ["a", "b", "c", "d", "x"])], last=99)
    answers = full(m)
    answers["x"] = RangeSet()
    plan = plan_repair(m, evidence(m, answers, {"x": BookieState.GONE}))
    (action,) = plan.actions
    assert action.kind is ActionKind.REPLACE and action.index == 4 and action.bookie == "x"
    # Index 4 of E5/WQ2 holds entries with e mod 5 in {3, 4}: 40 of the 100, not the whole fragment.
    assert action.entries.count() == 40
    assert all(e % 5 in (3, 4) for e in action.entries.to_rangeset())
    assert plan.work_class is WorkClass.BELOW_ACK_QUORUM and not plan.blocks  # one copy left, AQ 2


def test_alive_bookie_missing_some_entries_is_readded_in_place() -> None:
    m = md(3, 3, 2, [(0, ["a", "b", "c"])])
    answers = full(m)
    answers["c"] = RangeSet.span(0, 6)  # acked without c before an ensemble change: 7..9 missing
    plan = plan_repair(m, evidence(m, answers))
    (action,) = plan.actions
    assert action.kind is ActionKind.READD and action.bookie == "c"
    assert action.entries.to_rangeset() == RangeSet.span(7, 9)
    assert not plan.replacements()


def test_alive_bookie_holding_nothing_of_its_stripe_is_replaced() -> None:
    m = md(3, 2, 2, [(0, ["a", "b", "c"])])
    answers = full(m)
    answers["c"] = RangeSet()  # wiped: its copy is lost
    plan = plan_repair(m, evidence(m, answers))
    (action,) = plan.actions
    assert action.kind is ActionKind.REPLACE and action.entries.count() == len(full(m)["c"])


def test_read_only_bookie_is_replaced_not_readded() -> None:
    m = md(3, 3, 2, [(0, ["a", "b", "c"])])
    answers = full(m)
    answers["c"] = RangeSet.span(0, 5)
    plan = plan_repair(m, evidence(m, answers, {"c": BookieState.READ_ONLY}))
    (action,) = plan.actions
    assert action.kind is ActionKind.REPLACE and action.entries.to_rangeset() == RangeSet.span(0, 9)


def test_a_bookie_serving_a_corrupt_copy_is_moved_whole() -> None:
    """Re-adding in place leaves the rot served (SortedLedgerStorage's flushed copy, DbLedgerStorage's
    read-ahead cache): the bookie's whole stripe moves, and the move may read from it."""
    m = md(3, 2, 2, [(0, ["a", "b", "c"])])
    plan = plan_repair(m, evidence(m, corrupt={"b": RangeSet.from_ids([4])}))
    (action,) = plan.actions
    assert action.kind is ActionKind.MOVE and action.bookie == "b" and action.index == 1
    assert list(action.entries.to_rangeset()) == [e for e in range(10) if e % 3 in (0, 1)]  # b's stripe
    assert list(action.corrupt) == [4] and plan.replacements() == (action,)
    assert move_action(m, 0, 1, RangeSet.from_ids([4])) == action  # the healer's, for rot its copies met


def test_a_corrupt_copy_in_an_open_ledgers_last_segment_is_left_to_its_writer() -> None:
    m = md(3, 2, 2, [(0, ["a", "b", "c"])], state=LedgerState.OPEN)
    plan = plan_repair(m, evidence(m, full(m, 9), corrupt={"b": RangeSet.from_ids([4])}), end=9)
    assert not plan.actions and plan.blocks[0].reason is BlockReason.OPEN_SEGMENT


def test_entry_with_no_live_copy_is_data_loss_and_not_copied() -> None:
    m = md(3, 2, 2, [(0, ["a", "b", "c"])])
    answers = full(m)
    # Entry 0 lives on a and b (write set {0,1}); both lost it.
    answers["a"] = answers["a"].difference(RangeSet.from_ids([0]))
    answers["b"] = answers["b"].difference(RangeSet.from_ids([0]))
    plan = plan_repair(m, evidence(m, answers))
    assert plan.work_class is WorkClass.NO_LIVE_COPY
    assert plan.blocks[0].reason is BlockReason.DATA_LOSS and list(plan.lost.to_rangeset()) == [0]
    assert all(0 not in a.entries for a in plan.actions)


def test_gone_bookie_holding_an_only_copy_stays_named() -> None:
    m = md(3, 2, 2, [(0, ["a", "b", "x"])])
    answers = full(m)
    answers["b"] = answers["b"].difference(RangeSet.from_ids([1]))  # entry 1: on b and x only
    plan = plan_repair(m, evidence(m, answers, {"x": BookieState.GONE}))
    assert not plan.replacements()
    assert plan.blocks[0].reason is BlockReason.DATA_LOSS and 1 in plan.lost


def test_unknown_answer_is_a_wait_never_loss() -> None:
    m = md(3, 2, 2, [(0, ["a", "b", "c"])])
    answers = full(m)
    answers["b"] = UNKNOWN
    answers["a"] = answers["a"].difference(RangeSet.from_ids([0]))  # entry 0: a lacks it, b silent
    plan = plan_repair(m, evidence(m, answers))
    reasons = {b.reason for b in plan.blocks}
    assert BlockReason.DATA_LOSS not in reasons and BlockReason.WAIT_UNKNOWN in reasons
    assert not plan.lost
    assert all(0 not in a.entries for a in plan.actions)  # no source yet: not copied


def test_recently_absent_bookie_waits_instead_of_being_replaced() -> None:
    m = md(3, 2, 2, [(0, ["a", "b", "x"])])
    answers = full(m)
    del answers["x"]
    plan = plan_repair(m, evidence(m, answers, {"x": BookieState.ABSENT}))
    assert not plan.actions and {b.reason for b in plan.blocks} == {BlockReason.WAIT_UNKNOWN}


def test_bookie_state_applies_the_recovery_delay() -> None:
    assert bookie_state(True, False, None, 0, 60) is BookieState.WRITABLE
    assert bookie_state(False, True, None, 0, 60) is BookieState.READ_ONLY
    assert bookie_state(False, False, 1_000, 30_000, 60) is BookieState.ABSENT
    assert bookie_state(False, False, 1_000, 61_000, 60) is BookieState.GONE
    assert bookie_state(False, False, None, 0, 60) is BookieState.GONE


def test_open_ledger_last_segment_is_never_repaired_but_earlier_closed_ones_are() -> None:
    m = md(3, 2, 2, [(0, ["x", "b", "c"]), (10, ["x", "b", "d"])], state=LedgerState.OPEN)
    answers = full(m, 14)
    answers["x"] = RangeSet()
    plan = plan_repair(m, evidence(m, answers, {"x": BookieState.GONE}), end=14)
    (action,) = plan.actions
    assert action.segment_index == 0 and action.kind is ActionKind.REPLACE
    assert [(b.reason, b.segment_index) for b in plan.blocks] == [(BlockReason.OPEN_SEGMENT, 1)]


def test_open_ledger_segment_not_yet_covered_by_the_lac_is_not_repaired() -> None:
    m = md(3, 2, 2, [(0, ["x", "b", "c"]), (10, ["a", "b", "d"])], state=LedgerState.OPEN)
    answers = full(m, 5)
    answers["x"] = RangeSet()
    plan = plan_repair(m, evidence(m, answers, {"x": BookieState.GONE}), end=5)
    assert not plan.actions and plan.blocks[0].reason is BlockReason.OPEN_SEGMENT


def test_empty_segment_naming_a_gone_bookie_is_a_metadata_only_replacement() -> None:
    m = md(3, 2, 2, [(0, ["a", "b", "c"]), (10, ["a", "b", "x"])], last=9)
    plan = plan_repair(m, evidence(m, states={"x": BookieState.GONE}))
    (action,) = plan.actions
    assert action.kind is ActionKind.REPLACE and action.segment_index == 1 and not action.entries


def test_placement_failure_alone_is_placement_work() -> None:
    m = md(3, 2, 2, [(0, ["a", "b", "c"])])
    verdict = check_ledger(m, PlacementPolicy(), {"a": "/r1", "b": "/r1", "c": "/r1"})
    assert plan_repair(m, evidence(m), placement=verdict).work_class is WorkClass.PLACEMENT


def test_severity_order_worst_first_then_newest_first() -> None:
    items = [
        WorkItem(LedgerId.of(1), WorkClass.BELOW_WRITE_QUORUM, 100),
        WorkItem(LedgerId.of(2), WorkClass.NO_LIVE_COPY, 50),
        WorkItem(LedgerId.of(3), WorkClass.PLACEMENT, 300),
        WorkItem(LedgerId.of(4), WorkClass.BELOW_ACK_QUORUM, 10),
        WorkItem(LedgerId.of(5), WorkClass.BELOW_WRITE_QUORUM, 200),
    ]
    assert [w.ledger_id.ledger for w in work_order(items)] == [2, 4, 1, 5, 3]
    assert [w.ledger_id.ledger for w in work_order(items, newest_first=True)] == [2, 4, 5, 1, 3]


def test_backoff_is_javas_schedule_with_its_default_grace() -> None:
    b = Backoff(300.0)
    assert [b.delay_s(n) for n in range(8)] == [0.0, 9.375, 18.75, 37.5, 75.0, 150.0, 300.0, 300.0]
    assert b.next_attempt_ms(1_000, 1) == 1_000 + 9_375
    assert Backoff(300.0).delay_s(10_000) == 300.0


def test_segment_change_accepts_a_writers_change_elsewhere_and_refuses_one_here() -> None:
    planned = md(3, 2, 2, [(0, ["x", "b", "c"]), (10, ["a", "b", "c"])], state=LedgerState.OPEN)
    # The writer replaced its last segment in place, then appended one, then closed: segment 0 is intact.
    writer = replace(
        planned, segments=(*planned.segments[:1], Segment(10, ("a", "b", "d")), Segment(15, ("a", "e", "d")))
    )
    closed = replace(writer, state=LedgerState.CLOSED, last_entry_id=20)
    assert segment_change(planned, writer, 0) is None and segment_change(planned, closed, 0) is None
    # Someone replaced x already, or the segment's extent moved: refused, with the reason.
    assert "ensemble is now" in segment_change(planned, with_member(planned, 0, 0, "y"), 0)
    moved = replace(planned, segments=(planned.segments[0], Segment(12, ("a", "b", "c"))))
    assert "ends at entry 11" in segment_change(planned, moved, 0)
    # The last segment of an open ledger is the writer's.
    assert "open ledger" in segment_change(planned, planned, 1)
    done = with_member(planned, 0, 0, "y")
    assert done.segments[0].ensemble == ("y", "b", "c") and done.segments[1] == planned.segments[1]
    assert replace(done, segments=planned.segments) == planned


def test_closed_ledger_last_segment_changes_only_if_the_ledger_does() -> None:
    planned = md(3, 2, 2, [(0, ["x", "b", "c"])], last=9)
    assert segment_change(planned, planned, 0) is None
    assert "no longer exists" in segment_change(planned, md(3, 2, 2, [], last=9), 0)


G, A, R = BookieState.GONE, BookieState.ABSENT, BookieState.READ_ONLY


def test_metadata_class_counts_the_registered_members_of_the_poorest_write_set() -> None:
    # E3/WQ2/AQ2: every write set has two of a, b, c; one gone member leaves one copy: below ack quorum.
    m = md(3, 2, 2, [(0, ["a", "b", "c"])])
    assert metadata_work_class(m, {"a": W, "b": W, "c": W}) is WorkClass.NOTHING
    assert metadata_work_class(m, {"a": G, "b": W, "c": R}) is WorkClass.BELOW_ACK_QUORUM
    # Two gone of three: the write set {a, b} has nothing registered.
    assert metadata_work_class(m, {"a": G, "b": A, "c": W}) is WorkClass.NO_LIVE_COPY
    # E3/WQ3/AQ2: one gone member leaves two copies, still the ack quorum.
    m3 = md(3, 3, 2, [(0, ["a", "b", "c"])])
    assert metadata_work_class(m3, {"a": G, "b": W, "c": W}) is WorkClass.BELOW_WRITE_QUORUM


def test_metadata_class_sees_only_the_write_sets_that_hold_entries() -> None:
    # E5/WQ2, one entry (0): its write set is {a, b}; d and e hold nothing, so their loss is no loss.
    m = md(5, 2, 2, [(0, ["a", "b", "c", "d", "e"])], last=0)
    assert metadata_work_class(m, {"a": W, "b": W, "c": W, "d": G, "e": G}) is WorkClass.NOTHING
    assert metadata_work_class(m, {"a": W, "b": G, "c": W, "d": W, "e": W}) is WorkClass.BELOW_ACK_QUORUM
    # An empty closed ledger holds nothing anywhere; an empty segment before another counts for nothing.
    empty = md(3, 2, 2, [(0, ["a", "b", "c"])], last=-1)
    assert metadata_work_class(empty, {"a": G, "b": G, "c": G}) is WorkClass.NOTHING
    two = md(3, 2, 2, [(0, ["x", "y", "z"]), (0, ["a", "b", "c"])])
    assert metadata_work_class(two, {"x": G, "y": G, "z": G, "a": W, "b": W, "c": W}) is WorkClass.NOTHING


def test_metadata_class_of_an_open_ledger_counts_its_whole_last_segment() -> None:
    m = md(3, 2, 2, [(0, ["a", "b", "c"])], state=LedgerState.OPEN)
    assert metadata_work_class(m, {"a": W, "b": W, "c": G}) is WorkClass.BELOW_ACK_QUORUM
    # Earlier segments count by their extent: segment 0 holds entries 0-4 here.
    m2 = md(3, 2, 2, [(0, ["x", "y", "z"]), (5, ["a", "b", "c"])], state=LedgerState.OPEN)
    assert metadata_work_class(m2, {"x": G, "y": W, "z": W, "a": W, "b": W, "c": W}) is WorkClass.BELOW_ACK_QUORUM
