"""Findings: vocabulary, severities, log rendering, de-duplication, summaries, Pulsar context."""

from __future__ import annotations

import dataclasses
import json
import tracemalloc

import pytest

from auditor.durability.findings import (
    SEVERITY_OF,
    Category,
    Finding,
    FindingSummary,
    Method,
    Severity,
    pulsar_context,
    summarize,
    topic_of_managed_ledger,
)
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.ranges import RangeSet
from auditor.durability.striped import StripedSet

PULSAR_DATA = {
    "application": b"pulsar",
    "component": b"managed-ledger",
    "pulsar/managed-ledger": b"public/default/persistent/orders",
}


def md(custom: dict[str, bytes] | None = None, lid: LedgerId = LedgerId.of(42)) -> LedgerMetadata:
    return LedgerMetadata(
        lid, 3, 2, 2, LedgerState.CLOSED, 99, 0, (Segment(0, ("a", "b", "c")),), custom_metadata=custom or {}
    )


def test_vocabulary_is_stable() -> None:
    assert {c.value for c in Category} == {
        "entry_no_replica",
        "entry_below_ack_quorum",
        "entry_below_write_quorum",
        "placement_violation",
        "placement_soft",
        "underreplicated_too_long",
        "bookie_unreachable",
        "bookie_reincarnated",
        "digest_mismatch",
        "truncation_risk",
        "risky_quorum",
        "metadata_unreadable",
        "overreplicated",
        "repair_blocked",
        "ledger_missing",
        "orphan_ledger",
    }
    assert set(SEVERITY_OF) == set(Category)
    assert SEVERITY_OF[Category.ENTRY_NO_REPLICA] is Severity.CRITICAL
    assert SEVERITY_OF[Category.TRUNCATION_RISK] is Severity.CRITICAL
    assert SEVERITY_OF[Category.OVERREPLICATED] is Severity.INFO
    assert SEVERITY_OF[Category.PLACEMENT_SOFT] is Severity.INFO
    assert Severity.CRITICAL.rank < Severity.MAJOR.rank < Severity.MINOR.rank < Severity.INFO.rank


def test_finding_of_fills_ledger_state_severity_and_affected() -> None:
    affected = StripedSet.striped(0, 99, 5, [0, 1])
    f = Finding.of(
        Category.ENTRY_BELOW_WRITE_QUORUM,
        "msg",
        metadata=md(PULSAR_DATA),
        affected=affected,
        text_limit=2,
        segment_index=0,
        first_entry_id=0,
        last_entry_id=99,
        ensemble=["a", "b", "c"],
        unknown_bookies=["c", "b", "c"],
        detail={"least_copies": 1},
    )
    assert f.ledger == LedgerId.of(42) and f.ledger_state is LedgerState.CLOSED
    assert f.severity is Severity.MINOR and f.method == "entry-list" and not f.confirmed
    assert f.affected_count == 40 and f.affected_ranges == "0-1,5-6,...(+18 runs)"
    assert f.unknown_bookies == ("b", "c") and f.ensemble == ("a", "b", "c")
    assert f.pulsar is not None and f.pulsar["topic"] == "persistent://public/default/orders"
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.message = "x"  # type: ignore[misc]
    assert f.confirm().confirmed and not f.confirmed
    hash(f)


def test_severity_override_and_rangeset_affected() -> None:
    f = Finding.of(
        Category.RISKY_QUORUM,
        "m",
        ledger=LedgerId.of(1),
        severity=Severity.MAJOR,
        affected=RangeSet.of([(3, 5), (9, 9)]),
        method=Method.METADATA,
    )
    assert f.severity is Severity.MAJOR and f.affected_count == 4 and f.affected_ranges == "3-5,9"
    assert f.method == "metadata"


def test_to_log_dict_camel_case_and_json() -> None:
    lid = LedgerId(7, 2**40)
    f = Finding.of(
        Category.DIGEST_MISMATCH,
        "bad digest",
        metadata=md(PULSAR_DATA, lid),
        bookie="b:3181",
        entry_id=17,
        segment_index=1,
        first_entry_id=10,
        last_entry_id=20,
        method=Method.READ,
        detail={"expected_digest": "ab", "per_bookie": {"some_key": [1, 2]}},
    )
    d = f.to_log_dict()
    assert d["ledgerId"] == 2**40 and d["scopeId"] == 7 and d["qualifiedName"] == lid.qualified_name
    assert len(d["qualifiedName"]) == 32
    assert d["bookieId"] == "b:3181" and d["entryId"] == 17 and d["segmentIndex"] == 1
    assert d["firstEntryId"] == 10 and d["lastEntryId"] == 20 and d["ledgerState"] == "CLOSED"
    assert d["category"] == "digest_mismatch" and d["severity"] == "critical" and d["method"] == "read"
    assert d["detail"] == {"expectedDigest": "ab", "perBookie": {"someKey": [1, 2]}}
    assert d["pulsar"]["managedLedger"] == "public/default/persistent/orders"
    assert json.loads(f.to_json()) == json.loads(json.dumps(d))
    plain = Finding.of(Category.BOOKIE_UNREACHABLE, "down", bookie="x").to_log_dict()
    assert "ledgerId" not in plain and "scopeId" not in plain and plain["bookieId"] == "x"
    assert "scopeId" not in Finding.of(Category.OVERREPLICATED, "m", metadata=md()).to_log_dict()


