"""The asyncio bookie client against real BookKeeper 4.17.3 bookies, with ledgers written by the real
Java client (BkLedgerTool via devcluster/cluster)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.aio.adaptive import AdaptivePolicy
from auditor.bookie import BookieClient, BookieClientConfig, BookiePool, Capability, Outcome, Status
from auditor.bookie import protocol as P
from auditor.durability.entry import Verdict, parse_header
from auditor.durability.entrylist import EntryList
from auditor.durability.model import DigestType
from auditor.durability.ranges import RangeSet
from auditor.durability.schedule import index_residues
from auditor.durability.striped import StripedSet
from devcluster.cluster import Cluster

pytestmark = pytest.mark.realcluster

DIGESTS = {"CRC32": DigestType.CRC32, "CRC32C": DigestType.CRC32C, "MAC": DigestType.HMAC, "DUMMY": DigestType.DUMMY}
CONFIG = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=1.0)
NEVER_WRITTEN_LEDGER = 7_777_777_777


def resolver_for(cluster: Cluster):
    addresses = {b.bookie_id: (b.host, b.port) for b in cluster.bookies}

    def resolve(bookie_id: str) -> tuple[str, int]:
        return addresses[bookie_id]

    return resolve


def expected_by_bookie(ledger: dict[str, Any]) -> dict[str, RangeSet]:
    """What each bookie must hold, straight from the spec's round-robin rule (i - e) mod E < WQ."""
    E, WQ, last = ledger["ensembleSize"], ledger["writeQuorum"], ledger["lastEntryId"]
    starts = sorted((int(k), v) for k, v in ledger["ensembles"].items())
    out: dict[str, set[int]] = {}
    for k, (first, ensemble) in enumerate(starts):
        end = starts[k + 1][0] - 1 if k + 1 < len(starts) else last
        for i, bookie in enumerate(ensemble):
            out.setdefault(bookie, set()).update(e for e in range(first, end + 1) if (i - e) % E < WQ)
    return {b: RangeSet.from_ids(ids) for b, ids in out.items()}


def digest_of(ledger: dict[str, Any]) -> DigestType:
    return DIGESTS[ledger["digest"]]


@pytest.mark.parametrize("digest", list(DIGESTS))
async def test_reads_every_entry_and_verifies_digests(cluster: Cluster, digest: str) -> None:
    size = 100
    password = f"pw-{digest.lower()}"
    ledger = cluster.create_ledger(
        ensemble=3, write_quorum=2, ack_quorum=2, digest=digest, password=password, entries=20, entry_size=size
    )
    lid, E, WQ = ledger["ledgerId"], ledger["ensembleSize"], ledger["writeQuorum"]
    assert ledger["digest"] == digest and ledger["lastEntryId"] == 19
    ensemble = ledger["ensembles"]["0"]
    dt = digest_of(ledger)
    async with BookiePool(resolver_for(cluster), CONFIG) as pool:
        jobs = [(i, e, pool.client(b).read_entry(lid, e)) for i, b in enumerate(ensemble) for e in range(20)]
        results = await asyncio.gather(*(j[2] for j in jobs))
        present = 0
        for (i, e, _), r in zip(jobs, results):
            if (i - e) % E < WQ:
                assert r.outcome is Outcome.PRESENT, r
                v = r.verify(dt, password)
                assert v.verdict is Verdict.OK, v.detail
                assert v.payload == cluster.payload(lid, e, size)
                assert v.header is not None
                assert v.header.length == (e + 1) * size  # cumulative ledger length
                assert v.header.last_add_confirmed < e
                # maxLAC is the highest LAC piggybacked on the entries the bookie holds. The tool pipelines
                # its adds, so that can still be -1 for a closed ledger: only its presence is asserted.
                assert r.max_lac is not None and r.max_lac <= max(v.header.last_add_confirmed, r.max_lac)
                present += 1
                if dt is DigestType.HMAC:
                    assert r.verify(dt, password + "x").verdict is Verdict.CORRUPT
            else:
                # A SortedLedgerStorage bookie knows the ledger but not entries not striped to it.
                assert r.outcome is Outcome.ABSENT and r.status is Status.ENOENTRY, r
        assert present == 20 * WQ
        for client in (pool.client(b) for b in ensemble):
            assert client.stats.connects == 1  # all of it pipelined over one connection per bookie


