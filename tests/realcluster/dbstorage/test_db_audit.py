"""The exact audit on an all-DbLedgerStorage cluster, as Pulsar runs its bookies (issue 37).

Four real 4.17.3 DbLedgerStorage bookies, each with a real `bk-auditor agent` beside it (token required),
ledgers of thousands of entries written by the real Java client. The scrutiny check asks each bookie's
agent which entries its index holds (one request per bookie for all the ledgers, no entry data read),
confirms every absence with the bookie itself, and must be exact: clean on a healthy cluster (also right
after writing, before the bookies flushed their write caches), each planted fault found with the entries
the Java writer's report says, the method recorded. Without agents, the remote path (batched v2 reads)
must reach the same verdicts. Expected values come from the writer's report (checks_util), never from the
product's output.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.bookie import BookieClient, BookieClientConfig
from auditor.durability.findings import Category, Finding, Method
from devcluster.agent_util import AgentProc, start_agent, stop_agent
from devcluster.checks_util import actionable, audit, copies_without, expected_entries, rewrite_ensemble, settings_for
from devcluster.cluster import Cluster
from devcluster.dbstorage import remove_index_entries
from tests.realcluster.second_cluster import second_cluster

pytestmark = pytest.mark.realcluster

BOOKIES = 4
TOKEN = "db-audit-test-token"


@pytest.fixture(scope="module")
def dbc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, dict[int, AgentProc], Path]]:
    """The all-DbLedgerStorage cluster with an agent beside every bookie."""
    work = tmp_path_factory.mktemp("db-audit")
    token = work / "agent.token"
    token.write_text(TOKEN + "\n")
    with second_cluster("bk-db-audit-", BOOKIES, storage={n: "db" for n in range(1, BOOKIES + 1)}) as c:
        agents = {n: start_agent(c, n, work, token_file=token) for n in range(1, BOOKIES + 1)}
        try:
            yield c, agents, token
        finally:
            for a in agents.values():
                stop_agent(a)


def with_agents(c: Cluster, agents: dict[int, AgentProc], token: Path, **over: Any) -> Any:
    addresses = {c.bookie(n).bookie_id: f"{a.address[0]}:{a.address[1]}" for n, a in agents.items()}
    return settings_for(c, agent={"addresses": addresses, "token_file": str(token)}, **over)


def ids(c: Cluster, *ns: int) -> list[str]:
    return [c.bookie(n).bookie_id for n in ns]


def pairs(result: dict[str, Any]) -> int:
    """(ledger, bookie) pairs of one written ledger: the bookies that hold some entry of it."""
    return sum(1 for b in {b for ens in result["ensembles"].values() for b in ens} if expected_entries(result, b))


def entry_findings(findings: list[Finding]) -> list[Finding]:
    return [f for f in actionable(findings) if f.category.value.startswith("entry_")]


async def served(c: Cluster, n: int, ledger_id: int, entries: list[int]) -> list[bool]:
    """Whether bookie n serves each entry, asked directly (the truth the audit is held to)."""
    cfg = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0)
    client = BookieClient(c.bookie(n).bookie_id, lambda _: c.bookie(n).advertised_address, cfg)
    try:
        return [r.present for r in await client.read_entries(ledger_id, entries)]
    finally:
        await client.close()


@pytest.fixture(scope="module")
def written(dbc: tuple[Cluster, dict[int, AgentProc], Path]) -> dict[str, dict[str, Any]]:
    """Pulsar's shape (E2/WQ2/AQ2), a striped one (E3/WQ2) and E3/WQ3, thousands of entries each."""
    c, _, _ = dbc
    return {
        "pulsar": c.create_ledger(
            ensemble=2, write_quorum=2, ack_quorum=2, entries=3000, entry_size=100, bookies=ids(c, 1, 2)
        ),
        "striped": c.create_ledger(
            ensemble=3, write_quorum=2, ack_quorum=2, entries=2000, entry_size=100, bookies=ids(c, 2, 3, 4)
        ),
        "full": c.create_ledger(
            ensemble=3,
            write_quorum=3,
            ack_quorum=2,
            entries=1000,
            entry_size=100,
            digest="MAC",
            bookies=ids(c, 1, 3, 4),
        ),
    }


def test_healthy_ledgers_are_proven_by_the_index_without_reading_data(dbc, written) -> None:
    c, agents, token = dbc
    lids = [r["ledgerId"] for r in written.values()]
    want = sum(pairs(r) for r in written.values())
    # Right after writing: entries may still sit in the bookies' write caches, unindexed. The audit
    # reads what an index lacks before it believes an absence: still clean.
    findings, stats = audit(c, lids, settings=with_agents(c, agents, token))
    assert actionable(findings) == [], findings
    assert sum(stats["scrutiny"].index_answers.values()) == want
    # Once flushed (flushInterval 1 s), the index alone answers: not one request to any bookie.
    time.sleep(3.0)
    findings, stats = audit(c, lids, settings=with_agents(c, agents, token))
    assert actionable(findings) == [], findings
    assert sum(stats["scrutiny"].index_answers.values()) == want
    assert sum(stats["scrutiny"].bookie_requests.values()) == 0, stats["scrutiny"].bookie_requests


