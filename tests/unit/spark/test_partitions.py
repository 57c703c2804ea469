"""The sweep's pure parts: the id-space partitioner, the leaf-directory walk, the driver's aggregation,
master resolution and settings shipping. No JVM, no cluster."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from typer.testing import CliRunner

from auditor.cli import app
from auditor.durability.findings import Category, Finding, FindingSummary, Severity
from auditor.durability.ids import MAX_ID, LedgerId
from auditor.metadata.codecs.paths import HYBRID_SPLIT, LedgerPaths, walk_leaf_directories
from auditor.metadata.location import LedgerManager
from auditor.processes.engine import merge_run_stats
from auditor.processes.partitions import (
    ID_SPACE_END,
    IdPartition,
    Span,
    check_cover,
    clip_spans,
    heavy_spans,
    id_at,
    id_value,
    plan_partitions,
)
from auditor.processes.worker import FINDING, STATS, settings_from_wire, settings_to_wire
from auditor.settings import Settings
from auditor.spark.output import aggregate, findings_jsonl
from auditor.spark.session import parse_conf, resolve_master, spark_defaults


def L(n: int, scope: int = 0) -> LedgerId:
    return LedgerId(scope, n)


def leaf(first: int, ledgers: int = 0, scope: int = 0, ids: Sequence[int] | None = None, size: int = 10_000) -> Span:
    return Span(
        L(first, scope),
        L(first + size - 1, scope),
        ledgers,
        f"/ledgers/{scope}/{first}",
        tuple(L(i, scope) for i in ids) if ids is not None else None,
    )


def owner(parts: list[IdPartition], lid: LedgerId) -> list[int]:
    return [p.index for p in parts if p.contains(lid)]


# ------------------------------------------------------------------------------------------ numbering


def test_dense_numbering_round_trips_and_orders_like_ledger_ids() -> None:
    for lid in (L(0), L(MAX_ID), L(0, 1), L(5, 7), L(MAX_ID, MAX_ID)):
        assert id_at(id_value(lid)) == lid
    assert id_value(L(MAX_ID)) + 1 == id_value(L(0, 1))  # no gap between scope 0 and scope 1
    assert id_value(L(MAX_ID, MAX_ID)) + 1 == ID_SPACE_END
    with pytest.raises(ValueError):
        id_at(ID_SPACE_END)


# ------------------------------------------------------------------------------------------ the planner


def test_no_directories_gives_one_partition_over_everything() -> None:
    parts = plan_partitions([], 8)
    assert [(p.start, p.end) for p in parts] == [(0, ID_SPACE_END)]
    assert parts[0].end_id is None and parts[0].start_id == L(0)
    check_cover(parts)


def test_equal_directories_are_grouped_evenly_and_consecutively() -> None:
    spans = [leaf(i * 10_000, 1000) for i in range(12)]
    parts = plan_partitions(spans, 4)
    check_cover(parts)
    assert len(parts) == 4
    assert [len(p.directories) for p in parts] == [3, 3, 3, 3]
    # each directory's whole range is in exactly one partition
    for s in spans:
        assert owner(parts, s.first) == owner(parts, s.last)
    assert parts[1].start_id == L(30_000) and parts[3].end_id is None


def test_heavy_directory_is_cut_at_its_real_quantiles() -> None:
    ids = list(range(100))  # a small cluster: every ledger in 00/0000, ids 0..99
    parts = plan_partitions([leaf(0, 100, ids=ids)], 4)
    check_cover(parts)
    assert len(parts) == 4
    counts = [sum(1 for i in ids if parts[k].contains(L(i))) for k in range(4)]
    assert counts == [25, 25, 25, 25]
    assert [p.start_id for p in parts[1:]] == [L(25), L(50), L(75)]


def test_heavy_directory_without_ids_is_cut_evenly_by_id() -> None:
    parts = plan_partitions([leaf(0, 10_000)], 4)
    check_cover(parts)
    assert [p.start_id.ledger for p in parts] == [0, 2500, 5000, 7500]


def test_empty_or_single_ledger_directories_are_never_cut() -> None:
    assert len(plan_partitions([leaf(0, 0)], 8)) == 1
    assert len(plan_partitions([leaf(0, 1, ids=[7])], 8)) == 1
    assert heavy_spans([leaf(0, 1)], 8) == []


def test_legacy_long_and_scoped_directories_land_in_their_own_partitions() -> None:
    legacy = leaf(0, 50)
    long_low = Span(L(HYBRID_SPLIT), L(2147489999), 50, "/ledgers/000/0000/0021/4748")
    long_high = Span(L(10**15), L(10**15 + 9999), 50, "/ledgers/000/1000/0000/0000")
    scoped = Span(L(0, 3), L(9999, 3), 50, "/ledgers/scoped/.../0000")
    parts = plan_partitions([legacy, long_low, long_high, scoped], 4)
    check_cover(parts)
    assert [owner(parts, s.first) for s in (legacy, long_low, long_high, scoped)] == [[0], [1], [2], [3]]
    assert owner(parts, L(MAX_ID, MAX_ID)) == [3]
    assert owner(parts, L(HYBRID_SPLIT - 1)) == [0]  # the gap up to the next directory belongs before it


def test_overlapping_spans_are_refused() -> None:
    with pytest.raises(ValueError, match="overlaps"):
        plan_partitions([leaf(0, 1), Span(L(5), L(20_000), 1, "x")], 2)
    with pytest.raises(ValueError):
        plan_partitions([leaf(0, 1)], 0)


def test_restricted_range_is_covered_exactly_and_directories_are_clipped() -> None:
    spans = [leaf(i * 10_000, 100, ids=range(i * 10_000, i * 10_000 + 100)) for i in range(5)]
    lo, hi = L(15_000), L(40_050)
    clipped = clip_spans(spans, lo, hi)
    assert [s.first for s in clipped] == [L(15_000), L(20_000), L(30_000), L(40_000)]
    assert [s.ledgers for s in clipped] == [0, 100, 100, 50]
    parts = plan_partitions(spans, 3, lo=lo, hi=hi)
    check_cover(parts, lo, hi)
    assert parts[0].start_id == lo and parts[-1].end_id == hi


def test_check_cover_catches_gaps_overlaps_and_short_covers() -> None:
    a, b = IdPartition(0, 0, 100), IdPartition(1, 100, ID_SPACE_END)
    check_cover([a, b])
    with pytest.raises(ValueError, match="gap"):
        check_cover([a, IdPartition(1, 101, ID_SPACE_END)])
    with pytest.raises(ValueError, match="overlap"):
        check_cover([IdPartition(0, 0, 150), b])
    with pytest.raises(ValueError, match="cover"):
        check_cover([a])


def test_partition_wire_round_trip_and_dict() -> None:
    p = IdPartition(3, id_value(L(7, 2)), id_value(L(0, 3)), 12.5)
    assert IdPartition.from_wire(p.to_wire()) == p
    assert p.to_dict() == {"index": 3, "start": "2:7", "end": "3:0", "weight": 12.5, "leafDirectories": 0}


spans_strategy = st.lists(
    st.tuples(st.integers(0, 2000), st.integers(1, 30), st.integers(0, 20_000), st.integers(0, 2)),
    min_size=0,
    max_size=25,
)


@hsettings(max_examples=300, deadline=None)
@given(spans_strategy, st.integers(1, 40), st.booleans())
def test_partitions_always_cover_the_space_without_overlap(raw: list, n: int, with_ids: bool) -> None:
    spans, cursor = [], 0
    for gap, width, ledgers, scope_step in raw:
        first = cursor + gap
        if scope_step == 2:  # sometimes jump to the next scope (scoped ids)
            first = id_value(L(gap, id_at(cursor).scope + 1))
        last = first + width * 100 - 1
        ids = (
            tuple(id_at(v) for v in range(first, last + 1, max(1, (last - first + 1) // max(1, ledgers))))[:ledgers]
            if with_ids
            else None
        )
        spans.append(Span(id_at(first), id_at(last), ledgers if ids is None else len(ids), f"d{len(spans)}", ids))
        cursor = last + 1
    parts = plan_partitions(spans, n)
    check_cover(parts)
    assert 1 <= len(parts) <= n
    for s in spans:
        assert len(owner(parts, s.first)) == 1 and len(owner(parts, s.last)) == 1
        for i in s.ids or ():
            assert len(owner(parts, i)) == 1


# ------------------------------------------------------------------------------------------ leaf-directory walk


class FakeTree:
    """A ZooKeeper tree as paths; records every directory listed."""

    def __init__(self, ledger_paths: list[str], extra: Sequence[str] = ()) -> None:
        self.children: dict[str, set[str]] = {}
        for path in [*ledger_paths, *extra]:
            parts = path.strip("/").split("/")
            for i in range(len(parts)):
                self.children.setdefault("/" + "/".join(parts[:i]) if i else "/", set()).add(parts[i])
        self.listed: list[str] = []

    async def __call__(self, path: str) -> list[str] | None:
        self.listed.append(path)
        got = self.children.get(path)
        return sorted(got) if got is not None else None


def walk(paths: LedgerPaths, tree: FakeTree) -> list:
    async def go() -> list:
        return [d async for d in walk_leaf_directories(paths, tree)]

    return asyncio.run(go())


def test_hybrid_walk_finds_legacy_long_and_scoped_leaves_without_listing_them() -> None:
    paths = LedgerPaths("/ledgers", LedgerManager.HIERARCHICAL)
    ids = [L(0), L(5), L(12_345), L(HYBRID_SPLIT - 1), L(HYBRID_SPLIT), L(2**31 + 5), L(10**15), L(7, 3)]
    tree = FakeTree(
        [paths.path(i) for i in ids], extra=["/ledgers/LAYOUT", "/ledgers/available/x", "/ledgers/idgen-long/x"]
    )
    dirs = walk(paths, tree)
    leaf_dirs = {paths.path(i).rsplit("/", 1)[0] for i in ids}
    assert [d.path for d in dirs] == [
        "/ledgers/00/0000",
        "/ledgers/00/0001",
        "/ledgers/21/4748",
        "/ledgers/000/0000/0021/4748",
        "/ledgers/000/1000/0000/0000",
        "/ledgers/scoped/000/0000/0000/0000/0003/000/0000/0000/0000",
    ]
    assert set(d.path for d in dirs) == leaf_dirs
    assert not set(tree.listed) & leaf_dirs  # never listed a leaf directory
    by_path = {d.path: d for d in dirs}
    assert (by_path["/ledgers/00/0000"].first, by_path["/ledgers/00/0000"].last) == (L(0), L(9999))
    # the hybrid split is respected: the legacy 21/4748 stops below it, the long one starts at it
    assert by_path["/ledgers/21/4748"].last == L(HYBRID_SPLIT - 1)
    assert by_path["/ledgers/000/0000/0021/4748"].first == L(HYBRID_SPLIT)
    scoped = by_path["/ledgers/scoped/000/0000/0000/0000/0003/000/0000/0000/0000"]
    assert (scoped.first, scoped.last) == (L(0, 3), L(9999, 3))
    for i in ids:  # every ledger is inside the directory that holds it
        d = by_path[paths.path(i).rsplit("/", 1)[0]]
        assert d.first <= i <= d.last
    spans = [Span(d.first, d.last, 1, d.path) for d in dirs]
    check_cover(plan_partitions(spans, 3))


def test_long_and_flat_layouts() -> None:
    long_paths = LedgerPaths("/bk", LedgerManager.LONG_HIERARCHICAL)
    tree = FakeTree([long_paths.path(i) for i in (L(1), L(MAX_ID))])
    dirs = walk(long_paths, tree)
    assert [d.path for d in dirs] == ["/bk/000/0000/0000/0000", "/bk/922/3372/0368/5477"]
    assert dirs[-1].last == L(MAX_ID)  # clipped to the largest id
    flat = LedgerPaths("/bk", LedgerManager.FLAT)
    tree = FakeTree([flat.path(i) for i in (L(1), L(2))])
    dirs = walk(flat, tree)
    assert dirs[0].path == "/bk" and dirs[0].first == L(0) and dirs[0].last == L(MAX_ID)
    assert "/bk" not in tree.listed  # the flat root holds every ledger: never listed for planning


# ------------------------------------------------------------------------------------------ aggregation


def findings_fixture() -> list[Finding]:
    a = Finding.of(Category.ENTRY_BELOW_ACK_QUORUM, "a", ledger=L(1), segment_index=0, bookie="b1", confirmed=True)
    b = Finding.of(Category.RISKY_QUORUM, "b", ledger=L(2), severity=Severity.INFO)
    c = Finding.of(Category.RISKY_QUORUM, "c", ledger=L(9, 4), severity=Severity.INFO)
    dup = Finding.of(Category.ENTRY_BELOW_ACK_QUORUM, "a again", ledger=L(1), segment_index=0, bookie="b1")
    return [a, b, c, dup]


def rows_for(findings: list[Finding], partition: int = 0, check: str = "scrutiny", start: int = 0) -> list:
    return [
        (FINDING, partition, check, start + i, json.dumps({"key": list(f.dedup_key()), "finding": f.to_log_dict()}))
        for i, f in enumerate(findings)
    ]


def test_row_summary_matches_finding_summary() -> None:
    fs = findings_fixture()
    expected = FindingSummary()
    expected.extend(fs)
    got, _, _ = aggregate(rows_for(fs), ["scrutiny"])
    assert got.as_dict() == expected.as_dict()
    assert [f["message"] for f in got.findings] == [f.message for f in expected.findings]
    assert [f["check"] for f in got.findings] == ["scrutiny"] * 3
    assert len(got.actionable) == 1
    lines = findings_jsonl(got.findings).splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["qualifiedName"] == L(1).qualified_name


def test_first_sighting_wins_in_partition_then_row_order() -> None:
    first = Finding.of(Category.ENTRY_BELOW_WRITE_QUORUM, "from scrutiny", ledger=L(1), segment_index=0)
    later = Finding.of(Category.ENTRY_BELOW_WRITE_QUORUM, "from ledger check", ledger=L(1), segment_index=0)
    rows = rows_for([later], partition=0, check="ledger", start=5) + rows_for([first], partition=0, start=1)
    got, _, _ = aggregate(list(reversed(rows)), ["scrutiny", "ledger"])
    assert [f["message"] for f in got.findings] == ["from scrutiny"] and got.duplicates == 1


def test_run_stats_are_summed_over_partitions() -> None:
    a = {
        "durationSeconds": 1.5,
        "ledgersSeen": 3,
        "ledgersChecked": 2,
        "ledgersSkipped": {"open": 1},
        "ledgersRechecked": 0,
        "metadataUnreadable": 0,
        "bookieRequests": 4,
        "bookieRequestsByBookie": {"x": 4},
        "bookieUnknownByBookie": {},
        "reanalysed": 0,
    }
    b = {**a, "ledgersSkipped": {"open": 2, "closed": 1}, "bookieRequestsByBookie": {"x": 1, "y": 2}}
    merged = merge_run_stats("open", [a, b])
    assert merged["partitions"] == 2 and merged["ledgersSeen"] == 6 and merged["durationSeconds"] == 3.0
    assert merged["ledgersSkipped"] == {"open": 3, "closed": 1}
    assert merged["bookieRequestsByBookie"] == {"x": 5, "y": 2}
    rows = [(STATS, i, "open", 0, json.dumps({"stats": s, "ledgersVisited": 3})) for i, s in enumerate((a, b))]
    _, per_part, runs = aggregate(rows, ["open"])
    assert sorted(per_part) == [0, 1] and runs[0]["ledgersVisited"] == 6 and runs[0]["ledgersChecked"] == 4


# ------------------------------------------------------------------------------------------ session, settings, CLI


def test_master_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    assert resolve_master("spark://m:7077", known={"spark.master": "yarn"}) == ("spark://m:7077", "spark://m:7077")
    assert resolve_master(None, known={"spark.master": "yarn"}) == (None, "yarn")  # spark-submit / defaults decide
    assert resolve_master(None, known={}) == ("local[*]", "local[*]")
    monkeypatch.setenv("SPARK_MASTER", "local[3]")
    assert resolve_master(None, known={"spark.master": "yarn"}) == ("local[3]", "local[3]")


def test_spark_defaults_file_and_conf_pairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "spark-defaults.conf").write_text(
        "# comment\nspark.master   spark://h:7077\nspark.driver.memory=2g\n\nspark.ui.enabled : true\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert spark_defaults() == {
        "spark.master": "spark://h:7077",
        "spark.driver.memory": "2g",
        "spark.ui.enabled": "true",
    }
    assert parse_conf(["a=b", " spark.x = y=z "]) == {"a": "b", "spark.x": "y=z"}
    with pytest.raises(ValueError):
        parse_conf(["novalue"])


def test_settings_travel_as_a_plain_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Settings(
        metadata_service_uri="zk+hierarchical://127.0.0.1:1/ledgers",
        bookie_client={"requests_per_second": 7},
        recheck={"delays_seconds": [0.5], "attempts": 2},
    )
    wire = settings_to_wire(s)
    json.dumps(wire)  # plain JSON types only
    monkeypatch.setenv("BKAUDIT_BOOKIE_CLIENT__REQUESTS_PER_SECOND", "999")  # an executor's environment
    back = settings_from_wire(wire)
    assert back.model_dump() == s.model_dump()


def test_sweep_cli_rejects_bad_options_before_starting_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.upper().startswith("BKAUDIT_"):
            monkeypatch.delenv(key)
    uri = "zk+hierarchical://127.0.0.1:2181/ledgers"
    runner = CliRunner()
    r = runner.invoke(app, ["sweep", "--metadata-service-uri", uri, "--format", "xml"])
    assert r.exit_code == 2 and "--format" in r.output
    r = runner.invoke(app, ["sweep", "--metadata-service-uri", uri, "--conf", "oops"])
    assert r.exit_code == 2 and "key=value" in r.output
    r = runner.invoke(app, ["sweep", "--metadata-service-uri", uri, "--start", "x:y"])
    assert r.exit_code == 2 and "cannot parse ledger id" in r.output
    r = runner.invoke(app, ["sweep"])
    assert r.exit_code == 2 and "metadata_service_uri" in r.output


def test_error_line_picks_the_executor_exception() -> None:
    from auditor.spark.sweep import _error_line

    text = (
        "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.runJob.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed\n"
        'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
        "auditor.metadata.errors.MetadataConfigError: rack file /r.yaml: cannot read (No such file)\n\n"
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(x.scala:1)\n"
    )
    assert (
        _error_line(RuntimeError(text))
        == "auditor.metadata.errors.MetadataConfigError: rack file /r.yaml: cannot read (No such file)"
    )


def test_sweep_rejects_a_bad_executor_log_level_before_starting_spark(capsys: pytest.CaptureFixture[str]) -> None:
    from auditor.spark.sweep import SweepOptions, sweep_main

    s = Settings(metadata_service_uri="zk+hierarchical://127.0.0.1:1/ledgers")
    assert sweep_main(s, SweepOptions(executor_log_level="loud")) == 2
    assert sweep_main(s, SweepOptions(checks=["nope"])) == 2
    err = capsys.readouterr().err
    assert "--executor-log-level" in err and "unknown check 'nope'" in err
    assert all(line.startswith("error: ") for line in err.splitlines()), err  # the CLI's one error prefix


def test_sweep_progress_line_has_ledgers_rate_and_eta() -> None:
    import io

    from auditor.processes.partitions import IdPartition
    from auditor.spark.sweep import PartitionReport, SweepProgress, print_progress

    err = io.StringIO()
    show = print_progress(err)
    report = PartitionReport(IdPartition(3, 0, 100), started=10.0, finished=12.5, findings=1, ledgers=400)
    show(SweepProgress(2, 8, report, ledgers_done=1000, ledgers_estimate=4000, seconds=10.0))
    show(SweepProgress(3, 8, PartitionReport(IdPartition(4, 100, 200), 0.0, 1.0, error="boom"), 0, 4000, 0.0))
    show(SweepProgress(8, 8, report, ledgers_done=4100, ledgers_estimate=4000, seconds=41.0))
    first, failed, last = err.getvalue().splitlines()
    assert first.startswith("sweep: 2/8 partitions, 1000 of ~4000 ledgers, 100/s, ETA 30s (partition 3 ")
    assert first.endswith(": 400 ledgers, 1 finding row(s), 2.5s)")
    assert "ETA ?" in failed and "FAILED: boom" in failed
    assert last.startswith("sweep: 8/8 partitions, 4100 of ~4000 ledgers, 100/s, ETA 0s")
