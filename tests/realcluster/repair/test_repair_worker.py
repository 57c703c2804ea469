"""The repair worker end to end against real BookKeeper 4.17.3: ledgers written by the real Java client,
one bookie stopped and wiped, the ledgers marked as our auditor marks them, `bk-auditor repair --once`
run as an operator would; then the markers are gone, the lost bookie is in no ensemble, the Java client
reads every entry with the right content, Java's BookieClient verifies every copy of every write set,
and our own re-check is clean. A ledger with entries lost everywhere ends blocked (data loss), keeps its
marker and is not taken again before its backoff."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.bookie import BookieClientConfig, BookiePool
from auditor.checks.context import AuditContext
from auditor.checks.explain import explain_ledger
from auditor.durability.ids import LedgerId
from auditor.durability.repairplan import Backoff
from auditor.metadata.own.repairstate import RepairBlocks
from auditor.metadata.repair.lock import RepairLocks
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.repair.attempt import RepairOptions, Status
from auditor.repair.evidence import BookieStates, assess
from auditor.repair.ledger import recheck_problem
from auditor.repair.metrics import RepairMetrics
from auditor.repair.worker import RepairWorker
from devcluster.checks_util import bookie_lost, rewrite_ensemble
from devcluster.cli_util import BIN, cli, log_lines
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import mark_lost
from devcluster.ports import REPAIR_METRICS_PORT

pytestmark = pytest.mark.realcluster

SIZE = 100
ENTRIES = 60
VICTIM = 1
CONFIG = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=0.5)


def ids(cluster: Cluster, *ns: int) -> list[str]:
    return [cluster.bookie(n).bookie_id for n in ns]


@pytest.fixture(scope="module")
def lost(cluster: Cluster) -> Iterator[dict[str, dict[str, Any]]]:
    """Ledgers on bookies 1-5 (E3/WQ3, E3/WQ2, E5/WQ2, and one whose entries will be lost everywhere),
    then bookie 1 stopped and wiped; it comes back empty at the end and the ledgers are deleted."""
    e3, e5 = ids(cluster, 1, 2, 3), ids(cluster, 1, 2, 3, 4, 5)
    common = {"entries": ENTRIES, "entry_size": SIZE, "ack_quorum": 2}
    made = {
        "e3wq3": cluster.create_ledger(ensemble=3, write_quorum=3, bookies=e3, **common),
        "e3wq2": cluster.create_ledger(ensemble=3, write_quorum=2, bookies=e3, digest="CRC32", **common),
        "e5wq2": cluster.create_ledger(ensemble=5, write_quorum=2, bookies=e5, **common),
        "loss": cluster.create_ledger(ensemble=3, write_quorum=2, bookies=e3, **common),
    }
    # Index 1 of "loss" now names bookie 4, which never held it: with bookie 1 gone, the entries on
    # indexes {0, 1} only (e mod 3 == 0) have no copy anywhere.
    b2, b4 = ids(cluster, 2, 4)
    rewrite_ensemble(cluster, made["loss"]["ledgerId"], b2, b4)
    with bookie_lost(cluster, VICTIM, made.values()):
        cluster.wait_unregistered(VICTIM)
        yield made


async def test_repair_once_repairs_what_java_reads_and_blocks_data_loss(
    cluster: Cluster, lost: dict[str, dict[str, Any]], store: ZooKeeperMetadataStore
) -> None:
    victim = ids(cluster, VICTIM)[0]
    good = ["e3wq3", "e3wq2", "e5wq2"]
    await mark_lost(store, victim, [r["ledgerId"] for r in lost.values()])
    run = await asyncio.to_thread(
        cli, "repair", "--once", "--metadata-service-uri", cluster.metadata_service_uri, "--log-format", "json"
    )
    assert run.returncode == 1, run.stderr[-3000:]  # one ledger blocked
    lines = {(ln.get("ledgerId"), ln["event"]): ln for ln in log_lines(run.stderr) if "ledgerId" in ln}
    for name in good:
        lid = lost[name]["ledgerId"]
        line = lines.get((str(LedgerId.of(lid)), "ledger repaired"))
        assert line is not None, [ln for ln in lines.values() if ln["ledgerId"] == str(LedgerId.of(lid))]
        # Only the victim's stripe was copied: WQ/E of the entries (all of them for E3/WQ3).
        r = lost[name]
        assert line["entriesCopied"] == ENTRIES * r["writeQuorum"] // r["ensembleSize"], line
        assert line["segments"] == 1 and line["bytesCopied"] > line["entriesCopied"] * SIZE
        assert cluster.kazoo.exists(store.markers.marker(LedgerId.of(lid))) is None
        info = await asyncio.to_thread(cluster.ledger_info, lid)
        assert all(victim not in ens for ens in info["ensembles"].values()), info
        read = await asyncio.to_thread(cluster.read_ledger, lid, SIZE)
        assert (read["read"], read["badContent"]) == (ENTRIES, []), read
    rows = await asyncio.to_thread(cluster.copies, [str(lost[n]["ledgerId"]) for n in good])
    for row in rows:
        assert (row["missing"], row["corrupt"], row["unreadable"]) == ({}, {}, {}), row
    # Our own re-check (the scrutiny's verdict on fresh entry lists) is clean.
    async with BookiePool(store.address_resolver(), CONFIG) as pool:
        ctx = AuditContext(store, pool)
        states = BookieStates(0)
        states.update(await store.registrations())
        for name in good:
            md = (await store.read_ledger(LedgerId.of(lost[name]["ledgerId"]))).metadata
            assert recheck_problem(await assess(ctx, md, states)) is None
    # The ledger with entries lost everywhere: blocked as data loss, marker kept, lock released.
    loss = LedgerId.of(lost["loss"]["ledgerId"])
    blocked = lines[(str(loss), "ledger repair blocked")]
    assert blocked["reason"] == "data_loss" and "entries" in blocked["detail"], blocked
    assert blocked["retryInSeconds"] > 0
    assert cluster.kazoo.exists(store.markers.marker(loss)) is not None
    assert cluster.kazoo.exists(store.markers.lock(loss)) is None
    # ... reported as a finding (data loss: critical) and recorded for every worker, with its backoff.
    # (--once takes every marked ledger of the session cluster: other modules' may be blocked too.)
    [finding] = [
        ln for ln in log_lines(run.stderr) if ln.get("category") == "repair_blocked" and ln["ledgerId"] == loss.ledger
    ]
    assert finding["event"] == "finding" and finding["severity"] == "critical" and finding["ledgerId"] == loss.ledger
    assert "DATA LOSS" in finding["message"] and finding["detail"]["failures"] == 1
    record = await RepairBlocks(store).get(loss)
    assert record is not None and (record.reason, record.failures) == ("data_loss", 1)
    assert record.not_before_ms - record.blocked_at_ms == int(blocked["retryInSeconds"] * 1000)


async def test_a_blocked_ledger_is_not_retried_before_its_backoff(
    cluster: Cluster, lost: dict[str, dict[str, Any]], store: ZooKeeperMetadataStore
) -> None:
    """The backoff is shared: a second worker does not take the ledger before it either, and counts the
    first worker's failure (the record in our own subtree); explain and the metrics say why."""
    victim = ids(cluster, VICTIM)[0]
    loss = LedgerId.of(lost["loss"]["ledgerId"])
    await mark_lost(store, victim, [loss.ledger])
    records = RepairBlocks(store)
    if cluster.kazoo.exists(records.path(loss)):
        cluster.kazoo.delete(records.path(loss))  # a fresh count for this test
    options = RepairOptions(backoff=Backoff(cap_s=128))  # 4 s after the first failure, 8 s after the second
    async with BookiePool(store.address_resolver(), CONFIG) as pool:
        ctx = AuditContext(store, pool)
        worker = RepairWorker(ctx, RepairLocks(store, "bk-auditor@test"), options)
        first = [r for r in await worker.run_once() if r.ledger_id == loss]
        assert [(r.status, r.reason, r.retry_in_s) for r in first] == [(Status.BLOCKED, "data_loss", 4.0)]
        assert worker.in_backoff(loss)
        first_record = await records.get(loss)
        assert first_record is not None
        # Within the backoff the ledger is not taken again, however often the loop looks, by this worker
        # or by another one (another process: nothing shared but ZooKeeper).
        other = RepairWorker(ctx, RepairLocks(store, "bk-auditor@other"), options, metrics=RepairMetrics(cluster="t"))
        looked = 0
        for w in (worker, other, worker, other):
            if time.time() * 1000 > first_record.not_before_ms - 300:
                break  # a slow machine: only what ran well inside the backoff counts
            assert loss not in [r.ledger_id for r in await w.run_once()]
            looked += 1
        assert looked >= 2, "too slow to look twice within a 4 s backoff"
        await asyncio.sleep(max(0.0, first_record.not_before_ms / 1000 - time.time()) + 0.05)
        again = [r for r in await other.run_once() if r.ledger_id == loss]
        assert [(r.status, r.retry_in_s) for r in again] == [(Status.BLOCKED, 8.0)]  # doubled: 128/32*2
        record = await records.get(loss)
        assert record is not None and (record.failures, record.holder) == (2, "bk-auditor@other")
        note = [n for n in (await explain_ledger(ctx, loss)).notes if n.startswith("repair blocked")]
        assert (
            len(note) == 1
            and "(data_loss)" in note[0]
            and "2 failed attempt(s), the last by bk-auditor@other" in note[0]
        )
        await other.pending()
        value = other.metrics.registry.get_sample_value  # type: ignore[union-attr]
        assert value("bk_auditor_repair_blocked_total", {"bookkeeper_cluster": "t", "reason": "data_loss"}) == 1
        assert value("bk_auditor_repair_ledgers_total", {"bookkeeper_cluster": "t", "outcome": "blocked"}) == 1
        # Every marked ledger with a record counts (other modules' blocked ledgers too, in a full session).
        assert (
            value("bk_auditor_repair_blocked_ledgers", {"bookkeeper_cluster": "t", "reason": "data_loss"}) or 0
        ) >= 1
    assert cluster.kazoo.exists(store.markers.marker(loss)) is not None