async def test_hmac_wrong_password_is_a_digest_mismatch(cluster: Cluster) -> None:
    ledger = cluster.create_ledger(digest="MAC", password="secret", entries=2)
    bookie = ledger["ensembles"]["0"][0]
    async with BookiePool(resolver_for(cluster), CONFIG) as pool:
        r = await pool.client(bookie).read_entry(ledger["ledgerId"], 0)
        assert r.present
        assert r.verify(DigestType.HMAC, "secret").ok
        bad = r.verify(DigestType.HMAC, "not-the-password")
        assert bad.verdict is Verdict.CORRUPT and "digest mismatch" in bad.problems[0].value


async def test_entry_lists_match_schedule_with_wide_gaps(cluster: Cluster) -> None:
    ids = [cluster.bookie(n).bookie_id for n in range(1, 6)]
    ledger = cluster.create_ledger(ensemble=5, write_quorum=2, ack_quorum=2, entries=53, bookies=ids)
    lid = ledger["ledgerId"]
    assert ledger["ensembles"]["0"] == ids
    expected = expected_by_bookie(ledger)
    async with BookiePool(resolver_for(cluster), CONFIG) as pool:
        results = await asyncio.gather(*(pool.client(b).get_entry_list(lid) for b in ids))
    for bookie, r in zip(ids, results):
        assert r.outcome is Outcome.PRESENT, r
        assert isinstance(r.entries, EntryList)
        got = r.entries.to_rangeset()
        assert got == expected[bookie], (bookie, got, expected[bookie])
        # Runs of 2 with gaps of 3: exactly the case where Java's getUnavailableEntries is wrong.
        assert all(b - a == 1 for a, b in got.ranges[1:-1])
        assert not r.entries.missing(expected[bookie])
        # Bookies encode exactly like our encoder: one 24-byte record per maximal run, period 0.
        assert r.entries.records == EntryList.from_ranges(got).records
        assert r.entries.total == len(expected[bookie])
    # And missing entries show up: ask each bookie's list about every entry of the ledger.
    for bookie, r in zip(ids, results):
        assert r.entries is not None
        assert r.entries.missing(RangeSet.span(0, 52)) == RangeSet.span(0, 52) - expected[bookie]


async def test_entry_lists_after_ensemble_change(cluster: Cluster) -> None:
    ledger = cluster.write_with_ensemble_change(
        ensemble=3, write_quorum=2, ack_quorum=2, entries=30, change_after=10, entry_size=50, digest="CRC32"
    )
    lid, victim = ledger["ledgerId"], ledger["victim"]
    assert len(ledger["ensembles"]) == 2, ledger["ensembles"]
    second = int(max(ledger["ensembles"], key=int))
    assert victim not in ledger["ensembles"][str(second)]
    expected = expected_by_bookie(ledger)
    cluster.wait_ready(cluster._bookie_by(victim).index)
    async with BookiePool(resolver_for(cluster), CONFIG) as pool:
        bookies = sorted(expected)
        results = dict(zip(bookies, await asyncio.gather(*(pool.client(b).get_entry_list(lid) for b in bookies))))
        for bookie, r in results.items():
            assert r.outcome is Outcome.PRESENT, r
            assert r.entries is not None
            assert not r.entries.missing(expected[bookie]), (bookie, r.entries.to_rangeset(), expected[bookie])
            if bookie != victim:
                assert r.entries.to_rangeset() == expected[bookie], bookie
        # Every entry is readable from each bookie that should hold it, with the right payload.
        for bookie, want in expected.items():
            reads = await pool.client(bookie).read_entries(lid, list(want))
            for r in reads:
                assert r.present, r
                v = r.verify(DigestType.CRC32, "pw")
                assert v.ok and v.payload == cluster.payload(lid, r.entry_id, 50), v.detail


