"""The repair worker heals the bit rot it meets, against real BookKeeper 4.17.3: entries corrupted on the
disks of surviving bookies (a payload byte flipped in their entry logs and journals), another bookie
lost. The worker copies the lost stripe from verified copies only (a corrupt one is never sent), and
moves the stripe of each bookie serving a corrupt copy to another bookie (read from the other replicas
and from it, each copy verified). A re-add in place would not do: a SortedLedgerStorage bookie serves
its flushed copy until its memtable fills, a DbLedgerStorage one its read-ahead cache's stale copy once
its write cache is flushed (seen here: a re-added copy read back verified, and Java's census found it
corrupt again later). Right after the repair, with no restart, Java's census, which checks the digest
of every copy itself, finds nothing corrupt or missing (it saw the corrupt copies before), and the Java
client reads every entry."""

from __future__ import annotations

import asyncio

import pytest

from auditor.metadata.store import ZooKeeperMetadataStore
from devcluster.checks_util import bookie_lost, corrupt_entry_on_disk
from devcluster.cli_util import cli, ledger_log_lines
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import mark_lost

pytestmark = pytest.mark.realcluster

SIZE = 100
ENTRIES = 30
VICTIM = 5
DB = 6  # the session cluster's DbLedgerStorage bookie (tests/conftest.py)


def corrupt(cluster: Cluster, n: int, lid: int, entry: int) -> None:
    b = cluster.bookie(n)
    cluster.stop_bookie(n)
    try:
        assert corrupt_entry_on_disk(b.ledger_dir, lid, entry, journal_dir=b.journal_dir) == 1
    finally:
        cluster.start_bookie(n)


async def test_corrupt_copies_are_never_sent_and_their_bookies_are_moved(
    cluster: Cluster, store: ZooKeeperMetadataStore
) -> None:
    b1, b6, victim = (cluster.bookie(n).bookie_id for n in (1, DB, VICTIM))
    assert cluster.bookie(DB).storage == "db" and cluster.bookie(1).storage == "sorted"
    r = cluster.create_ledger(
        ensemble=3, write_quorum=3, ack_quorum=2, entries=ENTRIES, entry_size=SIZE, bookies=[b1, b6, victim]
    )
    lid = r["ledgerId"]
    # E3/WQ3: entry e's write set starts at index e mod 3, so the copy of the victim's (index 2) stripe
    # reads entry 4 from bookie 6 first and entry 9 from bookie 1 first: both corrupt there.
    corrupt(cluster, DB, lid, 4)
    corrupt(cluster, 1, lid, 9)
    (before,) = await asyncio.to_thread(cluster.copies, [str(lid)])
    assert before["corrupt"] == {b1: [9], b6: [4]}, before
    with bookie_lost(cluster, VICTIM, [r]):
        cluster.wait_unregistered(VICTIM, timeout=30)
        await mark_lost(store, victim, [lid])
        run = await asyncio.to_thread(
            cli, "repair", "--once", "--metadata-service-uri", cluster.metadata_service_uri, "--log-format", "json"
        )
        got = ledger_log_lines(run.stderr, lid)
        repaired = next((ln for ln in got if ln["event"] == "ledger repaired"), None)
        assert repaired is not None, run.stderr[-4000:]
        moved = {ln["bookieId"]: ln["entries"] for ln in got if ln["event"].startswith("corrupt copies healed")}
        assert moved == {b1: "9", b6: "4"}, got
        # E3/WQ3: every stripe is every entry: the lost one's, and the two rotted bookies'
        assert repaired["entriesCopied"] == 3 * ENTRIES, repaired
        info = await asyncio.to_thread(cluster.ledger_info, lid)
        now = info["ensembles"]["0"]
        assert len(set(now)) == 3 and set(now).isdisjoint({b1, b6, victim}), info
        (after,) = await asyncio.to_thread(cluster.copies, [str(lid)])  # no restart, no flush
        assert (after["missing"], after["corrupt"], after["unreadable"]) == ({}, {}, {}), after
        read = await asyncio.to_thread(cluster.read_ledger, lid, SIZE)
        assert (read["read"], read["badContent"]) == (ENTRIES, []), read


@pytest.mark.parametrize("rotted", [2, DB], ids=["sorted", "db"])
async def test_a_ledger_marked_for_a_corrupt_copy_alone_is_healed(
    cluster: Cluster, store: ZooKeeperMetadataStore, rotted: int
) -> None:
    """Nothing missing, one copy rotten: entry lists cannot show it, so the worker reads every copy of the
    marked ledger, finds the corrupt one and moves its bookie's stripe (reading the rest of it from that
    bookie); the marker goes, Java's census is clean with no restart."""
    b1, bad, b3 = (cluster.bookie(n).bookie_id for n in (1, rotted, 3))
    r = cluster.create_ledger(
        ensemble=3, write_quorum=2, ack_quorum=2, entries=ENTRIES, entry_size=SIZE, bookies=[b1, bad, b3]
    )
    lid = r["ledgerId"]
    corrupt(cluster, rotted, lid, 4)  # entry 4's write set: indexes 1 and 2
    (before,) = await asyncio.to_thread(cluster.copies, [str(lid)])
    assert before["corrupt"] == {bad: [4]} and before["missing"] == {}, before
    await mark_lost(store, bad, [lid])  # as the ledger check marks a ledger with a digest_mismatch
    try:
        run = await asyncio.to_thread(
            cli, "repair", "--once", "--metadata-service-uri", cluster.metadata_service_uri, "--log-format", "json"
        )
        got = ledger_log_lines(run.stderr, lid)
        repaired = next((ln for ln in got if ln["event"] == "ledger repaired"), None)
        assert repaired is not None, run.stderr[-4000:]
        # E3/WQ2: index 1 is in the write set of entries e with e mod 3 in (0, 1): 20 of 30
        assert repaired["entriesCopied"] == 20 and repaired["detail"] == "marker_deleted", repaired
        moved = {ln["bookieId"]: ln["entries"] for ln in got if ln["event"].startswith("corrupt copies healed")}
        assert moved == {bad: "4"}, got
        info = await asyncio.to_thread(cluster.ledger_info, lid)
        first, new, third = info["ensembles"]["0"]
        assert (first, third) == (b1, b3) and new not in (b1, bad, b3), info
        (after,) = await asyncio.to_thread(cluster.copies, [str(lid)])
        assert (after["missing"], after["corrupt"], after["unreadable"]) == ({}, {}, {}), after
    finally:
        cluster.ledger_tool("delete", "--ledger-id", str(lid))
