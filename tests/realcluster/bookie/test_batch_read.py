"""The v2 batch reader (BATCH_READ_ENTRY, BP-62) against real BookKeeper 4.17.3 bookies, SortedLedgerStorage
and DbLedgerStorage, with ledgers written by the real Java client: every answer equals BookieClient's v3
READ_ENTRY answer byte for byte, batches honour their count and size, a batch stops at the first entry the
bookie does not hold, and a 4.16.6 bookie (no BATCH_READ_ENTRY) is recognised and still answered."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from auditor.bookie import BookieClient, BookieClientConfig, BookiePool, Capability, Outcome, Status
from auditor.bookie.batch import BatchReader
from auditor.bookie.results import ReadEntryResult
from auditor.durability.entry import Verdict
from auditor.durability.model import DigestType
from devcluster.cluster import Cluster
from tests.realcluster.second_cluster import second_cluster

pytestmark = pytest.mark.realcluster

CONFIG = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=1.0)
NEVER_WRITTEN_LEDGER = 7_777_777_777
ENTRIES, SIZE = 300, 100
DB_BOOKIE = 6  # the session cluster's DbLedgerStorage bookie (tests/conftest.py)


def resolver_for(cluster: Cluster):  # type: ignore[no-untyped-def]
    addresses = {b.bookie_id: (b.host, b.port) for b in cluster.bookies}
    return lambda bookie_id: addresses[bookie_id]


def ids(cluster: Cluster, *indexes: int) -> list[str]:
    return [cluster.bookie(i).bookie_id for i in indexes]


@pytest.fixture(scope="module")
def ledgers(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """Three shapes, each with the DbLedgerStorage bookie and SortedLedgerStorage ones in its ensemble."""
    shapes = {
        "E3W2": (3, 2, (1, 2, DB_BOOKIE)),
        "E2W2": (2, 2, (3, DB_BOOKIE)),
        "E5W3": (5, 3, (1, 2, 3, 4, DB_BOOKIE)),
    }
    return {
        name: cluster.create_ledger(
            ensemble=e, write_quorum=wq, ack_quorum=2, entries=ENTRIES, entry_size=SIZE, bookies=ids(cluster, *members)
        )
        for name, (e, wq, members) in shapes.items()
    }


def share(ledger: dict[str, Any], bookie: str) -> list[int]:
    """The entries the round-robin schedule puts on `bookie` (one segment)."""
    ensemble = ledger["ensembles"]["0"]
    i, E, WQ = ensemble.index(bookie), ledger["ensembleSize"], ledger["writeQuorum"]
    return [e for e in range(ledger["lastEntryId"] + 1) if (i - e) % E < WQ]


def support(reader: BatchReader) -> Capability:
    """What the reader knows now (read through a call: a test's earlier assert does not fix it)."""
    return reader.batch_support


def same(batch: list[ReadEntryResult], v3: list[ReadEntryResult]) -> None:
    assert [(r.entry_id, r.outcome, r.status, r.body) for r in batch] == [
        (r.entry_id, r.outcome, r.status, r.body) for r in v3
    ]


@pytest.mark.parametrize("shape", ["E3W2", "E2W2", "E5W3"])
async def test_every_entry_equals_the_v3_read_byte_for_byte(
    cluster: Cluster, ledgers: dict[str, dict[str, Any]], shape: str
) -> None:
    ledger = ledgers[shape]
    lid = ledger["ledgerId"]
    async with BookiePool(resolver_for(cluster), CONFIG) as pool:
        for bookie in ledger["ensembles"]["0"]:
            reader = pool.batch_reader(bookie)
            assert reader is not None
            # Its share, and every entry of the ledger plus two past its end: what it does not hold is ABSENT.
            for asked in (share(ledger, bookie), list(range(ENTRIES + 2))):
                got = await reader.read_entries(lid, asked)
                want = await pool.client(bookie).read_entries(lid, asked)
                same(got, want)
                held = set(share(ledger, bookie))
                assert [r.outcome for r in got] == [Outcome.PRESENT if e in held else Outcome.ABSENT for e in asked]
                assert all(r.status is Status.ENOENTRY for r in got if r.absent)
                for r in got[:5]:
                    if r.present:
                        v = r.verify(DigestType.CRC32C, "pw")
                        assert v.verdict is Verdict.OK and v.payload == cluster.payload(lid, r.entry_id, SIZE)
            assert reader.batch_support is Capability.SUPPORTED


async def test_one_batch_is_one_request_and_runs_are_batched(
    cluster: Cluster, ledgers: dict[str, dict[str, Any]]
) -> None:
    full, striped = ledgers["E2W2"], ledgers["E3W2"]
    for index in (3, DB_BOOKIE):
        bookie = cluster.bookie(index).bookie_id
        async with BatchReader(bookie, resolver_for(cluster), CONFIG) as reader:
            got = await reader.read_entries(full["ledgerId"], list(range(ENTRIES)))
            assert all(r.present for r in got) and (reader.batches_sent, reader.reads_sent) == (1, 0)
            assert reader.stats.sent == 1
            await reader.read_entries(full["ledgerId"], list(range(ENTRIES)), max_count=100)
            assert reader.batches_sent == 1 + 3  # three batches of 100, pipelined
    # Striped (E3 WQ2): bookie index 0 holds runs of two (0, 2-3, 5-6, ...): one batch per run.
    bookie = striped["ensembles"]["0"][0]
    async with BatchReader(bookie, resolver_for(cluster), CONFIG) as reader:
        mine = share(striped, bookie)
        got = await reader.read_entries(striped["ledgerId"], mine)
        assert all(r.present for r in got)
        runs = 1 + sum(1 for a, b in zip(mine, mine[1:]) if b != a + 1)
        assert reader.batches_sent == runs


@pytest.mark.parametrize("index", [2, DB_BOOKIE])
async def test_max_count_and_max_size_are_honoured(
    cluster: Cluster, ledgers: dict[str, dict[str, Any]], index: int
) -> None:
    ledger = ledgers["E5W3"] if index == 2 else ledgers["E2W2"]
    lid = ledger["ledgerId"]
    bookie = cluster.bookie(index).bookie_id
    first = share(ledger, bookie)[0]
    async with BatchReader(bookie, resolver_for(cluster), CONFIG) as reader:
        one = await reader.read_batch(lid, first, max_count=1, max_size=1 << 20)
        assert one.present and [e for e, _ in one.entries] == [first]
        entry_bytes = len(one.entries[0][1])
        # The bookie counts the reply frame: 36 bytes, then 4 + the entry's length for each entry.
        sized = await reader.read_batch(lid, first, max_count=1000, max_size=36 + 2 * (entry_bytes + 4))
        tiny = await reader.read_batch(lid, first, max_count=1000, max_size=1)  # the first entry goes anyway
        counted = await reader.read_batch(lid, first, max_count=2, max_size=1 << 20)
        whole = await reader.read_batch(lid, first, max_count=1000, max_size=1 << 20)
    run = [first]
    while run[-1] + 1 in share(ledger, bookie):
        run.append(run[-1] + 1)  # E5 WQ3: runs of three (or two at the start); E2 WQ2: every entry
    assert len(tiny.entries) == 1
    assert [e for e, _ in whole.entries] == run  # the batch stops at the first entry it does not hold
    assert len(sized.entries) == len(counted.entries) == min(2, len(run))
    assert [b for _, b in counted.entries] == [b for _, b in whole.entries[:2]]


async def test_missing_entries_and_ledgers_it_does_not_hold(
    cluster: Cluster, ledgers: dict[str, dict[str, Any]]
) -> None:
    ledger = ledgers["E3W2"]
    lid = ledger["ledgerId"]
    outsider = cluster.bookie(5).bookie_id  # not in the ensemble: never saw the ledger
    for bookie in (ledger["ensembles"]["0"][0], ledger["ensembles"]["0"][2], outsider):
        async with BatchReader(bookie, resolver_for(cluster), CONFIG) as reader:
            past = await reader.read_batch(lid, ENTRIES + 3)
            assert past.absent and past.entries == []
            assert past.status is (Status.ENOLEDGER if bookie == outsider else Status.ENOENTRY)
            never = await reader.read_batch(NEVER_WRITTEN_LEDGER, 0)
            assert never.absent and never.status is Status.ENOLEDGER
            got = await reader.read_entries(NEVER_WRITTEN_LEDGER, list(range(50)))
            assert {(r.outcome, r.status) for r in got} == {(Outcome.ABSENT, Status.ENOLEDGER)}
            assert reader.batches_sent == 3  # ENOLEDGER answers for the whole ledger: no batch per entry
            async with BookieClient(bookie, resolver_for(cluster)(bookie), CONFIG) as v3:
                asked = [0, 1, 2, 3, 4, ENTRIES - 1, ENTRIES, ENTRIES + 7]
                same(await reader.read_entries(lid, asked), await v3.read_entries(lid, asked))


async def test_a_4_16_bookie_is_recognised_and_still_answered() -> None:
    with second_cluster("bk-auditor-bk416-", 2, bookie_versions={2: "4.16.6"}) as c:
        ledger = c.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=40, entry_size=SIZE)
        lid = ledger["ledgerId"]
        old, new = c.bookie(2).bookie_id, c.bookie(1).bookie_id
        async with BookiePool(resolver_for(c), CONFIG) as pool:
            reader = pool.batch_reader(old)
            assert reader is not None
            got = await reader.read_entries(lid, list(range(42)))
            assert reader.batch_support is Capability.UNSUPPORTED
            same(got, await pool.client(old).read_entries(lid, list(range(42))))
            assert [r.outcome for r in got] == [Outcome.PRESENT] * 40 + [Outcome.ABSENT] * 2
            assert reader.batches_sent == 2 and reader.reads_sent == 1 + 42  # the two probes, then one each
            again = await reader.read_batch(lid, 0)
            assert again.unknown and "does not support BATCH_READ_ENTRY" in (again.error or "")
            assert reader.batches_sent == 2  # known: nothing sent
            c.restart_bookie(2)  # the lost connection forgets what was learnt: the bookie may have been upgraded
            for _ in range(50):  # the loop sees the old connection's end
                if support(reader) is Capability.UNKNOWN:
                    break
                await asyncio.sleep(0.05)
            assert support(reader) is Capability.UNKNOWN
            same(await reader.read_entries(lid, list(range(42))), got)
            assert reader.batch_support is Capability.UNSUPPORTED and reader.batches_sent == 4
            newer = pool.batch_reader(new)
            assert newer is not None
            same(await newer.read_entries(lid, list(range(42))), got)
            assert newer.batch_support is Capability.SUPPORTED
