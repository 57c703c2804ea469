"""`bk-auditor underreplicated` on the real cluster: markers written as Java writes them, a Java-format worker
lock, and our verdict from the real bookies (broken, stale marker, deleted ledger); Java's shell lists the
same ledgers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.realcluster.checks_util import marker_path, rewrite_ensemble
from tests.realcluster.cluster import Cluster

pytestmark = pytest.mark.realcluster

BIN = Path(sys.executable).with_name("bk-auditor")


def run_ours(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    env["BKAUDIT_METADATA_SERVICE_URI"] = cluster.metadata_service_uri
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, env=env, timeout=120)


def test_underreplicated_lists_markers_with_lock_holder_and_our_verdict(cluster: Cluster) -> None:
    b = [cluster.bookie(i).bookie_id for i in (1, 2, 3, 4)]
    healthy = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=12, bookies=b[:3])["ledgerId"]
    broken = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=12, bookies=b[:3])["ledgerId"]
    gone = 2**30 + 12345  # no such ledger
    an_hour_ago = int(time.time() * 1000) - 3600 * 1000
    markers = {lid: marker_path(cluster, lid) for lid in (healthy, broken, gone)}
    lock = f"{cluster.ledgers_root}/underreplication/locks/urL{broken:010d}"
    rewrite_ensemble(cluster, broken, b[2], b[3])  # bookie 4 holds nothing: a third of the copies are gone
    try:
        for lid, path in markers.items():
            cluster.kazoo.create(path, f'replica: "{b[2]}"\nctime: {an_hour_ago}\n'.encode(), makepath=True)
        cluster.kazoo.create(lock, b'bookieId: "worker-7"\n', ephemeral=True, makepath=True)  # as Java's worker
        r = run_ours(cluster, "underreplicated", "--format", "json")
        java = cluster.shell("listunderreplicated").stdout
    finally:
        for path in (*markers.values(), lock):
            if cluster.kazoo.exists(path):
                cluster.kazoo.delete(path)
        rewrite_ensemble(cluster, broken, b[3], b[2])
    assert r.returncode == 1, r.stderr  # one is still broken
    rows = {row["ledgerId"]: row for row in map(json.loads, r.stdout.splitlines())}
    assert {healthy, broken, gone} <= set(rows)
    for lid in (healthy, broken, gone):
        assert str(lid) in java  # Java's shell lists the same markers
        assert rows[lid]["replicas"] == [b[2]] and 3590 <= rows[lid]["markedSeconds"] <= 3900
    assert rows[healthy]["verdict"] == "stale" and rows[healthy]["lockHolder"] is None
    assert rows[broken]["verdict"] == "broken" and rows[broken]["worstCategory"] == "entry_below_ack_quorum"
    # E3/WQ2: entries whose write set held ensemble index 2 (entry % 3 in {1, 2}) lost one of two copies.
    assert rows[broken]["entries"] == 8
    assert rows[broken]["lockHolder"] == "worker-7" and 0 <= rows[broken]["lockedSeconds"] < 120
    assert rows[gone]["verdict"] == "deleted"
    r = run_ours(cluster, "underreplicated")  # the table, once the markers are gone
    assert r.returncode in (0, 1) and not {str(healthy), str(broken), str(gone)} & set(r.stdout.split()), r.stdout