async def test_absent_ledger_and_absent_entry(cluster: Cluster) -> None:
    ledger = cluster.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=5)
    lid, bookie = ledger["ledgerId"], ledger["ensembles"]["0"][0]
    outsider = next(b for b in cluster.sorted_bookie_ids if b not in ledger["ensembles"]["0"])
    async with BookiePool(resolver_for(cluster), CONFIG) as pool:
        c = pool.client(bookie)
        r = await c.read_entry(NEVER_WRITTEN_LEDGER, 0)
        assert r.absent and r.status is Status.ENOLEDGER and r.no_such_ledger
        r = await c.read_entry(lid, 5)  # one past the end
        assert r.absent and r.status is Status.ENOENTRY
        r = await c.read_entry(lid, 10**12)
        assert r.absent and r.status is Status.ENOENTRY
        lst = await c.get_entry_list(NEVER_WRITTEN_LEDGER)
        assert lst.absent and lst.status is Status.ENOLEDGER and lst.entries is not None and lst.entries.total == 0
        lac = await c.read_lac(NEVER_WRITTEN_LEDGER)
        # The quirk: READ_LAC answers ENOENTRY (not ENOLEDGER) for a ledger the bookie lacks.
        assert lac.absent and lac.status is Status.ENOENTRY and not lac.conclusive
        # A bookie outside the ensemble never saw the ledger at all.
        o = pool.client(outsider)
        assert (await o.read_entry(lid, 0)).status is Status.ENOLEDGER
        assert (await o.get_entry_list(lid)).status is Status.ENOLEDGER


async def test_read_lac_and_last_entry(cluster: Cluster) -> None:
    ledger = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=12, digest="CRC32C")
    lid = ledger["ledgerId"]
    expected = expected_by_bookie(ledger)
    async with BookiePool(resolver_for(cluster), CONFIG) as pool:
        for bookie, want in expected.items():
            lac = await pool.client(bookie).read_lac(lid)
            assert lac.present and lac.status is Status.EOK, lac
            assert lac.lac_body is None  # the tool does not use explicit LAC
            header = lac.last_entry_header
            assert header is not None and header.entry_id == want.last
            last = await pool.client(bookie).read_last_entry(lid)
            assert last.present and last.entry_id == -1 and last.body is not None
            assert parse_header(last.body).entry_id == want.last
            assert last.verify(DigestType.CRC32C, "pw").ok  # entry id not compared for -1


async def test_open_ledger_is_readable(cluster: Cluster) -> None:
    ledger = cluster.create_ledger(ensemble=2, write_quorum=2, ack_quorum=1, entries=6, close=False)
    assert ledger["state"] == "OPEN"
    lid = ledger["ledgerId"]
    async with BookiePool(resolver_for(cluster), CONFIG) as pool:
        for bookie in ledger["ensembles"]["0"]:
            c = pool.client(bookie)
            reads = await c.read_entries(lid, list(range(6)))
            assert all(r.present and r.verify(DigestType.CRC32C, "pw").ok for r in reads)
            lac = await c.read_lac(lid)
            assert lac.present and lac.last_entry_header is not None and lac.last_entry_header.entry_id == 5


async def test_bookie_info_and_auth_probe(cluster: Cluster) -> None:
    async with BookiePool(resolver_for(cluster), CONFIG) as pool:
        for b in cluster.bookies:
            c = pool.client(b.bookie_id)
            info = await c.get_bookie_info()
            assert info.present, info
            assert info.total_disk_capacity and info.free_disk_space is not None
            assert 0 <= info.free_disk_space <= info.total_disk_capacity
            ping = await c.ping()
            assert ping.present and ping.total_disk_capacity is None and ping.free_disk_space is None
            auth = await c.auth_probe()
            assert auth.present and auth.plugin_name == "AuthDisabledPlugin"


