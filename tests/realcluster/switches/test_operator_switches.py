"""whoisauditor, lostBookieRecoveryDelay and the replication switch from our command line, checked against
Java's own shell on the same real cluster in both directions (what we set, Java reads; and back)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from auditor.metadata.bookkeeper.election import LeaderElection
from auditor.metadata.bookkeeper.operator import OperatorSwitches
from auditor.metadata.errors import ConcurrentUpdateError, NotLeaderError
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.metadata.zk.bridge import KazooBridge, start_client, stop_client
from devcluster.cluster import Cluster

pytestmark = pytest.mark.realcluster

BIN = Path(sys.executable).with_name("bk-auditor")


def ours(cluster: Cluster, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}, **(env or {})}
    env["BKAUDIT_METADATA_SERVICE_URI"] = cluster.metadata_service_uri
    return subprocess.run(
        [str(BIN), *args], capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL
    )


def test_recovery_delay_both_ways_with_javas_shell(cluster: Cluster, restore_switches: None) -> None:
    r = ours(cluster, "recovery-delay", "45", "--yes")
    assert r.returncode == 0 and r.stdout.strip().endswith("-> 45s (read back)"), (r.stdout, r.stderr)
    assert "LostBookieRecoveryDelay value in ZK: 45" in cluster.shell("lostbookierecoverydelay", "-get").stdout
    cluster.shell("lostbookierecoverydelay", "-set", "7")
    r = ours(cluster, "recovery-delay", "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout) == {
        "kind": "recoveryDelay",
        "lostBookieRecoveryDelaySeconds": 7,
    }, r.stderr
    # Off a terminal, a change needs --yes: refused in one line, nothing written.
    r = ours(cluster, "recovery-delay", "60")
    assert r.returncode == 2 and r.stderr.splitlines() == [
        f"error: refusing to set lostBookieRecoveryDelay of {cluster.ledgers_root} from 7s to 60s without --yes "
        "(no terminal to confirm on)"
    ]
    assert cluster.kazoo.get(f"{cluster.ledgers_root}/underreplication/lostBookieRecoveryDelay")[0] == b"7"
    r = ours(cluster, "recovery-delay", "-5", "--yes")
    assert r.returncode == 2


def test_replication_switch_both_ways_with_javas_shell(cluster: Cluster, restore_switches: None) -> None:
    r = ours(cluster, "replication", "disable", "--yes")
    assert r.returncode == 0 and r.stdout.strip() == "replication: enabled -> disabled (read back)", r.stderr
    assert "Autorecovery is disabled" in cluster.shell("autorecovery").stdout
    assert cluster.kazoo.get(f"{cluster.ledgers_root}/underreplication/disable")[0] == b""  # Java's format
    r = ours(cluster, "replication", "disable", "--yes")
    assert r.returncode == 0 and r.stdout.strip() == "replication: disabled; nothing to do"
    cluster.shell("autorecovery", "-enable")
    r = ours(cluster, "replication", "--format", "json")
    assert json.loads(r.stdout) == {"kind": "replication", "replicationEnabled": True, "changed": False}
    r = ours(cluster, "replication", "disable")  # no --yes, no terminal
    assert r.returncode == 2 and "without --yes" in r.stderr
    assert "Autorecovery is enabled" in cluster.shell("autorecovery").stdout


async def test_a_concurrent_change_is_not_overwritten(cluster: Cluster, restore_switches: None) -> None:
    store = await ZooKeeperMetadataStore.connect(cluster.metadata_service_uri)
    try:
        switches = OperatorSwitches(store)
        _, version = await switches.lost_bookie_recovery_delay()
        await switches.set_lost_bookie_recovery_delay(30, version, guard=None)
        _, version = await switches.lost_bookie_recovery_delay()
        cluster.shell("lostbookierecoverydelay", "-set", "11")  # another operator, between our read and write
        with pytest.raises(ConcurrentUpdateError, match="lostBookieRecoveryDelay: changed since it was read"):
            await switches.set_lost_bookie_recovery_delay(99, version, guard=None)
        assert await switches.lost_bookie_recovery_delay() == (11, version + 1)
    finally:
        await store.close()


class StaleVote:
    """The guard of a leader that has not yet learnt its vote is gone (a frozen process, a session expiring
    as it writes): its own check passes, so only ZooKeeper's check of the vote inside the write stops it."""

    def __init__(self, vote_path: str) -> None:
        self.guard_path = vote_path

    def check(self) -> None:
        pass


