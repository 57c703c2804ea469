"""Repair of ledgers whose metadata stores no password, against real BookKeeper 4.17.3.

The real Java client writes such a ledger when configured with `ledgerMetadataVersion=1` (format v1 has
no password and no digest type; v2 and v3 always store both). Java's administrative open, and our repair
role, then use the recovery settings (`repair.recovery_password` "", `repair.recovery_digest_type` CRC32
by default). Under them every intact copy of a CRC32C ledger (what Pulsar writes) fails verification:
that must never be called data loss. A stored copy proves a CRC digest type without any password, so the
CRC32C ledger is repaired; a MAC ledger written with another password cannot be verified, and is blocked
`credentials_mismatch` (not critical, backed off) until the recovery settings name its password.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.bookie import BookieClientConfig, BookiePool
from auditor.checks.context import AuditContext
from auditor.durability.entry import verify_entry
from auditor.durability.findings import Severity
from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType
from auditor.durability.repairblocked import blocked_finding
from auditor.durability.repairplan import Backoff
from auditor.durability.schedule import write_set
from auditor.metadata.own.repairstate import RepairBlocks
from auditor.metadata.repair.lock import RepairLocks
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.repair.attempt import RepairOptions, Status
from auditor.repair.metrics import RepairMetrics
from auditor.repair.worker import RepairWorker
from devcluster.checks_util import bookie_lost
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import mark_lost

pytestmark = pytest.mark.realcluster

SIZE = 80
ENTRIES = 24
VICTIM = 1
MAC_PASSWORD = "mac-ledger-pw-7f3a"
CONFIG = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=0.5)


def create_without_password(cluster: Cluster, conf: Path, digest: str, password: str) -> dict[str, Any]:
    """A closed ledger on bookies 1-3 (E3/WQ2), its metadata in format v1 (no password stored)."""
    ensemble = [cluster.bookie(n).bookie_id for n in (1, 2, 3)]
    return cluster.ledger_tool(
        "create",
        *("--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2", "--digest", digest),
        *("--password", password, "--entries", str(ENTRIES), "--entry-size", str(SIZE)),
        *("--bookies", ",".join(ensemble), "--allowed", ",".join(cluster.sorted_bookie_ids)),
        *("--client-conf", str(conf)),  # the tool takes the last --client-conf given
    )


@pytest.fixture(scope="module")
def lost(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    conf = tmp_path_factory.mktemp("v1conf") / "client.conf"
    shared = cluster.conf_dir / "client.conf"
    conf.write_text((shared.read_text() if cluster.client_conf else "") + "ledgerMetadataVersion=1\n")
    made = {
        "crc32c": create_without_password(cluster, conf, "CRC32C", ""),
        "mac": create_without_password(cluster, conf, "MAC", MAC_PASSWORD),
    }
    with bookie_lost(cluster, VICTIM, made.values()):
        cluster.wait_unregistered(VICTIM)
        yield made


async def test_no_password_in_metadata_is_never_data_loss(
    cluster: Cluster, lost: dict[str, dict[str, Any]], store: ZooKeeperMetadataStore
) -> None:
    victim = cluster.bookie(VICTIM).bookie_id
    crc, mac = (LedgerId.of(lost[n]["ledgerId"]) for n in ("crc32c", "mac"))
    for lid in (crc, mac):
        md = (await store.read_ledger(lid)).metadata
        assert (md.format_version, md.password, md.digest_type) == (1, None, None), md
    await mark_lost(store, victim, [crc.ledger, mac.ledger])
    metrics = RepairMetrics(cluster="t")
    options = RepairOptions(backoff=Backoff(cap_s=128))  # the default recovery settings: "" and CRC32
    async with BookiePool(store.address_resolver(), CONFIG) as pool:
        ctx = AuditContext(store, pool)
        worker = RepairWorker(ctx, RepairLocks(store, "bk-auditor@creds"), options, metrics=metrics)

        # CRC32C, no password needed: a stored copy proves the digest type, the ledger is repaired.
        got = await worker.repair(crc)
        assert (got.status, got.reason) == (Status.REPAIRED, ""), got
        assert got.entries_copied == ENTRIES * 2 // 3
        md = (await store.read_ledger(crc)).metadata
        assert victim not in md.bookies and md.password is None
        for e in range(ENTRIES):
            ensemble = md.segments[0].ensemble
            for i in write_set(e, md.ensemble_size, md.write_quorum):
                read = await pool.client(ensemble[i]).read_entry(crc.ledger, e)
                assert read.present and read.body is not None, (e, ensemble[i], read)
                check = verify_entry(read.body, ledger_id=crc.ledger, entry_id=e, digest_type=DigestType.CRC32C)
                assert check.ok and check.payload == cluster.payload(crc.ledger, e, SIZE), (e, ensemble[i])
        assert cluster.kazoo.exists(store.markers.marker(crc)) is None

        # MAC under another password: cannot verify. Blocked, not data loss, backed off, marker kept.
        got = await worker.repair(mac)
        assert (got.status, got.reason) == (Status.BLOCKED, "credentials_mismatch"), got
        assert "cannot verify" in got.detail and got.retry_in_s == 4.0
        record = await RepairBlocks(store).get(mac)
        assert record is not None and record.reason == "credentials_mismatch"
        finding = blocked_finding(mac, record, 4.0)
        assert finding.severity is not Severity.CRITICAL and "DATA LOSS" not in finding.message
        value = metrics.registry.get_sample_value
        assert (
            value("bk_auditor_repair_blocked_total", {"bookkeeper_cluster": "t", "reason": "credentials_mismatch"}) == 1
        )
        assert value("bk_auditor_repair_blocked_total", {"bookkeeper_cluster": "t", "reason": "data_loss"}) is None
        assert worker.in_backoff(mac)
        # Not retried within the backoff. (run_once takes every marker of the cluster: earlier test files
        # may have left some, blocked for their own reasons, so the counts are read before it.)
        assert mac not in [r.ledger_id for r in await worker.run_once()]
        assert cluster.kazoo.exists(store.markers.marker(mac)) is not None

        # With its password and digest type as the recovery settings, the same ledger is repaired.
        right = RepairOptions(recovery_password=MAC_PASSWORD.encode(), recovery_digest=DigestType.HMAC)
        fixed = await RepairWorker(ctx, RepairLocks(store, "bk-auditor@creds2"), right).repair(mac)
        assert fixed.status is Status.REPAIRED, fixed
        assert victim not in (await store.read_ledger(mac)).metadata.bookies