async def test_many_pipelined_requests_share_one_connection(cluster: Cluster) -> None:
    ledger = cluster.create_ledger(ensemble=1, write_quorum=1, ack_quorum=1, entries=200, entry_size=32)
    lid, bookie = ledger["ledgerId"], ledger["ensembles"]["0"][0]
    b = next(x for x in cluster.bookies if x.bookie_id == bookie)
    async with BookieClient(bookie, (b.host, b.port), BookieClientConfig(max_in_flight=64)) as c:
        entry_ids = list(range(-1, 230)) * 3
        results = await c.read_entries(lid, entry_ids)
        for e, r in zip(entry_ids, results):
            assert r.entry_id == e
            if e <= 199:
                assert r.present and r.verify(DigestType.CRC32C, "pw").ok, r
            else:
                assert r.absent, r
        lists = await asyncio.gather(*(c.get_entry_list(lid) for _ in range(100)))
        assert all(
            x.present and x.entries is not None and x.entries.to_rangeset() == RangeSet.span(0, 199) for x in lists
        )
        assert c.stats.connects == 1 and c.stats.timeouts == 0 and c.stats.protocol_errors == 0


async def test_rate_limit_against_a_real_bookie(cluster: Cluster) -> None:
    b = cluster.bookie(1)
    async with BookieClient(b.bookie_id, (b.host, b.port), BookieClientConfig(rate_limit=50, rate_burst=1)) as c:
        t0 = time.monotonic()
        results = await asyncio.gather(*(c.ping() for _ in range(26)))
        assert all(r.present for r in results)
        assert time.monotonic() - t0 >= 0.45  # 25 intervals of 20 ms


async def test_adaptive_rate_rises_on_a_real_bookie_and_halves_when_it_stops_answering(cluster: Cluster) -> None:
    """From its start rate the client drives an answering bookie towards the cap; timeouts (the bookie
    SIGSTOPped for a moment, below its ZooKeeper session timeout) halve the rate at once."""
    n = 3
    b = cluster.bookie(n)
    lid = cluster.create_ledger(ensemble=1, write_quorum=1, ack_quorum=1, entries=4, bookies=[b.bookie_id])["ledgerId"]
    cfg = BookieClientConfig(
        request_timeout=0.5,
        connect_timeout=1.0,
        backoff_initial=0.05,
        backoff_max=0.5,
        rate_limit=1000,
        rate_burst=1,
        adaptive=AdaptivePolicy(start=50, floor=5, hold_s=0.2),
    )
    async with BookieClient(b.bookie_id, (b.host, b.port), cfg) as c:
        assert c._bucket is not None
        for _ in range(60):  # a scan's bounded fan-out
            assert all(r.present for r in await c.read_entries(lid, [0, 1, 2, 3] * 2))
        risen = c._bucket.rate
        assert risen > 200, risen
        cluster.pause_bookie(n)
        try:
            stalled = await c.read_entries(lid, [0] * 8)
        finally:
            cluster.resume_bookie(n)
        assert all(r.unknown for r in stalled)
        assert c._bucket.rate <= risen / 2, (risen, c._bucket.rate)


async def test_paused_bookie_is_unknown_then_recovers(cluster: Cluster) -> None:
    n = 3
    b = cluster.bookie(n)
    ledger = cluster.create_ledger(ensemble=1, write_quorum=1, ack_quorum=1, entries=4, bookies=[b.bookie_id])
    lid = ledger["ledgerId"]
    cfg = BookieClientConfig(
        request_timeout=1.0, connect_timeout=1.0, backoff_initial=0.05, backoff_max=0.5, liveness_timeout=0.5
    )
    async with BookieClient(b.bookie_id, (b.host, b.port), cfg) as c:
        assert (await c.read_entry(lid, 0)).present
        cluster.pause_bookie(n)
        try:
            t0 = time.monotonic()
            results = await asyncio.gather(
                c.read_entry(lid, 1), c.read_entry(lid, 2), c.get_entry_list(lid), c.read_lac(lid), c.get_bookie_info()
            )
            elapsed = time.monotonic() - t0
            for r in results:
                assert r.outcome is Outcome.UNKNOWN, r  # never ABSENT
                assert b.bookie_id in (r.error or "")
            assert elapsed < 1.0 + 1.5, elapsed  # the per-request timeout, plus the liveness ping
            assert c.entry_list_support is not Capability.UNSUPPORTED  # a silent bookie proves nothing
            more = await c.read_entries(lid, [0, 1, 2, 3])
            assert all(r.unknown for r in more)
        finally:
            cluster.resume_bookie(n)
        deadline = time.monotonic() + 30
        while True:
            r = await c.read_entry(lid, 3)
            if r.present or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert r.present, r
        assert r.verify(DigestType.CRC32C, "pw").ok
        assert (await c.get_entry_list(lid)).present
        assert c.entry_list_support is Capability.SUPPORTED


