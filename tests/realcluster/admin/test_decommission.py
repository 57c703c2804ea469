"""`bk-auditor can-decommission` on a cluster of its own (3 real bookies, ledgers by the real Java client):
safe with complete copies elsewhere; not yet, naming the ledger and reason, when a ledger's only other copy
is gone, when an open ledger still has the bookie, and while another copy cannot be confirmed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.checks_util import rewrite_ensemble
from devcluster.cluster import Cluster
from tests.realcluster.second_cluster import second_cluster

pytestmark = pytest.mark.realcluster

BIN = Path(sys.executable).with_name("bk-auditor")


@pytest.fixture(scope="module")
def small() -> Iterator[Cluster]:
    with second_cluster("bk-auditor-decom-", 3) as c:
        yield c


def verdict(c: Cluster, bookie: str) -> tuple[int, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    env |= {"BKAUDIT_METADATA_SERVICE_URI": c.metadata_service_uri, "BKAUDIT_BOOKIE_CLIENT__TIMEOUT_SECONDS": "2"}
    r = subprocess.run(
        [str(BIN), "can-decommission", bookie, "--format", "json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


def test_can_decommission(small: Cluster) -> None:
    b1, b2, x = (small.bookie(i).bookie_id for i in (1, 2, 3))
    a = small.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=10, bookies=[b1, x])["ledgerId"]
    code, report = verdict(small, x)
    assert code == 0 and report["safe"] and report["registered"]
    [row] = report["ledgers"]
    assert (
        row["ledgerId"] == a and row["blockers"] == [] and row["reason"].startswith("other copies complete; not marked")
    )

    # b's only other copy is gone (its metadata names b1, which never had it): those entries live only on x.
    b = small.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=10, bookies=[b2, x])["ledgerId"]
    rewrite_ensemble(small, b, b2, b1)
    try:
        code, report = verdict(small, x)
    finally:
        rewrite_ensemble(small, b, b1, b2)
    rows = {r["ledgerId"]: r for r in report["ledgers"]}
    assert code == 1 and not report["safe"]
    assert rows[b]["blockers"] == ["no_other_copy"] and rows[b]["onlyHere"] == "0-9"
    assert rows[b]["reason"] == f"entries 0-9 exist only on {x}: another copy must be made before it goes"
    assert rows[a]["blockers"] == []

    # An open ledger with x in its last segment (checked below).
    made = small.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=5, bookies=[b1, x], close=False)
    assert sorted(made["ensembles"]["0"]) == sorted([b1, x]), made["ensembles"]
    o = made["ledgerId"]

    # The other copy's bookie is silent: not confirmed, so not safe (and not called lost).
    small.pause_bookie(1)
    try:
        code, report = verdict(small, x)
    finally:
        small.resume_bookie(1)
    rows = {r["ledgerId"]: r for r in report["ledgers"]}
    assert code == 1 and rows[a]["blockers"] == ["unconfirmed"] and rows[a]["unanswered"] == [b1]

    small.wait_ready(1)

    # The open ledger is named as such. (It was written above, before the pause: a bookie just resumed
    # may still refuse writes, and the Java client then moved the ensemble to b2, as it did under load.)
    code, report = verdict(small, x)
    rows = {r["ledgerId"]: r for r in report["ledgers"]}
    assert code == 1 and rows[o]["blockers"] == ["open_ledger"] and not rows[o]["closed"]
    assert "open ledger" in rows[o]["reason"]
    code, report = verdict(small, b2)  # b2 holds complete copies elsewhere of everything it has
    assert code == 0 and [r["ledgerId"] for r in report["ledgers"]] == [b]
