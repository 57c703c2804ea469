"""`bk-auditor check --processes N` (issue 12: use the cores you are given): the checks that judge each ledger
alone run on N worker processes over the planner's id ranges, the references check in the command's own
process; what the command prints is what one process prints, ledger for ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from devcluster.cluster import Cluster
from tests.realcluster.spark_util import finding_key, planted_ledgers

pytestmark = pytest.mark.realcluster

BIN = Path(sys.executable).with_name("bk-auditor")
ALL = "scrutiny,ledger,open,references"


def _check(uri: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`bk-auditor check ARGS` against `uri`, the environment's BKAUDIT_* replaced by `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BKAUDIT_")}
    return subprocess.run(
        [str(BIN), "check", *args],
        capture_output=True,
        text=True,
        env=clean | env | {"BKAUDIT_METADATA_SERVICE_URI": uri},
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def _json_run(cluster: Cluster, processes: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    r = _check(cluster.metadata_service_uri, "--checks", ALL, "--format", "json", "--processes", str(processes))
    assert r.returncode == 1, r.stderr[-3000:]  # the planted fault
    docs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert "summary" in docs[-1] and all("summary" not in d for d in docs[:-1])
    return docs[:-1], docs[-1]["summary"]


@pytest.fixture(scope="module")
def planted(cluster: Cluster) -> dict[str, Any]:
    return planted_ledgers(cluster)


def test_two_processes_find_what_one_finds(cluster: Cluster, planted: dict[str, Any]) -> None:
    one, one_summary = _json_run(cluster, 1)
    two, two_summary = _json_run(cluster, 2)

    ours = {f"{0:016x}{i:016x}" for i in planted["ids"]}
    mine = [finding_key(f) for f in two if f.get("qualifiedName") in ours]
    assert sorted(mine) == sorted(finding_key(f) for f in one if f.get("qualifiedName") in ours)
    assert len(mine) == len(set(mine))  # each fault once
    faulty = f"{0:016x}{planted['faulty']['ledgerId']:016x}"
    assert [
        (f["category"], f["qualifiedName"]) for f in two if f["severity"] != "info" and f["qualifiedName"] in ours
    ] == [("entry_below_ack_quorum", faulty)]
    # The whole cluster, not only our ledgers: the same actionable faults, the same counts per category.
    actionable = sorted((f["category"], f.get("qualifiedName")) for f in two if f["severity"] != "info")
    assert actionable == sorted((f["category"], f.get("qualifiedName")) for f in one if f["severity"] != "info")
    assert two_summary["byCategory"] == one_summary["byCategory"]
    assert two_summary["findingCount"] == len(two) and one_summary["findingCount"] == len(one)

    runs1 = {r["check"]: r for r in one_summary["checks"]}
    runs2 = {r["check"]: r for r in two_summary["checks"]}
    assert list(runs2) == ["scrutiny", "ledger", "open", "references"]  # per-ledger checks first
    for check in ("scrutiny", "ledger", "open"):
        assert runs2[check]["processes"] == 2 and runs2[check]["partitions"] >= 2
        for key in ("ledgersSeen", "ledgersChecked", "ledgersSkipped"):
            assert runs2[check][key] == runs1[check][key], (check, key)
        assert runs2[check]["ledgersVisited"] == runs1[check]["ledgersSeen"]
    assert "processes" not in runs2["references"]  # run in the command's own process
    assert runs2["references"]["ledgersSeen"] == runs1["references"]["ledgersSeen"]


def test_table_on_two_processes(cluster: Cluster, planted: dict[str, Any]) -> None:
    r = _check(cluster.metadata_service_uri, "--checks", "scrutiny", "--format", "table", "--processes", "2")
    assert r.returncode == 1, r.stderr[-3000:]
    assert "entry_below_ack_quorum" in r.stdout and str(planted["faulty"]["ledgerId"]) in r.stdout
    assert "scrutiny:" in r.stdout and "judgements of" in r.stdout
    # The session cluster has no racks: said once for the whole run (not once per worker process or
    # partition), and only when placement is judged.
    assert r.stderr.count("no rack information") == 1, r.stderr[-3000:]
    r = _check(cluster.metadata_service_uri, "--checks", "open,ledger", "--format", "table", "--processes", "2")
    assert r.returncode in (0, 1), r.stderr[-3000:]
    assert "no rack information" not in r.stderr


def test_errors_on_two_processes_are_one_line(cluster: Cluster) -> None:
    # nothing listens on port 1
    r = _check(
        "zk+hierarchical://127.0.0.1:1/ledgers",
        "--checks",
        "scrutiny",
        "--processes",
        "2",
        BKAUDIT_ZOOKEEPER__CONNECT_TIMEOUT_SECONDS="1",
    )
    assert r.returncode == 2
    assert "127.0.0.1:1" in r.stderr and "Traceback" not in r.stderr
    r = _check(cluster.metadata_service_uri, "--processes", "0")
    assert r.returncode == 2 and "--processes" in r.stderr


def test_a_small_cluster_is_checked_in_one_process_unless_a_count_is_given(
    cluster: Cluster, planted: dict[str, Any]
) -> None:
    """Without --processes, a cluster of fewer than IN_PROCESS_BELOW ledgers (the session cluster's few
    hundred) is checked in the command's own process: starting workers would cost more than they save.
    Named explicitly (flag or environment), the count is used whatever the size."""
    r = _check(cluster.metadata_service_uri, "--checks", "scrutiny", "--format", "json")
    assert r.returncode == 1, r.stderr[-3000:]  # the planted fault
    (run,) = json.loads(r.stdout.splitlines()[-1])["summary"]["checks"]
    assert "processes" not in run and run["ledgersChecked"] > 0, run
    r = _check(cluster.metadata_service_uri, "--checks", "scrutiny", "--format", "json", BKAUDIT_CHECK_PROCESSES="2")
    assert r.returncode == 1, r.stderr[-3000:]
    (run,) = json.loads(r.stdout.splitlines()[-1])["summary"]["checks"]
    assert run["processes"] == 2, run