async def test_db_ledger_storage_capability_is_detected(cluster: Cluster) -> None:
    db = cluster.bookie(6)
    assert db.storage == "db"
    b1, b2 = cluster.bookie(1).bookie_id, cluster.bookie(2).bookie_id
    ledger = cluster.create_ledger(
        ensemble=3,
        write_quorum=3,
        ack_quorum=2,
        entries=8,
        digest="CRC32",
        bookies=[db.bookie_id, b1, b2],
        allowed=[db.bookie_id, b1, b2],
    )
    lid = ledger["ledgerId"]
    assert db.bookie_id in ledger["ensembles"]["0"]
    async with BookiePool(resolver_for(cluster), CONFIG) as pool:
        c = pool.client(db.bookie_id)
        # A ledger it does not hold: the ENOLEDGER check comes first, so it answers.
        absent = await c.get_entry_list(NEVER_WRITTEN_LEDGER)
        assert absent.absent and absent.status is Status.ENOLEDGER
        assert c.entry_list_support is Capability.UNKNOWN
        # A ledger it holds: no reply ever. Other requests on the same connection must not suffer.
        t0 = time.monotonic()
        reads = asyncio.gather(*(c.read_entry(lid, e) for e in range(8)))
        cap = await c.probe_entry_list_support(lid, timeout=1.0)
        probe_time = time.monotonic() - t0
        assert cap is Capability.UNSUPPORTED
        assert probe_time < 1.0 + CONFIG.liveness_timeout + 0.5, probe_time
        for r in await reads:
            assert r.present and r.verify(DigestType.CRC32, "pw").ok, r
        assert c.connected and c.stats.connects == 1
        r = await c.get_entry_list(lid)
        assert r.unknown and r.unsupported and r.elapsed == 0.0
        # Fallback for callers: per-entry reads, which DbLedgerStorage answers (ENOENTRY past the end).
        assert (await c.read_entry(lid, 8)).status is Status.ENOENTRY
        lac = await c.read_lac(lid)
        assert lac.present and lac.last_entry_header is not None and lac.last_entry_header.entry_id == 7
        # Sorted bookies of the same ledger do answer.
        s = pool.client(b1)
        assert await s.probe_entry_list_support(lid) is Capability.SUPPORTED
        lst = await s.get_entry_list(lid)
        assert lst.present and lst.entries is not None and lst.entries.to_rangeset() == RangeSet.span(0, 7)


async def test_db_bookie_detected_by_first_timeout_without_probe(cluster: Cluster) -> None:
    db = cluster.bookie(6)
    b1 = cluster.bookie(1).bookie_id
    ledger = cluster.create_ledger(
        ensemble=2, write_quorum=2, ack_quorum=2, entries=3, bookies=[db.bookie_id, b1], allowed=[db.bookie_id, b1]
    )
    cfg = BookieClientConfig(request_timeout=1.5, liveness_timeout=1.0)
    async with BookieClient(db.bookie_id, (db.host, db.port), cfg) as c:
        first = await c.get_entry_list(ledger["ledgerId"])
        assert first.unknown and first.unsupported and "DbLedgerStorage" in (first.error or "")
        assert c.entry_list_support is Capability.UNSUPPORTED
        assert (await c.read_entry(ledger["ledgerId"], 2)).present


