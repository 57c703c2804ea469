"""The repair's lean evidence on DbLedgerStorage (real BookKeeper 4.17.3, ledgers written by the real Java
client): for a ledger whose metadata names a gone bookie, a survivor that cannot list entries is not read
before copying (its answer is its expected share, `Assessment.assumed`) unless
`repair.read_unlistable_copies` asks for it; the copy's own verified reads are the evidence, so the
repaired ledger is whole by Java's census and reads, and an entry with no copy anywhere is still named
lost (data loss), never copied on trust."""

from __future__ import annotations

import asyncio

import pytest

from auditor.bookie import BookieClientConfig, BookiePool
from auditor.checks.context import AuditContext
from auditor.durability.coverage import UNKNOWN
from auditor.durability.ids import LedgerId
from auditor.durability.repairplan import ActionKind
from auditor.metadata.repair.lock import RepairLocks
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.repair.attempt import RepairOptions, Status
from auditor.repair.evidence import BookieStates, assess
from auditor.repair.worker import RepairWorker
from devcluster.checks_util import bookie_lost, remove_markers, rewrite_ensemble
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import mark_lost

pytestmark = pytest.mark.realcluster

CONFIG = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=0.5)
SIZE = 512
ENTRIES = 30
VICTIM = 4
DB_BOOKIE = 6  # the session cluster's DbLedgerStorage bookie (tests/conftest.py)


async def test_a_lost_bookie_is_repaired_from_the_copies_own_reads_on_db_storage(
    cluster: Cluster, store: ZooKeeperMetadataStore
) -> None:
    victim, db, b2, b3 = (cluster.bookie(n).bookie_id for n in (VICTIM, DB_BOOKIE, 2, 3))
    common = {"ensemble": 3, "write_quorum": 2, "ack_quorum": 2, "entries": ENTRIES, "entry_size": SIZE}
    good = cluster.create_ledger(bookies=[victim, db, b2], **common)
    # Index 1 of "loss" names the DbLedgerStorage bookie, which never held it: with the victim gone, the
    # entries e = 0 mod 3 (write set {victim, db}) have no copy anywhere.
    loss = cluster.create_ledger(bookies=[victim, b2, b3], **common)
    rewrite_ensemble(cluster, loss["ledgerId"], b2, db)
    with bookie_lost(cluster, VICTIM, [good, loss]):
        cluster.wait_unregistered(VICTIM, timeout=30)
        lids = [LedgerId.of(r["ledgerId"]) for r in (good, loss)]
        await mark_lost(store, victim, [lid.ledger for lid in lids])
        async with BookiePool(store.address_resolver(), CONFIG) as pool:
            ctx = AuditContext(store, pool)
            states = BookieStates(0)
            states.update(await store.registrations())
            md = (await store.read_ledger(lids[0])).metadata
            # Lean: the DbLedgerStorage survivor is not read; the sorted one lists; the victim is replaced.
            lean = await assess(ctx, md, states, read_unlistable=False)
            assert lean.assumed == {db}
            assert lean.plan is not None and [a.kind for a in lean.plan.actions] == [ActionKind.REPLACE]
            assert lean.plan.actions[0].bookie == victim
            # Asked to read every copy: the same plan from the copy read entry by entry.
            full = await assess(ctx, md, states, read_unlistable=True)
            assert full.assumed == frozenset() and full.evidence.answers[db] is not UNKNOWN
            assert full.plan is not None and full.plan.actions == lean.plan.actions

            worker = RepairWorker(ctx, RepairLocks(store, "bk-auditor@lean"), RepairOptions())
            repaired = await worker.repair(lids[0])
            assert (repaired.status, repaired.detail) == (Status.REPAIRED, "marker_deleted"), repaired
            assert repaired.entries_copied == ENTRIES * 2 // 3
            blocked = await worker.repair(lids[1])
            assert (blocked.status, blocked.reason) == (Status.BLOCKED, "data_loss"), blocked
            lost_entries = [e for e in range(ENTRIES) if e % 3 == 0]
            assert str(lost_entries[0]) in blocked.detail, blocked.detail
        assert cluster.kazoo.exists(store.markers.marker(lids[1])) is not None
        remove_markers(cluster, [store.markers.marker(lids[1])])
        # Java's census: every entry of the repaired ledger whole on its write set; its reads agree.
        [row] = await asyncio.to_thread(cluster.copies, [str(good["ledgerId"])])
        assert (row["missing"], row["corrupt"], row["unreadable"]) == ({}, {}, {}), row
        info = await asyncio.to_thread(cluster.ledger_info, good["ledgerId"])
        assert all(victim not in ens for ens in info["ensembles"].values()), info
        read = await asyncio.to_thread(cluster.read_ledger, good["ledgerId"], SIZE)
        assert (read["read"], read["badContent"]) == (ENTRIES, []), read
