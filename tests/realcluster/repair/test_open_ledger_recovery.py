"""Opt-in ledger recovery of open ledgers whose writer is gone (seed 003), differential-tested against the
real Java client's open-with-recovery on real 4.17.3 bookies.

Each planted case is written twice, identically (`cluster.plant_ledgers`: an OPEN ledger whose entries
sit exactly on the bookies the layout names, as a writer that died mid-write leaves them); Java recovers
one copy, ours the other; both must close at the same last entry, and the Java client must then read
the same entries, with the right content, from both. Where Java's metadata length lies past its own last
entry (it keeps the length field of the LAC answer it chose), ours is the exact length: asserted as such.
Then the states where the two must differ or must not close at all: a bookie SIGSTOPped during recovery
(stopped, not closed), two recoverers at once (one close), a recovery that would truncate acknowledged
entries (ours refuses, Java truncates), and the worker path end to end (grace period, recovery, repair).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from auditor.bookie import BookieClientConfig, BookiePool
from auditor.checks.answers import ledger_end
from auditor.checks.context import AuditContext, RunStats
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState
from auditor.durability.repackage import ledger_credentials
from auditor.metadata.repair.lock import RepairLocks
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.repair.attempt import RepairOptions, Status
from auditor.repair.fencing import FencingClient
from auditor.repair.ledger import recheck_problem
from auditor.repair.recover import LedgerRecoverer, RecoveryOutcome, RecoveryResult
from auditor.repair.worker import RepairWorker
from devcluster.checks_util import bookie_lost
from devcluster.cluster import Cluster
from devcluster.cluster.errors import HarnessError
from devcluster.metadata_helpers import mark_lost

pytestmark = pytest.mark.realcluster

B = 100  # entry size
CONFIG = BookieClientConfig(request_timeout=2.0, connect_timeout=2.0, backoff_initial=0.05, backoff_max=0.5)
HOLDER = "bk-auditor@recovery-test"


def ids(cluster: Cluster, *ns: int) -> list[str]:
    return [cluster.bookie(n).bookie_id for n in ns]


@pytest.fixture
async def pool(store: ZooKeeperMetadataStore) -> AsyncIterator[BookiePool]:
    async with BookiePool(store.address_resolver(), CONFIG) as p:
        yield p


@pytest.fixture
async def cleanup(cluster: Cluster, store: ZooKeeperMetadataStore) -> AsyncIterator[list[int]]:
    """Ledgers to delete, with their markers and locks, after the test: later modules audit the cluster."""
    made: list[int] = []
    yield made
    for lid in made:
        for path in (store.markers.marker(LedgerId.of(lid)), store.markers.lock(LedgerId.of(lid))):
            if cluster.kazoo.exists(path):
                cluster.kazoo.delete(path)
    if made:
        await asyncio.to_thread(cluster.ledger_tool, "delete", "--ledger-id", ",".join(map(str, made)))


def _never_choose(md: LedgerMetadata, index: int, exclude: set[str]) -> Any:
    raise AssertionError(f"no replacement expected (index {index} of {md.segments[-1].ensemble})")


async def ours(
    cluster: Cluster,
    store: ZooKeeperMetadataStore,
    pool: BookiePool,
    lid: int,
    *,
    proven_end: int | None = None,
    recoverer: type[LedgerRecoverer] = LedgerRecoverer,
) -> RecoveryResult:
    """Our recovery of `lid` under the repair lock (the ledger marked first, as the worker needs), with
    the proven end the checks read now unless given."""
    lid_ = LedgerId.of(lid)
    if cluster.kazoo.exists(store.markers.marker(lid_)) is None:
        await mark_lost(store, ids(cluster, 6)[0], [lid])
    locks = RepairLocks(store, HOLDER)
    held = await locks.try_lock(lid_)
    assert held is not None
    try:
        md = (await store.read_ledger(lid_)).metadata
        ctx = AuditContext(store, pool)
        if proven_end is None:
            proven_end = (await ledger_end(ctx, md, RunStats(check="test"))).end
        regs = await store.registrations()
        rec = recoverer(
            ctx,
            store,
            store.address_resolver(),
            CONFIG,
            ledger_credentials(md),
            regs.available,
            _never_choose,  # type: ignore[arg-type]
            lease=held.guard,
        )
        return await rec.recover(md, proven_end, held.guard)
    finally:
        await locks.release(held)


def java(cluster: Cluster, lid: int) -> dict[str, Any]:
    return cluster.recover_ledger(lid)


# (name, E, WQ, AQ, layout, expected last entry, the lengths Java may close with when not only the exact one).
# Java keeps the length field of the LAC answer it chose when it recovers nothing after it; its fenced LAC
# read completes as soon as coverage is reached, so which answer that is depends on which bookies answered
# first: one entry past its own last entry, or the exact length, from run to run.
CASES = [
    ("clean_tail", 3, 2, 2, "0-9=ws", 9, None),
    ("one_copy_asked_first", 3, 3, 2, "0-9=ws;10=1", 10, None),
    # Entry 10 only on index 0, which its write set (1, 2, 0) asks last: two denials (WQ - AQ + 1) end the
    # ledger before the lone copy is asked for.
    ("one_copy_asked_last", 3, 3, 2, "0-9=ws;10=0", 9, {10 * B, 11 * B}),
    # Entry 13 is stored past a hole at 12 and carries LAC 11: reading starts at 12, which is absent; 13
    # is never part of the ledger. Java's length is entry 13's.
    ("gap_in_the_tail", 3, 3, 2, "0-9=ws;10=1,2;11=2;12=none;13=ws@11", 11, {14 * B}),
    ("acked_by_exactly_aq", 3, 3, 2, "0-9=ws;10=1,2;11=2,0", 11, None),
    ("wq_eq_aq_one_denial", 3, 2, 2, "0-9=ws;10=2", 9, {10 * B, 11 * B}),
    # A pipelining writer: 10 and 11 in flight at once, both carrying LAC 9; 10 was never stored.
    ("hole_after_the_lac", 3, 2, 2, "0-9=ws;11=ws@9", 9, {12 * B}),
    # Every entry carries LAC -1 (a writer with many adds in flight): reading starts at entry 0.
    ("lac_lags_pipelined_writer", 3, 2, 2, "0-9=ws@-1", 9, None),
    ("striped_e5", 5, 2, 2, "0-19=ws;20=0", 20, None),
]


@pytest.mark.parametrize(("name", "e", "wq", "aq", "layout", "last", "java_length"), CASES, ids=[c[0] for c in CASES])
async def test_differential_against_java(
    cluster: Cluster,
    store: ZooKeeperMetadataStore,
    pool: BookiePool,
    cleanup: list[int],
    name: str,
    e: int,
    wq: int,
    aq: int,
    layout: str,
    last: int,
    java_length: set[int] | None,
) -> None:
    theirs, mine = await asyncio.to_thread(
        cluster.plant_ledgers,
        ensemble=e,
        write_quorum=wq,
        ack_quorum=aq,
        bookies=ids(cluster, *range(1, e + 1)),
        layout=layout,
        entry_size=B,
        count=2,
    )
    cleanup += [theirs["ledgerId"], mine["ledgerId"]]
    j = await asyncio.to_thread(java, cluster, theirs["ledgerId"])
    got = await ours(cluster, store, pool, mine["ledgerId"])
    assert got.outcome is RecoveryOutcome.CLOSED, got
    assert (j["state"], j["lastEntryId"]) == ("CLOSED", last), j
    assert got.last_entry_id == j["lastEntryId"], (got, j)
    exact = (last + 1) * B
    assert got.length == exact and j["length"] in (java_length or {exact}), (got.length, j["length"])
    info = await asyncio.to_thread(cluster.ledger_info, mine["ledgerId"])
    assert (info["state"], info["lastEntryId"], info["length"]) == ("CLOSED", last, exact), info
    for lid in (theirs["ledgerId"], mine["ledgerId"]):
        read = await asyncio.to_thread(cluster.read_ledger, lid, B)
        assert (read["read"], read["badContent"]) == (last + 1, []), (lid, read)
    # Every recovered entry is on its whole write set now (written back with RECOVERY_ADD). Entries up to
    # the LAC reading started from are not recovery's to copy (nor Java's): the repair worker's, after.
    [census] = await asyncio.to_thread(cluster.copies, [f"{mine['ledgerId']}:{last}"])
    start = got.evidence["startLac"]
    assert [e for missing in census["missing"].values() for e in missing if e > start] == [], (start, census)
    assert (census["corrupt"], census["unreadable"]) == ({}, {}), census


async def test_a_bookie_stopped_during_recovery_stops_it_without_closing(
    cluster: Cluster,
    store: ZooKeeperMetadataStore,
    pool: BookiePool,
    cleanup: list[int],
) -> None:
    """E3/WQ2/AQ1: an entry is absent only when both members deny it. Bookie 2 (index 1, holding entry 10)
    is SIGSTOPped after our fencing: entry 10 has one denial and one unknown -> stop, not closed."""
    bookies = ids(cluster, 1, 2, 3)
    theirs, mine = await asyncio.to_thread(
        cluster.plant_ledgers,
        ensemble=3,
        write_quorum=2,
        ack_quorum=1,
        bookies=bookies,
        layout="0-9=ws;10=1",
        entry_size=B,
        count=2,
    )
    cleanup += [theirs["ledgerId"], mine["ledgerId"]]

    class PausedAfterFencing(LedgerRecoverer):
        async def _fence(self, md: LedgerMetadata, fencers: dict[str, FencingClient]) -> Any:
            start = await super()._fence(md, fencers)
            await asyncio.to_thread(cluster.pause_bookie, 2)
            return start

    try:
        got = await ours(cluster, store, pool, mine["ledgerId"], recoverer=PausedAfterFencing)
    finally:
        cluster.resume_bookie(2)
    # Java, with the bookie stopped before it starts: fencing cannot reach coverage (AQ 1 needs all).
    # (Each pause is kept short: a bookie stopped past its ZooKeeper session timeout unregisters.)
    cluster.wait_registered(2)
    cluster.pause_bookie(2)
    try:
        with pytest.raises(HarnessError):
            await asyncio.to_thread(java, cluster, theirs["ledgerId"])
    finally:
        cluster.resume_bookie(2)
    cluster.wait_registered(2)
    assert got.outcome is RecoveryOutcome.STOPPED and "entry 10" in got.detail, got
    assert got.evidence["endedAtEntry"] == 10 and got.evidence["recovered"] == ""
    for lid in (mine["ledgerId"], theirs["ledgerId"]):
        md = (await store.read_ledger(LedgerId.of(lid))).metadata
        assert md.state is LedgerState.IN_RECOVERY, (lid, md.state)  # not closed; a later attempt retries
    # With the bookie back, both recover entry 10.
    again = await ours(cluster, store, pool, mine["ledgerId"])
    j = await asyncio.to_thread(java, cluster, theirs["ledgerId"])
    assert (again.outcome, again.last_entry_id, again.length) == (RecoveryOutcome.CLOSED, 10, 11 * B), again
    assert (j["lastEntryId"], j["length"]) == (10, 11 * B), j


async def test_ours_and_javas_recoverer_at_once_close_once_without_truncation(
    cluster: Cluster,
    store: ZooKeeperMetadataStore,
    pool: BookiePool,
    cleanup: list[int],
) -> None:
    [r] = await asyncio.to_thread(
        cluster.plant_ledgers,
        ensemble=3,
        write_quorum=3,
        ack_quorum=2,
        bookies=ids(cluster, 1, 2, 3),
        layout="0-9=ws;10=1,2;11=2",
        entry_size=B,
    )
    lid = r["ledgerId"]
    cleanup.append(lid)
    await mark_lost(store, ids(cluster, 6)[0], [lid])
    before = (await store.read_ledger(LedgerId.of(lid))).metadata
    j, got = await asyncio.gather(asyncio.to_thread(java, cluster, lid), ours(cluster, store, pool, lid))
    after = (await store.read_ledger(LedgerId.of(lid))).metadata
    assert got.outcome in (RecoveryOutcome.CLOSED, RecoveryOutcome.ADOPTED), got
    assert (after.state, after.last_entry_id, after.length) == (LedgerState.CLOSED, 11, 12 * B), after
    assert (j["lastEntryId"], j["length"]) == (11, 12 * B), j
    assert got.last_entry_id == 11 and got.metadata is not None and got.metadata.version == after.version
    # Exactly one IN_RECOVERY write and one close: nobody's write went over the other's.
    assert before.version is not None and after.version == before.version + 2, (before.version, after.version)


async def test_a_recovery_that_would_truncate_is_refused_where_java_truncates(
    cluster: Cluster,
    store: ZooKeeperMetadataStore,
    pool: BookiePool,
    cleanup: list[int],
) -> None:
    """Entries 10-15 were acknowledged by bookies 1 and 2 (WQ3 AQ2); bookie 2 lost them (only bookie 1
    holds them now: its entry 15 carries LAC 14). With bookie 1 stopped, fencing still reaches coverage
    through bookies 2 and 3, and entry 10 is denied by both: a recovery now closes at 9. Java does; ours,
    knowing the bookies proved entries up to 14 acknowledged, refuses; once bookie 1 is back, ours
    recovers everything."""
    theirs, mine = await asyncio.to_thread(
        cluster.plant_ledgers,
        ensemble=3,
        write_quorum=3,
        ack_quorum=2,
        bookies=ids(cluster, 1, 2, 3),
        layout="0-9=ws;10-15=0",
        entry_size=B,
        count=2,
    )
    cleanup += [theirs["ledgerId"], mine["ledgerId"]]
    async with BookiePool(store.address_resolver(), CONFIG) as reads:
        md = (await store.read_ledger(LedgerId.of(mine["ledgerId"]))).metadata
        proven = (await ledger_end(AuditContext(store, reads), md, RunStats(check="test"))).end
    assert proven == 14
    # Each pause is kept short (a bookie stopped past its ZooKeeper session timeout unregisters, and
    # an unregistered bookie is asked last).
    cluster.pause_bookie(1)
    try:
        got = await ours(cluster, store, pool, mine["ledgerId"], proven_end=proven)
    finally:
        cluster.resume_bookie(1)
    cluster.wait_registered(1)
    cluster.pause_bookie(1)
    try:
        j = await asyncio.to_thread(java, cluster, theirs["ledgerId"])
    finally:
        cluster.resume_bookie(1)
    cluster.wait_registered(1)
    assert got.outcome is RecoveryOutcome.REFUSED and "10..14" in got.detail, got
    assert (await store.read_ledger(LedgerId.of(mine["ledgerId"]))).metadata.state is LedgerState.IN_RECOVERY
    # Java closed at 9: entries 10-15, which bookie 1 still holds, can never be read again.
    assert (j["state"], j["lastEntryId"]) == ("CLOSED", 9), j
    [held] = await asyncio.to_thread(cluster.copies, [f"{theirs['ledgerId']}:15"])
    assert 10 not in held["missing"].get(ids(cluster, 1)[0], []), held
    # Ours, with bookie 1 answering again: everything it holds is recovered and written back.
    again = await ours(cluster, store, pool, mine["ledgerId"])
    assert (again.outcome, again.last_entry_id, again.length) == (RecoveryOutcome.CLOSED, 15, 16 * B), again
    read = await asyncio.to_thread(cluster.read_ledger, mine["ledgerId"], B)
    assert (read["read"], read["badContent"]) == (16, []), read


async def test_worker_recovers_an_abandoned_ledger_after_the_grace_then_repairs_it(
    cluster: Cluster,
    store: ZooKeeperMetadataStore,
    pool: BookiePool,
) -> None:
    """A real Java writer writes 20 entries and dies (no close); bookie 3 of its ensemble dies too. Java
    recovers one copy; our worker (recovery on) waits out its grace period, recovers and closes the other
    at the same entry, then replaces bookie 3 and re-copies its stripe; the Java client reads every entry.
    A ledger in the same state that is not marked is never touched."""
    bookies = ids(cluster, 1, 2, 3)
    made = [
        cluster.create_ledger(
            ensemble=3, write_quorum=2, ack_quorum=2, entries=20, entry_size=B, bookies=bookies, close=False
        )
        for _ in range(3)
    ]
    theirs, mine, unmarked = (r["ledgerId"] for r in made)
    assert all(r["state"] == "OPEN" for r in made)
    victim = bookies[2]
    with bookie_lost(cluster, 3, made):
        cluster.wait_unregistered(3)
        await mark_lost(store, victim, [mine])
        j = await asyncio.to_thread(java, cluster, theirs)
        assert (j["state"], j["lastEntryId"]) == ("CLOSED", 19), j

        def worker(grace: float) -> RepairWorker:
            options = RepairOptions(recover_open_ledgers=True, open_ledger_grace_s=grace)
            return RepairWorker(AuditContext(store, pool), RepairLocks(store, HOLDER), options)

        waiting = await worker(600).repair(LedgerId.of(mine))
        assert (waiting.status, waiting.reason) == (Status.BLOCKED, "open_ledger_grace"), waiting
        assert waiting.retry_in_s is not None and 590 < waiting.retry_in_s <= 600
        assert (await store.read_ledger(LedgerId.of(mine))).metadata.state is LedgerState.OPEN  # nothing fenced
        w = worker(0)
        done = await w.repair(LedgerId.of(mine))
        assert done.status is Status.REPAIRED, done
        info = await asyncio.to_thread(cluster.ledger_info, mine)
        assert (info["state"], info["lastEntryId"], info["length"]) == ("CLOSED", j["lastEntryId"], j["length"]), info
        assert all(victim not in ens for ens in info["ensembles"].values()), info
        read = await asyncio.to_thread(cluster.read_ledger, mine, B)
        assert (read["read"], read["badContent"]) == (20, []), read
        [census] = await asyncio.to_thread(cluster.copies, [str(mine)])
        assert (census["missing"], census["corrupt"], census["unreadable"]) == ({}, {}, {}), census
        assert cluster.kazoo.exists(store.markers.marker(LedgerId.of(mine))) is None
        md = (await store.read_ledger(LedgerId.of(mine))).metadata
        assert recheck_problem(await w._assess(md)) is None
        # Only a marked ledger is ever taken (its lock needs the marker): the unmarked one, asked for
        # directly, is skipped and stays open, never fenced.
        skipped = await w.repair(LedgerId.of(unmarked))
        assert skipped.status is Status.SKIPPED, skipped
        assert (await store.read_ledger(LedgerId.of(unmarked))).metadata.state is LedgerState.OPEN
