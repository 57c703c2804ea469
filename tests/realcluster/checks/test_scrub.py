"""The digest scrub on real Java bookies (SortedLedgerStorage and DbLedgerStorage), ledgers written by the
real Java client: a damaged copy in an entry log is exactly one confirmed digest_mismatch naming its
bookie, ledger and entry; a clean ledger is fully covered with no finding; the byte budget holds (bytes
counted against the pacing's own clock); and a pass survives the loss of its leader (state in ZooKeeper).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from auditor.checks.build import audit_context
from auditor.checks.scrub import ScrubRunner, scrub_pass
from auditor.durability.findings import Category
from auditor.durability.ids import LedgerId
from auditor.durability.scrub import ScrubProgress
from auditor.metadata.own.scrubstate import parse_scrub, scrub_to_json
from devcluster import ports
from devcluster.agent_util import start_agent, stop_agent
from devcluster.checks_util import corrupt_entry_on_disk, expected_entries, settings_for, wait_for
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon

BIN = Path(sys.executable).with_name("bk-auditor")
DB_BOOKIE = 6  # the session cluster's DbLedgerStorage bookie (tests/conftest.py); 1-5 are SortedLedgerStorage


def ids(cluster: Cluster, *ns: int) -> list[str]:
    return [cluster.bookie(n).bookie_id for n in ns]


def scrub_cli(cluster: Cluster, ledgers: list[int]) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    """`bk-auditor scrub --ledgers ... --format json`: (exit code, findings, summary)."""
    got = subprocess.run(
        [
            str(BIN),
            "scrub",
            "--metadata-service-uri",
            cluster.metadata_service_uri,
            "--ledgers",
            ",".join(map(str, ledgers)),
            "--bytes-per-second",
            "0",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "BKAUDIT_RECHECK__DELAYS_SECONDS": "0.5,0.5"},
    )
    lines = [json.loads(line) for line in got.stdout.splitlines() if line.strip()]
    assert got.returncode in (0, 1), got.stderr[-2000:]
    summary = lines[-1]["summary"]["scrub"]
    return got.returncode, lines[:-1], summary


@pytest.mark.parametrize("storage_bookie", [1, DB_BOOKIE], ids=["sorted", "db"])
def test_one_damaged_copy_is_exactly_one_confirmed_digest_mismatch(cluster: Cluster, storage_bookie: int) -> None:
    others = [n for n in (2, 3) if n != storage_bookie]
    b = ids(cluster, storage_bookie, *others)
    r = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=40, entry_size=200, bookies=b)
    lid = r["ledgerId"]
    target = sorted(expected_entries(r, b[0]))[5]
    bookie = cluster.bookie(storage_bookie)
    cluster.stop_bookie(storage_bookie)
    try:
        assert corrupt_entry_on_disk(bookie.ledger_dir, lid, target, journal_dir=bookie.journal_dir) == 1
    finally:
        cluster.start_bookie(storage_bookie)
    code, findings, summary = scrub_cli(cluster, [lid])
    assert code == 1
    assert [(f["category"], f["bookieId"], f["ledgerId"], f["entryId"]) for f in findings] == [
        (Category.DIGEST_MISMATCH.value, b[0], lid, target)
    ], findings
    assert findings[0]["confirmed"] is True
    # Every other copy verified: 40 entries x WQ 2, less the damaged one.
    assert (summary["entries"], summary["unverifiedEntries"], summary["corrupt"]) == (79, 1, 1), summary


def test_a_clean_ledger_is_fully_covered_with_no_finding(cluster: Cluster) -> None:
    b = ids(cluster, 4, 5, DB_BOOKIE)
    r = cluster.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, entries=300, entry_size=100, bookies=b)
    code, findings, summary = scrub_cli(cluster, [r["ledgerId"]])
    assert (code, findings) == (0, [])
    assert summary["entries"] == summary["plannedEntries"] == 900
    assert summary["coverageRatio"] == 1.0 and summary["unverifiedEntries"] == 0
    assert set(summary["bytesByBookie"]) == set(b)


def test_the_byte_budget_holds_per_bookie(cluster: Cluster) -> None:
    """Bytes counted against the pacing's own clock (virtual: it moves only while the scrub waits for its
    budget, never by wall-clock time), so the bound is exact and cannot flake."""
    b = ids(cluster, 1, 2, DB_BOOKIE)
    ledgers = [
        r["ledgerId"]
        for r in cluster.create_ledgers(
            6, ensemble=3, write_quorum=2, ack_quorum=2, entries=120, entry_size=1000, bookies=b
        )
    ]
    rate = 48 * 1024.0
    now = [0.0]

    async def sleep(seconds: float) -> None:  # the virtual clock: reads take no time on it
        now[0] += seconds
        await asyncio.sleep(0)

    async def go() -> tuple[ScrubProgress, ScrubRunner]:
        async with audit_context(settings_for(cluster), one_shot=True) as (ctx, _):
            runner = ScrubRunner(
                ctx, bytes_per_second=rate, max_concurrent_ledgers=1, clock=lambda: now[0], sleep=sleep
            )
            done = await scrub_pass(
                ctx, runner, ScrubProgress(), report=lambda f: None, ledgers=[LedgerId(0, i) for i in ledgers]
            )
            return done, runner

    done, runner = asyncio.run(go())
    assert done.corrupt == 0 and done.unverified_entries == 0 and done.entries == 6 * 120 * 2
    elapsed = now[0]
    for bookie, nbytes in runner.bytes_by_bookie.items():
        # Each copy's reads end by paying their debt, so nothing is ahead of the budget at the end.
        assert nbytes > 4 * runner.burst, (bookie, nbytes)  # enough data that the bound means something
        assert nbytes - runner.burst <= rate * elapsed + 1, (bookie, nbytes, elapsed)
    # ... and no slower than the budget: each bookie waits only to pay the debt of its own reads, so the
    # waits add up to at most every bookie's bytes past its burst.
    total = sum(runner.bytes_by_bookie.values())
    assert elapsed <= (total - len(runner.bytes_by_bookie) * runner.burst) / rate + 0.01, (elapsed, total)
    assert elapsed > 0


def scrub_state(cluster: Cluster) -> ScrubProgress | None:
    path = f"{cluster.ledgers_root}/bk-auditor/scrub/state"
    if not cluster.kazoo.exists(path):
        return None
    data, _ = cluster.kazoo.get(path)
    return parse_scrub(data, path) if data else None


def test_a_pass_resumes_on_the_new_leader_after_the_leader_dies(
    cluster: Cluster, daemons: list[Daemon], tmp_path: Path
) -> None:
    b = ids(cluster, 3, 4, DB_BOOKIE)
    made = cluster.create_ledgers(24, ensemble=3, write_quorum=2, ack_quorum=2, entries=60, entry_size=1000, bookies=b)
    # The pass is one a previous leader began just before this test's ledgers: what the session cluster
    # held before (other tests' ledgers, some large and paced at the budget below) is behind its cursor,
    # so what is left of the pass is exactly these small ledgers.
    first_id = min(r["ledgerId"] for r in made)
    begun = ScrubProgress().begin(int(time.time() * 1000), planned_entries=24 * 60 * 2)
    cluster.kazoo.create(
        f"{cluster.ledgers_root}/bk-auditor/scrub/state",
        scrub_to_json(replace(begun, cursor=LedgerId(0, first_id - 1) if first_id > 0 else None)),
        makepath=True,
    )
    scrub = {
        "start_delay_seconds": 0,
        "bytes_per_second_per_bookie": 96 * 1024,
        "max_concurrent_ledgers": 1,
        "save_every_ledgers": 1,
        "save_every_seconds": 0.5,
    }
    first = Daemon(cluster, "scrub-a", tmp_path, scrub=scrub, schedule={"scrutiny_seconds": 0}).start()
    daemons.append(first)
    assert wait_for(lambda: first.is_leader(), timeout=30)
    assert wait_for(lambda: (s := scrub_state(cluster)) is not None and s.ledgers >= 3, timeout=40)
    before = scrub_state(cluster)
    assert before is not None and before.in_pass and before.passes == 0
    second = Daemon(cluster, "scrub-b", tmp_path, scrub=scrub, schedule={"scrutiny_seconds": 0}).start()
    daemons.append(second)
    time.sleep(1.0)  # the standby has joined the election
    first.kill()
    saved = scrub_state(cluster)
    assert "resuming the scrub pass" not in second.log_path.read_text()
    assert saved is not None and saved.in_pass
    assert wait_for(lambda: second.is_leader(), timeout=30)
    # The new leader goes on with the same pass after the saved cursor: the pass keeps its start and its
    # counts (one started over would have a later start and count from zero again).
    assert wait_for(lambda: (s := scrub_state(cluster)) is not None and s.ledgers > saved.ledgers, timeout=60), (
        scrub_state(cluster)
    )
    after = scrub_state(cluster)
    assert after is not None and after.pass_started_ms == before.pass_started_ms
    assert after.cursor is not None and saved.cursor is not None and after.cursor > saved.cursor
    assert "resuming the scrub pass" in second.log_path.read_text()


def test_the_agent_finds_the_damaged_copy_where_the_data_is(cluster: Cluster, tmp_path: Path) -> None:
    """On the DbLedgerStorage bookie with an agent beside it, its copies are verified by the agent (no entry
    crosses the network) and the damage is the same one confirmed finding; the other bookies' copies are
    read remotely."""
    b = ids(cluster, DB_BOOKIE, 4, 5)
    r = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=40, entry_size=200, bookies=b)
    lid = r["ledgerId"]
    target = sorted(expected_entries(r, b[0]))[3]
    bookie = cluster.bookie(DB_BOOKIE)
    cluster.stop_bookie(DB_BOOKIE)
    try:
        assert corrupt_entry_on_disk(bookie.ledger_dir, lid, target, journal_dir=bookie.journal_dir) == 1
    finally:
        cluster.start_bookie(DB_BOOKIE)
    token = tmp_path / "token"
    token.write_bytes(b"scrub-test-token\n")
    agent = start_agent(cluster, DB_BOOKIE, tmp_path, token_file=token, port=ports.AGENT_PORT_BASE + 9)
    try:
        settings = settings_for(
            cluster,
            agent={"addresses": {b[0]: f"127.0.0.1:{agent.port}"}, "token_file": str(token)},
            recheck={"delays_seconds": [0.3, 0.3], "attempts": 2},
        )

        async def go() -> tuple[list[Any], ScrubProgress, dict[str, int]]:
            found: list[Any] = []
            async with audit_context(settings, one_shot=True) as (ctx, _):
                runner = ScrubRunner(ctx, bytes_per_second=0, confirm_delays=(0.3, 0.3))
                done = await scrub_pass(ctx, runner, ScrubProgress(), report=found.append, ledgers=[LedgerId(0, lid)])
                return found, done, runner.bytes_by_bookie

        found, done, by_bookie = asyncio.run(go())
    finally:
        stop_agent(agent)
    assert [(f.category, f.bookie, f.entry_id, f.detail["scrub"]) for f in found] == [
        (Category.DIGEST_MISMATCH, b[0], target, "agent")
    ], found
    assert (done.entries, done.unverified_entries) == (79, 1), done
    assert set(by_bookie) == set(b)
