"""The sweep without Spark: `--master processes[N]`, N local worker processes running the executors' code
over the planner's id ranges (issue 12: use the cores of one machine). Same ledgers and expectations as
the Spark sweep (tests/realcluster/spark_util.py): every ledger exactly once, and the one-shot checks'
findings on our ledgers, ledger for ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from auditor.cli import app
from auditor.durability.findings import Category
from auditor.spark.sweep import SweepOptions, SweepResult, run_sweep_on_processes
from devcluster.checks_util import settings_for
from devcluster.cluster import Cluster
from tests.realcluster.spark_util import (
    CHECKS,
    assert_agrees_with_one_shot,
    assert_covers_every_ledger_once,
    planted_ledgers,
)

pytestmark = pytest.mark.realcluster


@pytest.fixture(scope="module")
def planted(cluster: Cluster) -> dict[str, Any]:
    return planted_ledgers(cluster)


@pytest.fixture(scope="module")
def full(cluster: Cluster, planted: dict[str, Any]) -> SweepResult:
    progress: list[int] = []
    result = run_sweep_on_processes(
        settings_for(cluster),
        2,
        SweepOptions(checks=CHECKS, partitions=6, trace_ledgers=True),
        progress=lambda p: progress.append(p.partitions_done),
    )
    assert progress == list(range(1, len(result.plan.partitions) + 1))
    return result


def test_every_ledger_exactly_once_in_two_processes(
    cluster: Cluster, full: SweepResult, planted: dict[str, Any]
) -> None:
    assert full.failed == [] and full.master == "processes[2]"
    assert 2 <= len(full.plan.partitions) <= 6
    assert_covers_every_ledger_once(cluster, full, planted)


def test_two_processes_agree_with_the_one_shot_checks(
    cluster: Cluster, full: SweepResult, planted: dict[str, Any]
) -> None:
    assert_agrees_with_one_shot(cluster, full, planted)


def test_cli_sweep_on_local_processes(
    cluster: Cluster, planted: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("BKAUDIT_CONFIG_FILE", "BKAUDIT_METADATA_SERVICE_URI"):
        monkeypatch.delenv(key, raising=False)
    faulty = planted["faulty"]["ledgerId"]
    base = ["sweep", "--metadata-service-uri", cluster.metadata_service_uri, "--checks", "scrutiny"]
    r = CliRunner().invoke(
        app,
        [*base, "--master", "processes[2]", "--format", "json", "--start", str(faulty), "--end", str(faulty + 1)],
    )
    assert r.exit_code == 1, r.output
    docs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert [(d["category"], d["ledgerId"]) for d in docs[:-1] if d["severity"] != "info"] == [
        (Category.ENTRY_BELOW_ACK_QUORUM.value, faulty)
    ]
    assert docs[-1]["summary"]["sweep"]["master"] == "processes[2]"
    r = CliRunner().invoke(app, [*base, "--master", "processes[0]"])
    assert r.exit_code == 2 and "at least one process" in r.output
