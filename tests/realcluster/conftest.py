"""Fixtures shared by the real-cluster tests: a metadata store on the session cluster, the daemons a test
starts, and the operator's switches left as a test found them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from auditor.metadata.store import ZooKeeperMetadataStore
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon, reset_auditor_state
from devcluster.metadata_helpers import open_store


@pytest.fixture
async def store(cluster: Cluster) -> AsyncIterator[ZooKeeperMetadataStore]:
    """A store on the session cluster, closed after the test."""
    s = await open_store(cluster.metadata_service_uri)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def daemons(cluster: Cluster, tmp_path: Path) -> Iterator[list[Daemon]]:
    """Daemons started by a test; all stopped (by pid) afterwards. Our ZooKeeper state starts fresh."""
    started: list[Daemon] = []
    reset_auditor_state(cluster)
    yield started
    for d in started:
        if d.running:
            d.kill()
    reset_auditor_state(cluster)


@pytest.fixture
def restore_switches(cluster: Cluster):  # the cluster is shared by the session: leave it as found
    cluster.shell("autorecovery")  # Java's shell creates the under-replication tree if missing
    delay_path = f"{cluster.ledgers_root}/underreplication/lostBookieRecoveryDelay"
    disable_path = f"{cluster.ledgers_root}/underreplication/disable"
    delay = cluster.kazoo.exists(delay_path) and cluster.kazoo.get(delay_path)[0]
    disabled = cluster.kazoo.exists(disable_path) is not None
    yield
    if delay:
        cluster.kazoo.set(delay_path, delay)
    elif cluster.kazoo.exists(delay_path):
        cluster.kazoo.delete(delay_path)
    if disabled and not cluster.kazoo.exists(disable_path):
        cluster.kazoo.create(disable_path, b"")
    if not disabled and cluster.kazoo.exists(disable_path):
        cluster.kazoo.delete(disable_path)
