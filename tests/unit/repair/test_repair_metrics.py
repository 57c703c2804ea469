"""The repair role's metrics (every series with the cluster label, every metric in docs/metrics.md) and
its `repair_blocked` finding (critical only for data loss)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from auditor.durability.findings import Category, Severity
from auditor.durability.ids import LedgerId
from auditor.durability.repairblocked import blocked_finding
from auditor.durability.repairplan import WorkClass, WorkItem
from auditor.metadata.own.repairstate import RepairBlock
from auditor.repair.metrics import RepairMetrics

DOCS = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def test_every_repair_metric_has_the_cluster_label_and_is_documented() -> None:
    m = RepairMetrics(cluster="c1")
    m.observe("blocked", "data_loss", 3, 300, 0.5)
    m.set_queue([WorkItem(LedgerId.of(1), WorkClass.NO_LIVE_COPY, 0), WorkItem(LedgerId.of(2), WorkClass.PLACEMENT, 0)])
    m.set_blocked({"data_loss": 1})
    m.corrupt("healed", 2)
    families = list(text_string_to_metric_families(generate_latest(m.registry).decode()))
    samples = [s for f in families for s in f.samples]
    assert samples and all(s.labels.get("bookkeeper_cluster") == "c1" for s in samples)
    value = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}
    assert value[("bk_auditor_repair_blocked_total", (("bookkeeper_cluster", "c1"), ("reason", "data_loss")))] == 1
    assert value[("bk_auditor_repair_entries_copied_total", (("bookkeeper_cluster", "c1"),))] == 3
    assert value[("bk_auditor_repair_corrupt_copies_total", (("bookkeeper_cluster", "c1"), ("outcome", "healed")))] == 2
    assert value[("bk_auditor_repair_queue_ledgers", (("bookkeeper_cluster", "c1"), ("work_class", "placement")))] == 1
    assert (
        value[("bk_auditor_repair_queue_ledgers", (("bookkeeper_cluster", "c1"), ("work_class", "below_ack_quorum")))]
        == 0
    )
    m.set_blocked({})  # a reason no longer present leaves no stale series
    assert "bk_auditor_repair_blocked_ledgers{" not in generate_latest(m.registry).decode()
    docs = DOCS.read_text()
    for obj in vars(m).values():
        if isinstance(obj, MetricWrapperBase):
            assert obj._name in docs, f"{obj._name} is not in docs/metrics.md"


def test_repair_blocked_is_critical_only_for_data_loss() -> None:
    loss = RepairBlock("data_loss", "entries 0,3 have no verified copy anywhere", 2, 1000, 2000, "w1")
    f = blocked_finding(LedgerId.of(7), loss, 0.2)
    assert (f.category, f.severity, f.confirmed) == (Category.REPAIR_BLOCKED, Severity.CRITICAL, True)
    assert "DATA LOSS" in f.message and f.detail["failures"] == 2 and f.detail["retryInSeconds"] == 0.2
    other = blocked_finding(LedgerId.of(7), RepairBlock("no_eligible_bookie", "x", 1, 0, 0, "w1"), 9.4)
    assert other.severity is Severity.MAJOR and "no_eligible_bookie" in other.message
