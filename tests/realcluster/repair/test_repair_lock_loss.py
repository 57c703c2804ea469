"""No repair write after the repair lock is lost, against real ZooKeeper and real BookKeeper 4.17.3.

The lock guard (metadata.repair.lock.LockGuard): a guarded multi-op checks the session's proof node as well as
the lock, so a guard whose session expired is refused by ZooKeeper itself, even after kazoo replaced
the session and another worker re-created the lock (same path, version 0), with the local check
bypassed; a lock deleted and re-created by another client while our session lives is not accepted.

The bookie side: a worker copying a segment of thousands of entries (slowed by its byte rate) onto a
replacement behind a counting proxy; mid-copy its ZooKeeper session is expired server-side (a second
client with the same session id and password, closed), or the ledger is deleted by the real Java
client. No RECOVERY_ADD arrives after the worker could see it (beyond those already on the wire). After
the expiry the ledger ends blocked (`lock_lost`) and the marker stays; after the deletion it ends `gone`
and its marker is deleted, as Java's worker deletes a deleted ledger's marker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from auditor.bookie import BookieClientConfig, BookiePool
from auditor.checks.context import AuditContext
from auditor.durability.ids import LedgerId
from auditor.metadata.codecs import formats
from auditor.metadata.errors import NotLeaderError, RepairLockLostError
from auditor.metadata.repair.lock import LockGuard, RepairLocks
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.metadata.zk.bridge import start_client, stop_client
from auditor.repair.attempt import LedgerRepair, RepairOptions, Status
from auditor.repair.copy import CopyLimits
from auditor.repair.worker import RepairWorker
from devcluster import zkwriters
from devcluster.checks_util import bookie_lost, ledger_path
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import leader_of, mark_lost, open_store
from tests.realcluster.hostile_proxy import AddCountingProxy, counting_proxies_for

pytestmark = pytest.mark.realcluster

HOLDER = "bk-auditor@lock-loss"
OTHER = "other-worker:3181"
CONFIG = BookieClientConfig(request_timeout=10.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=0.5)
VICTIM = 5
ENTRIES = 3000
SIZE = 100
BYTES_PER_SECOND = 30_000  # about 200 adds a second: the segment takes some 15 s
STARTED = 300  # adds seen at the target before the fault: mid-copy
IN_FLIGHT = 4  # adds outstanding to the target at most (entries_in_flight_per_bookie)
ON_THE_WIRE_S = 0.5  # adds sent before the fault was seen may still reach the proxy this long after


def scratch_id(offset: int) -> LedgerId:
    return LedgerId.of(int(time.time() * 1000) % (2**31 - 10**6) + 10**6 + offset)


async def expire_session(cluster: Cluster, client: KazooClient) -> None:
    """ZooKeeper-side expiry: a second client with the same session id and password, then closed."""
    session_id, password = client.client_id
    twin = KazooClient(hosts=cluster.zk_hosts, client_id=(session_id, password), timeout=4.0)
    await start_client(twin)
    await stop_client(twin)


async def until(what: Callable[[], bool], timeout: float, why: str) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out: {why}")
        await asyncio.sleep(0.01)


@asynccontextmanager
async def scratch_marker(cluster: Cluster, store: ZooKeeperMetadataStore, offset: int) -> AsyncIterator[LedgerId]:
    """A scratch ledger id marked under-replicated, its writes guarded by a won election on a test path;
    afterwards its lock (whoever holds it) and its marker are deleted."""
    lid = scratch_id(offset)
    election = await leader_of(store)
    try:
        await zkwriters.ensure_underreplication_layout(store, election.guard)
        await store.mark_underreplicated(lid, ["127.0.0.9:3181"], election.guard)
        yield lid
    finally:
        await until(lambda: cluster.kazoo.connected, 60, "the test's own client connected")
        # A ZooKeeper restart inside the test deposes the election (a suspended leader stops writing) until
        # its session is back and it has re-checked its vote.
        await election.wait_leader(timeout=60)
        if cluster.kazoo.exists(store.markers.lock(lid)):
            cluster.kazoo.delete(store.markers.lock(lid))
        await zkwriters.delete_marker(store, lid, election.guard)
        await election.close()


# ------------------------------------------------------------------ the guard's multi-op


async def test_a_guard_whose_session_was_replaced_is_refused_by_zookeeper(
    cluster: Cluster, store: ZooKeeperMetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session that took the lock expires, kazoo gets a new one, another worker re-creates the lock
    (same path, Java's data, version 0): with the local check bypassed, the multi itself must refuse."""
    async with scratch_marker(cluster, store, 21) as lid:
        worker = await open_store(cluster.metadata_service_uri)
        try:
            held = await RepairLocks(worker, HOLDER).try_lock(lid)
            assert held is not None
            lock = store.markers.lock(lid)
            old = worker.client.client_id[0]
            await expire_session(cluster, worker.client)
            await until(
                lambda: worker.client.connected and worker.client.client_id[0] != old,
                30,
                "a new session for the worker",
            )
            cluster.kazoo.create(lock, formats.serialize_lock(OTHER), ephemeral=True)  # another worker's now
            monkeypatch.setattr(LockGuard, "check", lambda self: None)  # only ZooKeeper decides now
            with pytest.raises(RepairLockLostError):
                await worker.delete_marker(lid, held.guard, held.marker_version)
            assert cluster.kazoo.exists(store.markers.marker(lid)) is not None
            await RepairLocks(worker, HOLDER).release(held)  # refused by the multi: the other worker keeps it
            assert cluster.kazoo.get(lock)[0] == formats.serialize_lock(OTHER)
        finally:
            await worker.close()


