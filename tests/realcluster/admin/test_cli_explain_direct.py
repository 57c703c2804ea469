"""`bk-auditor explain LEDGER --metadata-service-uri URI`: explained without a daemon, from the real ZooKeeper
and bookies, by the daemon's own code (auditor/checks/explain.py), so a `check` user can explain a finding."""

from __future__ import annotations

import json

import pytest

from devcluster.cli_util import cli, error_lines
from devcluster.cluster import Cluster

pytestmark = pytest.mark.realcluster


def test_explain_without_a_daemon(cluster: Cluster) -> None:
    ids = [cluster.bookie(n).bookie_id for n in (1, 2)]
    ledger = cluster.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=10, bookies=ids)["ledgerId"]
    uri = cluster.metadata_service_uri

    r = cli("explain", str(ledger), "--metadata-service-uri", uri, "--format", "json", timeout=120)
    assert r.returncode == 0, r.stderr
    (doc,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert doc["kind"] == "explanation" and doc["answeredBy"] == "here" and "findings" not in doc
    assert doc["metadata"]["ledgerId"] == str(ledger) and doc["metadata"]["state"] == "CLOSED"
    (segment,) = doc["segments"]
    copies = [
        (b["bookieId"], b["status"], int(b["expectedEntries"]), int(b["presentEntries"])) for b in segment["bookies"]
    ]
    assert copies == [  # (proto's JSON gives int64 as text)
        (ids[0], "ok", 10, 10),
        (ids[1], "ok", 10, 10),
    ]

    r = cli("explain", str(ledger), "--metadata-service-uri", uri, "--format", "table", timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"ledger {ledger} " in r.stdout and "E/WQ/AQ 2/2/2" in r.stdout
    assert "findings: not known here (no daemon asked)" in r.stdout

    missing = ledger + 10_000_000
    r = cli("explain", str(missing), "--metadata-service-uri", uri, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    (line,) = error_lines(r.stderr)
    assert line.startswith(f"error: ledger {missing} does not exist (")
