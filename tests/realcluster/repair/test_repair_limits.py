"""The repair workers' run-time limits through the daemon's admin API, against real BookKeeper 4.17.3:
an operator sets them on the leader (`bk-auditor repair-limits`; a standby refuses, naming the leader),
the leader writes them to our own subtree, and a running worker applies them before its next ledger: its
copy then goes at the byte rate set, and once they are cleared its own settings are back."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pytest

from auditor.admin.client import AdminClient, AdminClientError
from auditor.bookie import BookieClientConfig, BookiePool
from auditor.checks.context import AuditContext
from auditor.durability.ids import LedgerId
from auditor.metadata.repair.lock import RepairLocks
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.repair.attempt import LedgerRepair, RepairOptions, Status
from auditor.repair.worker import RepairWorker
from devcluster.checks_util import bookie_lost
from devcluster.cli_util import cli
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon
from devcluster.metadata_helpers import mark_lost
from tests.realcluster.daemon.test_daemon import start

pytestmark = pytest.mark.realcluster

CONFIG = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=0.5)
SIZE = 1024
ENTRIES = 30
VICTIM = 5
RATE = 5000.0


async def admin(d: Daemon) -> AdminClient:
    return AdminClient(f"127.0.0.1:{d.admin_port}", timeout=10)


async def next_ledger(worker: RepairWorker, ledger: int) -> LedgerRepair:
    """What `run_once` does before and for each ledger (the limits read, then the repair), for our ledger
    alone. The session cluster holds earlier tests' ledgers, and losing the victim gets every ledger on it
    marked: `run_once` took a 12 MB one of them first, at 5,000 bytes/s, and outlasted the test's timeout."""
    await worker.refresh_limits()
    return await worker.repair(LedgerId.of(ledger))


async def test_limits_set_on_the_leader_are_applied_by_a_running_worker(
    cluster: Cluster, store: ZooKeeperMetadataStore, daemons: list[Daemon], tmp_path: Path
) -> None:
    a = start(daemons, cluster, tmp_path, "auditor-a")
    await asyncio.to_thread(a.wait, a.is_leader, 30, "leadership")
    b = start(daemons, cluster, tmp_path, "auditor-b")
    await asyncio.to_thread(b.wait, lambda: b.health("liveness") == "SERVING", 30, "the standby up")
    async with await admin(a) as c:
        assert not (await c.repair_limits()).HasField("bytes_per_second")  # nothing set yet
        got = await c.set_repair_limits(bytes_per_second=RATE, entries_in_flight_per_bookie=2)
    assert (got.bytes_per_second, got.entries_in_flight_per_bookie) == (RATE, 2) and not got.HasField(
        "entries_in_flight"
    )
    assert got.set_by and got.set_at > 0
    data, _ = cluster.kazoo.get(f"{cluster.ledgers_root}/bk-auditor/repair/limits")
    doc = json.loads(data)
    assert (doc["bytesPerSecond"], doc["entriesInFlight"], doc["entriesInFlightPerBookie"]) == (RATE, None, 2)
    # A standby reads them but does not set them: it names the leader.
    async with await admin(b) as c:
        assert (await c.repair_limits()).bytes_per_second == RATE
        with pytest.raises(AdminClientError) as refused:
            await c.set_repair_limits(bytes_per_second=1.0)
    assert refused.value.code is grpc.StatusCode.FAILED_PRECONDITION and "auditor-a" in str(refused.value)
    # Invalid limits are refused with the reason, nothing written.
    async with await admin(a) as c:
        with pytest.raises(AdminClientError) as bad:
            await c.set_repair_limits(entries_in_flight=0)
    assert bad.value.code is grpc.StatusCode.INVALID_ARGUMENT and "entries in flight" in str(bad.value)
    shown = await asyncio.to_thread(cli, "repair-limits", "--admin", f"127.0.0.1:{a.admin_port}")
    assert shown.returncode == 0 and "5000" in shown.stdout and "unset (repair.entries_in_flight" in shown.stdout

    victim = cluster.bookie(VICTIM).bookie_id
    b1, b2 = (cluster.bookie(n).bookie_id for n in (1, 2))
    common = {"ensemble": 3, "write_quorum": 3, "ack_quorum": 2, "entries": ENTRIES, "entry_size": SIZE}
    made = [cluster.create_ledger(bookies=[b1, b2, victim], **common) for _ in range(2)]
    with bookie_lost(cluster, VICTIM, made):
        cluster.wait_unregistered(VICTIM, timeout=30)
        await mark_lost(store, victim, [made[0]["ledgerId"]])
        async with BookiePool(store.address_resolver(), CONFIG) as pool:
            worker = RepairWorker(AuditContext(store, pool), RepairLocks(store, "bk-auditor@limits"), RepairOptions())
            assert worker.byte_rate is None  # its own setting: unlimited
            first = await next_ledger(worker, made[0]["ledgerId"])
            assert first.status is Status.REPAIRED, first
            assert worker.byte_rate is not None and worker.byte_rate.rate == RATE
            assert worker.options.entries_in_flight_per_bookie == 2
            # ~31 KiB at 5,000 bytes/s (one second's burst first): at least about 5 s.
            assert first.duration_s >= (first.bytes_copied - RATE) / RATE * 0.9, first
            # Cleared: the next ledger goes at the worker's own settings again.
            async with await admin(a) as c:
                cleared = await c.set_repair_limits(clear=True)
            assert not cleared.HasField("bytes_per_second")
            await mark_lost(store, victim, [made[1]["ledgerId"]])
            second = await next_ledger(worker, made[1]["ledgerId"])
            assert second.status is Status.REPAIRED, second
            assert worker.byte_rate is None and worker.options.entries_in_flight_per_bookie == 32
            assert second.duration_s < first.duration_s / 2, (first, second)
        for r in made:
            read = await asyncio.to_thread(cluster.read_ledger, r["ledgerId"], SIZE)
            assert (read["read"], read["badContent"]) == (ENTRIES, []), read