async def test_a_lock_released_while_zookeeper_is_down_is_deleted_once_it_is_back(
    cluster: Cluster, store: ZooKeeperMetadataStore
) -> None:
    """A ZooKeeper restart suspends the connection but keeps the session, and with it the ephemeral lock.
    A release asked for meanwhile (a repair pass stopped by the disconnect) waits for the connection and
    deletes the lock then: the repair campaign's zk-restart round once left four locks held by a live
    session, so no worker took those ledgers until that session ended minutes later."""
    async with scratch_marker(cluster, store, 25) as lid:
        worker = await open_store(cluster.metadata_service_uri)
        try:
            locks = RepairLocks(worker, HOLDER)
            held = await locks.try_lock(lid)
            assert held is not None
            lock = store.markers.lock(lid)
            session = worker.client.client_id[0]
            assert cluster.zk is not None
            await asyncio.to_thread(cluster.zk.stop)
            try:
                await until(lambda: not worker.client.connected, 30, "the worker's connection suspended")
                assert worker.session_id == session  # suspended, not ended
                release = asyncio.ensure_future(locks.release(held))
                await asyncio.sleep(1.0)
                assert not release.done()  # waiting for ZooKeeper, not giving the lock up for lost
            finally:
                await asyncio.to_thread(cluster.zk.start)
            await asyncio.wait_for(release, 60)
            assert worker.client.client_id[0] == session  # the same session throughout
            await until(lambda: cluster.kazoo.connected, 60, "the test's own client reconnected")
            assert cluster.kazoo.exists(lock) is None
            again = await locks.try_lock(lid)  # free for the next pass at once
            assert again is not None
            await locks.release(again)
        finally:
            await worker.close()
    cluster.heal_bookies()


