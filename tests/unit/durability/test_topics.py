"""Findings grouped by Pulsar topic and namespace (`check --by topic`)."""

from __future__ import annotations

from auditor.durability.findings import Category, Finding, Severity
from auditor.durability.ids import LedgerId
from auditor.durability.topics import NO_TOPIC, at_risk_by_topic, namespace_of


def finding(category: Category, ledger: int, managed_ledger: str | None) -> Finding:
    pulsar = None
    if managed_ledger:
        from auditor.durability.findings import topic_of_managed_ledger

        pulsar = {"managedLedger": managed_ledger, "topic": topic_of_managed_ledger(managed_ledger) or ""}
    return Finding.of(category, f"ledger {ledger}", ledger=LedgerId.of(ledger), pulsar=pulsar)


def test_namespace_of_v2_v1_and_topic_only() -> None:
    assert namespace_of({"managedLedger": "public/default/persistent/orders%2Fv2"}) == "public/default"
    assert namespace_of({"managedLedger": "prop/cluster/ns/persistent/t"}) == "prop/cluster/ns"
    assert namespace_of({"topic": "persistent://t1/ns1/compacted"}) == "t1/ns1"
    assert namespace_of(None) is None


def test_topics_most_severe_first_with_their_ledgers() -> None:
    fs = [
        finding(Category.ENTRY_BELOW_WRITE_QUORUM, 7, "public/default/persistent/orders"),
        finding(Category.ENTRY_NO_REPLICA, 9, "public/default/persistent/orders"),
        finding(Category.ENTRY_BELOW_ACK_QUORUM, 3, "t/ns/persistent/payments"),
        finding(Category.ENTRY_BELOW_WRITE_QUORUM, 4, None),
        finding(Category.OVERREPLICATED, 5, "t/ns/persistent/quiet"),  # informational: not at risk
    ]
    rows = at_risk_by_topic(fs)
    assert [(r.topic, r.worst, r.findings) for r in rows] == [
        ("persistent://public/default/orders", Category.ENTRY_NO_REPLICA, 2),
        ("persistent://t/ns/payments", Category.ENTRY_BELOW_ACK_QUORUM, 1),
        (NO_TOPIC, Category.ENTRY_BELOW_WRITE_QUORUM, 1),
    ]
    assert rows[0].ledgers == (LedgerId.of(7), LedgerId.of(9)) and rows[0].namespace == "public/default"
    assert rows[0].severity is Severity.CRITICAL and rows[2].namespace is None


def test_namespace_counts_are_bounded_and_count_each_ledger_once_in_its_worst_category() -> None:
    from auditor.durability.topics import NO_NAMESPACE, OTHER_NAMESPACES, namespace_ledger_counts

    fs = [
        finding(Category.ENTRY_BELOW_WRITE_QUORUM, 1, "a/one/persistent/t"),
        finding(Category.ENTRY_NO_REPLICA, 1, "a/one/persistent/t"),  # ledger 1's worst
        finding(Category.ENTRY_BELOW_WRITE_QUORUM, 2, "a/one/persistent/u"),
        finding(Category.ENTRY_BELOW_ACK_QUORUM, 3, "b/two/persistent/t"),
        finding(Category.ENTRY_BELOW_WRITE_QUORUM, 4, "c/three/persistent/t"),
        finding(Category.ENTRY_BELOW_WRITE_QUORUM, 5, "d/four/persistent/t"),
        finding(Category.ENTRY_BELOW_WRITE_QUORUM, 6, None),
        finding(Category.OVERREPLICATED, 7, "e/five/persistent/t"),  # informational: not counted
    ]
    assert namespace_ledger_counts(fs, limit=2) == {
        ("a/one", "entry_no_replica"): 1,
        ("a/one", "entry_below_write_quorum"): 1,
        ("b/two", "entry_below_ack_quorum"): 1,
        (OTHER_NAMESPACES, "entry_below_write_quorum"): 2,
        (NO_NAMESPACE, "entry_below_write_quorum"): 1,
    }
    assert namespace_ledger_counts(fs, limit=0) == {
        (OTHER_NAMESPACES, "entry_no_replica"): 1,
        (OTHER_NAMESPACES, "entry_below_write_quorum"): 3,
        (OTHER_NAMESPACES, "entry_below_ack_quorum"): 1,
        (NO_NAMESPACE, "entry_below_write_quorum"): 1,
    }
