"""`check --format table`: what a person reads. A coverage finding names the bookie lacking copies, a long
run list is cut to a few runs (JSON keeps them all), and the run summaries are words, not Python dicts."""

from __future__ import annotations

import io

from auditor.checks.oneshot import print_table, run_counts
from auditor.durability.findings import Category, Finding, FindingSummary
from auditor.durability.ids import LedgerId
from auditor.durability.ranges import RangeSet


def test_the_table_names_the_bookie_and_keeps_cells_short() -> None:
    lost = RangeSet.of((i, i + 1) for i in range(0, 60, 3))  # 20 runs
    f = Finding.of(
        Category.ENTRY_BELOW_ACK_QUORUM,
        "ledger 7: 40 entries have fewer copies than the ack quorum",
        ledger=LedgerId.of(7),
        affected=lost,
        detail={"missing": [{"segmentIndex": 0, "bookie": "10.0.0.2:3181", "missing": 40}]},
    )
    summary = FindingSummary()
    summary.add(f, "scrutiny")
    run = {
        "check": "open",
        "ledgersChecked": 0,
        "ledgersSeen": 4,
        "ledgersSkipped": {"closed": 4},
        "ledgersRechecked": 0,
        "bookieRequests": 0,
        "durationSeconds": 0.01,
    }
    out = io.StringIO()
    print_table([f], summary, [run], out)
    text = out.getvalue()
    [row] = [line for line in text.splitlines() if "│ 7 " in line]
    assert "10.0.0.2:3181" in row
    assert "0-1,3-4,6-7,9-10," in text and "12-13" not in text
    assert "open: 0 judgements of 4 ledgers (0 re-checks, skipped 4 closed)" in text and "{" not in text


def test_the_run_counts_add_up_when_ledgers_are_re_checked() -> None:
    """A ledger judged again (a re-check) makes more judgements than ledgers: the line says so in words
    that add up instead of claiming more ledgers checked than seen."""
    run = {
        "ledgersChecked": 21,
        "ledgersSeen": 16,
        "ledgersSkipped": {},
        "ledgersRechecked": 5,
        "bookieRequests": 40,
    }
    assert run_counts(run) == "21 judgements of 16 ledgers (5 re-checks, skipped none), 40 bookie requests"


def test_identifier_cells_stay_on_one_line_when_details_are_long() -> None:
    """Off a terminal a row is never wrapped or cropped: an operator greps the row with the ledger id for
    its bookie, entries and detail (seen in CI: a 120-column pipe, 91-103 rows, a 13-digit ledger id)."""
    lost = RangeSet.of((i, i + 1) for i in range(1, 60, 3))
    findings = [
        Finding.of(
            Category.ENTRY_NO_REPLICA,
            f"ledger {n}: 40 entries have no replica (least copies 0 of WQ 2, AQ 2) " * 2,
            ledger=LedgerId.of(n),
            affected=lost,
            detail={
                "missing": [
                    {"segmentIndex": 0, "bookie": "127.0.0.1:3581", "missing": 40},
                    {"segmentIndex": 0, "bookie": "127.0.0.3:3583", "missing": 40},
                ]
            },
        )
        for n in [*range(2, 40), 1099512463115]
    ]
    summary = FindingSummary()
    for f in findings:
        summary.add(f, "scrutiny")
    out = io.StringIO()
    print_table(findings, summary, [], out)
    [row] = [line for line in out.getvalue().splitlines() if "│ 17 " in line]
    assert "127.0.0.1:3581, 127.0.0.3:3583" in row and "40 [1-2,4-5,7-8,10-11,...]" in row, out.getvalue()
    assert "│ critical " in row and "ledger 17: 40 entries have no replica" in row, row
