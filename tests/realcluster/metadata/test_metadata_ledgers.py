"""Ledger metadata written by the real Java client, read (and written back) by our ZooKeeper adapter."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerState, Segment
from auditor.metadata.bookkeeper.ledgers import FIRST_CHUNK, READ_CHUNK
from auditor.metadata.codecs import formats
from auditor.metadata.errors import (
    ConcurrentUpdateError,
    LayoutMismatchError,
    MetadataConfigError,
    NoSuchLedgerError,
    NotLeaderError,
)
from auditor.metadata.interfaces import ScanStats
from auditor.metadata.location import LedgerManager
from devcluster import zkwriters
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import JAVA_DIGEST, collect, java_to_string, leader_of, open_store

pytestmark = pytest.mark.realcluster
# A private id region per run so that other tests' ledgers never interfere.
BASE = 1_600_000_000 + random.randrange(0, 9_000) * 10_000


def check_against_tool(md, tool: dict) -> None:
    assert md.ledger_id == LedgerId(0, tool["ledgerId"])
    assert md.state.name == tool["state"]
    assert md.last_entry_id == tool["lastEntryId"]
    assert md.length == tool["length"]
    assert md.digest_type is JAVA_DIGEST[tool["digest"]]
    assert md.password == tool["password"].encode()
    assert (md.ensemble_size, md.write_quorum, md.ack_quorum) == (
        tool["ensembleSize"],
        tool["writeQuorum"],
        tool["ackQuorum"],
    )
    assert md.segments == tuple(
        Segment(int(k), tuple(v)) for k, v in sorted(tool["ensembles"].items(), key=lambda kv: int(kv[0]))
    )


async def test_every_digest_type_open_closed_custom_read_like_java(cluster: Cluster) -> None:
    tools = [
        cluster.create_ledger(
            digest=d,
            entries=5 + i,
            entry_size=10 * (i + 1),
            password=f"pw{i}",
            ensemble=3,
            write_quorum=3 - (i % 2),
            ack_quorum=2 - (i % 2),
        )
        for i, d in enumerate(["CRC32", "CRC32C", "MAC", "DUMMY"])
    ]
    tools.append(cluster.create_ledger(digest="CRC32C", custom={"app": "pulsar", "k2": "v2"}, entries=3))
    tools.append(cluster.create_ledger(digest="MAC", close=False, entries=4))
    tools.append(
        cluster.ledger_tool(
            "create",
            "--ensemble",
            "2",
            "--write-quorum",
            "2",
            "--ack-quorum",
            "2",
            "--digest",
            "CRC32",
            "--password",
            "x",
            "--entries",
            "2",
            "--entry-size",
            "8",
            "--allowed",
            ",".join(cluster.sorted_bookie_ids),
            "--store-ctime",
        )
    )
    store = await open_store(cluster.metadata_service_uri)
    try:
        assert store.manager is LedgerManager.HIERARCHICAL and store.layout is not None
        for t in tools:
            rec = await store.read_ledger(t["ledgerId"])
            check_against_tool(rec.metadata, t)
            # Created (version 0), then closed by the writer (version 1).
            assert rec.metadata.format_version == 3
            assert rec.metadata.version == rec.stat.version == (1 if t["state"] == "CLOSED" else 0)
            data, _ = cluster.kazoo.get(rec.path)
            # Byte-compatible writer: re-encoding what Java wrote gives Java's bytes back.
            assert formats.serialize_ledger_metadata(rec.metadata) == data
        custom = (await store.read_ledger(tools[4]["ledgerId"])).metadata.custom_metadata
        assert dict(custom) == {"app": b"pulsar", "k2": b"v2"}
        opened = (await store.read_ledger(tools[5]["ledgerId"])).metadata
        assert opened.state is LedgerState.OPEN and opened.last_entry_id == -1 and opened.length == 0
        with_ctime = await store.read_ledger(tools[6]["ledgerId"])
        assert (
            with_ctime.metadata.ctime is not None and abs(with_ctime.metadata.ctime - with_ctime.stat.ctime_ms) < 60_000
        )
        no_ctime = await store.read_ledger(tools[0]["ledgerId"])
        assert no_ctime.metadata.ctime is None and no_ctime.effective_ctime == no_ctime.stat.ctime_ms
        # The shell prints exactly what our model says (Java's toString), for each of them.
        for t in tools[:2] + tools[4:6]:
            out = cluster.shell("ledgermetadata", "-l", str(t["ledgerId"])).stdout
            md = (await store.read_ledger(t["ledgerId"])).metadata
            assert f"ledgerID: {t['ledgerId']}" in out
            assert java_to_string(md) in out, out
    finally:
        await store.close()


async def test_ensemble_changes_and_recovery(cluster: Cluster) -> None:
    t = cluster.write_with_ensemble_change(ensemble=3, write_quorum=2, ack_quorum=2, entries=20, change_after=8)
    store = await open_store(cluster.metadata_service_uri)
    try:
        md = (await store.read_ledger(t["ledgerId"])).metadata
        check_against_tool(md, t)
        assert len(md.segments) >= 2 and t["victim"] in md.segments[0].ensemble
        assert t["victim"] not in md.segments[-1].ensemble
        opened = cluster.create_ledger(entries=6, close=False)
        before = await store.read_ledger(opened["ledgerId"])
        recovered = cluster.recover_ledger(opened["ledgerId"])
        after = await store.read_ledger(opened["ledgerId"])
        assert (
            after.metadata.state is LedgerState.CLOSED and after.metadata.last_entry_id == recovered["lastEntryId"] == 5
        )
        assert after.stat.version > before.stat.version and after.metadata.version == after.stat.version
    finally:
        await store.close()


async def test_ids_above_2_pow_31_and_range_listing(cluster: Cluster) -> None:
    big = [2**31 + 777_001, 2**40 + random.randrange(10**6), 2**62 + random.randrange(10**9)]
    small = [BASE + 5, BASE + 20_005, BASE + 40_005]  # three different leaf directories
    for i in big + small:
        cluster.create_ledger(ledger_id=i, entries=2)
    store = await open_store(cluster.metadata_service_uri)
    try:
        for i in big:
            rec = await store.read_ledger(i)
            assert rec.path == store.paths.path(i) and len(rec.path.split("/")) == 7  # long form
        for i in small:
            assert len((await store.read_ledger(i)).path.split("/")) == 5  # legacy form
        everything = [lid for b in await collect(store.list_ledgers()) for lid in b.ledger_ids]
        assert everything == sorted(everything) and len(everything) == len(set(everything))
        assert {LedgerId(0, i) for i in big + small} <= set(everything)
        # The shell lists the same ledgers.
        shell_ids = {
            int(line.split(":")[1])
            for line in cluster.shell("listledgers").stdout.splitlines()
            if line.startswith("ledgerID:")
        }
        assert {x.ledger for x in everything} == shell_ids
        # Restricted range: [BASE, BASE+40_000) -> two of ours, one leaf directory per batch.
        batches = await collect(store.list_ledgers(LedgerId(0, BASE), LedgerId(0, BASE + 40_000)))
        assert [b.ledger_ids for b in batches] == [[LedgerId(0, BASE + 5)], [LedgerId(0, BASE + 20_005)]]
        # Resume from a cursor: everything from the second one on, in the long tree included.
        stats = ScanStats()
        recs = [r for b in await collect(store.scan_ledgers(LedgerId(0, BASE + 20_005), stats=stats)) for r in b]
        ids = [r.metadata.ledger_id.ledger for r in recs]
        assert ids == sorted(ids) and ids[0] == BASE + 20_005 and set(big) <= set(ids)
        assert stats.read == len(recs) and stats.corrupt == 0 and stats.last_ledger == LedgerId(0, max(ids))
    finally:
        await store.close()


async def test_deleted_mid_listing_and_corrupt_blob_do_not_stop_a_scan(cluster: Cluster) -> None:
    ids = [BASE + 100_007, BASE + 110_007, BASE + 120_007]
    for i in ids:
        cluster.create_ledger(ledger_id=i, entries=1)
    store = await open_store(cluster.metadata_service_uri)
    corrupt_id = BASE + 130_007
    corrupt_path = store.paths.path(corrupt_id)
    cluster.kazoo.create(corrupt_path, b"BookieMetadataFormatVersion\t3\n\x05\x08", makepath=True)
    try:
        stats = ScanStats()
        seen = []
        # Listed, then deleted just before its metadata is read (deleted where the bulk read is sent, so the
        # test does not depend on when the scan reads): dropped, counted as vanished, the scan goes on.
        read_many = store.bridge.get_many

        async def delete_then_read(paths: Any) -> Any:
            if store.paths.path(ids[1]) in paths:
                cluster.delete_ledger(ids[1])
            return await read_many(paths)

        store.bridge.get_many = delete_then_read  # type: ignore[method-assign]
        try:
            async for batch in store.scan_ledgers(
                LedgerId(0, BASE + 100_000), LedgerId(0, BASE + 140_000), stats=stats
            ):
                seen += batch
        finally:
            store.bridge.get_many = read_many  # type: ignore[method-assign]
        assert [getattr(r, "metadata", None) and r.metadata.ledger_id.ledger for r in seen[:2]] == [ids[0], ids[2]]
        bad = seen[2]
        assert isinstance(bad, type(seen[2])) and bad.ledger_id == LedgerId(0, corrupt_id)
        assert bad.path == corrupt_path and "truncated" in bad.problem
        assert (stats.read, stats.corrupt, stats.vanished) == (2, 1, 1)
        with pytest.raises(NoSuchLedgerError):
            await store.read_ledger(ids[1])
        # Read in bulk after it is gone: None in its place.
        res = await store.read_ledgers([LedgerId(0, ids[0]), LedgerId(0, ids[1])])
        assert res[1] is None and res[0] is not None
    finally:
        cluster.kazoo.delete(corrupt_path)
        await store.close()


async def test_our_v3_blob_is_read_by_the_java_shell_and_client(cluster: Cluster) -> None:
    t = cluster.create_ledger(entries=4, custom={"owner": "java"})
    store = await open_store(cluster.metadata_service_uri)
    election = await leader_of(store)
    try:
        rec = await store.read_ledger(t["ledgerId"])
        # 1. Compare-and-set rewrite of a Java ledger, adding custom metadata.
        changed = replace(rec.metadata, custom_metadata=MappingProxyType({"owner": b"java", "audited": b"\x00\x01yes"}))
        new_version = await zkwriters.write_ledger_metadata(
            store, changed, election.guard, expected_version=rec.stat.version
        )
        assert new_version == rec.stat.version + 1
        with pytest.raises(ConcurrentUpdateError):
            await zkwriters.write_ledger_metadata(store, changed, election.guard, expected_version=rec.stat.version)
        out = cluster.shell("ledgermetadata", "-l", str(t["ledgerId"])).stdout
        assert (
            java_to_string(changed) in out
            or java_to_string(
                replace(
                    changed, custom_metadata=MappingProxyType(dict(reversed(list(changed.custom_metadata.items()))))
                )
            )
            in out
        ), out
        info = cluster.ledger_info(t["ledgerId"])  # the Java client opens it and reads our metadata
        assert info["lastEntryId"] == 3 and info["ensembles"] == t["ensembles"]
        # 2. A brand-new ledger znode created by us (a copy of that metadata under a new id, long path).
        new_id = 2**50 + random.randrange(10**6)
        copy = replace(changed, ledger_id=LedgerId(0, new_id), ctime=1_700_000_000_000, creator_token=12345)
        assert await zkwriters.write_ledger_metadata(store, copy, election.guard, expected_version=None) == 0
        out = cluster.shell("ledgermetadata", "-l", str(new_id)).stdout
        assert f"ledgerID: {new_id}" in out and "state=CLOSED" in out and "lastEntryId=3" in out
        assert "customMetadata={" in out and "owner=base64:amF2YQ==" in out
        assert (await store.read_ledger(new_id)).metadata == replace(copy, version=0)
        cluster.delete_ledger(new_id)
        # 3. A deposed leader cannot write.
        guard = election.guard
        await election.close()
        with pytest.raises(NotLeaderError):
            await zkwriters.write_ledger_metadata(store, changed, guard, expected_version=new_version)
    finally:
        await election.close()
        await store.close()


async def test_layout_mismatch_is_refused(cluster: Cluster) -> None:
    with pytest.raises(LayoutMismatchError):
        await open_store(cluster.metadata_service_uri.replace("zk+hierarchical", "zk+longhierarchical"))
    with pytest.raises(LayoutMismatchError):
        await open_store(cluster.metadata_service_uri.replace("zk+hierarchical", "zk+flat"))
    for uri in (
        cluster.metadata_service_uri.replace("zk+hierarchical", "zk"),
        cluster.metadata_service_uri.replace("zk+hierarchical", "zk+null"),
        f"zk+hierarchical://{cluster.zk_hosts};{cluster.zk_hosts}{cluster.ledgers_root}",
    ):
        store = await open_store(uri)
        try:
            assert store.manager is LedgerManager.HIERARCHICAL
            assert (
                await zkwriters.instance_id(store)
                == cluster.kazoo.get(f"{cluster.ledgers_root}/INSTANCEID")[0].decode()
            )
        finally:
            await store.close()


async def test_pulsar_metadata_store_uri_and_missing_layout(cluster: Cluster) -> None:
    store = await open_store(f"metadata-store:zk:{cluster.zk_hosts}")
    try:
        assert store.location.ledgers_root == "/ledgers" and store.manager is LedgerManager.HIERARCHICAL
        assert store.layout is not None
        assert (await store.registrations()).available == frozenset(b.bookie_id for b in cluster.bookies)
    finally:
        await store.close()
    # A chroot with no BookKeeper metadata at all is not audited as an empty cluster (issue 10): refused,
    # naming the path inside the chroot, and nothing created. (A root with `available` but no LAYOUT is
    # still read as hybrid hierarchical: test_wrong_root.py.)
    chroot = f"/empty-{random.randrange(10**9)}"
    with pytest.raises(MetadataConfigError, match=f"{chroot}/ledgers: not a BookKeeper ledgers root"):
        await open_store(f"metadata-store:zk:{cluster.zk_hosts}{chroot}")
    assert cluster.kazoo.exists(chroot) is None


async def test_scoped_ledgers_live_outside_javas_view(cluster: Cluster) -> None:
    t = cluster.create_ledger(entries=2)
    store = await open_store(cluster.metadata_service_uri)
    election = await leader_of(store)
    scoped = [LedgerId(5, t["ledgerId"]), LedgerId(2**62 + 1, 2**40 + 9), LedgerId(5, 2**31 + 1)]
    try:
        md = (await store.read_ledger(t["ledgerId"])).metadata
        for lid in scoped:
            await zkwriters.write_ledger_metadata(
                store, replace(md, ledger_id=lid), election.guard, expected_version=None
            )
        for lid in scoped:
            rec = await store.read_ledger(lid)
            assert rec.path.startswith(f"{cluster.ledgers_root}/scoped/") and rec.metadata.ledger_id == lid
        listed = [i for b in await collect(store.list_ledgers()) for i in b.ledger_ids]
        assert listed == sorted(listed) and listed[-3:] == sorted(scoped)
        only_scope_5 = [
            i for b in await collect(store.list_ledgers(LedgerId(5, 0), LedgerId(6, 0))) for i in b.ledger_ids
        ]
        assert only_scope_5 == sorted(scoped[::2])
        # Java's listing (and so its auditor and GC) never sees them.
        shell_ids = {
            int(line.split(":")[1])
            for line in cluster.shell("listledgers").stdout.splitlines()
            if line.startswith("ledgerID:")
        }
        assert 2**40 + 9 not in shell_ids and 2**31 + 1 not in shell_ids
        assert shell_ids == {i.ledger for i in listed if i.scope == 0}
    finally:
        # Test clean-up of our extension's tree (not a production write path).
        cluster.kazoo.delete(f"{cluster.ledgers_root}/scoped", recursive=True)
        await election.close()
        await store.close()


async def test_bulk_reads_keep_order_across_chunks_with_gaps_and_a_rate_limit(cluster: Cluster) -> None:
    """read_ledgers reads in bulk (the window refilled from kazoo's thread, chunks read while the
    previous one is parsed): every answer lands at its ledger's place, missing ones are None, corrupt
    ones CorruptLedger, also when the rate limit releases the reads in slices; a cancelled bulk read
    stops and raises at once."""
    base = BASE + 400_000
    written = [base + i for i in range(0, 2600, 2)]  # 1,300 ledgers, every other id missing
    paths = await _plant_copies(cluster, written)
    corrupt = base + 2 * 777
    cluster.kazoo.set(paths[corrupt], b"BookieMetadataFormatVersion\t3\n\x05\x08")
    wanted = [LedgerId(0, base + i) for i in range(2600)]
    for limit in (None, 20000.0):
        store = await open_store(cluster.metadata_service_uri, reads_per_second=limit, max_in_flight=16)
        try:
            got = await store.read_ledgers(wanted)
            assert len(got) == len(wanted)
            for lid, rec in zip(wanted, got, strict=True):
                if lid.ledger not in paths:
                    assert rec is None, lid
                elif lid.ledger == corrupt:
                    assert rec is not None and not hasattr(rec, "metadata") and rec.ledger_id == lid
                else:
                    assert rec is not None and rec.metadata.ledger_id == lid and rec.path == paths[lid.ledger]
            task = asyncio.ensure_future(store.read_ledgers(wanted))
            await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                async with asyncio.timeout(5):
                    await task
        finally:
            await store.close()
    for p in paths.values():
        cluster.kazoo.delete(p)


async def test_a_scan_hands_on_a_directorys_first_ledgers_before_reading_the_rest(cluster: Cluster) -> None:
    """A scan yields a leaf directory's ledgers chunk by chunk as their bulk reads come in (FIRST_CHUNK,
    doubling up to READ_CHUNK), each chunk's read sent only once the one before it is in: the check
    starts on the first ledgers while the rest are still being read. Nothing is lost or reordered."""
    base = BASE + 500_000  # a leaf directory of its own
    written = [base + i for i in range(1_000)]
    paths = await _plant_copies(cluster, written)
    store = await open_store(cluster.metadata_service_uri)
    read_many = store.bridge.get_many
    reads: list[int] = []  # the size of each bulk read, in the order asked for

    def counted(chunk: Any) -> Any:
        reads.append(len(chunk))  # when the scan asks for it, not when the read's task first runs
        return read_many(chunk)

    store.bridge.get_many = counted  # type: ignore[method-assign]
    try:
        sizes, sent_at_yield, seen = [], [], []
        async for batch in store.scan_ledgers(LedgerId(0, base), LedgerId(0, base + 10_000)):
            sizes.append(len(batch))
            sent_at_yield.append(len(reads))
            seen += [r.metadata.ledger_id.ledger for r in batch]
        assert FIRST_CHUNK == 128 and READ_CHUNK == 1024
        assert sizes == [128, 256, 512, 104]
        assert reads == sizes  # one bulk read per batch
        # Each batch is handed on with only the next chunk's read sent: the first after 2 of the 4 reads.
        assert sent_at_yield == [2, 3, 4, 4]
        assert seen == written
        # read_ledgers hands nothing on before it returns: whole READ_CHUNK reads, no small first ones.
        reads.clear()
        got = await store.read_ledgers([LedgerId(0, i) for i in written])
        assert reads == [1_000] and [r.metadata.ledger_id.ledger for r in got if r is not None] == written
    finally:
        store.bridge.get_many = read_many  # type: ignore[method-assign]
        await store.close()
        for p in paths.values():
            cluster.kazoo.delete(p)


async def _plant_copies(cluster: Cluster, ids: list[int]) -> dict[int, str]:
    """Copies of one real ledger's metadata (written by the Java client) at `ids`."""
    source = cluster.create_ledger(entries=1)["ledgerId"]
    store = await open_store(cluster.metadata_service_uri)
    try:
        data, _ = cluster.kazoo.get(store.paths.path(source))
        md = formats.parse_ledger_metadata(data, LedgerId(0, source), "source", 0)
        paths = {}
        for i in ids:
            p = store.paths.path(i)
            cluster.kazoo.create(
                p, formats.serialize_ledger_metadata(replace(md, ledger_id=LedgerId(0, i))), makepath=True
            )
            paths[i] = p
        return paths
    finally:
        await store.close()
