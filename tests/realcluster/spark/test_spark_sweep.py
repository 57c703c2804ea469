"""The Spark sweep against the real cluster, on `local[2]` with several partitions.

Ledgers are written by the real Java client in four leaf directories (two legacy, two long-path above
2^31); one has a planted fault (its ensemble names a bookie that never got the entries). Expected
numbers come from what the tool wrote (checks_util), and the sweep must agree with the one-shot checks
on the same ledgers. Other tests share the cluster and leave ledgers (some broken) of their own, so the
assertions are about our ledgers, plus coverage of everything that is there (each ledger exactly once).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from auditor.cli import app
from auditor.durability.findings import Category
from auditor.durability.ids import LedgerId
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.processes.partitions import check_cover
from auditor.processes.plan import plan_with_store
from auditor.spark.session import get_session
from auditor.spark.sweep import SweepOptions, SweepResult, run_sweep, write_outputs
from devcluster import zkwriters
from devcluster.checks_util import copies_without, expected_entries, ledger_path, settings_for
from devcluster.cluster import Cluster
from devcluster.metadata_helpers import leader_of
from tests.realcluster.spark_util import (
    CHECKS,
    FAULTY,
    LEGACY_A,
    LONG_A,
    RANGE,
    assert_agrees_with_one_shot,
    assert_covers_every_ledger_once,
    leaf_dir,
    planted_ledgers,
    qn,
    traced,
)

pytestmark = pytest.mark.realcluster


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session, created = get_session("local[2]")
    try:
        yield session
    finally:
        if created:
            session.stop()


@pytest.fixture(scope="module")
def planted(cluster: Cluster) -> dict[str, Any]:
    return planted_ledgers(cluster)


@pytest.fixture(scope="module")
def full(cluster: Cluster, spark: Any, planted: dict[str, Any]) -> SweepResult:
    progress: list[tuple[int, int]] = []
    result = run_sweep(
        spark,
        settings_for(cluster),
        SweepOptions(checks=CHECKS, partitions=6, trace_ledgers=True),
        progress=lambda p: progress.append((p.partitions_done, p.partitions_total)),
    )
    n = len(result.plan.partitions)
    assert progress == [(i, n) for i in range(1, n + 1)]
    print(
        f"\nsweep: {json.dumps(result.sweep_dict()['plan'])} "
        f"ledgers visited per check {[r['ledgersVisited'] for r in result.runs]}, {result.seconds:.1f}s"
    )
    return result


# ----------------------------------------------------------------------------------------------- tests


def test_full_sweep_covers_every_ledger_exactly_once(
    cluster: Cluster, full: SweepResult, planted: dict[str, Any]
) -> None:
    assert full.failed == [] and full.master == "local[2]"
    assert 2 <= len(full.plan.partitions) <= 6
    assert_covers_every_ledger_once(cluster, full, planted)


def test_ledgers_in_different_leaf_directories_land_in_the_planned_partitions(
    cluster: Cluster, full: SweepResult, planted: dict[str, Any]
) -> None:
    parts = full.plan.partitions
    for r in planted["dirs"]:
        lid = LedgerId(0, r["ledgerId"])
        owners = [p for p in parts if p.contains(lid)]
        assert len(owners) == 1
        # The planner saw this leaf directory and put it in the partition that holds the id.
        assert leaf_dir(cluster, r["ledgerId"]) in owners[0].directories
        assert [i for i, name in traced(full, "scrutiny") if name == lid.qualified_name] == [owners[0].index]
    long_ids = [r["ledgerId"] for r in planted["dirs"] if r["ledgerId"] >= 2**31]
    shift = planted["shift"]
    assert long_ids == [LONG_A + shift, FAULTY + shift] and all(
        len(ledger_path(cluster, i).split("/")) == 7 for i in long_ids
    )


def test_planted_fault_is_found_exactly(full: SweepResult, planted: dict[str, Any]) -> None:
    r, lost = planted["faulty"], planted["fault_bookie"]
    copies = copies_without(r, {lost})
    worst = min(copies.values())
    affected = sorted(e for e, c in copies.items() if c == worst)
    assert worst == 1
    mine = [f for f in full.summary.findings if f.get("ledgerId") in planted["ids"]]
    got = [f for f in mine if f["severity"] != "info"]
    scrutiny = [f for f in got if f["check"] == "scrutiny"]
    assert [(f["category"], f["ledgerId"]) for f in scrutiny] == [
        (Category.ENTRY_BELOW_ACK_QUORUM.value, r["ledgerId"])
    ], got
    f = scrutiny[0]
    assert f["confirmed"] is True and f["affectedEntries"] == len(affected) == len(expected_entries(r, lost))
    assert (f["firstEntryId"], f["lastEntryId"]) == (affected[0], affected[-1])
    # Nothing actionable on our healthy ledgers, from any check.
    assert {f["ledgerId"] for f in got} == {r["ledgerId"]}
    assert full.exit_code == 1


def test_sweep_agrees_with_the_one_shot_checks(cluster: Cluster, full: SweepResult, planted: dict[str, Any]) -> None:
    assert_agrees_with_one_shot(cluster, full, planted)


def test_restricted_sweep_one_partition_per_leaf_directory_one_at_a_time(
    cluster: Cluster, spark: Any, planted: dict[str, Any]
) -> None:
    start, end = RANGE
    result = run_sweep(
        spark,
        settings_for(cluster),
        SweepOptions(
            checks=["scrutiny"], partitions=4, max_concurrent_partitions=1, start=start, end=end, trace_ledgers=True
        ),
    )
    parts = result.plan.partitions
    check_cover(parts, start, end)
    assert len(parts) == 4 and result.failed == []
    # Four leaf directories with one ledger each: one partition each, in id order.
    for part, r in zip(parts, planted["dirs"]):
        assert part.directories == (leaf_dir(cluster, r["ledgerId"]),)
        assert result.partition_stats[part.index].ledgers("scrutiny") == [qn(r["ledgerId"])]
    # max_concurrent_partitions=1: the partitions ran one after another.
    windows = sorted((r.started, r.finished) for r in result.reports)
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:]))
    assert [f["ledgerId"] for f in result.summary.actionable] == [planted["faulty"]["ledgerId"]]
    assert result.summary.as_dict()["byCategory"]["entry_below_ack_quorum"] == 1


def test_outputs_local_path_and_hadoop_uri(full: SweepResult, spark: Any, tmp_path: Path) -> None:
    for target, base in ((str(tmp_path / "plain"), tmp_path / "plain"), (f"file://{tmp_path}/uri", tmp_path / "uri")):
        write_outputs(full, target, spark)
        lines = (base / "findings.jsonl").read_text().splitlines()
        assert len(lines) == len(full.summary.findings)
        assert [json.loads(x)["category"] for x in lines] == [f["category"] for f in full.summary.findings]
        doc = json.loads((base / "summary.json").read_text())["summary"]
        assert doc["findingCount"] == len(lines) and doc["byCategory"] == full.summary.as_dict()["byCategory"]
        assert doc["sweep"]["partitionsDone"] == len(full.plan.partitions)
        assert [c["check"] for c in doc["checks"]] == CHECKS


def test_cli_sweep_exit_codes_and_json(
    cluster: Cluster, spark: Any, planted: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("BKAUDIT_CONFIG_FILE", "BKAUDIT_METADATA_SERVICE_URI"):
        monkeypatch.delenv(key, raising=False)
    faulty = planted["faulty"]["ledgerId"]
    runner = CliRunner()
    base = [
        "sweep",
        "--metadata-service-uri",
        cluster.metadata_service_uri,
        "--master",
        "local[2]",
        "--checks",
        "scrutiny",
        "--format",
        "json",
        "--log-level",
        "warning",
    ]
    r = runner.invoke(
        app,
        [
            *base,
            "--start",
            str(faulty),
            "--end",
            str(faulty + 1),
            "--partitions",
            "2",
            "--output",
            str(tmp_path / "out"),
        ],
    )
    assert r.exit_code == 1, r.output
    docs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert [(d["category"], d["ledgerId"]) for d in docs[:-1] if d["severity"] != "info"] == [
        (Category.ENTRY_BELOW_ACK_QUORUM.value, faulty)
    ]
    summary = docs[-1]["summary"]
    assert summary["byCategory"]["entry_below_ack_quorum"] == 1 and summary["sweep"]["partitionsTotal"] == 1
    assert (tmp_path / "out" / "findings.jsonl").is_file()
    healthy = planted["dirs"][0]["ledgerId"]
    r = runner.invoke(app, [*base, "--start", str(healthy), "--end", str(healthy + 1)])
    assert r.exit_code == 0, r.output  # only the informational WQ == AQ note


def test_failed_partitions_are_reported_with_their_ranges(cluster: Cluster, spark: Any, tmp_path: Path) -> None:
    # A rack file the driver has but the executors cannot read (here: gone before the tasks run).
    racks = tmp_path / "racks.yaml"
    racks.write_text(f"{cluster.bookie(1).bookie_id}: /rack-a\n")
    settings = settings_for(cluster, racks={"source": "file", "file": str(racks)})
    racks.unlink()
    result = run_sweep(spark, settings, SweepOptions(checks=["scrutiny"], partitions=4, start=RANGE[0], end=RANGE[1]))
    assert len(result.reports) == 4 and len(result.failed) == 4
    for r in result.failed:
        assert "MetadataConfigError" in r.error and "cannot read" in r.error, r.error
    doc = result.summary_dict()
    assert [p["start"] for p in doc["sweep"]["failedPartitions"]] == [
        p.to_dict()["start"] for p in result.plan.partitions
    ]
    assert doc["sweep"]["partitionsDone"] == 0 and doc["findingCount"] == 0
    assert result.exit_code == 2


def test_plan_over_legacy_long_and_scoped_trees_lists_every_ledger_once(
    cluster: Cluster, planted: dict[str, Any]
) -> None:
    """Planning only (no checks: the bookie protocol has no scoped ids): scoped ledgers written with our
    metadata extension get leaf directories and partitions of their own, and listing each partition's
    range yields every ledger of the cluster exactly once."""
    scoped_root = f"{cluster.ledgers_root}/scoped"
    had_scoped = cluster.kazoo.exists(scoped_root) is not None
    legacy_a = LEGACY_A + planted["shift"]
    scoped = [LedgerId(7, legacy_a), LedgerId(7, 2**40 + 11)]

    async def scenario() -> None:
        from dataclasses import replace

        store = await ZooKeeperMetadataStore.connect(cluster.metadata_service_uri)
        election = await leader_of(store)
        try:
            md = (await store.read_ledger(legacy_a)).metadata
            for lid in scoped:
                await zkwriters.write_ledger_metadata(
                    store, replace(md, ledger_id=lid), election.guard, expected_version=None
                )
            plan = await plan_with_store(store, 8)
            parts = plan.partitions
            check_cover(parts)
            everything = [i for b in [b async for b in store.list_ledgers()] for i in b.ledger_ids]
            per_part = []
            for p in parts:
                got = [i for b in [b async for b in store.list_ledgers(p.start_id, p.end_id)] for i in b.ledger_ids]
                assert all(p.contains(i) for i in got)
                per_part.append(got)
            assert sorted(i for got in per_part for i in got) == sorted(everything)  # each exactly once
            for lid in [*scoped, *(LedgerId(0, r["ledgerId"]) for r in planted["dirs"])]:
                (owner,) = [p for p in parts if p.contains(lid)]
                assert store.paths.path(lid).rsplit("/", 1)[0] in owner.directories
            scoped_dirs = [s for s in plan.spans if s.first.scope == 7]
            assert len(scoped_dirs) == 2 and all(s.directory.startswith(scoped_root + "/") for s in scoped_dirs)
            assert plan.leaf_directories == len(plan.spans)
        finally:
            for lid in scoped:
                cluster.kazoo.delete(store.paths.path(lid))
            await election.close()
            await store.close()

    try:
        asyncio.run(scenario())
    finally:
        if not had_scoped:
            cluster.kazoo.delete(scoped_root, recursive=True)
