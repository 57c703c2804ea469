"""A wrong ledgers root (issue 10, defect 2): refused at connect with exit 2 and a message naming the path,
for `check`, `sweep` and `run`; nothing created, whatever happens (the ZooKeeper tree is diffed). Missing
structural znodes are errors naming the path, never empty lists; the daemon never creates the ledgers
root or anything outside `<root>/bk-auditor` and the markers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.exceptions import NoNodeError

from auditor.metadata.bookkeeper.election import LeaderElection
from auditor.metadata.errors import MetadataConfigError, MetadataError
from devcluster import zkwriters
from devcluster.cli_util import cli, error_lines
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon
from devcluster.metadata_helpers import collect, leader_of, open_store, zk_tree

pytestmark = pytest.mark.realcluster

LAYOUT = b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"


def uri(cluster: Cluster, root: str) -> str:
    return f"zk+hierarchical://{cluster.zk_hosts}{root}"


@pytest.fixture
def scratch(cluster: Cluster) -> Iterator[str]:
    """A fresh root path (not created); removed afterwards with everything under it."""
    root = f"/scratch-{uuid.uuid4().hex[:8]}"
    yield root
    try:
        cluster.kazoo.delete(root, recursive=True)
    except NoNodeError:
        pass


@pytest.mark.parametrize(
    "root, why", [("/wrongroot", "no such znode"), ("/zookeeper", "it has neither LAYOUT nor available")]
)
def test_check_refuses_a_wrong_root_and_creates_nothing(cluster: Cluster, root: str, why: str) -> None:
    before = zk_tree(cluster.kazoo)
    r = cli("check", "--metadata-service-uri", uri(cluster, root), "--log-format", "json")
    assert r.returncode == 2, (r.returncode, r.stdout[-1000:], r.stderr[-2000:])
    (line,) = error_lines(r.stderr)
    assert f"{root}: not a BookKeeper ledgers root: {why}" in line, line
    assert "healthy" not in r.stdout
    assert zk_tree(cluster.kazoo) == before


def test_sweep_refuses_a_wrong_root(cluster: Cluster) -> None:
    before = zk_tree(cluster.kazoo)
    r = cli("sweep", "--metadata-service-uri", uri(cluster, "/wrongroot"), "--master", "local[1]")
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    (line,) = error_lines(r.stderr)
    assert "/wrongroot: not a BookKeeper ledgers root" in line, line
    assert zk_tree(cluster.kazoo) == before


def test_daemon_on_a_wrong_root_exits_2_and_creates_nothing(cluster: Cluster, tmp_path: Path) -> None:
    """An operator expects a misconfigured root to fail loudly (exit 2: a crash loop with the reason in the
    log), not a pod that stays unready forever or, worse, leads an empty cluster."""
    before = zk_tree(cluster.kazoo)
    d = Daemon(cluster, "wrong-root", tmp_path, metadata_service_uri=uri(cluster, "/wrongroot")).start()
    try:
        rc = d.proc.wait(60)
    finally:
        d.kill()
    assert rc == 2, d.tail()
    errors = [e for e in d.logs() if e.get("level") == "error"]
    assert errors and "/wrongroot: not a BookKeeper ledgers root" in errors[-1]["error"], d.tail()
    assert zk_tree(cluster.kazoo) == before
    # It never voted, so it says nothing of releasing an election node.
    assert not [e for e in d.logs() if "election node released" in str(e.get("event", ""))], d.tail()


async def test_connect_accepts_layout_or_available_and_refuses_neither(cluster: Cluster, scratch: str) -> None:
    zk = cluster.kazoo
    with pytest.raises(MetadataConfigError, match=f"{scratch}: not a BookKeeper ledgers root: no such znode"):
        await open_store(uri(cluster, scratch))
    zk.create(scratch)
    with pytest.raises(MetadataConfigError, match="neither LAYOUT nor available"):
        await open_store(uri(cluster, scratch))
    assert zk.get_children(scratch) == []  # nothing created by the attempts
    zk.create(f"{scratch}/available")  # a root Java's metaformat made, LAYOUT lost: accepted (warning)
    store = await open_store(uri(cluster, scratch))
    try:
        assert store.layout is None and (await store.registrations()).available == frozenset()
    finally:
        await store.close()
    zk.delete(f"{scratch}/available")
    zk.create(f"{scratch}/LAYOUT", LAYOUT)  # LAYOUT but no `available`: connect, but reading bookies fails
    store = await open_store(uri(cluster, scratch))
    try:
        with pytest.raises(MetadataError, match=f"{scratch}/available: bookie registration directory is missing"):
            await store.registrations()
    finally:
        await store.close()
    assert sorted(zk.get_children(scratch)) == ["LAYOUT"]


async def test_a_vanished_root_is_an_error_and_is_never_recreated(cluster: Cluster, scratch: str) -> None:
    """Reads: the root listing is an error, not an empty cluster. Writes (our subtree, markers, the
    election): each fails instead of re-creating the root."""
    zk = cluster.kazoo
    zk.create(f"{scratch}/LAYOUT", LAYOUT, makepath=True)
    zk.create(f"{scratch}/available")
    main = await open_store(cluster.metadata_service_uri)
    store = await open_store(uri(cluster, scratch))
    leader = await leader_of(main)  # a real guard (the writes below are leader-guarded)
    election = LeaderElection(store.bridge, f"{scratch}/bk-auditor/election", "auditor-py-x:1", ledgers_root=scratch)
    try:
        await store.put(f"{scratch}/bk-auditor/checks/scrutiny", b"{}", leader.guard)  # root there: fine
        assert zk.exists(f"{scratch}/bk-auditor/checks/scrutiny")
        zk.delete(scratch, recursive=True)
        with pytest.raises(MetadataError, match=f"{scratch}: the ledgers root is gone"):
            await collect(store.list_ledgers())
        with pytest.raises(MetadataError, match=f"{scratch}/available"):
            await store.registrations()
        for write in (
            lambda: store.put(f"{scratch}/bk-auditor/checks/scrutiny", b"{}", leader.guard),
            lambda: store.mark_underreplicated(7, ["127.0.0.1:1"], leader.guard),
            lambda: zkwriters.set_check_ctime(store, "checkallledgersctime", 1, leader.guard),
        ):
            with pytest.raises(Exception):
                await write()
            assert zk.exists(scratch) is None
        await election.start()
        await asyncio.sleep(2.0)  # it retries every 0.5 s: several attempts to vote
        assert not election.is_leader and zk.exists(scratch) is None
    finally:
        await election.close()
        await leader.close()
        await store.close()
        await main.close()


async def test_our_writes_stay_in_our_subtree(cluster: Cluster) -> None:
    store = await open_store(cluster.metadata_service_uri)
    leader = await leader_of(store)
    try:
        for path in (
            f"{cluster.ledgers_root}/x",
            f"{cluster.ledgers_root}/bk-auditor",
            "/elsewhere/bk-auditor/x",
            f"{cluster.ledgers_root}/bk-auditorx/y",
        ):
            with pytest.raises(ValueError, match="not under bk-auditor's own subtree"):
                await store.put(path, b"", leader.guard)
        bridge = store.bridge
        for path in ("/elsewhere", f"{cluster.ledgers_root}/underreplication/other", cluster.ledgers_root):
            with pytest.raises(MetadataConfigError, match="outside bk-auditor's own subtree"):
                LeaderElection(bridge, path, "auditor-py-x:1", ledgers_root=cluster.ledgers_root)
    finally:
        await leader.close()
        await store.close()
    assert cluster.kazoo.exists("/elsewhere") is None


async def test_own_state_is_read_back_only_from_our_subtree(cluster: Cluster) -> None:
    """`read_own` (what the check state and the bookie watch read through) reads back what `put` wrote,
    None for a missing znode, and refuses any path outside `<root>/bk-auditor` as `put` does."""
    store = await open_store(cluster.metadata_service_uri)
    leader = await leader_of(store)
    path = f"{store.own_subtree}/test-own-{uuid.uuid4().hex[:8]}/state"
    try:
        assert await store.read_own(path) is None
        await store.put(path, b'{"x": 1}', leader.guard)
        assert await store.read_own(path) == b'{"x": 1}'
        for outside in (f"{cluster.ledgers_root}/LAYOUT", f"{cluster.ledgers_root}/bk-auditorx/y", "/zookeeper"):
            with pytest.raises(ValueError, match="not under bk-auditor's own subtree"):
                await store.read_own(outside)
    finally:
        cluster.kazoo.delete(path.rsplit("/", 1)[0], recursive=True)
        await leader.close()
        await store.close()
