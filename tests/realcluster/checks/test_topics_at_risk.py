"""`check --by topic`: a ledger written by the real Java client with Pulsar's managed-ledger metadata, a
third of its copies lost, is reported under its topic and namespace."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from devcluster.checks_util import rewrite_ensemble
from devcluster.cluster import Cluster

pytestmark = pytest.mark.realcluster

BIN = Path(sys.executable).with_name("bk-auditor")


def test_check_by_topic_names_the_topic_at_risk(cluster: Cluster) -> None:
    b = [cluster.bookie(i).bookie_id for i in (1, 2, 3, 4)]
    local = f"orders-{uuid.uuid4().hex[:6]}"
    custom = {
        "application": "pulsar",
        "component": "managed-ledger",
        "pulsar/managed-ledger": f"acme/billing/persistent/{local}",
    }
    lid = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=12, bookies=b[:3], custom=custom)[
        "ledgerId"
    ]
    rewrite_ensemble(cluster, lid, b[2], b[3])  # bookie 4 never had these entries
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    env["BKAUDIT_METADATA_SERVICE_URI"] = cluster.metadata_service_uri
    try:
        r = subprocess.run(
            [str(BIN), "check", "--checks", "scrutiny", "--by", "topic", "--format", "json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
    finally:
        rewrite_ensemble(cluster, lid, b[3], b[2])
    assert r.returncode == 1, r.stderr[-2000:]
    rows = [doc for doc in map(json.loads, r.stdout.splitlines()) if doc.get("kind") == "topic"]
    [row] = [x for x in rows if x["topic"] == f"persistent://acme/billing/{local}"]
    assert row["namespace"] == "acme/billing" and row["worstCategory"] == "entry_below_ack_quorum"
    assert row["ledgers"] == [f"{0:016x}{lid:016x}"] and row["severity"] == "major"


def test_check_table_says_each_finding_once_and_names_the_bookie(cluster: Cluster) -> None:
    """Human output: the table is the report. Console logs on stderr do not repeat its findings or run
    summaries; a coverage finding names the bookie that lacks the copies; a long run list is cut."""
    b = [cluster.bookie(i).bookie_id for i in (1, 2, 3, 4)]
    lid = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=60, bookies=b[:3])["ledgerId"]
    rewrite_ensemble(cluster, lid, b[2], b[3])  # bookie 4 never had these entries: 40 of them, 20 runs
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    env["BKAUDIT_METADATA_SERVICE_URI"] = cluster.metadata_service_uri
    try:
        r = subprocess.run(
            [str(BIN), "check", "--checks", "scrutiny", "--format", "table"],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
    finally:
        rewrite_ensemble(cluster, lid, b[3], b[2])
    assert r.returncode == 1, r.stderr[-2000:]
    # Console lines, not JSON; none of them a finding or the run summary. (Other warnings may appear: the
    # session cluster holds other tests' planted faults, e.g. "entry lists omit entries ... findings dropped".)
    lines = r.stderr.splitlines()
    assert lines and not any(line.lstrip().startswith("{") for line in lines), r.stderr
    events = [re.match(r"\S+ \[\w+\s*\] (.*?)(?:\s{2,}|\s\[|$)", line) for line in lines]
    assert all(events), r.stderr
    assert not {m.group(1).strip() for m in events if m} & {"finding", "check finished"}, r.stderr
    [row] = [line for line in r.stdout.splitlines() if f"│ {lid} " in line]
    assert b[3] in row and "40 [1-2,4-5,7-8,10-11,...]" in row, r.stdout
    assert "scrutiny: " in r.stdout  # the run summary, once, on stdout
