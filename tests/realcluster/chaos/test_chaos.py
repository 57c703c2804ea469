"""Smoke version of the chaos campaign (bench/chaos.py, `make chaos`): its own small real cluster (5
bookies, one behind the TCP proxy, one DbLedgerStorage), two `bk-auditor run` daemons, the self-test
(the invariants can fail), then three rounds: a corrupting link, a planted loss, a leader SIGKILL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devcluster.chaos.campaign import Campaign, ChaosConfig, summary_text

pytestmark = pytest.mark.realcluster


@pytest.mark.usefixtures("quiet_kazoo")
def test_chaos_smoke(tmp_path: Path) -> None:
    cfg = ChaosConfig(
        rounds=3,
        seed=7,
        workdir=tmp_path / "chaos",
        results_dir=tmp_path / "results",
        ledgers_per_quorum=5,
        open_ledgers=3,
        num_bookies=5,
        db_bookies=(5,),
        proxied=4,
        kinds=("link-corrupt", "loss-copy", "leader-kill"),
        cycle=True,
        scrutiny_seconds=5,
        ledger_check_seconds=15,
        open_check_seconds=10,
        progress=print,
    )
    report = Campaign(cfg).run()
    text = summary_text(report) + "\n" + json.dumps(report["details"], indent=1, default=str)[:6000]
    assert report["self_test"] == {
        "stray_write_flagged": True,
        "false_marker_flagged": True,
        "false_finding_flagged": True,
    }, text
    assert report["rounds"] == 3 and report["faults_per_kind"] == {
        "link-corrupt": 1,
        "loss-copy": 1,
        "leader-kill": 1,
    }, text
    assert report["planted_losses"]["planted"] >= 1 and report["planted_losses"]["missed"] == 0, text
    assert report["findings"]["false"] == 0 and report["markers"]["false"] == 0, text
    assert report["failover_seconds"]["count"] == 1, text
    assert report["failover_seconds"]["max"] <= cfg.session_timeout + 2, text
    assert report["writes_outside_allowed_paths"] == 0, text
    assert report["violations_total"] == 0, text
