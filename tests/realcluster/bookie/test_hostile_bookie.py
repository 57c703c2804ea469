"""Hostile answers from one member of a real ledger's ensemble never become a loss on the others.

The ledger is written (and left open) by the real Java client on real bookies; one member is reached
through `ReplyRewritingProxy`, which rewrites only its READ_LAC replies the way a flipped bit, a
misdirected read or a corrupt index would. Issue 10, defect 1: such an answer moved the end of the open
ledger (to ~4.6e18, ~5e6), and the checks reported confirmed gaps and truncation risk for entries that were
never written. The expected outcome: no entry or truncation finding at all, and, where the bytes fail
verification, one confirmed `digest_mismatch` naming the bookie that sent them.
"""

from __future__ import annotations

import asyncio
import struct
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from auditor.bookie import protocol as P
from auditor.bookie.client import BookieClient
from auditor.durability.findings import Category, Finding
from devcluster import ports
from devcluster.checks_util import actionable, audit_async
from devcluster.cluster import Cluster
from tests.realcluster.hostile_proxy import ReplyRewritingProxy

pytestmark = pytest.mark.realcluster

CHECKS = ("open", "ledger")
LOSS = {
    Category.ENTRY_NO_REPLICA,
    Category.ENTRY_BELOW_ACK_QUORUM,
    Category.ENTRY_BELOW_WRITE_QUORUM,
    Category.TRUNCATION_RISK,
}


def _audit_through(
    cluster: Cluster, ledger_id: int, victim: int, rewrite: Callable[[Any], bool]
) -> tuple[list[Finding], int]:
    bookie = cluster.bookie(victim)

    async def run() -> tuple[list[Finding], int]:
        async with ReplyRewritingProxy(
            (bookie.host, bookie.port), ports.HOSTILE_PROXY_PORT, P.Op.READ_LAC, rewrite
        ) as proxy:
            findings, _ = await audit_async(cluster, [ledger_id], CHECKS, redirect={bookie.bookie_id: proxy.address})
            return findings, proxy.rewritten

    return asyncio.run(run())


def _open_ledger(cluster: Cluster, digest: str = "CRC32C") -> tuple[dict[str, Any], list[str]]:
    b = [cluster.bookie(n).bookie_id for n in (1, 2, 3)]
    r = cluster.create_ledger(
        ensemble=3, write_quorum=2, ack_quorum=2, entries=20, bookies=b, close=False, digest=digest
    )
    assert r["state"] == "OPEN"
    return r, b


def _set_last_entry(resp: Any, body: bytes) -> bool:
    resp.readLacResponse.lastEntryBody = body
    return True


def _assert_only_a_digest_mismatch_on(findings: list[Finding], bookie: str) -> None:
    got = actionable(findings)
    assert not [f for f in got if f.category in LOSS], got
    # once per check that asked (open, ledger): the same fault, one dedup key
    assert {(f.category, f.bookie, f.confirmed) for f in got} == {(Category.DIGEST_MISMATCH, bookie, True)}, got
    assert len({f.dedup_key() for f in got}) == 1, got


def test_a_flipped_lac_bit_in_one_read_lac_answer_is_that_bookies_fault_not_a_loss(cluster: Cluster) -> None:
    r, b = _open_ledger(cluster)

    def flip_lac_bit_62(resp: Any) -> bool:
        body = bytearray(resp.readLacResponse.lastEntryBody)
        if len(body) < 32:
            return False
        body[16] ^= 0x40  # bit 62 of the piggybacked LAC: 18 -> ~4.6e18
        return _set_last_entry(resp, bytes(body))

    findings, rewritten = _audit_through(cluster, r["ledgerId"], 2, flip_lac_bit_62)
    assert rewritten >= 2  # the first pass and the confirmation both saw it
    _assert_only_a_digest_mismatch_on(findings, b[1])


def test_an_entry_of_another_ledger_as_last_entry_body_is_not_a_loss(cluster: Cluster) -> None:
    r, b = _open_ledger(cluster)
    other = cluster.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, entries=300, bookies=b, close=False)

    async def read_other() -> bytes:
        async with BookieClient(b[0], (cluster.bookie(1).host, cluster.bookie(1).port)) as c:
            got = await c.read_lac(other["ledgerId"])
            assert got.present and got.last_entry_body is not None
            return got.last_entry_body

    foreign = asyncio.run(read_other())  # a real stored entry, intact, of the other ledger
    assert struct.unpack_from(">q", foreign, 16)[0] > r["lac"] + 100  # its LAC: far past this ledger's

    findings, rewritten = _audit_through(cluster, r["ledgerId"], 1, lambda resp: _set_last_entry(resp, foreign))
    assert rewritten >= 2
    _assert_only_a_digest_mismatch_on(findings, b[0])


def test_a_forged_explicit_lac_body_is_not_a_loss(cluster: Cluster) -> None:
    r, b = _open_ledger(cluster)

    def forge(resp: Any) -> bool:
        resp.readLacResponse.lacBody = struct.pack(">qq", r["ledgerId"], 5_000_000) + b"\x00\x00\x00\x00"
        return True

    findings, _ = _audit_through(cluster, r["ledgerId"], 3, forge)
    _assert_only_a_digest_mismatch_on(findings, b[2])


