"""The digest scrub's pure decisions: the copies a pass verifies, the byte budget, the pass cursor and
the coverage arithmetic (auditor/durability/scrub.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.ranges import RangeSet
from auditor.durability.schedule import write_set_bookies
from auditor.durability.scrub import (
    ByteBudget,
    ScrubProgress,
    chunks,
    copies_of,
    copy_entries,
    coverage_ratio,
    next_pass_in,
    oldest_verification_age_s,
    pass_seconds,
)

DAY_MS = 86_400_000


def ledger(
    e: int, wq: int, last: int, ensembles: list[tuple[int, tuple[str, ...]]], state: LedgerState
) -> LedgerMetadata:
    return LedgerMetadata(LedgerId.of(7), e, wq, wq, state, last, 0, tuple(Segment(f, ens) for f, ens in ensembles))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 5).flatmap(lambda e: st.tuples(st.just(e), st.integers(1, e))),
    st.integers(-1, 300),
    st.integers(0, 300),
)
def test_every_copy_of_every_entry_is_planned_once(quorums: tuple[int, int], last: int, change: int) -> None:
    """Each entry's write-set bookies, every one of them, once (across an ensemble change too)."""
    e, wq = quorums
    first_ens = tuple(f"b{i}" for i in range(e))
    second_ens = tuple(f"b{i + 2}" for i in range(e))
    segs = [(0, first_ens)] + ([(change, second_ens)] if 0 < change <= max(last, 0) else [])
    md = ledger(e, wq, last, segs, LedgerState.CLOSED)
    plans = copies_of(md)
    assert [p.bookie for p in plans] == sorted(p.bookie for p in plans)
    want: dict[str, set[int]] = {}
    for entry in range(last + 1):
        ens = first_ens if len(segs) == 1 or entry < change else second_ens
        for b in set(write_set_bookies(ens, entry, wq)):
            want.setdefault(b, set()).add(entry)
    assert {p.bookie: set(p.entries) for p in plans} == want
    assert copy_entries(md) == sum(len(v) for v in want.values())


def test_an_open_ledger_has_nothing_to_verify_yet() -> None:
    md = ledger(3, 2, 10, [(0, ("a", "b", "c"))], LedgerState.OPEN)
    assert copies_of(md) == [] and copy_entries(md) == 0


@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 40)), max_size=8), st.integers(1, 50))
def test_chunks_cover_the_entries_in_order_within_the_size(runs: list[tuple[int, int]], size: int) -> None:
    entries = RangeSet.of((a, a + n) for a, n in runs)
    got = list(chunks(entries, size))
    assert all(0 < len(c) <= size for c in got)
    assert [e for c in got for e in c] == list(entries)
    assert all(len(c) == size for c in got[:-1])


def test_chunk_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chunk size"):
        list(chunks(RangeSet.span(0, 3), 0))


@settings(max_examples=200, deadline=None)
@given(
    st.floats(1_000, 10_000_000),
    st.lists(st.tuples(st.integers(0, 2_000_000), st.floats(0, 2.0)), min_size=1, max_size=60),
)
def test_byte_budget_holds_on_average(rate: float, reads: list[tuple[int, float]]) -> None:
    """Reads that wait as told: once each read's wait is over, the bytes read are within burst + rate x
    elapsed (so only the read in flight can be ahead of the budget)."""
    burst = rate
    now = 0.0
    budget = ByteBudget(rate, burst, now)
    total = 0
    for nbytes, think in reads:
        now += budget.wait(now)  # wait as told before reading
        total += nbytes
        now += budget.charge(nbytes, now)
        assert total <= burst + rate * now + 1e-6 * (total + 1)
        now += think
    # Never slower than needed: over the whole run the waits add up to at most the debt paid.
    assert now <= sum(t for _, t in reads) + max(0.0, total - burst) / rate + 1e-6


def test_byte_budget_zero_is_unlimited_and_refuses_negatives() -> None:
    b = ByteBudget(0, 0, 0.0)
    assert b.charge(10**12, 0.0) == 0.0 and b.wait(0.0) == 0.0
    with pytest.raises(ValueError):
        ByteBudget(-1, 0, 0.0)
    with pytest.raises(ValueError):
        ByteBudget(1, 1, 0.0).charge(-1, 0.0)


def test_a_pass_resumes_after_its_cursor_and_keeps_its_counts() -> None:
    p = ScrubProgress().begin(1_000, planned_entries=10)
    assert p.in_pass and p.cursor is None and p.first_started_ms == 1_000
    p = p.ledger_done(LedgerId.of(3), copies=2, entries=4, nbytes=400, unverified=0, corrupt=0)
    p = p.ledger_done(LedgerId.of(5), copies=2, entries=4, nbytes=400, unverified=2, corrupt=1)
    assert (p.cursor, p.ledgers, p.entries, p.bytes, p.unverified_entries, p.corrupt) == (
        LedgerId.of(5),
        2,
        8,
        800,
        2,
        1,
    )
    assert coverage_ratio(p) == pytest.approx(0.8)
    assert next_pass_in(p, 5 * DAY_MS, 14 * DAY_MS) == 0.0  # in a pass: resume at once
    done = p.finish(2_000)
    assert not done.in_pass and done.passes == 1 and done.previous_started_ms == 1_000
    assert coverage_ratio(done) == pytest.approx(0.8)  # the last pass's, until the next one begins
    again = done.begin(3_000, planned_entries=0)
    assert again.first_started_ms == 1_000 and again.entries == 0 and coverage_ratio(again) == 1.0


@given(st.integers(0, 100 * DAY_MS), st.integers(0, 100 * DAY_MS), st.integers(1, 30))
def test_the_next_pass_begins_one_period_after_the_last_began(started: int, now: int, days: int) -> None:
    p = ScrubProgress().begin(started, 1).finish(started + 1)
    wait = next_pass_in(p, now, days * DAY_MS)
    assert wait == max(0.0, (started + days * DAY_MS - now) / 1000)
    assert oldest_verification_age_s(p, now) == max(0.0, (now - started) / 1000)


def test_before_any_pass_nothing_is_covered() -> None:
    p = ScrubProgress()
    assert coverage_ratio(p) == 0.0 and oldest_verification_age_s(p, 10) is None
    assert next_pass_in(p, 10, DAY_MS) == 0.0
    assert coverage_ratio(p.begin(0, None)) == 0.0  # a pass whose plan could not be counted


def test_cost_formula() -> None:
    # 1 TiB of copies per bookie at 4 MiB/s: 262,144 s, about 3.03 days.
    assert pass_seconds(2**40, 4 * 2**20) == 262_144
    assert pass_seconds(10, 0) is None
