"""Which Pulsar topics are at risk: actionable findings grouped by the topic (and namespace) their ledger
belongs to, from the Pulsar custom metadata a finding carries (`Finding.pulsar`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .findings import SEVERITY_OF, Category, Finding, Severity, split_managed_ledger
from .ids import LedgerId

NO_TOPIC = "(not a Pulsar topic)"


def namespace_of(pulsar: Mapping[str, str] | None) -> str | None:
    """`tenant/ns` (or v1 `property/cluster/ns`) from the managed ledger name, else from the topic."""
    if not pulsar:
        return None
    split = split_managed_ledger(pulsar.get("managedLedger") or "")
    if split:
        return split[0]
    topic = pulsar.get("topic")
    if topic and "://" in topic:
        rest = topic.split("://", 1)[1].split("/")
        return "/".join(rest[:2]) if len(rest) > 2 else None
    return None


@dataclass(frozen=True)
class TopicRisk:
    topic: str  # NO_TOPIC for ledgers without Pulsar metadata
    namespace: str | None
    severity: Severity  # the worst of its findings
    worst: Category  # the category of its worst finding
    ledgers: tuple[LedgerId, ...]
    findings: int

    def to_dict(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "namespace": self.namespace,
            "severity": self.severity.value,
            "worstCategory": self.worst.value,
            "ledgers": [lid.qualified_name for lid in self.ledgers],
            "findings": self.findings,
        }


def at_risk_by_topic(findings: Iterable[Finding]) -> list[TopicRisk]:
    """One row per topic with actionable findings, most severe first, then by topic name."""
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        if f.actionable:
            topic = (f.pulsar or {}).get("topic") or NO_TOPIC
            groups.setdefault(topic, []).append(f)
    rows = []
    for topic, fs in groups.items():
        worst = min(fs, key=lambda f: (f.severity.rank, f.category.value))
        ledgers = tuple(sorted({f.ledger for f in fs if f.ledger is not None}, key=lambda lid: (lid.scope, lid.ledger)))
        rows.append(TopicRisk(topic, namespace_of(worst.pulsar), worst.severity, worst.category, ledgers, len(fs)))
    return sorted(rows, key=lambda r: (r.severity.rank, r.topic == NO_TOPIC, r.topic))


NO_NAMESPACE = "none"  # ledgers without Pulsar metadata
OTHER_NAMESPACES = "other"  # namespaces beyond the limit, summed


def namespace_ledger_counts(findings: Iterable[Finding], limit: int) -> dict[tuple[str, str], int]:
    """(namespace, category) -> distinct ledgers whose worst actionable finding has that category, for a
    gauge of bounded cardinality: the `limit` namespaces most at risk (worst severity, then most ledgers)
    keep their name, the rest are summed under "other"; ledgers without Pulsar metadata count as "none"."""
    worst: dict[LedgerId, Finding] = {}
    for f in findings:
        if f.actionable and f.ledger is not None:
            seen = worst.get(f.ledger)
            if seen is None or (f.severity.rank, f.category.value) < (seen.severity.rank, seen.category.value):
                worst[f.ledger] = f
    per_ns: dict[str, dict[str, int]] = {}
    for f in worst.values():
        ns = namespace_of(f.pulsar) or NO_NAMESPACE
        cats = per_ns.setdefault(ns, {})
        cats[f.category.value] = cats.get(f.category.value, 0) + 1

    def risk(ns: str) -> tuple[int, int, str]:
        top = min(SEVERITY_OF[Category(c)].rank for c in per_ns[ns])
        return (top, -sum(per_ns[ns].values()), ns)

    ranked = sorted(per_ns, key=risk)
    out: dict[tuple[str, str], int] = {}
    for i, ns in enumerate(ranked):
        name = ns if i < limit or ns == NO_NAMESPACE else OTHER_NAMESPACES
        for c, n in per_ns[ns].items():
            out[(name, c)] = out.get((name, c), 0) + n
    return out
