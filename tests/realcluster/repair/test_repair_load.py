"""The repair worker's per-bookie bound on adds in flight, over all its lanes, against real BookKeeper
4.17.3: four ledgers repaired at once (four lanes, eight entries in flight per copy) onto the same
replacement bookies, whose add replies a counting proxy slows down; at no time has any of them more than
`entries_in_flight_per_bookie` adds outstanding, and the bound is reached (the backlog is there). The
Java client reads every entry of every ledger afterwards."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import pytest

from auditor.bookie import BookieClientConfig, BookiePool
from auditor.checks.context import AuditContext
from auditor.durability.ids import LedgerId
from auditor.metadata.repair.lock import RepairLocks
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.repair.attempt import RepairOptions, Status
from auditor.repair.copy import CopyLimits
from auditor.repair.worker import RepairWorker
from devcluster.checks_util import bookie_lost
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import mark_lost
from tests.realcluster.hostile_proxy import counting_proxies_for

pytestmark = pytest.mark.realcluster

CONFIG = BookieClientConfig(request_timeout=10.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=0.5)
SIZE = 512
ENTRIES = 40
VICTIM = 5
LIMIT = 3


async def test_adds_in_flight_to_one_bookie_are_bounded_over_every_lane(
    cluster: Cluster, store: ZooKeeperMetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    b1, b2, victim = (cluster.bookie(n).bookie_id for n in (1, 2, VICTIM))
    made = [
        cluster.create_ledger(
            ensemble=3, write_quorum=3, ack_quorum=2, entries=ENTRIES, entry_size=SIZE, bookies=[b1, b2, victim]
        )
        for _ in range(4)
    ]
    lids = [r["ledgerId"] for r in made]
    candidates = {n: cluster.bookie(n) for n in (3, 4, 6)}  # every possible replacement, each behind a proxy
    async with AsyncExitStack() as stack:
        proxies = await counting_proxies_for(stack, store, candidates, monkeypatch, reply_delay=0.02)
        with bookie_lost(cluster, VICTIM, made):
            cluster.wait_unregistered(VICTIM, timeout=30)
            await mark_lost(store, victim, lids)
            options = RepairOptions(
                ledgers_in_parallel=4, copy_limits=CopyLimits(max_in_flight=8), entries_in_flight_per_bookie=LIMIT
            )
            async with BookiePool(store.address_resolver(), CONFIG) as pool:
                worker = RepairWorker(AuditContext(store, pool), RepairLocks(store, "bk-auditor@load"), options)
                results = await asyncio.gather(*(worker.repair(LedgerId.of(lid)) for lid in lids))
            assert [r.status for r in results] == [Status.REPAIRED] * 4, results
            counts = {b: (p.adds, p.max_in_flight) for b, p in proxies.items() if p.adds}
            assert sum(a for a, _ in counts.values()) == 4 * ENTRIES, counts  # WQ3: every entry on the victim
            assert all(m <= LIMIT for _, m in counts.values()), counts
            assert max(m for _, m in counts.values()) == LIMIT, counts  # the bound was reached
            for lid in lids:
                read = await asyncio.to_thread(cluster.read_ledger, lid, SIZE)
                assert (read["read"], read["badContent"]) == (ENTRIES, []), read
