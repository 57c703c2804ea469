"""Leader election and session handling against the real ZooKeeper."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from auditor.metadata.bookkeeper.election import LeaderElection, sort_votes
from auditor.metadata.errors import MetadataConfigError, NotLeaderError
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.metadata.zk.bridge import KazooBridge, start_client, stop_client
from devcluster import ports
from devcluster.cluster import Cluster

JAVA_ID = f"127.0.0.1:{ports.JAVA_AUDITOR_PORT}"  # a Java auditor's identity (nothing listens)

pytestmark = pytest.mark.realcluster


async def _client(cluster: Cluster) -> tuple[KazooClient, KazooBridge]:
    client = KazooClient(hosts=cluster.zk_hosts, timeout=4.0)
    await start_client(client)
    return client, KazooBridge(client)


async def _expire_session(cluster: Cluster, client: KazooClient) -> None:
    """The known trick: a second client with the same session id and password, then closed."""
    session_id, password = client.client_id
    twin = KazooClient(hosts=cluster.zk_hosts, client_id=(session_id, password), timeout=4.0)
    await start_client(twin)
    await stop_client(twin)


async def test_votes_order_and_failover(cluster: Cluster) -> None:
    path = f"{cluster.ledgers_root}/bk-auditor/election-{uuid.uuid4().hex[:8]}"
    clients = [await _client(cluster) for _ in range(3)]
    elections = [
        LeaderElection(b, path, f"auditor-py-{i}:1", ledgers_root=cluster.ledgers_root)
        for i, (_, b) in enumerate(clients)
    ]
    try:
        for e in elections:
            await e.start()
            await asyncio.sleep(0.2)
        await elections[0].wait_leader(10)
        assert [e.is_leader for e in elections] == [True, False, False]
        children = cluster.kazoo.get_children(path)
        assert sort_votes(children) == sorted(children, key=lambda c: int(c[2:]))
        assert all(c.startswith("V_") for c in children) and len(children) == 3
        data, stat = cluster.kazoo.get(f"{path}/{sort_votes(children)[0]}")
        assert data == b'bookieId: "auditor-py-0:1"\n' and stat.ephemeralOwner == clients[0][0].client_id[0]
        assert await elections[1].current_leader() == (sort_votes(children)[0], "auditor-py-0:1")
        deposed = []
        elections[0].on_deposed(lambda: deposed.append(True))
        old_guard = elections[0].guard
        await elections[0].close()  # deletes its vote: the next one takes over at once
        await elections[1].wait_leader(10)
        assert deposed == [True] and not elections[2].is_leader
        assert len(cluster.kazoo.get_children(path)) == 2
        with pytest.raises(NotLeaderError):
            old_guard.check()
        # Only the predecessor is watched: deleting the last vote's predecessor's predecessor changes nothing.
        assert elections[2].follower_event.is_set()
    finally:
        for e in elections:
            await e.close()
        for c, b in clients:
            b.detach()
            await stop_client(c)
    assert cluster.kazoo.get_children(path) == []


async def test_java_election_path_needs_opt_in(cluster: Cluster) -> None:
    client, bridge = await _client(cluster)
    try:
        with pytest.raises(MetadataConfigError):
            LeaderElection(
                bridge,
                f"{cluster.ledgers_root}/underreplication/auditorelection",
                "x:1",
                ledgers_root=cluster.ledgers_root,
            )
        with pytest.raises(MetadataConfigError):
            LeaderElection(
                bridge,
                f"{cluster.ledgers_root}/bk-auditor/x",
                "not a bookie id",
                java_compatible=True,
                ledgers_root=cluster.ledgers_root,
            )
    finally:
        bridge.detach()
        await stop_client(client)


async def test_session_expiry_steps_down_and_reenters_with_a_new_vote(cluster: Cluster) -> None:
    client = KazooClient(hosts=cluster.zk_hosts, timeout=4.0)
    await start_client(client)
    store = await ZooKeeperMetadataStore.connect(cluster.metadata_service_uri, client=client)
    path = f"{cluster.ledgers_root}/bk-auditor/election-{uuid.uuid4().hex[:8]}"
    e = LeaderElection(store.bridge, path, "auditor-py-a:1", ledgers_root=cluster.ledgers_root)
    states: list[KazooState] = []
    leader_when_lost: list[bool] = []  # read in the callback: the re-entry may follow LOST within one poll

    def on_state(state: KazooState) -> None:
        states.append(state)
        if state == KazooState.LOST:
            leader_when_lost.append(e.is_leader)

    store.bridge.add_state_callback(on_state)
    delay_events: list[int | None] = []
    cancel = store.watch_lost_bookie_recovery_delay(delay_events.append)
    try:
        await e.start()
        await e.wait_leader(10)
        first_vote, guard = e.vote_path, e.guard
        await asyncio.sleep(0.3)
        await _expire_session(cluster, client)
        await e.wait_follower(20)  # SUSPENDED first: stepped down at once
        for _ in range(200):
            if KazooState.LOST in states:
                break
            await asyncio.sleep(0.1)
        assert KazooState.LOST in states and leader_when_lost == [False]
        # A write with the old guard fails: locally, and on the server (the old vote died with the session).
        with pytest.raises(NotLeaderError):
            await store.mark_underreplicated(123, ["a:1"], guard)
        await e.wait_leader(30)  # re-entered with a new vote after the new session connected
        assert e.vote_path != first_vote and e.elections == 2
        assert cluster.kazoo.exists(first_vote) is None and cluster.kazoo.exists(e.vote_path) is not None
        # Watches were re-armed on the new session: a same-value rewrite is still reported.
        if not cluster.kazoo.exists(store.markers.lost_bookie_recovery_delay):
            cluster.kazoo.create(store.markers.lost_bookie_recovery_delay, b"0", makepath=True)
        before = len(delay_events)
        await asyncio.sleep(1.0)
        cluster.kazoo.set(store.markers.lost_bookie_recovery_delay, b"0")
        for _ in range(100):
            if len(delay_events) > before:
                break
            await asyncio.sleep(0.1)
        assert delay_events[-1] == 0 and len(delay_events) > before
    finally:
        cancel()
        await e.close()
        await store.close()
        await stop_client(client)


async def test_zookeeper_restart_suspends_then_resumes_leadership(cluster: Cluster) -> None:
    client = KazooClient(hosts=cluster.zk_hosts, timeout=10.0)
    await start_client(client)
    bridge = KazooBridge(client)
    path = f"{cluster.ledgers_root}/bk-auditor/election-{uuid.uuid4().hex[:8]}"
    e = LeaderElection(bridge, path, "auditor-py-b:1", ledgers_root=cluster.ledgers_root)
    states: list[KazooState] = []
    bridge.add_state_callback(states.append)
    try:
        await e.start()
        await e.wait_leader(10)
        vote = e.vote_path
        loop = asyncio.get_running_loop()
        # Restart ZooKeeper (down ~2 s, well inside every session timeout), off the loop.
        restart = loop.run_in_executor(None, cluster.restart_zookeeper, 2.0)
        await e.wait_follower(20)  # stepped down at once on SUSPENDED
        assert KazooState.SUSPENDED in states
        await restart
        await e.wait_leader(60)
        if KazooState.LOST in states:
            # The server restart outlasted the session (it can, on a loaded machine): a new vote.
            assert e.vote_path != vote and cluster.kazoo.exists(vote) is None
        else:
            assert e.vote_path == vote  # same session, same vote: leader again
        assert e.elections == 2
        for n in range(1, len(cluster.bookies) + 1):
            cluster.wait_registered(n, timeout=60)
    finally:
        await e.close()
        bridge.detach()
        await stop_client(client)


async def test_a_zookeeper_restart_longer_than_the_backoff_keeps_the_session(cluster: Cluster) -> None:
    """ZooKeeper down 5 s, a 4 s session: our client must try again often enough to reach the restarted
    server before the session times out there. kazoo's default backoff (doubling up to an hour) next
    tried ~6 s after the drop and lost the session (chaos seed 1, round 115: a new leader only 9 s later)."""
    from dataclasses import replace

    from auditor.metadata.location import parse_service_uri

    loc = replace(parse_service_uri(cluster.metadata_service_uri), session_timeout_ms=4000)
    store = await ZooKeeperMetadataStore.connect(loc)
    states: list[KazooState] = []
    store.bridge.add_state_callback(states.append)
    session = store.client.client_id
    try:
        await asyncio.get_running_loop().run_in_executor(None, cluster.restart_zookeeper, 5.0)
        deadline = asyncio.get_running_loop().time() + 30
        while not store.client.connected:
            assert asyncio.get_running_loop().time() < deadline, states
            await asyncio.sleep(0.1)
        assert KazooState.LOST not in states and store.client.client_id == session, states
        for n in range(1, len(cluster.bookies) + 1):
            cluster.wait_registered(n, timeout=60)
    finally:
        await store.close()


async def test_many_reads_in_flight_without_blocking_the_loop(cluster: Cluster) -> None:
    store = await ZooKeeperMetadataStore.connect(cluster.metadata_service_uri, max_in_flight=8)
    in_flight = peak = 0
    real = store.client.get_children_async

    def counting(path, *args):  # what kazoo sees: requests between submission and completion
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        result = real(path, *args)

        def done(_):
            nonlocal in_flight
            in_flight -= 1

        result.rawlink(done)
        return result

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    t = asyncio.ensure_future(ticker())
    try:
        results = await asyncio.gather(
            *(store.bridge.call(counting, f"{cluster.ledgers_root}/available") for _ in range(300))
        )
        assert all(results) and len(results) == 300
        assert 1 < peak <= 8  # several in flight at once, never more than the bound
        assert ticks > 50  # the loop kept running while kazoo worked
    finally:
        t.cancel()
        await store.close()


async def test_opt_in_java_election_is_read_by_whoisauditor(cluster: Cluster) -> None:
    """Only when asked: a vote in Java's own election, in Java's exact format, understood by Java's tools."""
    client, bridge = await _client(cluster)
    path = f"{cluster.ledgers_root}/underreplication/auditorelection"
    e = LeaderElection(bridge, path, JAVA_ID, java_compatible=True, ledgers_root=cluster.ledgers_root)
    try:
        await e.start()
        await e.wait_leader(20)
        name = e.vote_path.rsplit("/", 1)[1]
        assert name.startswith("V_") and name[2:].isdigit() and len(name) == 12
        assert cluster.kazoo.get(e.vote_path)[0] == f'bookieId: "{JAVA_ID}"\n'.encode()
        assert cluster.kazoo.get(path)[0] == f'bookieId: "{JAVA_ID}"\n'.encode()  # the leader's announcement
        out = cluster.shell("whoisauditor").stdout
        assert f"Auditor: {JAVA_ID}" in out, out
    finally:
        await e.close()
        bridge.detach()
        await stop_client(client)
    assert cluster.kazoo.get_children(path) == []  # our vote is gone: nothing left in Java's election


