"""The durability checks against the real cluster: each category planted for real and found exactly,
and the no-false-alarm cases. Expected numbers come from what the Java tool wrote (checks_util derives
them by brute force), never from the product's output."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from auditor.durability.findings import Category, Finding
from auditor.durability.ids import LedgerId
from devcluster.checks_util import (
    actionable,
    audit,
    audit_async,
    copies_without,
    corrupt_entry_on_disk,
    expected_entries,
    marker_path,
    rewrite_ensemble,
    settings_for,
)
from devcluster.cluster import Cluster

pytestmark = pytest.mark.realcluster


def ids(cluster: Cluster, *ns: int) -> list[str]:
    return [cluster.bookie(n).bookie_id for n in ns]


def by_category(findings: list, category: Category) -> list:
    return [f for f in findings if f.category is category]


# ----------------------------------------------------------------------------- no false alarms


def test_healthy_ledgers_striped_wider_than_wq_and_with_ensemble_change_are_clean(cluster: Cluster) -> None:
    sorted_ids = cluster.sorted_bookie_ids
    wide = cluster.create_ledger(ensemble=5, write_quorum=2, ack_quorum=2, entries=101, bookies=sorted_ids[:5])
    full = cluster.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, entries=40, digest="MAC")
    changed = cluster.write_with_ensemble_change(
        ensemble=3,
        write_quorum=2,
        ack_quorum=2,
        entries=40,
        change_after=17,
        bookies=sorted_ids[:3],
        victim=sorted_ids[1],
    )
    assert len(changed["ensembles"]) == 2, changed
    lids = [wide["ledgerId"], full["ledgerId"], changed["ledgerId"]]
    findings, stats = audit(cluster, lids, checks=("scrutiny", "ledger", "open"), verification_percentage=100.0)
    assert actionable(findings) == []
    assert stats["scrutiny"].ledgers_checked == 3
    # Every expected copy was asked for, once per bookie per ledger, over entry lists.
    assert stats["scrutiny"].bookie_requests.total() >= 5 + 3 + 4


def test_dbledgerstorage_bookie_is_read_instead_of_listed(cluster: Cluster) -> None:
    db = cluster.bookie(6).bookie_id
    pool = ids(cluster, 1, 2) + [db]
    r = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=30, bookies=pool, allowed=pool)
    findings, stats = audit(cluster, [r["ledgerId"]])
    assert actionable(findings) == []
    # The DbLedgerStorage bookie was read entry by entry: as many reads as entries it should hold.
    assert stats["scrutiny"].bookie_requests[db] >= len(expected_entries(r, db))


def test_ledger_deleted_while_the_check_runs_reports_nothing(cluster: Cluster) -> None:
    r = cluster.create_ledger(entries=20)

    async def scenario() -> list:
        from auditor.checks.build import audit_context

        async with audit_context(settings_for(cluster), one_shot=True) as (ctx, _):
            record = await ctx.store.read_ledger(LedgerId(0, r["ledgerId"]))
        cluster.delete_ledger(r["ledgerId"])
        findings, stats = await audit_async(cluster, [], records=[record])
        assert stats["scrutiny"].ledgers_checked + sum(stats["scrutiny"].ledgers_skipped.values()) == 1
        return findings

    assert asyncio.run(scenario()) == []


def test_metadata_change_between_first_read_and_report_is_reanalysed_not_reported(cluster: Cluster) -> None:
    b = ids(cluster, 1, 2, 3, 4)
    r = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=30, bookies=b[:3])

    async def scenario() -> tuple[list, object]:
        from auditor.checks.build import audit_context

        async with audit_context(settings_for(cluster), one_shot=True) as (ctx, _):
            record = await ctx.store.read_ledger(LedgerId(0, r["ledgerId"]))
        # What we read names bookie 4 (as if an ensemble change were in flight); ZooKeeper has the truth.
        rewrite_ensemble(cluster, r["ledgerId"], b[2], b[3])
        stale = await _read(cluster, r["ledgerId"])
        rewrite_ensemble(cluster, r["ledgerId"], b[3], b[2])
        return await audit_async(cluster, [], records=[stale])

    findings, stats = asyncio.run(scenario())
    assert actionable(findings) == []
    assert stats["scrutiny"].reanalysed == 1


async def _read(cluster: Cluster, lid: int):  # type: ignore[no-untyped-def]
    from auditor.checks.build import audit_context

    async with audit_context(settings_for(cluster), one_shot=True) as (ctx, _):
        return await ctx.store.read_ledger(LedgerId(0, lid))


def test_slow_bookie_that_answers_in_the_end_is_not_reported(cluster: Cluster) -> None:
    b = ids(cluster, 1, 2, 3)
    r = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=20, bookies=b)
    cluster.pause_bookie(3)
    try:

        async def scenario() -> tuple[list, dict]:
            task = asyncio.create_task(
                audit_async(
                    cluster,
                    [r["ledgerId"]],
                    settings=settings_for(
                        cluster,
                        bookie_client={"timeout_seconds": 1.0},
                        recheck={"delays_seconds": [2.5, 2.5], "attempts": 2},
                    ),
                )
            )
            await asyncio.sleep(1.5)  # the first attempt times out on bookie 3 ...
            cluster.resume_bookie(3)  # ... which answers the re-check
            return await task

        findings, stats = asyncio.run(scenario())
    finally:
        cluster.resume_bookie(3)
    assert actionable(findings) == []
    # Bookie 3 was asked again (a re-check, or reads after its silent entry-list probe) and answered.
    assert stats["scrutiny"].bookie_requests[b[2]] >= 2


# ----------------------------------------------------------------------------- planted faults


def test_ensemble_naming_a_bookie_that_never_got_the_entries(cluster: Cluster) -> None:
    b = ids(cluster, 1, 2, 3, 4)
    r = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=30, bookies=b[:3])
    rewrite_ensemble(cluster, r["ledgerId"], b[2], b[3])
    r["ensembles"] = {"0": [b[0], b[1], b[3]]}
    findings, _ = audit(cluster, [r["ledgerId"]])
    copies = copies_without(r, {b[3]})
    worst = min(copies.values())
    affected = sorted(e for e, c in copies.items() if c == worst)
    assert worst == 1  # WQ 2, one copy lost; below AQ 2 as well
    got = actionable(findings)
    assert [f.category for f in got] == [Category.ENTRY_BELOW_ACK_QUORUM], got
    f = got[0]
    assert f.ledger == LedgerId(0, r["ledgerId"]) and f.confirmed
    assert f.affected_count == len(affected) == len(expected_entries(r, b[3]))
    assert f.first_entry_id == affected[0] and f.last_entry_id == affected[-1]


def test_wiped_bookie_back_empty_loses_its_copies(cluster: Cluster) -> None:
    b = ids(cluster, 2, 3, 4, 5)
    victim = b[3]
    r1 = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=60, bookies=[b[0], b[1], victim])
    r2 = cluster.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, entries=25, bookies=[b[1], b[2], victim])
    r3 = cluster.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=10, bookies=[b[0], b[1]])
    cluster.stop_bookie(5)
    cluster.wipe_bookie(5)
    cluster.start_bookie(5)
    findings, _ = audit(cluster, [r1["ledgerId"], r2["ledgerId"], r3["ledgerId"]], checks=("scrutiny", "ledger"))
    got: dict = {}
    for f in actionable(findings):  # scrutiny's (every entry) comes before the read check's (a sample)
        got.setdefault((f.ledger.ledger, f.category), f)
    # r1: WQ 2 -> 1 copy left for victim's entries (< AQ 2); r2: WQ 3 -> 2 copies (< WQ, >= AQ); r3 untouched.
    assert set(got) == {
        (r1["ledgerId"], Category.ENTRY_BELOW_ACK_QUORUM),
        (r2["ledgerId"], Category.ENTRY_BELOW_WRITE_QUORUM),
    }, findings
    assert got[(r1["ledgerId"], Category.ENTRY_BELOW_ACK_QUORUM)].affected_count == len(expected_entries(r1, victim))
    assert got[(r2["ledgerId"], Category.ENTRY_BELOW_WRITE_QUORUM)].affected_count == 25


def test_ledger_check_reads_the_only_entry_of_a_one_entry_ledger(cluster: Cluster) -> None:
    """A segment that ends at entry 0 holds entry 0: the read check once took its last entry as -1, read
    nothing of a one-entry ledger and called it healthy with a copy gone."""
    b = ids(cluster, 2, 3, 5)
    victim = b[2]  # ensemble index 0: entry 0 is written to indexes 0 and 1
    one = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=1, bookies=[victim, b[0], b[1]])
    cluster.stop_bookie(5)
    cluster.wipe_bookie(5)
    cluster.start_bookie(5)
    findings, stats = audit(cluster, [one["ledgerId"]], checks=("ledger",))
    asked = stats["ledger"].bookie_requests
    assert asked[victim] >= 1 and asked[b[0]] >= 1 and asked[b[1]] == 0  # entry 0, where it should be
    got = actionable(findings)
    assert [(f.ledger.ledger, f.category, f.affected_count) for f in got] == [
        (one["ledgerId"], Category.ENTRY_BELOW_ACK_QUORUM, 1)
    ], findings


def test_rack_violating_ensembles_with_pulsar_rack_map(cluster: Cluster) -> None:
    b = ids(cluster, 1, 2, 3, 4)
    racks = {
        "default": {
            b[0]: {"rack": "/rack-a"},
            b[1]: {"rack": "/rack-a"},
            b[2]: {"rack": "/rack-b"},
            b[3]: {"rack": "/rack-b"},
        }
    }
    good = cluster.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=5, bookies=[b[0], b[2]])
    bad = cluster.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=5, bookies=[b[0], b[1]])
    cluster.kazoo.create("/bookies", json.dumps(racks).encode())
    try:
        findings, _ = audit(cluster, [good["ledgerId"], bad["ledgerId"]])
    finally:
        cluster.kazoo.delete("/bookies")
    got = actionable(findings)
    assert [(f.category, f.ledger.ledger) for f in got] == [(Category.PLACEMENT_VIOLATION, bad["ledgerId"])], got
    assert got[0].segment_index == 0 and set(got[0].ensemble) == {b[0], b[1]}


def test_stale_underreplication_marker_is_reported_past_the_grace_period(cluster: Cluster) -> None:
    r = cluster.create_ledger(entries=5)
    fresh = cluster.create_ledger(entries=5)
    old_ms = int(time.time() * 1000) - 2 * 3600 * 1000
    paths = [marker_path(cluster, r["ledgerId"]), marker_path(cluster, fresh["ledgerId"])]
    cluster.kazoo.create(
        paths[0], f'replica: "{cluster.bookie(1).bookie_id}"\nctime: {old_ms}\n'.encode(), makepath=True
    )
    cluster.kazoo.create(
        paths[1],
        f'replica: "{cluster.bookie(1).bookie_id}"\nctime: {int(time.time() * 1000)}\n'.encode(),
        makepath=True,
    )
    try:
        findings, stats = audit(cluster, [r["ledgerId"], fresh["ledgerId"]], underreplicated_grace_period=3600)
    finally:
        for p in paths:
            cluster.kazoo.delete(p)
    got = actionable(findings)
    assert [(f.category, f.ledger.ledger) for f in got] == [(Category.UNDERREPLICATED_TOO_LONG, r["ledgerId"])]
    assert got[0].detail["ageS"] >= 7200 if "ageS" in got[0].detail else got[0].detail["age_s"] >= 7200
    assert stats["scrutiny"].ledgers_skipped["underreplicated"] == 1  # the fresh one: left to the workers


def test_markers_are_listed_once_per_run_and_read_again_before_anything_is_reported(cluster: Cluster) -> None:
    """The scrutiny lists the markers when its run begins and reads the marker only of ledgers marked then;
    a ledger marked after that is still left to the workers (the confirmation reads its marker), and one
    whose marker went away meanwhile is checked as any other."""
    from auditor.checks.build import audit_context
    from auditor.checks.per_ledger import CHECKS
    from auditor.checks.runner import CheckRun

    b = ids(cluster, 1, 2, 3, 4)
    late = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=10, bookies=b[:3])
    gone = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=10, bookies=b[:3])
    for r in (late, gone):
        rewrite_ensemble(cluster, r["ledgerId"], b[2], b[3])  # bookie 4 never got the entries: gaps
    marker = f'replica: "{b[3]}"\nctime: {int(time.time() * 1000)}\n'.encode()
    cluster.kazoo.create(marker_path(cluster, gone["ledgerId"]), marker, makepath=True)

    async def scenario() -> tuple[list, object]:
        found: list = []
        async with audit_context(settings_for(cluster), one_shot=True) as (ctx, locations):
            run = CheckRun(ctx, CHECKS["scrutiny"](ctx, locations), found.append)
            assert await run.begin()
            cluster.kazoo.create(marker_path(cluster, late["ledgerId"]), marker, makepath=True)
            cluster.kazoo.delete(marker_path(cluster, gone["ledgerId"]))
            recs = [
                r
                for r in await ctx.store.read_ledgers([LedgerId.of(late["ledgerId"]), LedgerId.of(gone["ledgerId"])])
                if r
            ]

            async def source():  # type: ignore[no-untyped-def]
                yield recs

            await run.scan(records=source())
            await run.drain_rechecks()
        return found, run.stats

    try:
        found, stats = asyncio.run(scenario())
    finally:
        if cluster.kazoo.exists(marker_path(cluster, late["ledgerId"])):
            cluster.kazoo.delete(marker_path(cluster, late["ledgerId"]))
    got = {(f.category, f.ledger.ledger) for f in actionable(found)}
    assert any(l == gone["ledgerId"] for _, l in got), got  # its gaps, reported
    assert all(l != late["ledgerId"] for _, l in got), got
    assert stats.ledgers_skipped["underreplicated"] == 1  # type: ignore[attr-defined]


def test_paused_bookie_becomes_bookie_unreachable_after_rechecks(cluster: Cluster) -> None:
    b = ids(cluster, 1, 2, 3)
    r = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=20, bookies=b)
    cluster.pause_bookie(2)
    try:
        findings, stats = audit(
            cluster,
            [r["ledgerId"]],
            settings=settings_for(
                cluster, bookie_client={"timeout_seconds": 0.5}, recheck={"delays_seconds": [0.3, 0.3], "attempts": 2}
            ),
        )
    finally:
        cluster.resume_bookie(2)
    got = actionable(findings)
    assert [(f.category, f.bookie) for f in got] == [(Category.BOOKIE_UNREACHABLE, b[1])], got
    assert stats["scrutiny"].ledgers_rechecked == 2


def test_corrupted_entry_on_disk_is_a_digest_mismatch(cluster: Cluster) -> None:
    b = ids(cluster, 1, 2, 3)
    r = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=30, bookies=b, digest="CRC32")
    target = max(expected_entries(r, b[0]))  # the last entry bookie 1 holds: the read check reads it
    cluster.stop_bookie(1)
    try:
        assert (
            corrupt_entry_on_disk(
                cluster.bookie(1).ledger_dir, r["ledgerId"], target, journal_dir=cluster.bookie(1).journal_dir
            )
            == 1
        )
    finally:
        cluster.start_bookie(1)
    findings, _ = audit(cluster, [r["ledgerId"]], checks=("ledger",))
    got = actionable(findings)
    assert [(f.category, f.bookie, f.entry_id) for f in got] == [(Category.DIGEST_MISMATCH, b[0], target)], got


def test_open_ledger_with_missing_copies_is_a_truncation_risk(cluster: Cluster) -> None:
    b = ids(cluster, 2, 3, 4)
    r = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=20, bookies=b, close=False)
    assert r["state"] == "OPEN"
    healthy, _ = audit(cluster, [r["ledgerId"]], checks=("open",))
    assert actionable(healthy) == []
    cluster.stop_bookie(4)
    cluster.wipe_bookie(4)
    cluster.start_bookie(4)
    findings, _ = audit(cluster, [r["ledgerId"]], checks=("open",))
    got = actionable(findings)
    # Bookies know LAC = 18 (entry 19 carries it). WQ - AQ + 1 = 1 denial truncates, so the first entry
    # the wiped bookie (index 2) should hold is the truncation point.
    lac = 18
    at_risk = sorted(e for e in expected_entries(r, b[2], end=lac))
    trunc = [f for f in got if f.category is Category.TRUNCATION_RISK]
    assert len(trunc) == 1, got
    assert trunc[0].entry_id == at_risk[0] and trunc[0].affected_count == len(at_risk)
    assert {f.category for f in got} <= {Category.TRUNCATION_RISK, Category.ENTRY_BELOW_ACK_QUORUM}


def test_scoped_ledger_is_judged_on_metadata_and_never_breaks_a_scan(cluster: Cluster) -> None:
    """128-bit ids (our extension): the bookie wire protocol has no scope, so entries can't be asked for;
    the check judges quorum settings and placement and counts the ledger as skipped."""
    from dataclasses import replace

    from auditor.durability.model import LedgerState
    from auditor.metadata.codecs import formats
    from auditor.metadata.codecs.paths import LedgerPaths
    from auditor.metadata.location import LedgerManager

    r = cluster.create_ledger(ensemble=3, write_quorum=1, ack_quorum=1, entries=5)
    real = asyncio.run(_read(cluster, r["ledgerId"]))
    scoped_id = LedgerId(9, r["ledgerId"])
    path = LedgerPaths(cluster.ledgers_root, LedgerManager.HIERARCHICAL).path(scoped_id)
    md = replace(real.metadata, ledger_id=scoped_id)
    assert md.state is LedgerState.CLOSED
    cluster.kazoo.create(path, formats.serialize_ledger_metadata(md), makepath=True)
    try:

        async def scenario() -> tuple[list, dict]:
            from auditor.checks.build import audit_context

            async with audit_context(settings_for(cluster), one_shot=True) as (ctx, _):
                record = await ctx.store.read_ledger(scoped_id)
            return await audit_async(cluster, [], records=[record], checks=("scrutiny", "ledger"))

        findings, stats = asyncio.run(scenario())
    finally:
        cluster.kazoo.delete(f"{cluster.ledgers_root}/scoped", recursive=True)
    # WQ 1 (no replication) is judged from metadata alone; nothing else could be known.
    assert {(f.category, f.ledger) for f in actionable(findings)} == {(Category.RISKY_QUORUM, scoped_id)}
    assert sum(stats["scrutiny"].ledgers_skipped.values()) == sum(stats["ledger"].ledgers_skipped.values()) == 1


def test_ledgers_asked_in_groups_get_the_verdicts_they_get_one_by_one(cluster: Cluster) -> None:
    """A scan asks the bookies of up to GROUP_LEDGERS ledgers together (entry lists for the scrutiny,
    reads for the ledger check); with max_concurrent_ledgers 1 it asks ledger by ledger. Both must find
    exactly the same, with the same requests: healthy striped ledgers, an ensemble change, and a bookie that
    never got its entries."""
    b = ids(cluster, 1, 2, 3, 4, 5)
    healthy = cluster.create_ledgers(20, ensemble=5, write_quorum=2, ack_quorum=2, entries=23, bookies=b)
    changed = cluster.write_with_ensemble_change(
        ensemble=3, write_quorum=2, ack_quorum=2, entries=30, change_after=11, bookies=b[:3], victim=b[1]
    )
    broken = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=30, bookies=b[:3])
    rewrite_ensemble(cluster, broken["ledgerId"], b[2], b[3])
    lids = [r["ledgerId"] for r in healthy] + [changed["ledgerId"], broken["ledgerId"]]

    def key(f: Finding) -> tuple:
        return (f.ledger, f.category, f.bookie, f.first_entry_id, f.last_entry_id, f.affected_count, f.confirmed)

    checks = ("scrutiny", "ledger")  # entry lists, and reads of each fragment's ends
    grouped, g_stats = audit(cluster, lids, checks=checks)
    single, s_stats = audit(cluster, lids, checks=checks, settings=settings_for(cluster, max_concurrent_ledgers=1))
    assert sorted(map(key, grouped)) == sorted(map(key, single))
    assert sorted({(f.category, f.ledger.ledger) for f in actionable(grouped)}) == [
        (Category.ENTRY_BELOW_ACK_QUORUM, broken["ledgerId"])
    ]
    for check in checks:
        assert g_stats[check].ledgers_checked == s_stats[check].ledgers_checked == len(lids)
        assert g_stats[check].bookie_requests == s_stats[check].bookie_requests


def test_informational_quorum_findings_are_reported_without_reading_anything_again(cluster: Cluster) -> None:
    """WQ == AQ (risky_quorum, informational, from the metadata alone) needs no confirmation by the bookies
    or the markers: nothing they say can change it. A clean scan of such ledgers makes no point read of a
    marker or of metadata (it once re-read both for each of them: a string compared to the enum with `is`),
    only one bulk read of their metadata versions, so a ledger deleted meanwhile is not reported."""
    from auditor.checks.build import audit_context
    from auditor.checks.per_ledger import CHECKS
    from auditor.checks.runner import CheckRun

    b = ids(cluster, 1, 2, 3)
    risky = cluster.create_ledgers(3, ensemble=3, write_quorum=2, ack_quorum=2, entries=12, bookies=b)
    clean = cluster.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, entries=12, bookies=b)
    lids = [LedgerId.of(r["ledgerId"]) for r in [*risky, clean]]

    async def scenario() -> tuple[list, object, list[str]]:
        found: list = []
        reads: list[str] = []
        async with audit_context(settings_for(cluster), one_shot=True) as (ctx, locations):
            recs = [r for r in await ctx.store.read_ledgers(lids) if r]
            for name in ("read_marker", "read_ledger", "ledger_versions"):
                real = getattr(ctx.store, name)

                async def counted(*a: object, _real=real, _name=name, **kw: object) -> object:  # type: ignore[no-untyped-def]
                    reads.append(_name)
                    return await _real(*a, **kw)

                setattr(ctx.store, name, counted)
            run = CheckRun(ctx, CHECKS["scrutiny"](ctx, locations), found.append)
            assert await run.begin()

            async def source():  # type: ignore[no-untyped-def]
                yield recs

            await run.scan(records=source())
            await run.drain_rechecks()
        return found, run.stats, reads

    found, stats, reads = asyncio.run(scenario())
    assert reads == ["ledger_versions"]  # one bulk read for the three risky ledgers
    assert sorted((f.category, f.ledger.ledger, f.confirmed) for f in found) == sorted(
        (Category.RISKY_QUORUM, r["ledgerId"], True) for r in risky
    )
    assert stats.ledgers_checked == 4  # type: ignore[attr-defined]


def test_a_long_run_lists_the_markers_again_and_leaves_ledgers_marked_meanwhile(cluster: Cluster) -> None:
    """A run that began before a ledger was marked (a bookie lost during a pass) lists the markers again
    once its listing is older than `marked_refresh_seconds`: the ledger's copies are then not read at all,
    it is left to the repair. Without the new listing the clean ledger is read and checked like any other."""
    from auditor.checks.build import audit_context
    from auditor.checks.context import RunStats
    from auditor.checks.per_ledger import CHECKS
    from auditor.checks.runner import CheckRun

    b = ids(cluster, 1, 2, 3)
    r = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=20, bookies=b)
    marker = f'replica: "{b[2]}"\nctime: {int(time.time() * 1000)}\n'.encode()

    async def scenario(refresh_s: float) -> RunStats:
        async with audit_context(settings_for(cluster), one_shot=True) as (ctx, locations):
            check = CHECKS["scrutiny"](ctx, locations)
            check.marked_refresh_seconds = refresh_s
            run = CheckRun(ctx, check, lambda f: None)
            assert await run.begin()
            cluster.kazoo.create(marker_path(cluster, r["ledgerId"]), marker, makepath=True)
            recs = [x for x in await ctx.store.read_ledgers([LedgerId.of(r["ledgerId"])]) if x]

            async def source():  # type: ignore[no-untyped-def]
                yield recs

            try:
                await run.scan(records=source())
                await run.drain_rechecks()
            finally:
                cluster.kazoo.delete(marker_path(cluster, r["ledgerId"]))
        return run.stats

    listed_again = asyncio.run(scenario(0.0))
    assert listed_again.ledgers_skipped["underreplicated"] == 1
    assert sum(listed_again.bookie_requests.values()) == 0
    once = asyncio.run(scenario(3600.0))
    assert once.ledgers_skipped.get("underreplicated", 0) == 0
    assert once.ledgers_checked == 1 and sum(once.bookie_requests.values()) > 0
