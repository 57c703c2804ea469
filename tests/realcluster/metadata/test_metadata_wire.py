"""Bulk reads on our own ZooKeeper session (`auditor.metadata.zk.wire`) against the real ZooKeeper: the same
answers as kazoo's, the chroot, the session kept alive under a slow rate, and every failure handed back
to kazoo without losing a read."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl

from auditor.aio.ratelimit import TokenBucket
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.metadata.zk.wire import WireReader, WireUnavailable
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import open_store

pytestmark = pytest.mark.realcluster


@pytest.fixture
def area(cluster: Cluster) -> str:
    """A private subtree: /wire-<random> with 300 children holding distinct data, one with an ACL we fail."""
    root = f"/wire-{uuid.uuid4().hex[:8]}"
    zk = cluster.kazoo
    tx = zk.transaction()
    tx.create(root, b"")
    for i in range(300):
        tx.create(f"{root}/n{i:04d}", f"value {i}".encode() * (i % 7))
    tx.commit()
    zk.create(f"{root}/secret", b"hidden", acl=[make_digest_acl("someone", "else", all=True)])
    yield root
    zk.delete(f"{root}/secret")  # recursive delete would list it, which its ACL forbids
    zk.delete(root, recursive=True)


@pytest.fixture
async def store(cluster: Cluster) -> AsyncIterator[ZooKeeperMetadataStore]:
    s = await open_store(cluster.metadata_service_uri)
    try:
        yield s
    finally:
        await s.close()


def _paths(area: str) -> list[str]:
    return [f"{area}/n{i:04d}" for i in range(300)] + [f"{area}/missing", f"{area}/secret"]


async def test_the_wire_answers_exactly_what_kazoo_answers(store: ZooKeeperMetadataStore, area: str) -> None:
    wire = store.bridge.wire
    assert wire is not None, "a plaintext store reads in bulk on its own session by default"
    paths = _paths(area)
    theirs = await store.bridge._kazoo_get_many(paths)
    before = wire.batches
    mine = await store.bridge.get_many(paths)
    assert wire.batches == before + 1 and wire.handed_back == 0
    for path, a, b in zip(paths[:-1], theirs[:-1], mine[:-1], strict=True):
        assert a == b, path  # data and every Stat field
    assert mine[-2] is None  # missing
    assert isinstance(theirs[-1], NoAuthError) and isinstance(mine[-1], NoAuthError)
    assert mine[0] == (b"", theirs[0][1]) and mine[1][0] == b"value 1"


async def test_a_chrooted_reader_reads_inside_its_chroot(cluster: Cluster, area: str) -> None:
    reader = WireReader([("127.0.0.1", cluster.zk_port)], chroot=area, session_timeout_s=10)
    try:
        got = await reader.get_many(["/n0003", "/n0299", "/nothing"], 8, None, 10)
    finally:
        reader.close()
    assert got[0][0] == b"value 3" * 3 and got[1][0] == b"value 299" * (299 % 7) and got[2] is None


async def test_a_slow_rate_keeps_the_session_alive_with_pings(cluster: Cluster, area: str) -> None:
    # A 4 s session (ZooKeeper's minimum at tickTime 2000). At 1 read/s the one slice of 8 reads is
    # released 7 s after the sync: without a ping meanwhile the server expires the session and the
    # reads fail (WireUnavailable); with them the same session serves them.
    reader = WireReader([("127.0.0.1", cluster.zk_port)], chroot="", session_timeout_s=4)
    try:
        first = await reader.get_many(_paths(area)[:8], 8, None, 10)
        session = reader._session
        got = await reader.get_many(_paths(area)[:8], 8, TokenBucket(1.0), 10)
        assert reader._session is session and not session.closed
        assert got == first and all(g is not None for g in got)
    finally:
        reader.close()


async def test_an_idle_session_is_replaced_before_it_can_expire(cluster: Cluster, area: str) -> None:
    reader = WireReader([("127.0.0.1", cluster.zk_port)], chroot="", session_timeout_s=4)
    try:
        await reader.get_many(_paths(area)[:2], 8, None, 10)
        old = reader._session
        await asyncio.sleep(2.6)  # past 0.6 of the 4 s timeout
        got = await reader.get_many(_paths(area)[:2], 8, None, 10)
        assert reader._session is not old and old.closed and got[1][0] == b"value 1"
    finally:
        reader.close()


async def test_no_server_hands_the_batch_to_kazoo_and_kazoo_serves_for_a_while(
    store: ZooKeeperMetadataStore, area: str
) -> None:
    wire = WireReader([("127.0.0.1", 1)], chroot="", session_timeout_s=10, connect_timeout_s=2)
    store.bridge.wire = wire
    paths = _paths(area)[:50]
    with pytest.raises(WireUnavailable, match="127.0.0.1:1"):
        await wire.get_many(paths, 8, None, 5)
    got = await store.bridge.get_many(paths)
    assert wire.handed_back == 1 and wire.batches == 0
    assert [g[0] for g in got] == [f"value {i}".encode() * (i % 7) for i in range(50)]
    again = await store.bridge.get_many(paths)  # within retry_after_s: straight to kazoo
    assert again == got and wire.handed_back == 1
    wire.retry_after_s = 0  # once the pause is over the wire is tried again (and fails again here)
    await store.bridge.get_many(paths)
    assert wire.handed_back == 2


async def test_a_connection_lost_mid_batch_loses_no_read(store: ZooKeeperMetadataStore, area: str) -> None:
    wire = store.bridge.wire
    assert wire is not None
    paths = _paths(area)[:300] * 10  # 3,000 reads, 4 in flight, in slices at 1,000/s: ~3 s
    store.bridge.max_in_flight = 4
    store.bridge.rate = TokenBucket(1000.0)
    reading = asyncio.ensure_future(store.bridge.get_many(paths))
    while wire._session is None or wire._session.transport is None:  # noqa: ASYNC110 (a poll of our own state)
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.5)
    assert not reading.done()
    wire._session.transport.abort()  # the connection drops with reads outstanding
    got = await reading
    assert wire.handed_back == 1 and wire.batches == 0
    assert [g[0] for g in got] == [f"value {i % 300}".encode() * (i % 300 % 7) for i in range(3000)]


async def test_with_wire_reads_off_kazoo_serves(cluster: Cluster, area: str) -> None:
    s = await open_store(cluster.metadata_service_uri, wire_reads=False)
    try:
        assert s.bridge.wire is None
        got = await s.bridge.get_many(_paths(area)[:3])
        assert got[2][0] == b"value 2" * 2
    finally:
        await s.close()


def test_the_wire_serves_on_uvloop(cluster: Cluster, area: str) -> None:
    """The shipped event loop is uvloop, whose transports are not asyncio.Transport: the same batch there."""
    import uvloop

    async def read() -> tuple[list, int, int]:
        s = await open_store(cluster.metadata_service_uri)
        try:
            assert s.bridge.wire is not None
            got = await s.bridge.get_many(_paths(area)[:300])
            return got, s.bridge.wire.batches, s.bridge.wire.handed_back
        finally:
            await s.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        got, batches, handed_back = runner.run(read())
    assert (batches, handed_back) == (1, 0)
    assert [g[0] for g in got] == [f"value {i}".encode() * (i % 7) for i in range(300)]
