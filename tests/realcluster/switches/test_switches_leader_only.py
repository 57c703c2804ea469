"""The operator's switches (`lostBookieRecoveryDelay`, the replication `disable` znode) through the admin API
of two real daemons: only the leader changes them, with its guarded write; a standby refuses, naming the
leader, and ZooKeeper is left exactly as it was."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest

from auditor.admin.client import AdminClient, AdminClientError
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon
from tests.realcluster.daemon.test_daemon import start

pytestmark = pytest.mark.realcluster

QUIET = {"schedule": {"scrutiny_seconds": 0, "bookie_check_seconds": 0}}  # the daemons change nothing themselves


def switch_state(cluster: Cluster) -> tuple[Any, ...]:
    """Everything a switch write could change: the delay znode's data and version, whether `disable`
    exists, and the under-replication tree's child version (any create or delete under it moves it)."""
    base = f"{cluster.ledgers_root}/underreplication"
    delay = cluster.kazoo.get(f"{base}/lostBookieRecoveryDelay")
    tree = cluster.kazoo.exists(base)
    return delay[0], delay[1].version, cluster.kazoo.exists(f"{base}/disable") is not None, tree.cversion


async def test_a_standby_refuses_to_set_the_switches_and_the_leader_sets_them(
    cluster: Cluster,
    restore_switches: None,  # before `daemons`: restored after their state is reset
    daemons: list[Daemon],
    tmp_path: Path,
) -> None:
    a = start(daemons, cluster, tmp_path, "switches-a", **QUIET)
    await asyncio.to_thread(a.wait, a.is_leader, 60, "leadership")
    b = start(daemons, cluster, tmp_path, "switches-b", **QUIET)
    await asyncio.to_thread(b.wait, lambda: b.status().identity == "switches-b", 60, "the standby's admin API")
    cluster.shell("lostbookierecoverydelay", "-set", "7")
    if cluster.kazoo.exists(f"{cluster.ledgers_root}/underreplication/disable"):
        cluster.shell("autorecovery", "-enable")
    before = switch_state(cluster)

    async with AdminClient(f"127.0.0.1:{b.admin_port}", timeout=10) as standby:
        # Reads answer on any replica, once connected (a standby not yet connected would refuse otherwise).
        read = await asyncio.wait_for(_connected_read(standby), 30)
        assert read.seconds == 7
        with pytest.raises(AdminClientError) as delay_refused:
            await standby.set_recovery_delay(99, read.version)
        with pytest.raises(AdminClientError) as replication_refused:
            await standby.set_replication(False)
    for refused in (delay_refused.value, replication_refused.value):
        assert refused.code is grpc.StatusCode.FAILED_PRECONDITION, refused
        assert "standby; the leader is switches-a" in str(refused), refused
    assert switch_state(cluster) == before  # nothing written by the standby

    async with AdminClient(f"127.0.0.1:{a.admin_port}", timeout=10) as leader:
        got = await leader.set_recovery_delay(99, read.version)
        assert (got.seconds, got.previous_seconds, got.version) == (99, 7, read.version + 1)
        switched = await leader.set_replication(False)
        assert (switched.enabled, switched.changed) == (False, True)
        assert "Autorecovery is disabled" in cluster.shell("autorecovery").stdout  # Java reads what we wrote
        assert (await leader.set_replication(True)).enabled
    assert cluster.kazoo.get(f"{cluster.ledgers_root}/underreplication/lostBookieRecoveryDelay")[0] == b"99"


async def _connected_read(client: AdminClient) -> Any:
    while True:
        try:
            return await client.recovery_delay()
        except AdminClientError as exc:
            if "not connected to ZooKeeper yet" not in str(exc):
                raise
            await asyncio.sleep(0.2)