async def test_the_running_worker_stops_cleanly_on_sigterm(
    cluster: Cluster, lost: dict[str, dict[str, Any]], store: ZooKeeperMetadataStore, tmp_path: Path
) -> None:
    """`bk-auditor repair` (no --once) keeps looking until SIGTERM, then exits 0 holding no lock."""
    loss = LedgerId.of(lost["loss"]["ledgerId"])
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    env["BKAUDIT_METRICS__BIND"] = f"127.0.0.1:{REPAIR_METRICS_PORT}"
    log_file = tmp_path / "repair.log"
    with log_file.open("w") as err:
        proc = await asyncio.create_subprocess_exec(
            str(BIN),
            *("repair", "--metadata-service-uri", cluster.metadata_service_uri, "--log-format", "json"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=err,
            stdin=asyncio.subprocess.DEVNULL,
            env=env,
        )
        try:
            deadline = time.monotonic() + 120
            while "ledger repair blocked" not in log_file.read_text() and time.monotonic() < deadline:
                assert proc.returncode is None, log_file.read_text()[-3000:]
                await asyncio.sleep(0.2)
            # Its metrics are served while it runs, with the cluster label.
            url = f"http://127.0.0.1:{REPAIR_METRICS_PORT}/metrics"
            text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read().decode())
            assert 'bk_auditor_repair_blocked_total{bookkeeper_cluster="' in text and 'reason="data_loss"' in text, text
            proc.send_signal(signal.SIGTERM)
            rc = await asyncio.wait_for(proc.wait(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    events = [ln["event"] for ln in log_lines(log_file.read_text())]
    assert rc == 0 and "repair worker stopped" in events, log_file.read_text()[-3000:]
    assert cluster.kazoo.exists(store.markers.lock(loss)) is None
    assert cluster.kazoo.exists(store.markers.marker(loss)) is not None


async def test_a_blocked_ledger_made_repairable_is_repaired_and_its_record_deleted(
    cluster: Cluster, lost: dict[str, dict[str, Any]], store: ZooKeeperMetadataStore
) -> None:
    """The lost stripe's real holder named again (as if an operator fixed the metadata): the next attempt
    repairs it, deletes the shared record and the marker; the Java client reads every entry."""
    loss = LedgerId.of(lost["loss"]["ledgerId"])
    records = RepairBlocks(store)
    assert await records.get(loss) is not None  # blocked by the tests above
    b2, b4 = ids(cluster, 2, 4)
    rewrite_ensemble(cluster, loss.ledger, b4, b2)
    async with BookiePool(store.address_resolver(), CONFIG) as pool:
        worker = RepairWorker(AuditContext(store, pool), RepairLocks(store, "bk-auditor@test"), RepairOptions())
        result = await worker.repair(loss)  # taken directly: its backoff is for the loop
    assert result.status is Status.REPAIRED, result
    assert await records.get(loss) is None
    assert cluster.kazoo.exists(store.markers.marker(loss)) is None
    read = await asyncio.to_thread(cluster.read_ledger, loss.ledger, SIZE)
    assert (read["read"], read["badContent"]) == (ENTRIES, []), read
