"""The repair campaign's live writers (devcluster/chaos/writers.py, ChaosWriter.java; issue 39) on a real
cluster of their own (four 4.17.3 bookies): two writer JVMs x three threads write small ledgers fast, so
they roll over and trim; a bookie is SIGKILLed mid-run (the Java client's ensemble changes keep them
writing) and one writer JVM is SIGKILLed (its ledgers stay open). The Java verifier then reads every
acknowledged entry back, without recovery: none missing or changed, none closed short, the killed JVM's
ledgers still OPEN. And the verifier can fail: an ack log naming a real entry with a wrong hash is
reported as changed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.chaos.writers import WriterFleet, parse_ack_log
from devcluster.cluster import Cluster
from tests.realcluster.second_cluster import second_cluster

pytestmark = pytest.mark.realcluster

VICTIM = 4


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with second_cluster("bk-auditor-writers-", 4) as c:
        yield c


def _acks_in(log: Path) -> int:
    return sum(len(rec.entries) for rec in parse_ack_log(log, 0).values())


def test_writers_survive_a_bookie_and_a_writer_kill(cluster: Cluster, tmp_path: Path) -> None:
    fleet = WriterFleet(
        cluster,
        tmp_path / "writers",
        processes=2,
        writers=3,
        rate=25,
        seed=5,
        shapes=("3/2/2", "3/3/2"),
        entry_size=(256, 2048),
        entries=(30, 60),
        retain=2,
    )
    fleet.start()
    try:
        assert fleet.wait_acked(150, timeout=40) >= 150, fleet.log_tail(0)
        time.sleep(3)
        cluster.kill_bookie(VICTIM)
        killed_at_ms = time.time() * 1000
        at_bookie_kill = fleet.written_total()
        time.sleep(6)
        left_open = fleet.kill(1)
        fleet.restart(1)  # a new incarnation: new seed, new ack log
        deadline = time.monotonic() + 40
        while _acks_in(fleet.slots[1].logs[-1]) < 20 and time.monotonic() < deadline:
            time.sleep(0.5)
        after = fleet.written_total()
    finally:
        codes = fleet.stop_all()
    assert codes[0] == 0, (codes, fleet.log_tail(0))
    assert left_open, "the killed writer JVM had no open ledger"
    assert len(fleet.slots[1].logs) == 2 and _acks_in(fleet.slots[1].logs[-1]) >= 20, fleet.log_tail(1)
    assert codes[1] == 0, codes  # the restarted incarnation stopped cleanly too
    # Writing went on after the bookie's loss (ensemble changes, or new ledgers on the other three).
    assert after - at_bookie_kill >= 100, (at_bookie_kill, after)

    acked = fleet.acked()
    rolled = [r for r in acked.values() if r.closed_last is not None]
    deleted = [r for r in acked.values() if r.deleted]
    assert rolled and deleted, (len(rolled), len(deleted))
    created_after = [r for r in acked.values() if (r.created_ms or 0) > killed_at_ms and r.entries]
    assert created_after, "no ledger written after the bookie kill"
    for lid in left_open:
        assert acked[lid].open and acked[lid].process == 1

    rows = fleet.verify()
    summary = fleet.last_summary
    by_id = {r["ledgerId"]: r for r in rows}
    assert set(by_id) == set(acked), (sorted(set(acked) ^ set(by_id)))[:10]
    assert summary["missing"] == 0 and summary["changed"] == 0 and summary["closedShort"] == 0, summary
    live = [r for r in rows if r["state"] != "GONE"]
    assert sum(r["verified"] for r in live) == sum(r["acked"] for r in live) == summary["verified"], summary
    assert summary["verified"] >= 250, summary
    for r in live:
        assert r["verified"] == r["acked"] == len(acked[r["ledgerId"]].entries), r
        assert not r["closedShort"], r
        rec = acked[r["ledgerId"]]
        if rec.closed_last is not None:
            assert r["state"] == "CLOSED" and r["lastEntryId"] == rec.closed_last, (r, rec.closed_last)
    assert all(by_id[r.ledger_id]["state"] == "GONE" for r in deleted)
    for lid in left_open:
        assert by_id[lid]["state"] == "OPEN", by_id[lid]
    # Some ledger met the bookie's loss mid-write and went on in a new ensemble (3 of 4 bookies per ensemble,
    # six ledgers open at the kill: each holds the victim with probability 3/4); most are trimmed by now, so
    # by the metadata the writer closed.
    changed_ensemble = [r.ledger_id for r in rolled if (r.ensembles or 1) > 1]
    assert changed_ensemble, [(r.ledger_id, r.ensembles) for r in rolled]

    # The verifier can fail: a wrong hash for a real entry is reported as changed.
    assert fleet.tampered_entry_flagged(), fleet.tamper_detail
    detail = fleet.tamper_detail
    assert detail["row"]["changed"] == [detail["entry"]] and detail["row"]["missing"] == [], detail