async def test_a_leader_that_lost_its_vote_cannot_set_the_switches(cluster: Cluster, restore_switches: None) -> None:
    base = f"{cluster.ledgers_root}/underreplication"
    store = await ZooKeeperMetadataStore.connect(cluster.metadata_service_uri)
    election = LeaderElection(
        store.bridge,
        f"{cluster.ledgers_root}/bk-auditor/election-{uuid.uuid4().hex[:8]}",
        "switch-writer:1",
        ledgers_root=cluster.ledgers_root,
    )
    try:
        await election.start()
        await election.wait_leader(20)
        guard = election.guard
        switches = OperatorSwitches(store)
        if await switches.replication_disabled():
            assert await switches.set_replication_disabled(False, guard=guard)
        # While it leads, its guarded writes go through (compare-and-set on the delay's version as before).
        _, version = await switches.lost_bookie_recovery_delay()
        assert await switches.change_lost_bookie_recovery_delay(21, version, guard=guard) == (
            21,
            0 if version is None else version + 1,
        )
        assert await switches.change_replication_disabled(True, guard=guard)
        _, version = await switches.lost_bookie_recovery_delay()

        cluster.kazoo.delete(guard.guard_path)  # its vote is gone (as when its session expires)
        before = cluster.kazoo.get(f"{base}/lostBookieRecoveryDelay"), cluster.kazoo.exists(base).cversion
        for stale in (StaleVote(guard.guard_path), guard):  # not noticed yet, and noticed (or not yet)
            with pytest.raises(NotLeaderError):
                await switches.set_replication_disabled(False, guard=stale)
            with pytest.raises(NotLeaderError):
                await switches.set_lost_bookie_recovery_delay(5, version, guard=stale)
        after = cluster.kazoo.get(f"{base}/lostBookieRecoveryDelay"), cluster.kazoo.exists(base).cversion
        assert after == before and cluster.kazoo.exists(f"{base}/disable") is not None  # nothing written
    finally:
        await election.close()
        await store.close()


async def test_whoisauditor_names_javas_and_our_leader(cluster: Cluster) -> None:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=cluster.zk_hosts, timeout=4.0)
    await start_client(client)
    bridge = KazooBridge(client)
    ours_path = f"{cluster.ledgers_root}/bk-auditor/election-{uuid.uuid4().hex[:8]}"
    java_path = f"{cluster.ledgers_root}/underreplication/auditorelection"
    our_vote = LeaderElection(bridge, ours_path, "auditor-py-7:1", ledgers_root=cluster.ledgers_root)
    java_vote = LeaderElection(
        bridge, java_path, "127.0.0.1:3999", java_compatible=True, ledgers_root=cluster.ledgers_root
    )
    try:
        await our_vote.start()
        await java_vote.start()
        await our_vote.wait_leader(20)
        await java_vote.wait_leader(20)
        r = ours(cluster, "whoisauditor", "--format", "json", env={"BKAUDIT_ELECTION__PATH": ours_path})
        assert r.returncode == 0, r.stderr
        vote = lambda e: e.vote_path.rsplit("/", 1)[1]  # noqa: E731
        assert json.loads(r.stdout)["leaders"] == [
            {"election": java_path, "vote": vote(java_vote), "identity": "127.0.0.1:3999"},
            {"election": ours_path, "vote": vote(our_vote), "identity": "auditor-py-7:1"},
        ]
        r = ours(cluster, "whoisauditor", env={"BKAUDIT_ELECTION__PATH": ours_path})
        assert r.stdout.splitlines()[0] == f"Auditor: 127.0.0.1:3999 (vote {java_path}/{vote(java_vote)})"
        assert "Auditor: 127.0.0.1:3999" in cluster.shell("whoisauditor").stdout  # Java agrees
    finally:
        await our_vote.close()
        await java_vote.close()
        bridge.detach()
        await stop_client(client)
