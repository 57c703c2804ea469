"""Our repair worker on one cluster with Java's AutoRecovery halves: markers written by a real Java
Auditor are repaired by ours, and ours and a real Java ReplicationWorker working the same markers at
the same time each take a ledger only under Java's lock, so every ledger is repaired once, by one of
them, and the real Java client reads every entry afterwards."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kazoo.exceptions import NoNodeError

from auditor.bookie import BookieClientConfig, BookiePool
from auditor.checks.context import AuditContext
from auditor.durability.ids import LedgerId
from auditor.metadata.repair.lock import RepairLocks
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.repair.attempt import RepairOptions, Status
from auditor.repair.worker import RepairWorker
from devcluster.checks_util import bookie_lost, marker_leaves, remove_markers
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import mark_lost

pytestmark = pytest.mark.realcluster

SIZE = 100
ENTRIES = 30
VICTIM = 5
HOLDER = "bk-auditor@coexist"
CONFIG = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=0.5)


def _ledgers(cluster: Cluster, n: int) -> list[dict[str, Any]]:
    b = [cluster.bookie(i).bookie_id for i in (2, 3, VICTIM)]
    return cluster.create_ledgers(
        n, ensemble=3, write_quorum=2, ack_quorum=2, entries=ENTRIES, entry_size=SIZE, bookies=b
    )


async def _all_read_back(cluster: Cluster, lids: list[int]) -> None:
    victim = cluster.bookie(VICTIM).bookie_id
    for lid in lids:
        info = await asyncio.to_thread(cluster.ledger_info, lid)
        (ensemble,) = info["ensembles"].values()
        assert victim not in ensemble and len(set(ensemble)) == 3, info
        read = await asyncio.to_thread(cluster.read_ledger, lid, SIZE)
        assert (read["read"], read["badContent"]) == (ENTRIES, []), read
    for row in await asyncio.to_thread(cluster.copies, [str(lid) for lid in lids]):
        assert (row["missing"], row["corrupt"], row["unreadable"]) == ({}, {}, {}), row


# How long a Java ReplicationWorker may still hold a lock once the ledger's marker is gone: it took the
# lock after the marker was deleted (it does not look again) and gives it back only after checking every
# fragment of the ledger (ReplicationWorker.rereplicate, then markLedgerReplicated's finally).
LOCK_OUTLIVES_MARKER_S = 60.0


async def _locks_outliving_markers(
    cluster: Cluster, store: ZooKeeperMetadataStore, lids: list[int]
) -> list[tuple[int, str, float]]:
    """Wait (up to LOCK_OUTLIVES_MARKER_S) until no lock of `lids` is held; (ledger, holder, seconds it was
    still seen) for each lock seen once every marker was gone."""
    started = time.monotonic()
    seen: dict[int, tuple[str, float]] = {}
    while time.monotonic() - started < LOCK_OUTLIVES_MARKER_S + 5:
        held = 0
        for lid in lids:
            try:
                data, _ = cluster.kazoo.get(store.markers.lock(LedgerId.of(lid)))
            except NoNodeError:
                continue
            held += 1
            seen[lid] = (data.decode(errors="replace"), time.monotonic() - started)
        if not held:
            break
        await asyncio.sleep(0.05)
    return [(lid, holder, seconds) for lid, (holder, seconds) in sorted(seen.items())]


def _still_marked(cluster: Cluster, store: ZooKeeperMetadataStore, lids: list[int]) -> list[int]:
    return [lid for lid in lids if cluster.kazoo.exists(store.markers.marker(LedgerId.of(lid)))]


def _set_delay_zero(cluster: Cluster) -> bool:
    """lostBookieRecoveryDelay 0 for the Java Auditor; True if we created the znode (to delete it after)."""
    path = f"{cluster.ledgers_root}/underreplication/lostBookieRecoveryDelay"
    if cluster.kazoo.exists(path):
        cluster.kazoo.set(path, b"0")
        return False
    cluster.kazoo.create(path, b"0", makepath=True)
    return True


async def test_markers_of_a_real_java_auditor_are_repaired_by_ours(
    cluster: Cluster, store: ZooKeeperMetadataStore
) -> None:
    made = _ledgers(cluster, 4)
    lids = [r["ledgerId"] for r in made]
    before = marker_leaves(cluster)
    created = _set_delay_zero(cluster)
    auditor = cluster.start_java_auditor(seconds=300)
    try:
        with bookie_lost(cluster, VICTIM, made):
            cluster.wait_unregistered(VICTIM)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if len(_still_marked(cluster, store, lids)) == len(lids):
                    break
                await asyncio.sleep(0.5)
            auditor.stop()
            for lid in lids:  # Java's Auditor wrote them: its text, the lost bookie named
                data, _ = cluster.kazoo.get(store.markers.marker(LedgerId.of(lid)))
                assert f'replica: "{cluster.bookie(VICTIM).bookie_id}"' in data.decode()
            async with BookiePool(store.address_resolver(), CONFIG) as pool:
                worker = RepairWorker(AuditContext(store, pool), RepairLocks(store, HOLDER), RepairOptions())
                results = [await worker.repair(LedgerId.of(lid)) for lid in lids]
            assert [r.status for r in results] == [Status.REPAIRED] * len(lids), results
            # Only the lost bookie's stripe (WQ/E of the entries) was copied for each.
            assert [r.entries_copied for r in results] == [ENTRIES * 2 // 3] * len(lids)
            for lid in lids:
                assert cluster.kazoo.exists(store.markers.marker(LedgerId.of(lid))) is None
            await _all_read_back(cluster, lids)
    finally:
        auditor.stop()
        remove_markers(cluster, marker_leaves(cluster) - before)
        if created:
            try:
                cluster.kazoo.delete(f"{cluster.ledgers_root}/underreplication/lostBookieRecoveryDelay")
            except NoNodeError:
                pass


async def test_ours_and_a_real_java_replication_worker_share_the_markers(
    cluster: Cluster, store: ZooKeeperMetadataStore
) -> None:
    made = _ledgers(cluster, 10)
    lids = [r["ledgerId"] for r in made]
    before = marker_leaves(cluster)
    victim = cluster.bookie(VICTIM).bookie_id
    java = None
    try:
        with bookie_lost(cluster, VICTIM, made):
            cluster.wait_unregistered(VICTIM)
            await mark_lost(store, victim, lids)
            java = cluster.start_replication_worker(seconds=300)
            # Ours starts once Java holds one of these ledgers, so both get work.
            java_seen: set[int] = set()
            deadline = time.monotonic() + 90
            while not java_seen and time.monotonic() < deadline:
                for lid in lids:
                    try:
                        data, _ = cluster.kazoo.get(store.markers.lock(LedgerId.of(lid)))
                    except NoNodeError:
                        continue
                    if HOLDER not in data.decode():
                        java_seen.add(lid)
                await asyncio.sleep(0.05)
            assert java_seen, "Java's worker never took a ledger"
            ours: dict[int, int] = {}  # ledger -> entries we copied
            skipped = 0
            async with BookiePool(store.address_resolver(), CONFIG) as pool:
                worker = RepairWorker(AuditContext(store, pool), RepairLocks(store, HOLDER), RepairOptions())
                deadline = time.monotonic() + 240
                while time.monotonic() < deadline:
                    left = _still_marked(cluster, store, lids)
                    if not left:
                        break
                    for lid in left:
                        r = await worker.repair(LedgerId.of(lid))
                        if r.status is Status.REPAIRED:
                            ours[lid] = r.entries_copied
                        elif r.status is Status.SKIPPED:
                            skipped += 1  # held by Java's worker (or already done by it)
                        else:
                            pytest.fail(f"ledger {lid}: {r}")
                    await asyncio.sleep(0.2)
            assert not _still_marked(cluster, store, lids)
            by_java = set(lids) - set(ours)
            # Both worked; the ones Java held were never repaired by us.
            assert ours and by_java and not (java_seen & set(ours)), (ours, java_seen)
            assert all(n == ENTRIES * 2 // 3 for n in ours.values()), ours
            lingering = await _locks_outliving_markers(cluster, store, lids)
            # Ours gives a lock back right after its marker (or at once, when it wins a lock on finished
            # work); Java's worker takes a lock without looking at the marker again, so it can hold one on a
            # ledger we just finished until its own check of that ledger is done. Neither keeps it.
            assert not [(lid, holder) for lid, holder, _ in lingering if HOLDER in holder], lingering
            assert all(seconds < LOCK_OUTLIVES_MARKER_S for _, _, seconds in lingering), lingering
            await _all_read_back(cluster, lids)
    finally:
        if java is not None:
            java.stop()
        remove_markers(cluster, marker_leaves(cluster) - before)
