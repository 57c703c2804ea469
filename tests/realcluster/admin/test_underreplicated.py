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

from devcluster.checks_util import marker_path, rewrite_ensemble
from devcluster.cluster import Cluster

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
    # Its third bookie is gone for good: the metadata names a bookie that is not registered, as after a loss.
    lost = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=12, bookies=b[:3])["ledgerId"]
    dead = "127.0.0.99:3181"
    an_hour_ago = int(time.time() * 1000) - 3600 * 1000
    markers = {lid: marker_path(cluster, lid) for lid in (healthy, broken, gone, lost)}
    lock = f"{cluster.ledgers_root}/underreplication/locks/urL{broken:010d}"
    rewrite_ensemble(cluster, broken, b[2], b[3])  # bookie 4 holds nothing: a third of the copies are gone
    rewrite_ensemble(cluster, lost, b[2], dead)
    try:
        for lid, path in markers.items():
            named = dead if lid == lost else b[2]
            cluster.kazoo.create(path, f'replica: "{named}"\nctime: {an_hour_ago}\n'.encode(), makepath=True)
        cluster.kazoo.create(lock, b'bookieId: "worker-7"\n', ephemeral=True, makepath=True)  # as Java's worker
        r = run_ours(cluster, "underreplicated", "--format", "json")
        java = cluster.shell("listunderreplicated").stdout
    finally:
        for path in (*markers.values(), lock):
            if cluster.kazoo.exists(path):
                cluster.kazoo.delete(path)
        rewrite_ensemble(cluster, broken, b[3], b[2])
        rewrite_ensemble(cluster, lost, dead, b[2])
    assert r.returncode == 1, r.stderr  # one is still broken
    rows = {row["ledgerId"]: row for row in map(json.loads, r.stdout.splitlines())}
    assert {healthy, broken, gone} <= set(rows)
    for lid in (healthy, broken, gone, lost):
        assert str(lid) in java  # Java's shell lists the same markers
        assert 3590 <= rows[lid]["markedSeconds"] <= 3900
    assert all(rows[lid]["replicas"] == [b[2]] for lid in (healthy, broken, gone))
    assert rows[healthy]["verdict"] == "stale" and rows[healthy]["lockHolder"] is None
    assert rows[broken]["verdict"] == "broken" and rows[broken]["worstCategory"] == "entry_below_ack_quorum"
    # E3/WQ2: entries whose write set held ensemble index 2 (entry % 3 in {1, 2}) lost one of two copies.
    assert rows[broken]["entries"] == 8
    assert rows[broken]["lockHolder"] == "worker-7" and 0 <= rows[broken]["lockedSeconds"] < 120
    assert rows[gone]["verdict"] == "deleted"
    # The bookie the marker names is not registered: gone, as the marker says, so broken (not unknown).
    assert rows[lost]["verdict"] == "broken" and rows[lost]["worstCategory"] == "entry_below_ack_quorum"
    assert rows[lost]["replicas"] == [dead]
    r = run_ours(cluster, "underreplicated")  # the table, once the markers are gone
    assert r.returncode in (0, 1) and not {str(x) for x in (healthy, broken, gone, lost)} & set(r.stdout.split())
