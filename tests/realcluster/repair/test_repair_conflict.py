"""The repair worker as a whole against metadata that changes while it copies, on real BookKeeper 4.17.3:
a ledger's stripe copied slowly (a byte rate), and meanwhile its metadata rewritten. When the segment being
repaired is unchanged (another field moved the version), the worker's compare-and-set conflicts, it re-reads
and re-applies on top, and the repair completes; when that segment itself changed, it commits nothing
and the ledger is blocked (`segment_changed`), so a concurrent change is never overwritten. (A live Java
writer's ensemble change against the same update: tests/realcluster/repair/test_repair_protocol.py.)"""

from __future__ import annotations

import asyncio
import time

import pytest

from auditor.bookie import BookieClientConfig, BookiePool
from auditor.checks.context import AuditContext
from auditor.durability.ids import LedgerId
from auditor.durability.repairplan import Backoff
from auditor.metadata.repair.lock import RepairLocks
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.repair.attempt import RepairOptions, Status
from auditor.repair.worker import RepairWorker
from devcluster.checks_util import bookie_lost, ledger_path, remove_markers, rewrite_ensemble
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import mark_lost

pytestmark = pytest.mark.realcluster

CONFIG = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=0.5)
SIZE = 1024
ENTRIES = 40
VICTIM = 5
SLOW = RepairOptions(bytes_per_second=3000)  # the victim's stripe (~27 KiB) takes about 8 s to copy


async def copying(cluster: Cluster, store: ZooKeeperMetadataStore, lid: int) -> None:
    """Until the worker holds the ledger's lock, then one second more: the copy is under way."""
    deadline = time.monotonic() + 30
    while cluster.kazoo.exists(store.markers.lock(LedgerId.of(lid))) is None:
        assert time.monotonic() < deadline, "the worker never took the lock"
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)


async def test_a_concurrent_metadata_change_is_re_applied_on_or_blocks(
    cluster: Cluster, store: ZooKeeperMetadataStore
) -> None:
    b1, b2, b4, victim = (cluster.bookie(n).bookie_id for n in (1, 2, 4, VICTIM))
    common = {"ensemble": 3, "write_quorum": 2, "ack_quorum": 2, "entries": ENTRIES, "entry_size": SIZE}
    other_field = cluster.create_ledger(bookies=[b1, b2, victim], **common)
    same_segment = cluster.create_ledger(bookies=[b1, b2, victim], **common)
    with bookie_lost(cluster, VICTIM, [other_field, same_segment]):
        cluster.wait_unregistered(VICTIM, timeout=30)
        lids = [other_field["ledgerId"], same_segment["ledgerId"]]
        await mark_lost(store, victim, lids)
        async with BookiePool(store.address_resolver(), CONFIG) as pool:
            worker = RepairWorker(AuditContext(store, pool), RepairLocks(store, "bk-auditor@conflict"), SLOW)

            # 1. The version moves, the segment does not (an identical rewrite, as any field's update
            #    would): re-read, re-applied on top, repaired.
            lid = lids[0]
            task = asyncio.ensure_future(worker.repair(LedgerId.of(lid)))
            await copying(cluster, store, lid)
            path = ledger_path(cluster, lid)
            data, stat = cluster.kazoo.get(path)
            moved = cluster.kazoo.set(path, data, version=stat.version)
            assert not task.done(), "the copy ended before the metadata changed: slow it down"
            result = await task
            assert (result.status, result.detail) == (Status.REPAIRED, "marker_deleted"), result
            _, final = cluster.kazoo.get(path)
            assert final.version > moved.version  # our update landed on top of the concurrent one
            info = await asyncio.to_thread(cluster.ledger_info, lid)
            new = info["ensembles"]["0"]
            assert new[:2] == [b1, b2] and new[2] not in (b1, b2, victim), info
            read = await asyncio.to_thread(cluster.read_ledger, lid, SIZE)
            assert (read["read"], read["badContent"]) == (ENTRIES, []), read

            # 2. The segment being repaired changes (another repairer replaced its first bookie): nothing
            #    committed over it, the ledger blocked and its marker kept.
            lid = lids[1]
            task = asyncio.ensure_future(worker.repair(LedgerId.of(lid)))
            await copying(cluster, store, lid)
            rewrite_ensemble(cluster, lid, b1, b4)
            assert not task.done(), "the copy ended before the metadata changed: slow it down"
            result = await task
            assert (result.status, result.reason) == (Status.BLOCKED, "segment_changed"), result
            info = await asyncio.to_thread(cluster.ledger_info, lid)
            assert info["ensembles"]["0"] == [b4, b2, victim], info  # the concurrent change stands
            assert cluster.kazoo.exists(store.markers.marker(LedgerId.of(lid))) is not None
            assert cluster.kazoo.exists(store.markers.lock(LedgerId.of(lid))) is None
            remove_markers(cluster, [store.markers.marker(LedgerId.of(lid))])  # its ledger goes with the block


async def test_the_clusters_lost_bookie_recovery_delay_is_honoured(
    cluster: Cluster, store: ZooKeeperMetadataStore
) -> None:
    """A bookie the worker saw registered and then lose its registration is waited for while the
    cluster's `lostBookieRecoveryDelay` (the znode Java's shell sets) runs, and replaced once an operator
    sets it to 0: the worker reads it before each ledger, not only its own setting (here 0)."""
    b1, b2, victim = (cluster.bookie(n).bookie_id for n in (1, 2, VICTIM))
    r = cluster.create_ledger(
        ensemble=3, write_quorum=2, ack_quorum=2, entries=ENTRIES, entry_size=SIZE, bookies=[b1, b2, victim]
    )
    lid = LedgerId.of(r["ledgerId"])
    delay_path = f"{cluster.ledgers_root}/underreplication/lostBookieRecoveryDelay"
    if cluster.kazoo.exists(delay_path):
        cluster.kazoo.set(delay_path, b"3600")
    else:
        cluster.kazoo.create(delay_path, b"3600", makepath=True)
    try:
        async with BookiePool(store.address_resolver(), CONFIG) as pool:
            options = RepairOptions(backoff=Backoff(cap_s=32))  # 1 s after the first failure
            worker = RepairWorker(AuditContext(store, pool), RepairLocks(store, "bk-auditor@delay"), options)
            await worker.pending()  # sees the victim registered
            with bookie_lost(cluster, VICTIM, [r]):
                cluster.wait_unregistered(VICTIM, timeout=30)
                await mark_lost(store, victim, [lid.ledger])
                waiting = await worker.repair(lid)
                assert (waiting.status, waiting.reason) == (Status.BLOCKED, "wait_unknown"), waiting
                assert worker.states.recovery_delay_s == 3600
                cluster.kazoo.set(delay_path, b"0")  # the operator: replace it now
                await asyncio.sleep(1.2)  # the backoff
                done = await worker.repair(lid)
                assert done.status is Status.REPAIRED, done
                info = await asyncio.to_thread(cluster.ledger_info, lid.ledger)
                assert victim not in info["ensembles"]["0"], info
                read = await asyncio.to_thread(cluster.read_ledger, lid.ledger, SIZE)
                assert (read["read"], read["badContent"]) == (ENTRIES, []), read
    finally:
        cluster.kazoo.delete(delay_path)
