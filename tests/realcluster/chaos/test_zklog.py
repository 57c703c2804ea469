"""The repair campaign's independent observers (issue 39, invariant 4), against a real cluster of their
own (ZooKeeper 3.8 from Debian, four 4.17.3 bookies, bookie 4 behind the decoding proxy):

- `zklog` reads ZooKeeper's transaction log with ZooKeeper's own reader and finds, from it alone, the
  ledger-metadata write made without the lock, and the ledger znode created again after its delete;
- the proxy's request decoder records every RECOVERY_ADD the real `bk-auditor repair` sends to the
  proxied bookie, with the sending process's pid from /proc, and `adds_without_lock` joins them with the
  lock intervals of the log and the session -> pid map sampled from ZooKeeper's `cons`: none is outside
  a lock; moved outside every lock, or sent by another process, the same adds are flagged.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from kazoo.client import KazooClient

from devcluster.chaos.proxy import LinkProxy
from devcluster.chaos.zklog import (
    SessionSampler,
    TxnLog,
    adds_without_lock,
    ledger_of_path,
    list_ledgers,
    lock_intervals,
    metadata_writes_without_lock,
    read_txnlog,
    recreated_ledgers,
    session_spans,
)
from devcluster.checks_util import bookie_lost, ledger_path
from devcluster.cli_util import BIN
from devcluster.cluster import Cluster
from devcluster.cluster.servers import PROXY_HOST
from devcluster.metadata_helpers import mark_lost, open_store
from tests.realcluster.second_cluster import second_cluster

pytestmark = pytest.mark.realcluster

PROXIED = 4
LOCK_DATA = b'bookieId: "zklog-test"\n'  # Java's LockDataFormat in protobuf text format


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with second_cluster("bk-auditor-zklog-", 4, proxied=(PROXIED,)) as c:
        yield c


@pytest.fixture(scope="module")
def proxy(cluster: Cluster) -> Iterator[LinkProxy]:
    b = cluster.bookie(PROXIED)
    p = LinkProxy(PROXY_HOST, b.host, b.port, decode_requests=True).start()
    try:
        yield p
    finally:
        p.stop()


def _client(cluster: Cluster) -> KazooClient:
    k = KazooClient(hosts=cluster.zk_hosts, timeout=10.0)
    k.start(timeout=30)
    return k


def _wait_connected(k: KazooClient, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not k.connected:
        assert time.monotonic() < deadline, "kazoo did not reconnect after the ZooKeeper restart"
        time.sleep(0.1)


def _lock_path(cluster: Cluster, lid: int) -> str:
    return f"{cluster.ledgers_root}/underreplication/locks/urL{lid:010d}"


def test_the_txn_log_shows_the_write_without_the_lock_and_the_recreated_ledger(cluster: Cluster) -> None:
    root = cluster.ledgers_root
    lid = cluster.create_ledger(entries=5)["ledgerId"]
    path, lock = ledger_path(cluster, lid), _lock_path(cluster, lid)
    assert ledger_of_path(path, root) == (0, lid)
    a, b, c = _client(cluster), _client(cluster), _client(cluster)
    sa, sb, sc = (k.client_id[0] for k in (a, b, c))
    try:
        a.ensure_path(f"{root}/underreplication/locks")
        # A: the lock (ephemeral, Java's shape), a version-checked write under it, the release.
        a.create(lock, LOCK_DATA, ephemeral=True)
        data, stat = a.get(path)
        a.set(path, data, version=stat.version)
        a.delete(lock)
        # B: the same write, version-checked, but holding no lock: the one violation.
        data, stat = b.get(path)
        unlocked_version = b.set(path, data, version=stat.version).version
        # A ZooKeeper restart in between: the log goes on in a new file; both sessions survive it.
        cluster.restart_zookeeper()
        for k in (a, b, c):
            _wait_connected(k)
        # A session that expired meanwhile (a slow reconnect under load) was replaced by a new one: the
        # records after the restart carry whichever each client has now.
        sa2, sb2, sc = (k.client_id[0] for k in (a, b, c))
        # A deletes the ledger under the lock again (allowed); B creates its znode again.
        a.create(lock, LOCK_DATA, ephemeral=True)
        data, stat = a.get(path)
        a.delete(path, version=stat.version)
        a.delete(lock)
        b.create(path, data)
        # C takes the lock and closes its session without releasing it: ZooKeeper ends it.
        c.create(lock, LOCK_DATA, ephemeral=True)
    finally:
        for k in (a, b, c):
            k.stop()
            k.close()
    log = TxnLog(cluster)
    records = log.records()
    assert len(list((cluster.workdir / "zk" / "data" / "version-2").glob("log.*"))) >= 2
    assert [r.zxid for r in read_txnlog(cluster)] == [r.zxid for r in records]
    assert len({r.session for r in records if r.type == "createSession"}) > 5
    mine = [r for r in records if ledger_of_path(r.path, root) == (0, lid)]
    writer = next(r.session for r in mine if r.type == "create")
    assert writer not in (sa, sb, sc)  # the Java tool's own session created the ledger, and closed it:
    assert [r.type for r in mine if r.session == writer][:2] == ["create", "setData"], mine

    bad = [v for v in metadata_writes_without_lock(records, root) if v["ledger"] == lid]
    assert [(v["type"], v["session"], v["version"]) for v in bad] == [("setData", sb, unlocked_version)], bad

    ivs = [iv for iv in lock_intervals(records, root) if iv.ledger == lid]
    assert [(iv.session, iv.ended_by) for iv in ivs] == [(sa, "delete"), (sa2, "delete"), (sc, "closeSession")], ivs
    assert all(iv.end_ms is not None and iv.start_ms <= iv.end_ms for iv in ivs)

    again = [v for v in recreated_ledgers(records, root) if v["ledger"] == lid]
    assert [(v["session"], v["deleted_by"]) for v in again] == [(sb2, sa2)], again

    spans = session_spans(records)
    for s in (sa, sb, sc):
        created, closed = spans[s].created_ms, spans[s].closed_ms
        assert created is not None and closed is not None and created <= closed, spans[s]
    assert lid in list_ledgers(cluster.kazoo, root)  # B's re-created znode
    # Read on: only the txns after the last one read come in.
    cluster.kazoo.create("/zklog-test", b"x")
    cluster.kazoo.delete("/zklog-test")
    more = log.records()[len(records) :]
    assert [(r.type, r.path) for r in more] == [("create", "/zklog-test"), ("delete", "/zklog-test")], more


async def test_the_proxy_records_every_recovery_add_of_a_real_repair_inside_its_lock(
    cluster: Cluster, proxy: LinkProxy
) -> None:
    root = cluster.ledgers_root
    b1, b2, victim = (cluster.bookie(n).bookie_id for n in (1, 2, 3))
    r = await asyncio.to_thread(
        cluster.create_ledger, ensemble=3, write_quorum=2, ack_quorum=2, entries=20, bookies=[b1, b2, victim]
    )
    lid = r["ledgerId"]
    # E3/WQ2: entry e is on indexes e % 3 and (e + 1) % 3; the victim is index 2.
    stripe = {e for e in range(20) if 2 in (e % 3, (e + 1) % 3)}
    before = len(proxy.recovery_adds())
    sampler = SessionSampler(cluster, interval=0.1).start()
    store = await open_store(cluster.metadata_service_uri)
    try:
        with bookie_lost(cluster, 3, [r]):
            await asyncio.to_thread(cluster.wait_unregistered, 3, 30)
            await mark_lost(store, victim, [lid])
            argv = [str(BIN), "repair", "--once", "--metadata-service-uri", cluster.metadata_service_uri]
            env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
            worker = await asyncio.to_thread(
                subprocess.Popen,
                [*argv, "--log-format", "json"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            out, err = await asyncio.to_thread(worker.communicate, None, 120)
            assert worker.returncode == 0, err[-3000:]
            records = await asyncio.to_thread(read_txnlog, cluster)
    finally:
        sampler.stop()
        await store.close()
    adds = proxy.recovery_adds()[before:]
    assert {(a.ledger, a.pid, a.protocol) for a in adds} == {(lid, worker.pid, "v3")}, adds[:5]
    assert sorted(a.entry for a in adds) == sorted(stripe), adds
    assert proxy.stats.requests.get("RECOVERY_ADD", 0) >= len(adds)
    session_pid = sampler.snapshot()
    worker_sessions = {s for s, p in session_pid.items() if p == worker.pid}
    assert worker_sessions, (session_pid, sampler.samples, sampler.failed_samples)
    held = [iv for iv in lock_intervals(records, root) if iv.ledger == lid]
    assert held and {iv.session for iv in held} <= worker_sessions, held

    print(f"\nrecovery adds {len(adds)} from pid {worker.pid}, requests {proxy.stats.requests}, locks {held}")
    print(f"records {len(records)}, sessions->pid {len(session_pid)}, worker sessions {worker_sessions}")
    # The observers' verdict on the real run: every add inside the worker's lock, every metadata
    # change of the ledger by its writer or under the lock.
    assert adds_without_lock(adds, records, session_pid, root) == []
    assert [v for v in metadata_writes_without_lock(records, root) if v["ledger"] == lid] == []
    assert any(
        x.type == "setData" and x.session in worker_sessions for x in records if x.path == ledger_path(cluster, lid)
    )

    # ... and they can fail: the same adds a second before the lock was taken, after it ended, or sent by
    # a process that holds no lock (this one: its sessions are known but hold none) are all flagged.
    start, end = held[0].start_ms / 1000, max(iv.end_ms or 0 for iv in held) / 1000
    early = [replace(a, time=start - 1.0) for a in adds]
    late = [replace(a, time=end + 1.0) for a in adds]
    other = [replace(a, pid=os.getpid()) for a in adds]
    unknown = [replace(a, pid=None) for a in adds]
    for forged in (early, late, other, unknown):
        flagged = adds_without_lock(forged, records, session_pid, root)
        assert len(flagged) == len(adds), flagged[:2]
    assert {v["reason"] for v in adds_without_lock(unknown, records, session_pid, root)} == {"sender pid unknown"}
    # End slack: 0.1 s after the lock's end passes, 0.3 s does not.
    last = [replace(adds[0], time=held[-1].end_ms / 1000 + 0.1)] if held[-1].end_ms else []
    assert adds_without_lock(last, records, session_pid, root) == []
    assert len(adds_without_lock([replace(a, time=a.time + 0.2) for a in last], records, session_pid, root)) == 1


def test_java_recovery_over_the_v2_protocol_is_seen_and_flagged_without_a_lock(
    cluster: Cluster, proxy: LinkProxy
) -> None:
    """A real Java client speaking the v2 wire protocol opens an open ledger with recovery (BookieShell
    `readledger -r`): its fencing reads and RECOVERY_ADDs to the proxied bookie are decoded from v2 frames,
    and since it holds no repair lock and did not write the ledger, both observers flag it."""
    root = cluster.ledgers_root
    ensemble = [cluster.bookie(n).bookie_id for n in (PROXIED, 1, 2)]
    r = cluster.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, entries=30, close=False, bookies=ensemble)
    lid = r["ledgerId"]
    conf = cluster.conf_dir / "client-v2.conf"
    conf.write_text((cluster.conf_dir / "client.conf").read_text() + "useV2WireProtocol=true\n")
    before, counts = len(proxy.recovery_adds()), dict(proxy.stats.requests)
    cluster.shell("readledger", "-r", "-l", str(lid), conf=conf)
    adds = proxy.recovery_adds()[before:]
    fence_reads = proxy.stats.requests.get("FENCE_READ", 0) - counts.get("FENCE_READ", 0)
    print(f"\nv2 recovery: {len(adds)} adds, {fence_reads} fencing reads, requests {proxy.stats.requests}")
    assert fence_reads >= 1
    assert adds and {(a.ledger, a.protocol) for a in adds} == {(lid, "v2")}, adds
    assert all(0 <= a.entry < 30 for a in adds) and len({a.pid for a in adds}) == 1, adds
    assert adds[0].pid not in (None, os.getpid()), adds[0]
    records = read_txnlog(cluster)
    bad = [v for v in metadata_writes_without_lock(records, root) if v["ledger"] == lid]
    assert bad and {v["type"] for v in bad} == {"setData"}, bad  # IN_RECOVERY, then CLOSED
    assert all(v["writer"] is not None and v["session"] != v["writer"] for v in bad), bad
    flagged = adds_without_lock(adds, records, {}, root)
    assert len(flagged) == len(adds), flagged[:2]
