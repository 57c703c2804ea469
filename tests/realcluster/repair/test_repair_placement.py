"""The repair worker as a whole honours the placement policy, against real BookKeeper 4.17.3: racks from
a file, a rack-aware policy (Java's default), a lost bookie. With no writable bookie that keeps every
write quorum on two racks the ledger is blocked (`no_eligible_bookie`, finding and record) rather than
placed badly; once a bookie in another rack is there, the next attempt puts the stripe on it, and the
Java client reads every entry. Without racks the same worker would have taken the first candidate."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from auditor.durability.ids import LedgerId
from auditor.metadata.own.repairstate import RepairBlocks
from auditor.metadata.store import ZooKeeperMetadataStore
from devcluster.checks_util import bookie_lost
from devcluster.cli_util import cli, ledger_log_lines
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import mark_lost

pytestmark = pytest.mark.realcluster

SIZE = 100
ENTRIES = 30
VICTIM = 5


async def test_placement_is_respected_or_the_ledger_blocked(
    cluster: Cluster, store: ZooKeeperMetadataStore, tmp_path: Path
) -> None:
    b = {n: cluster.bookie(n).bookie_id for n in range(1, 7)}
    victim = b[VICTIM]
    # Ensemble [b1 (/r1), b3 (/r2), b5 (/r3)], WQ2: write quorums {b1,b3}, {b3,b5}, {b5,b1}. Replacing
    # b5 with b2 (/r1) puts {b5's slot, b1} on one rack; with b4 (/r2), {b3, b5's slot}.
    r = cluster.create_ledger(
        ensemble=3, write_quorum=2, ack_quorum=2, entries=ENTRIES, entry_size=SIZE, bookies=[b[1], b[3], victim]
    )
    lid = r["ledgerId"]
    racks = tmp_path / "racks.yaml"
    config = tmp_path / "repair.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "metadata_service_uri": cluster.metadata_service_uri,
                "racks": {"source": "file", "file": str(racks)},
                "placement": {"policy": "rackaware", "min_racks_per_write_quorum": 2},
                "repair": {"backoff_cap_seconds": 32},  # first backoff 1 s
                "log": {"format": "json"},
            }
        )
    )

    def write_racks(b6: str) -> None:
        racks.write_text(yaml.safe_dump({b[1]: "/r1", b[2]: "/r1", b[3]: "/r2", b[4]: "/r2", victim: "/r3", b[6]: b6}))

    with bookie_lost(cluster, VICTIM, [r]):
        cluster.wait_unregistered(VICTIM, timeout=30)
        await mark_lost(store, victim, [lid])
        # Bookie 6 on /r1 too: every candidate breaks a write quorum's two racks.
        write_racks("/r1")
        run = await asyncio.to_thread(cli, "repair", "--once", "--config", str(config))
        assert run.returncode == 1, run.stderr[-3000:]
        [blocked] = [ln for ln in ledger_log_lines(run.stderr, lid) if ln["event"] == "ledger repair blocked"]
        assert blocked["reason"] == "no_eligible_bookie", blocked
        assert "rackaware placement policy" in blocked["detail"] and "1 distinct racks, need 2" in blocked["detail"]
        [finding] = [ln for ln in ledger_log_lines(run.stderr, lid) if ln.get("category") == "repair_blocked"]
        assert finding["severity"] == "major" and finding["detail"]["reason"] == "no_eligible_bookie"
        record = await RepairBlocks(store).get(LedgerId.of(lid))
        assert record is not None and record.reason == "no_eligible_bookie"
        info = await asyncio.to_thread(cluster.ledger_info, lid)
        assert info["ensembles"]["0"] == [b[1], b[3], victim], info  # nothing placed badly
        # Bookie 6 on a rack of its own: the only candidate that keeps two racks per write quorum.
        write_racks("/r4")
        await asyncio.sleep(1.5)  # the backoff
        run = await asyncio.to_thread(cli, "repair", "--once", "--config", str(config))
        [repaired] = [ln for ln in ledger_log_lines(run.stderr, lid) if ln["event"] == "ledger repaired"]
        assert repaired["entriesCopied"] == ENTRIES * 2 // 3, repaired
        info = await asyncio.to_thread(cluster.ledger_info, lid)
        assert info["ensembles"]["0"] == [b[1], b[3], b[6]], info
        assert await RepairBlocks(store).get(LedgerId.of(lid)) is None
        read = await asyncio.to_thread(cluster.read_ledger, lid, SIZE)
        assert (read["read"], read["badContent"]) == (ENTRIES, []), read
