"""Bookie registrations, service info, cookies, racks; and a second cluster with the long layout."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from auditor.durability.ids import LedgerId
from auditor.metadata.bookkeeper.bookies import pulsar_racks
from auditor.metadata.location import LedgerManager
from auditor.metadata.store import ZooKeeperMetadataStore
from devcluster import zkwriters
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import collect, open_store
from tests.realcluster.second_cluster import second_cluster

pytestmark = pytest.mark.realcluster


async def test_registrations_service_info_and_resolver(cluster: Cluster) -> None:
    store = await open_store(cluster.metadata_service_uri)
    try:
        regs = await store.registrations()
        assert set(regs.writable) == {b.bookie_id for b in cluster.bookies}  # "readonly" child skipped
        assert regs.read_only == {} and regs.available == frozenset(regs.writable)
        for b in cluster.bookies:
            reg = regs.writable[b.bookie_id]
            assert reg.info is not None and reg.info_error is None and reg.stat.ephemeral_owner != 0
            rpc = reg.info.rpc_endpoint
            assert (rpc.host, rpc.port, rpc.protocol) == (b.host, b.port, "bookie-rpc")
            http = [e for e in reg.info.endpoints if e.protocol == "http"]
            assert http and http[0].port == b.http_port
            addr = await store.resolve_bookie(b.bookie_id)
            assert (addr.host, addr.port, addr.best_effort) == (b.host, b.port, False)
        resolve = store.address_resolver()
        assert await resolve(cluster.bookies[0].bookie_id) == (cluster.bookies[0].host, cluster.bookies[0].port)
        unknown = await store.resolve_bookie("10.1.2.3:4000")  # not registered: parsed, flagged
        assert (unknown.host, unknown.port, unknown.best_effort) == ("10.1.2.3", 4000, True)
        with pytest.raises(LookupError):
            await resolve("custom-bookie-id")
        # Cookies: one per bookie, with the cluster's instance id, and a stat for incarnation.
        cookies = await store.cookies()
        iid = await zkwriters.instance_id(store)
        assert set(cookies) == {b.bookie_id for b in cluster.bookies}
        for b in cluster.bookies:
            c = cookies[b.bookie_id]
            assert c.cookie.bookie_id == b.bookie_id and c.cookie.instance_id == iid
            assert c.cookie.journal_dirs.endswith(str(b.journal_dir)) or str(b.journal_dir) in c.cookie.journal_dirs
            assert c.incarnation[0] > 0
    finally:
        await store.close()


async def test_readonly_bookie_and_registration_watch(cluster: Cluster) -> None:
    store = await open_store(cluster.metadata_service_uri)
    fired = asyncio.Event()
    cancel = store.watch_registrations(fired.set)
    n = 5
    try:
        await asyncio.sleep(0.5)
        fired.clear()
        # Flip bookie 5 to read-only through its admin API (the real bookie moves its registration).
        status, text = await asyncio.get_running_loop().run_in_executor(
            None, lambda: _http_put(cluster, n, "/api/v1/bookie/state/readonly", '{"readOnly": true}')
        )
        assert status == 200, text
        await asyncio.wait_for(fired.wait(), 30)
        for _ in range(100):
            regs = await store.registrations()
            if cluster.bookie(n).bookie_id in regs.read_only and cluster.bookie(n).bookie_id not in regs.writable:
                break
            await asyncio.sleep(0.2)
        assert cluster.bookie(n).bookie_id in regs.read_only and regs.read_only[cluster.bookie(n).bookie_id].read_only
        assert cluster.bookie(n).bookie_id in regs.available
    finally:
        _http_put(cluster, n, "/api/v1/bookie/state/readonly", '{"readOnly": false}')
        cancel()
        await store.close()
    cluster.wait_registered(n)


def _http_put(cluster: Cluster, n: int, path: str, body: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    b = cluster.bookie(n)
    req = urllib.request.Request(
        f"http://{b.host}:{b.http_port}{path}",
        data=body.encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_pulsar_rack_map_from_zookeeper(cluster: Cluster) -> None:
    ids = [b.bookie_id for b in cluster.bookies]
    doc = {
        "default": {ids[0]: {"rack": "rack-a", "hostname": "bk1"}, ids[1]: {"rack": "/rack-b"}},
        "iso": {ids[2]: {"rack": "/"}},
    }
    cluster.kazoo.create("/bookies", json.dumps(doc).encode())
    store = await open_store(cluster.metadata_service_uri)
    try:
        racks = await pulsar_racks(store)
        got = await racks.racks(ids[:4])
        assert got == {ids[0]: "/rack-a", ids[1]: "/rack-b", ids[2]: "/default-rack", ids[3]: "/default-rack"}
    finally:
        cluster.kazoo.delete("/bookies")
        await store.close()
    store = await open_store(cluster.metadata_service_uri)
    try:
        assert await pulsar_racks(store) is None
    finally:
        await store.close()


@pytest.fixture(scope="module")
def long_cluster() -> Iterator[Cluster]:
    with second_cluster("bk-auditor-long-", 1, layout="longhierarchical") as c:
        yield c


async def test_long_hierarchical_cluster_and_cookie_incarnation(long_cluster: Cluster) -> None:
    c = long_cluster
    t1 = c.create_ledger(ensemble=1, write_quorum=1, ack_quorum=1, entries=3)
    t2 = c.create_ledger(ensemble=1, write_quorum=1, ack_quorum=1, entries=2, ledger_id=2**45 + 3)
    store = await ZooKeeperMetadataStore.connect(c.metadata_service_uri)
    try:
        assert store.manager is LedgerManager.LONG_HIERARCHICAL
        assert store.layout.factory_class == "org.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory"
        for t in (t1, t2):
            rec = await store.read_ledger(t["ledgerId"])
            assert len(rec.path.split("/")) == 7  # R/AAA/BBBB/CCCC/DDDD/LEEEE
            assert rec.metadata.last_entry_id == t["lastEntryId"]
        ids = [i for b in await collect(store.list_ledgers()) for i in b.ledger_ids]
        assert ids == sorted([LedgerId(0, t1["ledgerId"]), LedgerId(0, t2["ledgerId"])])
        # A reformatted bookie gets a new cookie: same content, new czxid.
        bookie_id = c.bookies[0].bookie_id
        before = (await store.cookies())[bookie_id]
        c.stop_bookie(1)
        c.wipe_bookie(1)
        assert await store.cookie(bookie_id) is None
        c.start_bookie(1)
        after = await store.cookie(bookie_id)
        assert (
            after.cookie.bookie_id == before.cookie.bookie_id and after.cookie.instance_id == before.cookie.instance_id
        )
        assert after.incarnation != before.incarnation and after.stat.czxid > before.stat.czxid
        assert after.stat.version == 0
    finally:
        await store.close()
    # The hierarchical view of this cluster is refused.
    from auditor.metadata.errors import LayoutMismatchError

    with pytest.raises(LayoutMismatchError):
        await ZooKeeperMetadataStore.connect(c.metadata_service_uri.replace("longhierarchical", "hierarchical"))