async def test_entry_lists_of_many_ledgers_in_one_batch_equal_one_by_one(cluster: Cluster) -> None:
    """`get_entry_lists` (a scan's batch): the same answers, in order, as one `get_entry_list` each, for
    held, striped and never-written ledgers, through a window far smaller than the batch."""
    ids = [cluster.bookie(n).bookie_id for n in range(1, 6)]
    made = [
        cluster.create_ledger(ensemble=5, write_quorum=2, ack_quorum=2, entries=n, bookies=ids) for n in (10, 31, 52)
    ] + cluster.create_ledgers(3, ensemble=5, write_quorum=2, ack_quorum=2, entries=17, bookies=ids)
    lids = [m["ledgerId"] for m in made] + [NEVER_WRITTEN_LEDGER]
    b = cluster.bookie(2)
    async with BookieClient(b.bookie_id, (b.host, b.port), BookieClientConfig(max_in_flight=4)) as c:
        batch = await c.get_entry_lists(lids * 5)  # 35 requests, 4 in flight
        single = [await c.get_entry_list(lid) for lid in lids * 5]
        assert c.stats.timeouts == 0 and c.stats.protocol_errors == 0 and c.stats.connects == 1
    assert [(r.ledger_id, r.outcome, r.status) for r in batch] == [(r.ledger_id, r.outcome, r.status) for r in single]
    for r, m in zip(batch, ([*made, None]) * 5):
        if m is None:
            assert r.absent and r.ledger_id == NEVER_WRITTEN_LEDGER
            continue
        assert r.present and r.entries is not None
        assert r.entries.to_rangeset() == expected_by_bookie(m)[b.bookie_id]


async def test_entry_lists_that_are_exactly_the_bookies_share_are_recognised_with_the_same_answers(
    cluster: Cluster,
) -> None:
    """`get_entry_lists(shares=...)`, as a scan asks: each real bookie's list that is exactly its share
    (E == WQ and striped, short and long ledgers) comes back marked with it, the same answer as the
    general decode gives; a list checked against a share it does not hold is decoded the general way."""
    ids = [cluster.bookie(n).bookie_id for n in range(1, 6)]
    made = [
        cluster.create_ledger(ensemble=e, write_quorum=wq, ack_quorum=2, entries=n, bookies=ids[:e])
        for e, wq, n in ((3, 3, 40), (3, 2, 1), (3, 2, 61), (5, 2, 200), (5, 2, 7))
    ]
    b = cluster.bookie(2)
    shares = []
    for m in made:
        ((first, ensemble),) = ((int(k), v) for k, v in m["ensembles"].items())
        i = ensemble.index(b.bookie_id)
        share = StripedSet.striped(
            first, m["lastEntryId"], m["ensembleSize"], index_residues(i, m["ensembleSize"], m["writeQuorum"])
        )
        assert share.to_rangeset() == expected_by_bookie(m)[b.bookie_id]
        shares.append(share)
    wrong = [shares[1], shares[0]]  # the first two ledgers checked against each other's share
    lids = [m["ledgerId"] for m in made]
    async with BookieClient(b.bookie_id, (b.host, b.port), CONFIG) as c:
        plain = await c.get_entry_lists(lids)
        marked = await c.get_entry_lists(lids, shares=shares)
        unmarked = await c.get_entry_lists(lids[:2], shares=wrong)
    for p, r, share in zip(plain, marked, shares):
        assert r.present and r.entries is not None and p.entries is not None
        assert r.entries.share is share and p.entries.share is None
        assert r.entries == p.entries and r.entries.to_rangeset() == p.entries.to_rangeset() == share.to_rangeset()
    for p, r in zip(plain, unmarked):
        assert r.entries is not None and r.entries.share is None and r.entries == p.entries


