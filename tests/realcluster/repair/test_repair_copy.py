"""The repair role's copy path against real BookKeeper 4.17.3 bookies: ledgers written by the real Java
client, one bookie lost (stopped and wiped), exactly the stripe of its index copied with RECOVERY_ADD
through the repair gate, then checked by Java alone (its client reads every entry, its BookieClient
verifies every copy of every write set, BookieShell readledger shows the copies on the target).

Expected entry sets are derived here by brute force from the round-robin rule, not by the product.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from auditor.bookie import BookieClientConfig, BookiePool
from auditor.bookie import protocol as P
from auditor.durability.entry import DIGEST_LENGTH
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata
from auditor.durability.repackage import ledger_credentials
from auditor.metadata.codecs import formats
from auditor.repair.copy import CopyLimits, CopyResult, CopyTask, FailureKind, copy_entries
from auditor.repair.gate import RecoveryAddPermit
from auditor.repair.writer import RecoveryAddClient
from devcluster import ports
from devcluster.chaos.truth import LedgerRecord, readledger
from devcluster.checks_util import bookie_lost, holds, ledger_path, rewrite_ensemble
from devcluster.cluster import Cluster
from tests.realcluster.hostile_proxy import ReplyRewritingProxy

pytestmark = pytest.mark.realcluster

CONFIG = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=0.5)
SIZE = 100  # payload bytes per entry
VICTIM = 1  # bookie lost (index 0 of every ensemble below)
SPARE = 6  # the target (DbLedgerStorage: another storage than the source bookies)
DEAD_PORT = ports.HOSTILE_PROXY_PORT + 5  # nothing listens there
Resolve = Callable[[str], tuple[str, int]]


class _NoLock:
    """These tests exercise the copy alone, with no marker and so no repair lock: nothing ends it (the
    lock's lease is tested with the worker, tests/realcluster/repair/test_repair_lock_loss.py)."""

    def write_refusal(self) -> str | None:
        return None


NO_LOCK = _NoLock()


def bookie_ids(cluster: Cluster, *ns: int) -> list[str]:
    return [cluster.bookie(n).bookie_id for n in ns]


def resolver(cluster: Cluster, redirect: dict[str, tuple[str, int]] | None = None) -> Resolve:
    addresses = {b.bookie_id: (b.host, b.port) for b in cluster.bookies}
    addresses.update(redirect or {})
    return lambda bookie_id: addresses[bookie_id]


def read_metadata(cluster: Cluster, ledger_id: int) -> LedgerMetadata:
    path = ledger_path(cluster, ledger_id)
    data, stat = cluster.kazoo.get(path)
    return formats.parse_ledger_metadata(data, LedgerId(0, ledger_id), path, stat.version)


def stripe(r: dict[str, Any], index: int) -> list[int]:
    """Entries ensemble index `index` holds in the ledger's (only) segment, by brute force."""
    e, wq = r["ensembleSize"], r["writeQuorum"]
    return [x for x in range(r["lastEntryId"] + 1) if holds(index, x, e, wq)]


async def copy_stripe(
    cluster: Cluster,
    r: dict[str, Any],
    target: str,
    index: int = 0,
    redirect: dict[str, tuple[str, int]] | None = None,
    entries: list[int] | None = None,
) -> CopyResult:
    md = read_metadata(cluster, r["ledgerId"])
    creds = ledger_credentials(md)
    permit = RecoveryAddPermit.for_ledger(r["ledgerId"], target, creds)
    task = CopyTask(md, 0, index, target, tuple(stripe(r, index) if entries is None else entries))
    async with (
        BookiePool(resolver(cluster, redirect), CONFIG) as reads,
        RecoveryAddClient(permit, resolver(cluster), CONFIG, lease=NO_LOCK) as writer,
    ):
        return await copy_entries(task, reads, writer, creds, CopyLimits(max_in_flight=4, retry_delay=0.05))


async def present_on(cluster: Cluster, bookie: str, ledger_id: int, entries: list[int]) -> set[int]:
    async with BookiePool(resolver(cluster), CONFIG) as pool:
        got = await pool.client(bookie).read_entries(ledger_id, entries)
    assert not [g for g in got if g.unknown], got
    return {g.entry_id for g in got if g.present}


def body_bytes(r: dict[str, Any], digest: Any, entries: list[int]) -> int:
    return len(entries) * (32 + DIGEST_LENGTH[digest] + SIZE)


def java_checks_target(cluster: Cluster, r: dict[str, Any], password: str, target: str) -> None:
    """Java alone: every entry read with the right content, every copy of every write set verified."""
    read = cluster.read_ledger(r["ledgerId"], SIZE, password)
    assert (read["read"], read["badContent"]) == (r["lastEntryId"] + 1, []), read
    (row,) = cluster.copies([str(r["ledgerId"])], password)
    assert (row["missing"], row["corrupt"], row["unreadable"]) == ({}, {}, {}), row
    # BookieShell readledger -b on the target shows a run of the stripe (4.17.3 stops at the first entry
    # the bookie lacks, so one contiguous run at a time): the first run of two or more entries.
    want = stripe(r, 0)
    first = next(e for e in want if e + 1 in want)
    last = first
    while last + 1 in want:
        last += 1
    ok, failed = readledger(cluster, LedgerRecord.from_tool({**r, "lastEntryId": last}), target, first)
    assert ok == set(range(first, last + 1)) and not failed, (ok, failed)


@pytest.fixture(scope="module")
def lost(cluster: Cluster) -> Iterator[dict[str, Any]]:
    """Ledgers on bookies 1-5, then bookie 1 stopped and wiped (it comes back empty at the end)."""
    e3 = bookie_ids(cluster, 1, 2, 3)
    e5 = bookie_ids(cluster, 1, 2, 3, 4, 5)
    common = {"entries": 60, "entry_size": SIZE, "write_quorum": 2, "ack_quorum": 2}
    made = {
        "e3": cluster.create_ledger(ensemble=3, bookies=e3, digest="CRC32C", **common),
        "e5": cluster.create_ledger(ensemble=5, bookies=e5, digest="CRC32", **common),
        "hmac": cluster.create_ledger(ensemble=3, bookies=e3, digest="MAC", password="s3cret", **common),
        "empty_pw": cluster.create_ledger(ensemble=5, bookies=e5, digest="CRC32C", password="", **common),
        "loss": cluster.create_ledger(ensemble=3, bookies=e3, digest="CRC32C", **common),
        "unknown": cluster.create_ledger(ensemble=3, bookies=e3, digest="CRC32C", **common),
        "wq3": cluster.create_ledger(
            ensemble=3, bookies=e3, digest="CRC32C", entries=30, entry_size=SIZE, write_quorum=3, ack_quorum=2
        ),
    }
    with bookie_lost(cluster, VICTIM, made.values()):
        yield made


@pytest.mark.parametrize(("name", "password"), [("e3", "pw"), ("e5", "pw"), ("hmac", "s3cret")])
async def test_the_stripe_of_the_lost_index_is_copied_and_java_reads_it(
    cluster: Cluster, lost: dict[str, Any], name: str, password: str
) -> None:
    r = lost[name]
    victim, spare = bookie_ids(cluster, VICTIM, SPARE)
    want = stripe(r, 0)
    md = read_metadata(cluster, r["ledgerId"])
    result = await copy_stripe(cluster, r, spare)
    assert result.complete, result
    assert list(result.sent) == want
    assert result.entries_sent == len(want) and result.add_requests == len(want)
    assert result.bytes_sent == body_bytes(r, md.digest_type, want)
    if r["ensembleSize"] > r["writeQuorum"]:
        # Java's replicator copies the whole fragment range [first stored, last stored] here.
        assert len(want) < want[-1] - want[0] + 1
    assert await present_on(cluster, spare, r["ledgerId"], list(range(60))) == set(want)
    rewrite_ensemble(cluster, r["ledgerId"], victim, spare)
    await asyncio.to_thread(java_checks_target, cluster, r, password, spare)
    # Re-adding entries the target already holds succeeds and leaves them readable (spec §1.6).
    again = await copy_stripe(cluster, r, spare)
    assert again.complete and list(again.sent) == want, again
    read = await asyncio.to_thread(cluster.read_ledger, r["ledgerId"], SIZE, password)
    assert (read["read"], read["badContent"]) == (60, [])


async def test_an_entry_with_no_copy_anywhere_is_data_loss_and_not_sent(cluster: Cluster, lost: dict) -> None:
    r = lost["loss"]
    b2, b4, spare = bookie_ids(cluster, 2, 4, SPARE)
    # Index 1 now names bookie 4, which never held the ledger: entries on indexes {0, 1} only
    # (e mod 3 == 0) have no copy left anywhere; those on {2, 0} (e mod 3 == 2) are on bookie 3.
    rewrite_ensemble(cluster, r["ledgerId"], b2, b4)
    want = stripe(r, 0)
    gone = [e for e in want if e % 3 == 0]
    result = await copy_stripe(cluster, r, spare)
    assert list(result.lost) == gone, result.failures
    assert {f.kind for f in result.failures} == {FailureKind.LOST} and result.stopped is None
    assert list(result.sent) == [e for e in want if e % 3 == 2] and not result.corrupt
    assert await present_on(cluster, spare, r["ledgerId"], want) == set(result.sent)


async def test_a_replica_that_does_not_answer_is_unknown_never_lost(cluster: Cluster, lost: dict) -> None:
    r = lost["unknown"]
    b2, spare = bookie_ids(cluster, 2, SPARE)
    want = stripe(r, 0)
    result = await copy_stripe(cluster, r, spare, redirect={b2: ("127.0.0.1", DEAD_PORT)})
    unknown = [e for e in want if e % 3 == 0]  # their only other replica is bookie 2
    assert list(result.entries_with(FailureKind.UNKNOWN)) == unknown, result.failures
    assert not result.lost and list(result.sent) == [e for e in want if e % 3 == 2]


async def test_a_corrupt_copy_is_never_propagated_and_is_named(cluster: Cluster, lost: dict) -> None:
    r = lost["wq3"]  # E3/WQ3: every entry on all three bookies; bookie 1 lost, two copies left each
    b2, b3, spare = bookie_ids(cluster, 2, 3, SPARE)
    flip_on_b2, flip_on_both = 4, 7  # entry 4: corrupt on bookie 2 only; entry 7: on 2 and 3

    def corrupting(entries: set[int]) -> Callable[[Any], bool]:
        def rewrite(resp: Any) -> bool:
            rr = resp.readResponse
            if rr.entryId not in entries or not rr.HasField("body"):
                return False
            body = bytearray(rr.body)
            body[-1] ^= 0xFF  # one payload bit pattern flipped, as on a rotting disk
            rr.body = bytes(body)
            return True

        return rewrite

    up2, up3 = cluster.bookie(2), cluster.bookie(3)
    async with (
        ReplyRewritingProxy(
            (up2.host, up2.port), ports.HOSTILE_PROXY_PORT + 6, P.Op.READ_ENTRY, corrupting({4, 7})
        ) as p2,
        ReplyRewritingProxy((up3.host, up3.port), ports.HOSTILE_PROXY_PORT + 7, P.Op.READ_ENTRY, corrupting({7})) as p3,
    ):
        result = await copy_stripe(cluster, r, spare, redirect={b2: p2.address, b3: p3.address})
    assert p2.rewritten >= 2 and p3.rewritten >= 1
    assert [(c.entry_id, c.bookie_id) for c in result.corrupt] == [(4, b2), (7, b2), (7, b3)], result.corrupt
    assert list(result.lost) == [flip_on_both]
    assert list(result.sent) == [e for e in range(30) if e != flip_on_both]
    assert flip_on_b2 in result.sent  # from bookie 3's good copy
    # What reached the spare is the good copy (Java verifies every copy), and entry 7 never did.
    assert await present_on(cluster, spare, r["ledgerId"], [flip_on_both]) == set()
    rewrite_ensemble(cluster, r["ledgerId"], bookie_ids(cluster, VICTIM)[0], spare)
    (row,) = await asyncio.to_thread(cluster.copies, [str(r["ledgerId"])])
    assert row["corrupt"] == {} and row["missing"] == {spare: [flip_on_both]}, row


async def test_re_add_in_place_to_the_wiped_bookie_without_ensemble_change(cluster: Cluster, lost: dict) -> None:
    r = lost["empty_pw"]  # E5/WQ2, CRC32C, empty password (master key SHA-1("ledger"))
    victim = bookie_ids(cluster, VICTIM)[0]
    await asyncio.to_thread(cluster.start_bookie, VICTIM)  # back, empty, same id
    want = stripe(r, 0)
    assert await present_on(cluster, victim, r["ledgerId"], want) == set()
    result = await copy_stripe(cluster, r, victim)
    assert result.complete and list(result.sent) == want, result
    (row,) = await asyncio.to_thread(cluster.copies, [str(r["ledgerId"])], "")
    assert (row["missing"], row["corrupt"], row["unreadable"]) == ({}, {}, {}), row
    read = await asyncio.to_thread(cluster.read_ledger, r["ledgerId"], SIZE, "")
    assert (read["read"], read["badContent"]) == (60, [])
