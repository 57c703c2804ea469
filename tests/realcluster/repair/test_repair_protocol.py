"""The repair worker's ZooKeeper half against the real peers: Java's lock protocol shared with a real Java
ReplicationWorker, the marker deleted at the captured version only, `disable`, and the version-checked
ensemble update read back by the real Java client while a live Java writer changes the same ledger."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from kazoo.exceptions import NoNodeError

from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata
from auditor.durability.repairplan import with_member
from auditor.metadata.bookkeeper.election import LeaderElection
from auditor.metadata.errors import NotLeaderError, RepairLockLostError
from auditor.metadata.interfaces import ReleaseOutcome
from auditor.metadata.repair.ensemble import UpdateOutcome, replace_member
from auditor.metadata.repair.lock import RepairLocks
from auditor.metadata.store import ZooKeeperMetadataStore
from devcluster import zkwriters
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import java_to_string, leader_of, listunderreplicated, open_store

pytestmark = pytest.mark.realcluster

HOLDER = f"bk-auditor@{socket.gethostname()}"


@pytest.fixture
async def zk(cluster: Cluster) -> AsyncIterator[tuple[ZooKeeperMetadataStore, LeaderElection, RepairLocks]]:
    """A store, a won election (the auditor's guard, to write markers as our auditor does) and the
    repair locks on the same connection."""
    store = await open_store(cluster.metadata_service_uri)
    election = await leader_of(store)
    try:
        await zkwriters.ensure_underreplication_layout(store, election.guard)
        yield store, election, RepairLocks(store, HOLDER)
    finally:
        await election.close()
        await store.close()


async def test_lock_protocol_shared_with_a_java_replication_worker(cluster: Cluster, zk) -> None:
    store, election, locks = zk
    b1, b2, b3 = (cluster.bookie(n).bookie_id for n in (1, 2, 3))
    # Enough data that Java's copy takes a while: its lock can be seen held.
    lid = cluster.create_ledger(
        ensemble=3, write_quorum=3, ack_quorum=2, entries=3000, entry_size=4096, bookies=[b1, b2, b3]
    )["ledgerId"]
    lock_path = store.markers.lock(lid)
    marker = store.markers.marker(lid)
    worker = None
    cluster.stop_bookie(1)
    try:
        cluster.wait_unregistered(1)
        await store.mark_underreplicated(lid, [b1], election.guard)
        held = await locks.try_lock(LedgerId.of(lid))
        assert held is not None and held.marker_version == 0
        # Java's lock data format, readable by Java's own tool.
        data, stat = cluster.kazoo.get(lock_path)
        assert data == f'bookieId: "{HOLDER}"\n'.encode()
        assert stat.ephemeralOwner == store.client.client_id[0]
        assert listunderreplicated(cluster)[lid]["worker"] == HOLDER
        assert await locks.try_lock(LedgerId.of(lid)) is None  # held: not taken twice
        # A real Java worker skips the ledger while we hold it.
        worker = cluster.start_replication_worker(seconds=300)
        await asyncio.sleep(8)
        assert cluster.kazoo.get(lock_path)[1].czxid == stat.czxid
        assert cluster.kazoo.exists(marker) is not None
        assert b1 in cluster.ledger_info(lid)["ensembles"]["0"]
        # Released, Java's worker takes it; while it holds the lock, ours cannot take it.
        await locks.release(held)
        seen_java_lock = 0
        deadline = time.monotonic() + 120
        while cluster.kazoo.exists(marker) is not None and time.monotonic() < deadline:
            before = cluster.kazoo.exists(lock_path)
            if before is None or before.ephemeralOwner == store.client.client_id[0]:
                await asyncio.sleep(0.02)
                continue
            got = await locks.try_lock(LedgerId.of(lid))
            after = cluster.kazoo.exists(lock_path)
            if got is not None:
                await locks.release(got)
                pytest.fail(
                    f"took {lock_path} while Java's worker held it (marker still there: "
                    f"{cluster.kazoo.exists(marker) is not None})"
                )
            if after is not None and after.czxid == before.czxid:
                seen_java_lock += 1
                try:
                    holder = cluster.kazoo.get(lock_path)[0].decode()
                except NoNodeError:
                    continue  # Java's worker finished and released it just now
                assert holder.startswith('bookieId: "') and HOLDER not in holder
        assert cluster.kazoo.exists(marker) is None, "Java's worker did not finish the ledger"
        assert seen_java_lock >= 1
        assert b1 not in cluster.ledger_info(lid)["ensembles"]["0"]
    finally:
        if worker is not None:
            worker.stop()
        cluster.start_bookie(1)


async def test_marker_deleted_only_at_the_captured_version(cluster: Cluster, zk) -> None:
    store, election, locks = zk
    lid = LedgerId.of(int(time.time() * 1000) % (2**31 - 10**6) + 10**6)
    marker = store.markers.marker(lid)
    await store.mark_underreplicated(lid, ["127.0.0.9:3181"], election.guard)
    held = await locks.try_lock(lid)
    assert held is not None and held.marker_version == 0
    # The auditor re-marks while we work: the version moves on and the marker must survive our delete.
    await store.mark_underreplicated(lid, ["127.0.0.8:3181"], election.guard)
    assert await locks.mark_replicated(held) is ReleaseOutcome.MARKER_KEPT
    assert cluster.kazoo.exists(store.markers.lock(lid)) is None  # the lock is released anyway
    assert cluster.kazoo.get(marker)[0].count(b"replica:") == 2
    # A write with a released lock is refused, before ZooKeeper sees it.
    with pytest.raises(RepairLockLostError):
        await store.delete_marker(lid, held.guard, 1)
    # Next pass: captured at version 1, deleted, parents cleaned, Java no longer lists it.
    again = await locks.try_lock(lid)
    assert again is not None and again.marker_version == 1
    assert await locks.mark_replicated(again) is ReleaseOutcome.MARKER_DELETED
    assert cluster.kazoo.exists(marker) is None
    assert cluster.kazoo.exists(marker.rsplit("/", 1)[0]) is None
    assert lid.ledger not in listunderreplicated(cluster)
    # A lock that vanished (its session expired; simulated by deleting the znode) guards nothing: the
    # server-side check refuses the write even though our session is alive.
    await store.mark_underreplicated(lid, ["127.0.0.9:3181"], election.guard)
    third = await locks.try_lock(lid)
    assert third is not None
    cluster.kazoo.delete(store.markers.lock(lid))
    with pytest.raises(NotLeaderError):
        await locks.mark_replicated(third)
    assert cluster.kazoo.exists(marker) is not None
    await zkwriters.delete_marker(store, lid, election.guard)


async def test_lock_of_an_ended_session_guards_nothing(cluster: Cluster, zk) -> None:
    store, election, _ = zk
    lid = LedgerId.of(int(time.time() * 1000) % (2**31 - 10**6) + 10**6 + 7)
    await store.mark_underreplicated(lid, ["127.0.0.9:3181"], election.guard)
    other = await open_store(cluster.metadata_service_uri)
    try:
        held = await RepairLocks(other, HOLDER).try_lock(lid)
        assert held is not None
    finally:
        await other.close()  # the session ends: its ephemeral lock goes with it
    assert cluster.kazoo.exists(store.markers.lock(lid)) is None
    with pytest.raises(RepairLockLostError):
        held.guard.check()
    assert cluster.kazoo.exists(store.markers.marker(lid)) is not None
    await zkwriters.delete_marker(store, lid, election.guard)


async def test_lock_won_after_the_marker_went_is_given_back(cluster: Cluster, zk, monkeypatch) -> None:
    """Java's worker deletes the marker, cleans the parents, then drops its lock: a lock created in that
    gap must not be kept (it was, and held a finished ledger; the shared-protocol test caught it in CI)."""
    store, election, locks = zk
    lid = LedgerId.of(int(time.time() * 1000) % (2**31 - 10**6) + 10**6 + 11)
    marker = store.markers.marker(lid)
    await store.mark_underreplicated(lid, ["127.0.0.9:3181"], election.guard)
    looked = store.exists

    async def java_finishes_after_our_look(path: str, watch=None):
        stat = await looked(path, watch)
        if path == marker and stat is not None:
            cluster.kazoo.delete(marker)  # between our look and our create, as Java's worker may
        return stat

    monkeypatch.setattr(store, "exists", java_finishes_after_our_look)
    assert await locks.try_lock(lid) is None
    assert cluster.kazoo.exists(store.markers.lock(lid)) is None


async def test_disable_is_honoured(cluster: Cluster, zk) -> None:
    store, election, locks = zk
    lid = LedgerId.of(int(time.time() * 1000) % (2**31 - 10**6) + 10**6 + 13)
    await store.mark_underreplicated(lid, ["127.0.0.9:3181"], election.guard)
    cluster.shell("autorecovery", "-disable")
    try:
        assert await locks.is_disabled()
        assert await locks.try_lock(lid) is None
        assert cluster.kazoo.exists(store.markers.lock(lid)) is None
        assert await locks.wait_enabled(timeout=1.0) is False
        waiting = asyncio.ensure_future(locks.wait_enabled(timeout=60))
        await asyncio.sleep(0.5)
        assert not waiting.done()
        await asyncio.to_thread(cluster.shell, "autorecovery", "-enable")
        assert await asyncio.wait_for(waiting, 10) is True
    finally:
        if cluster.kazoo.exists(store.markers.disable):
            cluster.shell("autorecovery", "-enable")
    held = await locks.try_lock(lid)
    assert held is not None
    await locks.release(held)
    await zkwriters.delete_marker(store, lid, election.guard)


async def test_ensemble_update_read_back_by_java(cluster: Cluster, zk) -> None:
    store, election, locks = zk
    b1, b2, b3, b4 = (cluster.bookie(n).bookie_id for n in (1, 2, 3, 4))
    lid = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=30, bookies=[b1, b2, b3])["ledgerId"]
    await store.mark_underreplicated(lid, [b3], election.guard)
    held = await locks.try_lock(LedgerId.of(lid))
    assert held is not None
    try:
        planned = (await store.read_ledger(lid)).metadata
        done = await replace_member(store, planned, 0, 2, b4, held.guard)
        assert done.outcome is UpdateOutcome.UPDATED and done.attempts == 1
        stored = (await store.read_ledger(lid)).metadata
        assert stored == replace(with_member(planned, 0, 2, b4), version=planned.version + 1)
        # Java reads it back: the shell prints the same metadata, the client addresses the new member
        # (b4 was given nothing, so Java's own census finds exactly its stripe missing there).
        assert java_to_string(stored) in cluster.shell("ledgermetadata", "-l", str(lid)).stdout
        assert cluster.ledger_info(lid)["ensembles"]["0"] == [b1, b2, b4]
        (census,) = cluster.copies([str(lid)])
        assert census["missing"] == {b4: [e for e in range(30) if e % 3 in (1, 2)]}
        assert census["corrupt"] == {} and census["unreadable"] == {}
        # ... and the Java client still reads every entry, right, from the other member of each write set.
        read = cluster.read_ledger(lid, 64)
        assert read["read"] == 30 and read["badContent"] == []
        # Another party changes the segment between our plan and our write: refused, nothing written.
        other = await replace_member(store, planned, 0, 2, cluster.bookie(5).bookie_id, held.guard)
        assert other.outcome is UpdateOutcome.SEGMENT_CHANGED and other.attempts == 2
        assert (await store.read_ledger(lid)).metadata == stored
        # Back to b3, which holds the data: the real Java client reads every entry from every member
        # of its write set, digests verified.
        back = await replace_member(store, stored, 0, 2, b3, held.guard)
        assert back.outcome is UpdateOutcome.UPDATED
        (census,) = cluster.copies([str(lid)])
        assert census["reads"] == 60 and census["missing"] == {} and census["corrupt"] == {}
        assert census["unreadable"] == {}
        read = cluster.read_ledger(lid, 64)
        assert read["read"] == 30 and read["badContent"] == []
    finally:
        await locks.release(held)
        await zkwriters.delete_marker(store, lid, election.guard)


async def test_concurrent_ensemble_change_by_a_live_java_writer(cluster: Cluster, zk) -> None:
    """A live Java writer replaces a failed bookie (a new segment) between our plan and our write: the
    compare-and-set conflicts, the segment we repair is unchanged, the replacement is re-applied on top of
    the writer's change, and both survive. Planning on the writer's own last segment is refused."""
    store, election, locks = zk
    b = [cluster.bookie(n).bookie_id for n in range(1, 7)]
    pool = b[:5]
    pause = cluster.workdir / f"pause-{time.monotonic_ns()}"
    writer = _paused_writer(cluster, b[:3], b[:5], pause)
    killed: list[int] = []
    held = None
    lid = None
    try:
        assert writer.stdout is not None
        line = await asyncio.to_thread(writer.stdout.readline)
        assert line.startswith("PAUSED"), line
        lid = int(line.split('"ledgerId":')[1].split(",")[0])
        await store.mark_underreplicated(lid, [b[2]], election.guard)
        held = await locks.try_lock(LedgerId.of(lid))
        assert held is not None
        # The last segment of an open ledger is the writer's: refused, nothing written.
        first = (await store.read_ledger(lid)).metadata
        refused = await replace_member(store, first, 0, 2, b[5], held.guard)
        assert refused.outcome is UpdateOutcome.SEGMENT_CHANGED and "open ledger" in refused.reason
        assert (await store.read_ledger(lid)).metadata == first
        # First failure: the writer appends segment 2 -> segment 0 becomes repairable; we plan on it.
        cluster.kill_bookie(3)
        killed.append(3)
        pause.touch()
        planned = await _wait_segments(store, lid, 2)
        # Second failure while we "copy": the writer changes its last segment again, replacing it in
        # place (no entry acked since the last change) or appending one (§5); either way the version moves.
        replaced = planned.segments[-1].ensemble
        victim = next(n for n in (4, 5) if cluster.bookie(n).bookie_id in replaced)
        cluster.kill_bookie(victim)
        killed.append(victim)
        changed = await _wait_replaced(store, lid, cluster.bookie(victim).bookie_id)
        assert changed.version > planned.version and changed.segments[0] == planned.segments[0]
        done = await replace_member(store, planned, 0, 2, b[5], held.guard)
        # At least one conflict, re-read and re-applied (under load the writer may move the version
        # once more before our write lands: then one more attempt).
        assert done.outcome is UpdateOutcome.UPDATED and done.attempts >= 2, done
        assert done.metadata.segments[1:] == changed.segments[1:] or done.metadata.version > changed.version + 1
        out = await asyncio.to_thread(writer.communicate, timeout=180)
        assert writer.returncode == 0, out
        final = (await store.read_ledger(lid)).metadata
        assert final.segments[0].ensemble == (b[0], b[1], b[5])
        # The writer's last segment no longer names the victim; an earlier segment may (when the writer
        # appended a segment rather than replacing in place, the entries written before stay there).
        assert cluster.bookie(victim).bookie_id not in final.segments[-1].ensemble
        # The writer's segments as our write left them, unless the writer changed them again after it: the
        # Java client may pick a killed bookie whose registration has not expired yet, then replace that
        # one too, in place (make test saw 5 -> 3 -> 4 in the last segment).
        assert final.segments[1:] == done.metadata.segments[1:] or final.version > done.metadata.version
        info = cluster.ledger_info(lid)
        assert info["ensembles"]["0"] == [b[0], b[1], b[5]]
        assert java_to_string(final) in cluster.shell("ledgermetadata", "-l", str(lid)).stdout
    finally:
        if writer.poll() is None:
            pause.touch()
            writer.kill()
            writer.wait(10)
        if held is not None:
            await locks.release(held)
        for n in killed:
            cluster.start_bookie(n)
        if lid is not None:
            await zkwriters.delete_marker(store, lid, election.guard)


async def _wait_segments(store: ZooKeeperMetadataStore, lid: int, count: int) -> LedgerMetadata:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = (await store.read_ledger(lid)).metadata
        if len(md.segments) >= count:
            return md
        await asyncio.sleep(0.01)
    raise AssertionError(f"ledger {lid} never reached {count} segments: {md}")


async def _wait_replaced(store: ZooKeeperMetadataStore, lid: int, bookie: str) -> LedgerMetadata:
    """The writer's metadata once its last segment no longer names `bookie`."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = (await store.read_ledger(lid)).metadata
        if bookie not in md.segments[-1].ensemble:
            return md
        await asyncio.sleep(0.01)
    raise AssertionError(f"the writer of ledger {lid} never replaced {bookie}: {md}")


def _paused_writer(cluster: Cluster, first: list[str], pool: list[str], pause: Path) -> subprocess.Popen[str]:
    """The real Java client writing an OPEN ledger of 4000 entries (one at a time) on `first`, replacing
    failed bookies from `pool`; it prints PAUSED after 10 entries and waits for `pause` to exist."""
    args = cluster._create_args(3, 2, 2, "CRC32C", "pw", 4000, 64, None, None, first, pool, False)
    with open(cluster.logs_dir / "concurrent-writer.log", "a") as log:
        return subprocess.Popen(
            cluster._tool_argv("create", [*args, "--pause-after", "10", "--pause-file", str(pause)]),
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            stdin=subprocess.DEVNULL,
        )