async def test_an_orphaned_lock_of_our_own_session_is_taken_back_and_no_one_elses(
    cluster: Cluster, store: ZooKeeperMetadataStore
) -> None:
    """A lock our live session holds but none of our lanes does (its release never reached ZooKeeper) is
    deleted and taken again by the next try; one a lane holds, or another session's, is not."""
    async with scratch_marker(cluster, store, 27) as lid:
        worker = await open_store(cluster.metadata_service_uri)
        lock = store.markers.lock(lid)
        try:
            locks = RepairLocks(worker, HOLDER)
            held = await locks.try_lock(lid)
            assert held is not None
            assert await RepairLocks(worker, HOLDER).try_lock(lid) is None  # a lane of this connection holds it
            first = cluster.kazoo.exists(lock)
            assert first is not None and first.ephemeralOwner == worker.client.client_id[0]
            # The release that could not reach ZooKeeper (as before the fix above): forgotten, still there.
            held.guard.released = True
            locks._held.discard(lock)
            again = await RepairLocks(worker, HOLDER).try_lock(lid)
            assert again is not None
            now = cluster.kazoo.exists(lock)
            assert now is not None and now.czxid != first.czxid and now.ephemeralOwner == first.ephemeralOwner
            await locks.release(again)
            # Another session's lock: left alone.
            cluster.kazoo.create(lock, formats.serialize_lock(OTHER), ephemeral=True)
            assert await locks.try_lock(lid) is None
            assert cluster.kazoo.get(lock)[0] == formats.serialize_lock(OTHER)
        finally:
            await worker.close()


async def test_a_lock_re_created_by_another_client_is_not_accepted(
    cluster: Cluster, store: ZooKeeperMetadataStore
) -> None:
    """Our session lives; our lock is deleted and re-created by another client (same path, version 0):
    the lock's watch marks the guard lost, no write is made under it and the other lock is not released."""
    async with scratch_marker(cluster, store, 23) as lid:
        locks = RepairLocks(store, HOLDER)
        held = await locks.try_lock(lid)
        assert held is not None
        lock = store.markers.lock(lid)
        # The proof is ours, in our own subtree, and the lock is Java's, byte for byte.
        proof = cluster.kazoo.exists(held.guard.proof_path)
        assert proof is not None and proof.ephemeralOwner == store.client.client_id[0]
        assert held.guard.proof_path.startswith(f"{cluster.ledgers_root}/bk-auditor/repair-sessions/")
        data, stat = cluster.kazoo.get(lock)
        assert data == f'bookieId: "{HOLDER}"\n'.encode() and stat.ephemeralOwner == store.client.client_id[0]
        cluster.kazoo.delete(lock)
        cluster.kazoo.create(lock, formats.serialize_lock(OTHER), ephemeral=True)
        await until(lambda: held.guard.lost is not None, 10, "the lock's watch to fire")
        with pytest.raises(RepairLockLostError):
            held.guard.check()
        assert held.guard.write_refusal() is not None
        with pytest.raises(NotLeaderError):
            await locks.mark_replicated(held)
        assert cluster.kazoo.exists(store.markers.marker(lid)) is not None
        assert cluster.kazoo.get(lock)[0] == formats.serialize_lock(OTHER)


# ------------------------------------------------------------------ the bookie writes


@asynccontextmanager
async def slow_copy(
    cluster: Cluster, store: ZooKeeperMetadataStore, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[dict[str, Any], dict[str, AddCountingProxy], RepairWorker]]:
    """A ledger of ENTRIES entries on bookies 1, 2 and VICTIM (E3/WQ3), VICTIM lost, the ledger marked;
    every possible replacement behind a counting proxy; a worker whose byte rate makes the copy slow."""
    b1, b2, victim = (cluster.bookie(n).bookie_id for n in (1, 2, VICTIM))
    made = cluster.create_ledger(
        ensemble=3, write_quorum=3, ack_quorum=2, entries=ENTRIES, entry_size=SIZE, bookies=[b1, b2, victim]
    )
    async with AsyncExitStack() as stack:
        proxies = await counting_proxies_for(stack, store, {n: cluster.bookie(n) for n in (3, 4, 6)}, monkeypatch)
        with bookie_lost(cluster, VICTIM, [made]):
            cluster.wait_unregistered(VICTIM, timeout=30)
            await mark_lost(store, victim, [made["ledgerId"]])
            options = RepairOptions(
                bytes_per_second=BYTES_PER_SECOND,
                copy_limits=CopyLimits(max_in_flight=IN_FLIGHT),
                entries_in_flight_per_bookie=IN_FLIGHT,
            )
            async with BookiePool(store.address_resolver(), CONFIG) as pool:
                worker = RepairWorker(AuditContext(store, pool), RepairLocks(store, HOLDER), options)
                try:
                    yield made, proxies, worker
                finally:
                    marker = store.markers.marker(LedgerId.of(made["ledgerId"]))
                    if cluster.kazoo.exists(marker):
                        cluster.kazoo.delete(marker)


