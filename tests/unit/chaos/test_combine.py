"""A repair campaign run in parts (`bench.chaos --first-round`) is reported as one (`--combine`): the
combined report's figures are the ones a single run of the same rounds would report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import chaos
from devcluster.chaos.repair_campaign import combine_repair_reports, report_from_rounds

RESULTS = Path(__file__).resolve().parents[3] / "bench" / "results" / "chaos-repair"
# An 8-round run of seed 1 from one go (written before reports named their parts).
ONE_GO = RESULTS / "chaos-repair-20261203-151003-seed1.json"


def one_go() -> dict[str, Any]:
    return json.loads(ONE_GO.read_text())


def part(report: dict[str, Any], rounds: list[dict[str, Any]], seconds: int) -> dict[str, Any]:
    segment = {
        "date": report["date"],
        "seconds": seconds,
        "first_round": rounds[0]["n"],
        "self_test": report["self_test"],
        "written_total": 1000,
    }
    return report_from_rounds(report["seed"], report["config"], [segment], rounds)


FIGURES = (
    "rounds",
    "faults_per_kind",
    "faults_applied",
    "ledgers_marked",
    "open_ledgers_recovered",
    "open_ledgers_left_open",
    "recovery_adds_seen_at_proxy",
    "restore_seconds",
    "markers",
    "findings",
    "acknowledged_lost_or_changed",
    "closed_short",
    "writes_without_lock",
    "rounds_with_violations",
    "violations_total",
)


def test_two_parts_combine_to_the_figures_of_one_run() -> None:
    whole = one_go()
    rounds = whole["per_round"]
    first, second = part(whole, rounds[:3], 200), part(whole, rounds[3:], 409)
    combined = combine_repair_reports([second, first])  # in any order
    assert {k: combined[k] for k in FIGURES} == {k: whole[k] for k in FIGURES}
    assert combined["entries"]["acknowledged_verified"] == whole["entries"]["acknowledged_verified"]
    assert combined["entries"]["written_total"] == 2000 and combined["seconds"] == 609
    assert [r["n"] for r in combined["per_round"]] == list(range(1, 9))
    assert [s["first_round"] for s in combined["segments"]] == [4, 1]


def test_a_report_from_before_parts_combines_as_one_part() -> None:
    whole = one_go()
    again = combine_repair_reports([whole])
    assert {k: again[k] for k in FIGURES} == {k: whole[k] for k in FIGURES}
    assert again["segments"][0]["first_round"] == 1


def test_a_self_test_that_failed_in_any_part_is_a_violation() -> None:
    whole = one_go()
    rounds = whole["per_round"]
    first, second = part(whole, rounds[:3], 1), part(whole, rounds[3:], 1)
    second["segments"][0]["self_test"] = {**whole["self_test"], "unlocked_write_flagged": False}
    assert combine_repair_reports([first, second])["violations_total"] == whole["violations_total"] + 1


@pytest.mark.parametrize(
    "change, error",
    [
        (lambda b: b.update(seed=2), "different seeds"),
        (lambda b: b["config"].update(rounds=9), "different fault plans"),
        (lambda b: b["per_round"].append(dict(b["per_round"][0], n=1)), "round 1 is in reports 1 and 2"),
    ],
)
def test_parts_of_different_campaigns_are_refused(change: Any, error: str) -> None:
    whole = one_go()
    rounds = whole["per_round"]
    first, second = part(whole, rounds[:3], 1), part(whole, rounds[3:], 1)
    second["config"] = dict(second["config"])
    change(second)
    with pytest.raises(ValueError, match=error):
        combine_repair_reports([first, second])


def test_the_command_writes_the_combined_report_and_names_a_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = one_go()
    rounds = whole["per_round"]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(part(whole, rounds[:5], 10)))
    b.write_text(json.dumps(part(whole, rounds[5:], 10)))
    out = tmp_path / "out"
    assert chaos.main(["--combine", str(a), str(b), "--results", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "8 rounds, seed 1, 20s in 2 parts" in printed
    (written,) = out.glob("chaos-repair-*-seed1-combined.json")
    assert json.loads(written.read_text())["rounds"] == 8
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert chaos.main(["--combine", str(a), str(bad), "--results", str(out)]) == 2
    assert str(bad) in capsys.readouterr().err
    assert chaos.main(["--repair", "--rounds", "5", "--first-round", "6"]) == 2