def test_dedup_key_ignores_counts_and_method() -> None:
    a = Finding.of(Category.ENTRY_NO_REPLICA, "a", metadata=md(), affected=RangeSet.span(0, 3))
    b = Finding.of(Category.ENTRY_NO_REPLICA, "b", metadata=md(), affected=RangeSet.span(0, 9), method=Method.READ)
    c = Finding.of(Category.ENTRY_NO_REPLICA, "c", metadata=md(), bookie="x")
    d = Finding.of(Category.ENTRY_NO_REPLICA, "d", metadata=md(lid=LedgerId(1, 42)))
    assert a.dedup_key() == b.dedup_key()
    assert a.dedup_key() != c.dedup_key() and a.dedup_key() != d.dedup_key()


def test_summary_counts_and_dedup() -> None:
    fs = [
        Finding.of(Category.ENTRY_NO_REPLICA, "x", metadata=md(lid=LedgerId.of(1))),
        Finding.of(Category.ENTRY_NO_REPLICA, "x again", metadata=md(lid=LedgerId.of(1))),
        Finding.of(Category.ENTRY_NO_REPLICA, "y", metadata=md(lid=LedgerId.of(2))),
        Finding.of(Category.PLACEMENT_VIOLATION, "p", metadata=md(lid=LedgerId.of(2)), segment_index=0),
        Finding.of(Category.PLACEMENT_VIOLATION, "p", metadata=md(lid=LedgerId.of(2)), segment_index=1),
        Finding.of(Category.BOOKIE_UNREACHABLE, "b", bookie="b1"),
    ]
    s = summarize(fs)
    assert s.total == 5 and s.duplicates == 1
    assert s.by_category[Category.ENTRY_NO_REPLICA] == 2 and s.ledgers(Category.ENTRY_NO_REPLICA) == 2
    assert s.by_category[Category.PLACEMENT_VIOLATION] == 2 and s.ledgers(Category.PLACEMENT_VIOLATION) == 1
    assert s.worst_severity is Severity.CRITICAL
    d = s.as_dict()
    assert d["byCategory"]["entry_no_replica"] == 2 and d["ledgersByCategory"]["placement_violation"] == 1
    assert d["bySeverity"]["major"] == 1 and d["findingCount"] == 5
    assert FindingSummary().worst_severity is None


def test_summary_dedups_whole_ledger_and_partial_findings_alike() -> None:
    """Whole-ledger findings of scope-0 ledgers are remembered by id alone; the rest by their key. Both
    deduplicate as `dedup_key` says, and a ledger with both kinds in one category counts once."""
    risky = [
        Finding.of(Category.RISKY_QUORUM, "r", metadata=md(lid=LedgerId.of(i)), severity=Severity.INFO)
        for i in (5, 3, 5, 9, 3)
    ]
    scoped = [
        Finding.of(Category.RISKY_QUORUM, "r", metadata=md(lid=LedgerId(1, 5)), severity=Severity.INFO)
        for _ in range(2)
    ]
    partial = [
        Finding.of(Category.ENTRY_NO_REPLICA, "whole", metadata=md(lid=LedgerId.of(7))),
        Finding.of(Category.ENTRY_NO_REPLICA, "bookie", metadata=md(lid=LedgerId.of(7)), bookie="b1"),
        Finding.of(Category.ENTRY_NO_REPLICA, "bookie again", metadata=md(lid=LedgerId.of(7)), bookie="b1"),
        Finding.of(Category.ENTRY_NO_REPLICA, "other bookie", metadata=md(lid=LedgerId.of(8)), bookie="b2"),
        Finding.of(Category.ENTRY_NO_REPLICA, "scoped", metadata=md(lid=LedgerId(2, 7)), entry_id=3),
    ]
    s = summarize([*risky, *scoped, *partial])
    keys = {f.dedup_key() for f in [*risky, *scoped, *partial]}
    assert s.total == len(keys) == 8 and s.duplicates == 12 - 8
    assert s.ledgers(Category.RISKY_QUORUM) == 4  # 3, 5, 9 and scope 1's 5
    assert s.ledgers(Category.ENTRY_NO_REPLICA) == 3  # 7 (twice over), 8, and scope 2's 7
    assert [f.message for f in s.findings] == ["r", "r", "r", "r", "whole", "bookie", "other bookie", "scoped"]
    assert s.informational[Category.RISKY_QUORUM] == 4 and s.informational[Category.ENTRY_NO_REPLICA] == 0