def adds(proxies: dict[str, AddCountingProxy]) -> int:
    return sum(p.adds for p in proxies.values())


async def fault_mid_copy(
    proxies: dict[str, AddCountingProxy],
    repair: asyncio.Task[LedgerRepair],
    fault: Callable[[], Awaitable[None]],
    seen: Callable[[], bool],
) -> tuple[int, int, int]:
    """Start the fault once STARTED adds reached the target; returns (adds when the worker could see
    it, adds ON_THE_WIRE_S later, adds when the repair ended)."""
    await until(lambda: adds(proxies) >= STARTED or repair.done(), 60, "the copy to start")
    assert not repair.done(), repair.result()
    faulted = asyncio.ensure_future(fault())
    await until(seen, 30, "the fault to be visible to the worker")
    at_seen = adds(proxies)
    await asyncio.sleep(ON_THE_WIRE_S)
    settled = adds(proxies)
    await faulted
    await asyncio.wait({repair}, timeout=120)  # its outcome is judged after the counts
    assert repair.done(), "the repair did not end"
    return at_seen, settled, adds(proxies)


async def test_no_add_after_the_session_expiry_is_seen(
    cluster: Cluster, store: ZooKeeperMetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with slow_copy(cluster, store, monkeypatch) as (made, proxies, worker):
        lid = LedgerId.of(made["ledgerId"])
        old = store.client.client_id[0]
        repair = asyncio.ensure_future(worker.repair(lid))
        at_seen, settled, final = await fault_mid_copy(
            proxies,
            repair,
            lambda: expire_session(cluster, store.client),
            lambda: store.client.state != KazooState.CONNECTED or store.client.client_id[0] != old,
        )
        assert final == settled, f"{final - settled} adds after the session expiry was seen (at {at_seen})"
        assert settled - at_seen <= IN_FLIGHT, (at_seen, settled)
        assert final < ENTRIES // 2, final  # it stopped mid-copy
        result = repair.result()
        assert (result.status, result.reason) == (Status.BLOCKED, "lock_lost"), result
        await until(lambda: store.client.connected and store.client.client_id[0] != old, 30, "a new session")
        assert cluster.kazoo.exists(store.markers.lock(lid)) is None  # went with the expired session
        assert cluster.kazoo.exists(store.markers.marker(lid)) is not None
        assert cluster.bookie(VICTIM).bookie_id in cluster.ledger_info(lid.ledger)["ensembles"]["0"]


async def test_no_add_after_the_ledger_deletion_is_seen(
    cluster: Cluster, store: ZooKeeperMetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with slow_copy(cluster, store, monkeypatch) as (made, proxies, worker):
        lid = LedgerId.of(made["ledgerId"])
        path = ledger_path(cluster, lid.ledger)

        async def delete() -> None:
            await asyncio.to_thread(cluster.delete_ledger, lid.ledger)  # the real Java client

        repair = asyncio.ensure_future(worker.repair(lid))
        at_seen, settled, final = await fault_mid_copy(
            proxies, repair, delete, lambda: cluster.kazoo.exists(path) is None
        )
        assert final == settled, f"{final - settled} adds after the deletion was seen (at {at_seen})"
        assert settled - at_seen <= IN_FLIGHT, (at_seen, settled)
        # Stopped before the segment's end. The Java client's deletion takes a JVM's start-up, seconds
        # on a loaded machine, so how far the copy got first varies; the counts above are the point.
        assert final < ENTRIES, final
        result = repair.result()
        assert result.status is Status.GONE, result
        assert cluster.kazoo.exists(store.markers.lock(lid)) is None  # released
        assert cluster.kazoo.exists(store.markers.marker(lid)) is None  # finished work: no marker left
