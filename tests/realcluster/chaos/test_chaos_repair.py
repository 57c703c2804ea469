"""Smoke version of the repair chaos campaign (`make chaos-repair`, bench/chaos.py --repair): its own real
cluster (6 bookies, one behind the TCP proxy, one DbLedgerStorage), two `bk-auditor run` daemons with a
repair worker each, live Java writers; the self-test (the invariants can fail), then two rounds, each a
bookie lost for good (and a writer killed mid-ledger) healed by our repair: one with the repair worker
SIGSTOPped past its session timeout mid-repair, one with bit rot on a surviving copy.

In `make test`; alone: `make chaos-repair-smoke`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devcluster.chaos.repair_campaign import RepairCampaign, RepairConfig, repair_summary_text

pytestmark = pytest.mark.realcluster


@pytest.mark.usefixtures("quiet_kazoo")
def test_chaos_repair_smoke(tmp_path: Path) -> None:
    cfg = RepairConfig(
        rounds=2,
        seed=11,
        workdir=tmp_path / "chaos-repair",
        results_dir=tmp_path / "results",
        ledgers_per_quorum=4,
        kinds=("worker-stop", "bitrot"),
        cycle=True,
        writer_processes=2,
        writers_per_process=3,
        scrutiny_seconds=5,
        ledger_check_seconds=15,
        open_check_seconds=10,
        progress=print,
    )
    report = RepairCampaign(cfg).run()
    text = repair_summary_text(report) + "\n" + json.dumps(report["details"], indent=1, default=str)[:6000]
    assert report["self_test"] == {
        "false_marker_flagged": True,
        "false_finding_flagged": True,
        "changed_entry_flagged": True,
        "unlocked_write_flagged": True,
    }, text
    assert report["rounds"] == 2 and report["faults_per_kind"] == {"worker-stop": 1, "bitrot": 1}, text
    assert report["ledgers_marked"] > 0 and report["entries"]["acknowledged_verified"] > 0, text
    assert report["restore_seconds"]["count"] == 2, text
    assert report["acknowledged_lost_or_changed"] == 0 and report["closed_short"] == 0, text
    assert report["writes_without_lock"] == 0, text
    assert report["violations_total"] == 0, text
