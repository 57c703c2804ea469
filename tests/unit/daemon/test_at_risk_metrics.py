"""Data at risk now, per severity: `bk_auditor_ledgers_at_risk` and `bk_auditor_entries_at_risk`, computed
from the store's actionable findings at each sync (informational findings and findings about no ledger
left out; entries short of copies on two bookies counted once)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from auditor.board.findings import FindingStore
from auditor.daemon.metrics import AuditorMetrics
from auditor.durability.findings import Category, Finding
from auditor.durability.ids import LedgerId
from auditor.durability.ranges import RangeSet


def _gauges(m: AuditorMetrics) -> dict[tuple[str, str], float]:
    out = {}
    for family in text_string_to_metric_families(m.exposition().decode()):
        for s in family.samples:
            if s.name in ("bk_auditor_ledgers_at_risk", "bk_auditor_entries_at_risk"):
                out[(s.name.removeprefix("bk_auditor_"), s.labels["severity"])] = s.value
    return out


def _entries(category: Category, ledger: int, bookie: str, first: int, last: int) -> Finding:
    return Finding.of(
        category,
        f"ledger {ledger}",
        ledger=LedgerId.of(ledger),
        bookie=bookie,
        segment_index=0,
        affected=RangeSet.span(first, last),
    )


def test_ledgers_and_entries_at_risk_by_severity() -> None:
    m = AuditorMetrics(cluster="zk:2181/ledgers")
    assert set(_gauges(m).values()) == {0.0}  # every severity's series exists at zero
    store = FindingStore()
    store.add(_entries(Category.ENTRY_NO_REPLICA, 1, "b1:3181", 0, 9))  # 10 entries, critical
    store.add(_entries(Category.ENTRY_BELOW_WRITE_QUORUM, 2, "b1:3181", 0, 99))  # minor: 100 entries
    store.add(_entries(Category.ENTRY_BELOW_WRITE_QUORUM, 2, "b2:3181", 0, 49))  # the same ledger, counted once
    store.add(_entries(Category.ENTRY_BELOW_WRITE_QUORUM, 3, "b2:3181", 5, 6))  # minor: 2 entries
    store.add(Finding.of(Category.LEDGER_MISSING, "ledger 4 gone", ledger=LedgerId.of(4)))  # whole ledger
    store.add(Finding.of(Category.ORPHAN_LEDGER, "ledger 5 orphan", ledger=LedgerId.of(5)))  # info: not at risk
    m.sync_findings(store)
    g = _gauges(m)
    assert g[("ledgers_at_risk", "critical")] == 2  # ledger 1 and the missing ledger 4 (critical)
    assert g[("entries_at_risk", "critical")] == 10
    assert g[("ledgers_at_risk", "minor")] == 2
    assert g[("entries_at_risk", "minor")] == 102
    assert g[("ledgers_at_risk", "major")] == 0
    # once the store no longer holds them, the gauges fall back
    m.sync_findings(FindingStore())
    assert set(_gauges(m).values()) == {0.0}