async def test_real_bookies_list_replies_are_recognised_from_their_bytes(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every GET_LIST reply of a real bookie that found the ledger has the one shape `_listed_reply`
    recognises without protobuf, and reads as protobuf reads it; ENOLEDGER is left to protobuf."""
    ids = [cluster.bookie(n).bookie_id for n in range(1, 4)]
    made = [
        cluster.create_ledger(ensemble=3, write_quorum=wq, ack_quorum=2, entries=n, bookies=ids)
        for wq, n in ((3, 1), (2, 5), (3, 300))
    ]
    bodies: list[bytes] = []
    decode = P.decode_response

    def recording(body: bytes) -> P.Reply:
        bodies.append(body)
        return decode(body)

    monkeypatch.setattr(P, "decode_response", recording)
    b = cluster.bookie(1)
    async with BookieClient(b.bookie_id, (b.host, b.port), CONFIG) as c:
        got = await c.get_entry_lists([m["ledgerId"] for m in made] + [NEVER_WRITTEN_LEDGER])
    assert [r.present for r in got] == [True, True, True, False]
    assert len(bodies) == 4
    listed = []
    for body in bodies:
        parsed = pb.Response()
        parsed.ParseFromString(body)
        fast = P._listed_reply(body)
        if parsed.status == pb.ENOLEDGER:
            assert fast is None
            continue
        assert fast is not None, body.hex()
        sub = parsed.getListOfEntriesOfLedgerResponse
        assert (fast.txn_id, fast.sub.ledgerId, fast.sub.availabilityOfEntriesOfLedger) == (
            parsed.header.txnId,
            sub.ledgerId,
            sub.availabilityOfEntriesOfLedger,
        )
        listed.append(sub.ledgerId)
    assert sorted(listed) == sorted(m["ledgerId"] for m in made)


async def test_a_cancelled_batch_withdraws_its_requests_and_the_connection_carries_on(cluster: Cluster) -> None:
    ledger = cluster.create_ledger(
        ensemble=1, write_quorum=1, ack_quorum=1, entries=50, bookies=[cluster.bookie(1).bookie_id]
    )
    lid = ledger["ledgerId"]
    b = cluster.bookie(1)
    async with BookieClient(
        b.bookie_id, (b.host, b.port), BookieClientConfig(max_in_flight=2, rate_limit=200, rate_burst=1)
    ) as c:
        asking = asyncio.ensure_future(c.get_entry_lists([lid] * 400))  # 2 s at 200/s
        await asyncio.sleep(0.3)
        asking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asking
        sent = c.stats.sent
        assert 20 < sent < 150, sent  # some went out, the rest were withdrawn while queued
        await asyncio.sleep(0.3)
        assert c.stats.sent == sent and not c._queue and c._slots == 0
        after = await c.get_entry_lists([lid, lid])  # late replies of withdrawn requests are dropped quietly
        assert all(
            r.present and r.entries is not None and r.entries.to_rangeset() == RangeSet.span(0, 49) for r in after
        )
        assert c.stats.protocol_errors == 0 and c.stats.connects == 1


async def test_a_batch_to_a_paused_bookie_is_unknown_never_absent(cluster: Cluster) -> None:
    n = 4
    b = cluster.bookie(n)
    lid = cluster.create_ledger(ensemble=1, write_quorum=1, ack_quorum=1, entries=4, bookies=[b.bookie_id])["ledgerId"]
    cfg = BookieClientConfig(request_timeout=1.0, connect_timeout=1.0, backoff_initial=0.05, liveness_timeout=0.5)
    async with BookieClient(b.bookie_id, (b.host, b.port), cfg) as c:
        assert all(r.present for r in await c.get_entry_lists([lid] * 3))
        cluster.pause_bookie(n)
        try:
            t0 = time.monotonic()
            stalled = await c.get_entry_lists([lid] * 20)
            elapsed = time.monotonic() - t0
        finally:
            cluster.resume_bookie(n)
    assert all(r.unknown and b.bookie_id in (r.error or "") for r in stalled), stalled
    assert elapsed < 1.0 + 1.5, elapsed  # one timeout for the whole batch, plus the liveness ping
    assert c.entry_list_support is Capability.SUPPORTED  # it answered before: silence proves nothing