def test_without_agents_the_remote_path_reads_every_entry_and_is_clean(dbc, written) -> None:
    c, _, _ = dbc
    lids = [r["ledgerId"] for r in written.values()]
    findings, stats = audit(c, lids, settings=settings_for(c), fallback_read_budget=10_000)
    assert actionable(findings) == [], findings
    assert sum(stats["scrutiny"].index_answers.values()) == 0
    # Every expected copy was read (each bookie's share, whole: within the budget, so exact).
    want = sum(len(expected_entries(r, b)) for r in written.values() for b in ids(c, 1, 2, 3, 4))
    lists = sum(pairs(r) for r in written.values())  # at most one GET_LIST each, before the bookie is known
    assert want <= sum(stats["scrutiny"].bookie_requests.values()) <= want + lists, stats["scrutiny"]


def test_entries_removed_from_a_bookies_index_are_found_exactly(dbc) -> None:
    c, agents, token = dbc
    r = c.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=2500, entry_size=100, bookies=ids(c, 1, 2))
    lid = r["ledgerId"]
    time.sleep(3.0)  # flushed into the index, so the removal below is what the bookie keeps
    c.stop_bookie(1)
    assert remove_index_entries(c, 1, lid, 1000, 1199) == 200
    c.start_bookie(1)
    c.wait_ready(1)
    # The bookie itself no longer serves them (the truth), and still serves the next one. (Not the one
    # before: a read of entry 999 fills the bookie's read-ahead cache from its entry log, and it then
    # serves the unindexed entries after it from that cache for a while.)
    assert asyncio.run(served(c, 1, lid, [1000, 1100, 1199, 1200])) == [False, False, False, True]
    findings, _ = audit(c, [lid], settings=with_agents(c, agents, token))
    got = entry_findings(findings)
    assert [(f.category, f.affected_count, f.method) for f in got] == [
        (Category.ENTRY_BELOW_ACK_QUORUM, 200, Method.INDEX.value)
    ], findings
    assert got[0].affected_ranges.startswith("1000-1199"), got[0]
    assert got[0].confirmed


def test_metadata_naming_a_bookie_that_never_had_the_ledger_is_found(dbc) -> None:
    c, agents, token = dbc
    r = c.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=1500, entry_size=100, bookies=ids(c, 1, 2, 3))
    lid = r["ledgerId"]
    b1, b4 = ids(c, 1, 4)
    rewrite_ensemble(c, lid, b1, b4)  # bookie 4 never saw this ledger; bookie 1 still holds it
    findings, stats = audit(c, [lid], settings=with_agents(c, agents, token))
    got = entry_findings(findings)
    # Bookie 4's share (bookie 1's in the writer's report) has one copy left: below the ack quorum.
    lost = copies_without(r, {b1})
    assert [(f.category, f.affected_count, f.method) for f in got] == [
        (Category.ENTRY_BELOW_ACK_QUORUM, sum(1 for n in lost.values() if n < 2), Method.INDEX.value)
    ], findings
    # Bookie 4 was asked through its agent (the index does not know the ledger) and one read (NOLEDGER)
    # confirmed it: once by the check, once by the re-check that confirmed the finding.
    assert stats["scrutiny"].index_answers[b4] == 2
    assert stats["scrutiny"].bookie_requests[b4] == 2


def test_no_false_finding_while_bookies_restart_compact_and_flush(dbc, written) -> None:
    c, agents, token = dbc
    lids = [r["ledgerId"] for r in written.values()]
    settings = with_agents(c, agents, token)
    fresh = [
        c.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=1200, entry_size=100, bookies=ids(c, 3, 4))[
            "ledgerId"
        ]
    ]
    seen: list[Finding] = []
    for step in ("restart", "compact", "write"):
        if step == "restart":
            c.restart_bookie(3)
        elif step == "compact":
            status, body = c.http_put(2, "/api/v1/bookie/gc", "{}")
            assert status == 200, body
        else:
            fresh.append(
                c.create_ledger(
                    ensemble=2, write_quorum=2, ack_quorum=2, entries=1200, entry_size=100, bookies=ids(c, 2, 4)
                )["ledgerId"]
            )
        findings, _ = audit(c, lids + fresh, settings=settings)
        seen += actionable(findings)
    assert seen == []


def test_a_wiped_bookie_is_found_through_its_agent(dbc, written) -> None:
    """Last: bookie 4 loses its disks and comes back empty under the same id; its agent keeps running."""
    c, agents, token = dbc
    r = written["striped"]
    c.stop_bookie(4)
    c.wipe_bookie(4)
    c.start_bookie(4)
    c.wait_ready(4)
    (b4,) = ids(c, 4)
    findings, stats = audit(c, [r["ledgerId"]], settings=with_agents(c, agents, token))
    got = entry_findings(findings)
    lost = copies_without(r, {b4})
    assert [(f.category, f.affected_count) for f in got] == [
        (Category.ENTRY_BELOW_ACK_QUORUM, sum(1 for n in lost.values() if n < 2))
    ], findings
    assert got[0].confirmed
    assert stats["scrutiny"].index_answers[b4] == 2, "the agent answered for the wiped bookie (check, re-check)"
    assert got[0].method == Method.INDEX.value