async def test_opt_in_java_election_beside_a_real_java_autorecovery(cluster: Cluster) -> None:
    """Our Java-format vote takes part in Java's own election with a real AutoRecoveryMain: while we lead,
    Java follows (its sort accepts our vote and whoisauditor names us); when we leave, Java's elector
    takes over. Nothing crashes on either side."""
    client, bridge = await _client(cluster)
    path = f"{cluster.ledgers_root}/underreplication/auditorelection"
    ours = f"127.0.0.1:{ports.OUR_VOTE_PORT}"
    e = LeaderElection(bridge, path, ours, java_compatible=True, ledgers_root=cluster.ledgers_root)
    java = None
    try:
        await e.start()
        await e.wait_leader(20)
        java = cluster.start_autorecovery(port=ports.JAVA_AUDITOR_PORT)
        deadline = asyncio.get_running_loop().time() + 60
        while len(cluster.kazoo.get_children(path)) < 2:  # Java voted behind us
            assert java.running, (cluster.logs_dir / "autorecovery.log").read_text()[-3000:]
            assert asyncio.get_running_loop().time() < deadline, "the Java elector never voted"
            await asyncio.sleep(0.5)
        assert e.is_leader
        assert f"Auditor: {ours}" in cluster.shell("whoisauditor").stdout
        await e.close()  # we leave: Java's elector must take over
        deadline = asyncio.get_running_loop().time() + 60
        while f"Auditor: {JAVA_ID}" not in cluster.shell("whoisauditor", check=False).stdout:
            assert java.running, (cluster.logs_dir / "autorecovery.log").read_text()[-3000:]
            assert asyncio.get_running_loop().time() < deadline, "Java never took over"
            await asyncio.sleep(1)
        assert java.running
    finally:
        await e.close()
        if java is not None:
            java.stop()
        bridge.detach()
        await stop_client(client)
