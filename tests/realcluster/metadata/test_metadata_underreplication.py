"""Under-replication markers, flags and check-time znodes: written by us (guarded), seen by Java."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import pytest

from auditor.durability.ids import LedgerId
from auditor.metadata.codecs import formats
from auditor.metadata.errors import CorruptZnodeError, MetadataVersionChangedError, NotLeaderError
from auditor.metadata.interfaces import MarkResult
from devcluster import zkwriters
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import collect, leader_of, listunderreplicated, open_store

pytestmark = pytest.mark.realcluster


@dataclass
class StaleGuard:
    """A guard that skips the local check: proves the server-side check alone refuses the write."""

    guard_path: str

    def check(self) -> None:
        pass


async def test_markers_written_like_java_and_seen_by_the_shell(cluster: Cluster) -> None:
    store = await open_store(cluster.metadata_service_uri)
    election = await leader_of(store)
    ids = [random.randrange(10**6, 2**31 - 1), 2**40 + random.randrange(10**6)]
    try:
        guard = election.guard
        await zkwriters.ensure_underreplication_layout(store, guard)
        assert cluster.kazoo.get(store.markers.layout)[0] == b'type: "BASIC"\nversion: 1\n'
        assert await store.mark_underreplicated(ids[0], ["127.0.0.9:3189"], guard) is MarkResult.CREATED
        assert (
            await store.mark_underreplicated(ids[1], ["127.0.0.8:3188", "127.0.0.9:3189"], guard) is MarkResult.CREATED
        )
        first = await store.read_marker(ids[0])
        assert (
            first.path
            == f"{cluster.ledgers_root}/underreplication/ledgers/"
            + "/".join(f"{(ids[0] >> s) & 0xFFFF:04x}" for s in (48, 32, 16, 0))
            + f"/urL{ids[0]:010d}"
        )
        assert first.replicas == ("127.0.0.9:3189",) and first.ctime > 0 and first.stat.version == 0
        # Merge: same replica -> no write; a new one -> appended, ctime refreshed, version bumped.
        assert await store.mark_underreplicated(ids[0], ["127.0.0.9:3189"], guard) is MarkResult.UNCHANGED
        assert (await store.read_marker(ids[0])).stat.version == 0
        await asyncio.sleep(0.01)
        assert (
            await store.mark_underreplicated(ids[0], ["127.0.0.9:3189", "127.0.0.7:3187"], guard) is MarkResult.MERGED
        )
        merged = await store.read_marker(ids[0])
        assert merged.replicas == ("127.0.0.9:3189", "127.0.0.7:3187") and merged.stat.version == 1
        assert merged.ctime >= first.ctime
        # The real shell sees both, with our ctime and replicas.
        shell = listunderreplicated(cluster)
        assert shell[ids[0]] == {
            "ctime": merged.ctime,
            "replicas": ["127.0.0.9:3189", "127.0.0.7:3187"],
            "worker": None,
        }
        assert shell[ids[1]]["replicas"] == ["127.0.0.8:3188", "127.0.0.9:3189"]
        listed = {m.ledger_id: m for m in await collect(store.list_markers())}
        assert {LedgerId(0, i) for i in ids} <= set(listed)
        # A scoped ledger's marker lives in its own tree: Java never sees it.
        scoped = LedgerId(7, ids[0])
        assert await store.mark_underreplicated(scoped, ["127.0.0.9:3189"], guard) is MarkResult.CREATED
        assert (await store.read_marker(scoped)).path.startswith(
            f"{cluster.ledgers_root}/underreplication/scopedledgers/"
        )
        assert set(listunderreplicated(cluster)) == set(shell)
        assert scoped in {m.ledger_id for m in await collect(store.list_markers())}
        # A corrupt marker: a typed error naming it, and the merge refuses to overwrite it.
        bad = random.randrange(10**6, 2**31 - 1)
        bad_path = store.markers.marker(bad)
        cluster.kazoo.create(bad_path, b"replica: ???", makepath=True)
        with pytest.raises(CorruptZnodeError) as err:
            await store.mark_underreplicated(bad, ["a:1"], guard)
        assert err.value.path == bad_path
        cluster.kazoo.delete(bad_path)
        # Locks are only read: none is held.
        assert await zkwriters.lock_holder(store, ids[0]) is None
    finally:
        for lid in [*ids, LedgerId(7, ids[0])]:
            if election.is_leader:
                await zkwriters.delete_marker(store, lid, election.guard)
        await election.close()
        await store.close()
    for i in ids:
        assert cluster.kazoo.exists(store.markers.marker(i)) is None
    # Empty parents were removed with the markers, as Java's workers do.
    assert cluster.kazoo.exists(store.markers.marker(ids[1]).rsplit("/", 1)[0]) is None


async def test_deposed_leader_cannot_write(cluster: Cluster) -> None:
    store = await open_store(cluster.metadata_service_uri)
    election = await leader_of(store)
    lid = random.randrange(10**6, 2**31 - 1)
    try:
        guard = election.guard
        vote = guard.guard_path
        await election.close()  # deletes our vote
        with pytest.raises(NotLeaderError):
            await store.mark_underreplicated(lid, ["a:1"], guard)
        # Even a guard that skips the local check is refused by ZooKeeper: the vote is gone.
        with pytest.raises(NotLeaderError):
            await store.mark_underreplicated(lid, ["a:1"], StaleGuard(vote))
        with pytest.raises(NotLeaderError):
            await zkwriters.set_check_ctime(store, "replicascheckctime", 1, StaleGuard(vote))
        assert cluster.kazoo.exists(store.markers.marker(lid)) is None
    finally:
        await store.close()


async def test_flags_delay_watch_and_check_times(cluster: Cluster) -> None:
    store = await open_store(cluster.metadata_service_uri)
    election = await leader_of(store)
    seen: list[int | None] = []
    changed = asyncio.Event()

    def on_delay(value: int | None) -> None:
        seen.append(value)
        changed.set()

    cancel = store.watch_lost_bookie_recovery_delay(on_delay)
    try:
        await asyncio.sleep(0.5)
        assert await store.is_replication_disabled() is False
        cluster.shell("autorecovery", "-disable")
        assert await store.is_replication_disabled() is True
        cluster.shell("autorecovery", "-enable")
        assert await store.is_replication_disabled() is False
        # The real shell sets the delay; then writes the same value again (what triggeraudit does).
        for expected in (7, 7):
            changed.clear()
            cluster.shell("lostbookierecoverydelay", "-set", str(expected))
            await asyncio.wait_for(changed.wait(), 30)
            assert seen[-1] == expected
        assert await store.lost_bookie_recovery_delay() == 7
        changed.clear()
        cluster.kazoo.set(store.markers.lost_bookie_recovery_delay, b"7")  # same value, raw rewrite
        await asyncio.wait_for(changed.wait(), 30)
        assert seen == [7, 7, 7]
        # Check-time znodes: binary protos, guarded writes, read back by us.
        guard = election.guard
        for name in formats.CTIME_MESSAGES:
            await zkwriters.set_check_ctime(store, name, 1_700_000_000_000, guard)
            assert await zkwriters.check_ctime(store, name) == 1_700_000_000_000
        assert cluster.kazoo.get(f"{store.markers.base}/checkallledgersctime")[0].hex() == "0880d095ffbc31"
        # Java's forceauditchecks resets them; we read what Java wrote.
        cluster.shell("forceauditchecks", "-calc", "-ppc", "-rc")
        for name in formats.CTIME_MESSAGES:
            assert (await zkwriters.check_ctime(store, name)) != 1_700_000_000_000
    finally:
        cancel()
        # The shell refuses "-set 0" (it treats 0 as "not given"), so restore the default directly.
        if cluster.kazoo.exists(store.markers.lost_bookie_recovery_delay):
            cluster.kazoo.set(store.markers.lost_bookie_recovery_delay, b"0")
        await election.close()
        await store.close()


async def test_marker_conditioned_on_the_ledger_metadata_version(cluster: Cluster) -> None:
    """The lost-bookie marking writes without re-reading the ledger: the marker's transaction checks the
    indexed metadata version. Current version: written (its own directory created in the same
    transaction); a version the ledger has moved past: refused, nothing written."""
    info = cluster.create_ledger(entries=2)
    lid = LedgerId(0, info["ledgerId"])
    store = await open_store(cluster.metadata_service_uri)
    election = await leader_of(store)
    try:
        guard = election.guard
        rec = await store.read_ledger(lid)
        marker_dir = store.markers.marker(lid).rsplit("/", 1)[0]
        assert cluster.kazoo.exists(marker_dir) is None  # the marker's parents do not exist yet
        with pytest.raises(MetadataVersionChangedError) as err:
            await store.mark_underreplicated(lid, ["127.0.0.9:3189"], guard, if_metadata_version=rec.stat.version + 1)
        assert err.value.path == rec.path
        assert cluster.kazoo.exists(store.markers.marker(lid)) is None
        created = await store.mark_underreplicated(lid, ["127.0.0.9:3189"], guard, if_metadata_version=rec.stat.version)
        assert created is MarkResult.CREATED
        assert listunderreplicated(cluster)[lid.ledger]["replicas"] == ["127.0.0.9:3189"]
        # The ledger changes (its metadata is rewritten): the old version no longer writes, even a merge.
        await zkwriters.write_ledger_metadata(store, rec.metadata, guard, expected_version=rec.stat.version)
        with pytest.raises(MetadataVersionChangedError):
            await store.mark_underreplicated(lid, ["127.0.0.8:3188"], guard, if_metadata_version=rec.stat.version)
        assert (await store.read_marker(lid)).replicas == ("127.0.0.9:3189",)
        merged = await store.mark_underreplicated(
            lid, ["127.0.0.8:3188"], guard, if_metadata_version=rec.stat.version + 1
        )
        assert merged is MarkResult.MERGED
    finally:
        if election.is_leader:
            await zkwriters.delete_marker(store, lid, election.guard)
        await election.close()
        await store.close()