def test_summary_counts_what_it_does_not_keep() -> None:
    s = FindingSummary(keep=lambda f: f.actionable)
    for i in range(3):
        for _ in range(2):
            s.add(
                Finding.of(Category.RISKY_QUORUM, "info", metadata=md(lid=LedgerId.of(i)), severity=Severity.INFO),
                "scrutiny",
            )
    s.add(Finding.of(Category.ENTRY_NO_REPLICA, "bad", metadata=md(lid=LedgerId.of(1))), "scrutiny")
    assert [f.message for f in s.findings] == ["bad"] and [c for _, c in s.sightings()] == ["scrutiny"]
    assert s.total == 4 and s.duplicates == 3 and [f.message for f in s.actionable] == ["bad"]
    d = s.as_dict()
    assert (
        d["findingCount"] == 4 and d["byCategory"]["risky_quorum"] == 3 and d["ledgersByCategory"]["risky_quorum"] == 3
    )
    assert s.informational[Category.RISKY_QUORUM] == 3


def test_a_summary_not_keeping_informational_findings_holds_a_few_bytes_each() -> None:
    """What `bk-auditor check --format json` holds for each of a million WQ == AQ ledgers: 50,000
    informational findings cost it about 9 bytes each (their ids, for deduplication), where it held each
    finding (~1.2 KB) before (docs/benchmarks.md, "Memory at 10k, 100k and 1M ledgers")."""
    s = FindingSummary(keep=lambda f: f.actionable)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(50_000):
            lid = LedgerId.of(i)
            s.add(Finding.of(Category.RISKY_QUORUM, "WQ == AQ", ledger=lid, severity=Severity.INFO))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert s.total == 50_000 and s.ledgers(Category.RISKY_QUORUM) == 50_000 and not s.findings
    assert held / 50_000 < 12, held / 50_000


# --------------------------------------------------------------------------------------------------
# Pulsar context


def test_pulsar_data_ledger() -> None:
    ctx = pulsar_context(PULSAR_DATA)
    assert ctx == {
        "application": "pulsar",
        "component": "managed-ledger",
        "managedLedger": "public/default/persistent/orders",
        "topic": "persistent://public/default/orders",
        "kind": "topic",
    }


def test_pulsar_cursor_ledger() -> None:
    ctx = pulsar_context({**PULSAR_DATA, "pulsar/cursor": b"sub-1"})
    assert ctx is not None and ctx["kind"] == "cursor" and ctx["cursor"] == "sub-1"


def test_pulsar_schema_ledger() -> None:
    ctx = pulsar_context(
        {"application": b"pulsar", "component": b"schema", "pulsar/schemaId": b"public/default/orders"}
    )
    assert ctx is not None and ctx["kind"] == "schema" and ctx["schemaId"] == "public/default/orders"


def test_pulsar_compacted_ledger() -> None:
    message_id = bytes([0x08, 0x0C, 0x10, 0x22])  # MessageIdData{ledgerId=12, entryId=34}
    ctx = pulsar_context(
        {
            "application": b"pulsar",
            "component": b"compacted-ledger",
            "pulsar/compactedTopic": b"persistent://t/ns/events",
            "pulsar/compactedTo": message_id,
        }
    )
    assert ctx is not None and ctx["kind"] == "compacted-topic"
    assert ctx["topic"] == "persistent://t/ns/events" and ctx["compactedTo"] == "12:34"
    bad = pulsar_context({"pulsar/compactedTo": b"\xff"})
    assert bad is not None and bad["compactedTo"] == "ff"


def test_pulsar_placement_config_and_non_pulsar() -> None:
    ctx = pulsar_context({**PULSAR_DATA, "EnsemblePlacementPolicyConfig": b'{"policyClass":"x"}'})
    assert ctx is not None and ctx["placementPolicyConfig"] == '{"policyClass":"x"}'
    assert pulsar_context({"owner": b"someone"}) is None
    assert pulsar_context({}) is None and pulsar_context(None) is None
    assert Finding.of(Category.OVERREPLICATED, "m", metadata=md({"owner": b"x"})).pulsar is None


def test_topic_names() -> None:
    assert topic_of_managed_ledger("t/ns/persistent/a%20b") == "persistent://t/ns/a b"
    assert topic_of_managed_ledger("prop/cluster/ns/persistent/x") == "persistent://prop/cluster/ns/x"
    assert topic_of_managed_ledger("t/ns/non-persistent/x") == "non-persistent://t/ns/x"
    assert topic_of_managed_ledger("not-a-topic") is None


def test_confirm_copies_every_field_and_sets_only_confirmed() -> None:
    from dataclasses import fields, replace

    f = Finding.of(
        Category.ENTRY_BELOW_ACK_QUORUM,
        "m",
        ledger=LedgerId.of(7),
        bookie="b:1",
        ensemble=["a:1", "b:1"],
        detail={"x": [1, 2]},
        unknown_bookies=["c:1"],
        affected=RangeSet.span(3, 9),
    )
    c = f.confirm()
    assert c.confirmed and not f.confirmed and c == replace(f, confirmed=True)
    assert all(getattr(c, x.name) is getattr(f, x.name) for x in fields(Finding) if x.name != "confirmed")
    assert c.confirm() is c