def test_an_unverifiable_dummy_digest_lac_from_one_bookie_moves_nothing(cluster: Cluster) -> None:
    """DUMMY digest: nothing in the bytes can be checked, so a consistent-looking header claiming entry
    1,000,000 (LAC 999,999) is undetectable. One bookie alone must not move the end: no finding at all."""
    r, b = _open_ledger(cluster, digest="DUMMY")

    def claim_far_entry(resp: Any) -> bool:
        body = bytearray(resp.readLacResponse.lastEntryBody)
        if len(body) < 32:
            return False
        struct.pack_into(">qq", body, 8, 1_000_000, 999_999)
        return _set_last_entry(resp, bytes(body))

    findings, rewritten = _audit_through(cluster, r["ledgerId"], 2, claim_far_entry)
    assert rewritten >= 1
    assert actionable(findings) == [], findings


def test_the_same_ledgers_are_clean_without_the_stand_in(cluster: Cluster) -> None:
    """Control: the honest answers give the Java client's LAC and no finding."""
    r, _ = _open_ledger(cluster)
    d, _ = _open_ledger(cluster, digest="DUMMY")

    async def run() -> list[Finding]:
        findings, _ = await audit_async(cluster, [r["ledgerId"], d["ledgerId"]], CHECKS)
        return findings

    assert actionable(asyncio.run(run())) == []


# Issue 10, defect 3: header + one periodic group (first 0, last 2*(10**7 - 1), size 1, period 2) —
# 88 bytes naming ten million single-entry ranges.
HOSTILE_88 = struct.pack(">ii", 0, 1) + bytes(56) + struct.pack(">qqii", 0, 2 * (10**7 - 1), 1, 2)


def test_an_88_byte_entry_list_costs_only_the_ledgers_own_entries(cluster: Cluster) -> None:
    assert len(HOSTILE_88) == 88
    b = [cluster.bookie(n).bookie_id for n in (1, 2, 3)]
    r = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=30, bookies=b)
    victim = cluster.bookie(2)

    def periodic_list(resp: Any) -> bool:
        resp.getListOfEntriesOfLedgerResponse.availabilityOfEntriesOfLedger = HOSTILE_88
        return True

    async def run() -> tuple[list[Finding], int]:
        async with ReplyRewritingProxy(
            (victim.host, victim.port), ports.HOSTILE_PROXY_PORT + 1, P.Op.GET_LIST_OF_ENTRIES_OF_LEDGER, periodic_list
        ) as proxy:
            findings, _ = await audit_async(
                cluster, [r["ledgerId"]], ("scrutiny",), redirect={victim.bookie_id: proxy.address}
            )
            return findings, proxy.rewritten

    tracemalloc.start()
    try:
        findings, rewritten = asyncio.run(run())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rewritten >= 2
    assert peak < 64 * 1024 * 1024, peak  # the old expansion alone took 1.4 GiB
    # The answer says bookie 2 (index 1) holds only the even entries, twice; but the real bookie serves
    # the odd ones its list leaves out (they are read before anything is reported): no entry finding.
    assert not [f for f in actionable(findings) if f.category in LOSS], findings


def test_an_entry_list_that_omits_an_entry_the_bookie_serves_is_not_a_finding(cluster: Cluster) -> None:
    """A bookie whose index lists fewer entries than it serves (its GET_LIST answer lacks entry 0 every
    time it is asked, while READ_ENTRY returns it): two identical lists used to confirm the gap. The
    scrutiny now reads the entries the lists lacked before it reports, and reports nothing; a real gap
    (bookie 4 named in the ensemble, never written) is still reported."""
    from auditor.durability.entrylist import EntryList, encode_ranges
    from auditor.durability.ranges import RangeSet
    from devcluster.checks_util import rewrite_ensemble

    b = [cluster.bookie(n).bookie_id for n in (1, 2, 3, 4)]
    r = cluster.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, entries=10, bookies=b[:3])
    real_gap = cluster.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, entries=10, bookies=b[:3])
    rewrite_ensemble(cluster, real_gap["ledgerId"], b[1], b[3])
    victim = cluster.bookie(2)

    def drop_entry_0(resp: Any) -> bool:
        sub = resp.getListOfEntriesOfLedgerResponse
        held = EntryList.decode(sub.availabilityOfEntriesOfLedger).to_rangeset()
        sub.availabilityOfEntriesOfLedger = encode_ranges(held - RangeSet.span(0, 0))
        return True

    async def run() -> tuple[list[Finding], int]:
        async with ReplyRewritingProxy(
            (victim.host, victim.port), ports.HOSTILE_PROXY_PORT, P.Op.GET_LIST_OF_ENTRIES_OF_LEDGER, drop_entry_0
        ) as proxy:
            findings, _ = await audit_async(
                cluster,
                [r["ledgerId"], real_gap["ledgerId"]],
                ("scrutiny",),
                redirect={victim.bookie_id: proxy.address},
            )
            return findings, proxy.rewritten

    findings, rewritten = asyncio.run(run())
    assert rewritten >= 2  # the list was asked for twice and lacked entry 0 both times
    got = actionable(findings)
    assert not [f for f in got if f.ledger.ledger == r["ledgerId"]], got
    assert {(f.category, f.ledger.ledger) for f in got} == {
        (Category.ENTRY_BELOW_WRITE_QUORUM, real_gap["ledgerId"])
    }, got
