"""The real cluster itself: ZooKeeper, bookies and ledgers written by the real Java client."""

from __future__ import annotations

import time

import pytest

from devcluster.cluster import Cluster

pytestmark = pytest.mark.realcluster


def legacy_path(root: str, ledger_id: int) -> str:
    d = f"{ledger_id:010d}"
    return f"{root}/{d[:2]}/{d[2:6]}/L{d[6:]}"


def test_bookies_registered(cluster: Cluster) -> None:
    available = set(cluster.kazoo.get_children(f"{cluster.ledgers_root}/available")) - {"readonly"}
    assert available == {b.bookie_id for b in cluster.bookies}
    assert {b.storage for b in cluster.bookies} == {"sorted", "db"}


def test_closed_and_open_ledgers_visible_in_zookeeper(cluster: Cluster) -> None:
    closed = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=25, digest="CRC32")
    opened = cluster.create_ledger(ensemble=2, write_quorum=2, ack_quorum=1, entries=7, close=False)
    assert closed["state"] == "CLOSED" and closed["lastEntryId"] == 24
    assert opened["state"] == "OPEN" and opened["lastEntryId"] == -1 and opened["lac"] == 6
    for result in (closed, opened):
        data, stat = cluster.kazoo.get(legacy_path(cluster.ledgers_root, result["ledgerId"]))
        assert data.startswith(b"BookieMetadataFormatVersion\t3\n")
        for bookie in result["ensembles"]["0"]:
            assert bookie.encode() in data
    # The shell, an independent reader, lists both.
    listed = cluster.shell("listledgers").stdout
    for result in (closed, opened):
        assert f"ledgerID: {result['ledgerId']}" in listed


def test_ledger_above_2_pow_31_uses_long_path(cluster: Cluster) -> None:
    ledger_id = 2**31 + 4_000_321  # far from the id ranges other modules plant (e.g. the Spark sweep's)
    cluster.create_ledger(ledger_id=ledger_id, entries=3)
    d = f"{ledger_id:019d}"
    path = f"{cluster.ledgers_root}/{d[:3]}/{d[3:7]}/{d[7:11]}/{d[11:15]}/L{d[15:]}"
    assert cluster.kazoo.exists(path) is not None


def test_killed_bookie_unregisters_within_session_timeout_and_is_healed(cluster: Cluster) -> None:
    n = 4
    path = cluster.registration_path(n)
    assert cluster.kazoo.exists(path)
    start = time.monotonic()
    cluster.kill_bookie(n)
    try:
        cluster.wait_unregistered(n, timeout=20)
        gone_after = time.monotonic() - start
        # zkTimeout=6000 ms; ZooKeeper may take up to one more tick plus session-expiry checks.
        assert gone_after < 6.0 + 4.0, gone_after
    finally:
        healed = cluster.heal_bookies()  # what the session fixture does before every test
    assert len(healed) == 1 and healed[0].startswith(f"bookie {n} had exited (code -9); restarted"), healed
    assert cluster.kazoo.exists(path)
    assert cluster.heal_bookies() == []


def test_deterministic_payload_matches_what_the_shell_reads(cluster: Cluster) -> None:
    result = cluster.create_ledger(entries=3, entry_size=40, digest="CRC32C")
    out = cluster.shell("readledger", "-l", str(result["ledgerId"]), "-fe", "0", "-le", "2", "-m").stdout
    for e in range(3):
        assert cluster.payload(result["ledgerId"], e, 40).decode() in out


def test_java_replication_worker_repairs_a_ledger_marked_in_java_format(cluster: Cluster) -> None:
    """The harness's ReplicationWorker is real: given a marker written the way Java writes it, it moves
    the lost bookie's fragments to another bookie and deletes the marker."""
    b1, b2, b3 = (cluster.bookie(n).bookie_id for n in (1, 2, 3))
    result = cluster.create_ledger(entries=20, bookies=[b1, b2, b3])
    lid = result["ledgerId"]
    marker = (
        f"{cluster.ledgers_root}/underreplication/ledgers/{(lid >> 48) & 0xFFFF:04x}/"
        f"{(lid >> 32) & 0xFFFF:04x}/{(lid >> 16) & 0xFFFF:04x}/{lid & 0xFFFF:04x}/urL{lid:010d}"
    )
    cluster.stop_bookie(1)
    worker = None
    try:
        cluster.wait_unregistered(1)
        cluster.kazoo.create(marker, f'replica: "{b1}"\nctime: {int(time.time() * 1000)}\n'.encode(), makepath=True)
        worker = cluster.start_replication_worker(seconds=120)
        deadline = time.monotonic() + 60
        while cluster.kazoo.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not cluster.kazoo.exists(marker)
        ensemble = cluster.ledger_info(lid)["ensembles"]["0"]
        assert b1 not in ensemble and {b2, b3} <= set(ensemble)
    finally:
        if worker is not None:
            worker.stop()
        cluster.start_bookie(1)
