"""Prometheus side of the deployment tests: promtool, the chart's alert rules, and checking every metric name
and label a rule or dashboard query uses against the exposition of a real `AuditorMetrics`."""

from __future__ import annotations

import functools
import re
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from auditor.board.findings import FindingStore
from auditor.daemon.metrics import AuditorMetrics, RunSummary
from auditor.durability.findings import Category, Finding
from auditor.durability.ids import LedgerId
from auditor.repair.metrics import RepairMetrics
from tests.deploy.artifacts import ROOT, rendered


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is missing: scripts/setup.sh installs Debian's prometheus package"
    return path


def alert_rules(scenario: str = "default") -> list[dict[str, Any]]:
    docs = rendered(scenario)
    rule = next(d for d in docs if d["kind"] in ("PrometheusRule", "VMRule"))
    return [r for g in rule["spec"]["groups"] for r in g["rules"]]


def write_rules_file(tmp_path: Path, scenario: str = "default") -> Path:
    docs = rendered(scenario)
    rule = next(d for d in docs if d["kind"] in ("PrometheusRule", "VMRule"))
    path = tmp_path / f"rules-{scenario}.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    return path


@functools.cache
def exposed() -> dict[str, frozenset[str]]:
    """Sample name -> label names, from the exposition of a real AuditorMetrics with every series present."""
    m = AuditorMetrics(
        CollectorRegistry(), cluster="pulsar-zookeeper:2181/ledgers", checks=["bookies", "ledger", "scrutiny", "open"]
    )
    m.set_info(version="0.1.0", identity="bk-auditor-0")
    m.set_leader(True)
    m.set_leader(False)
    m.set_paused(False)
    m.observe_run(
        RunSummary(check="scrutiny", started=1.0, finished=2.0, ok=True, ledgers=3, findings={"entry_no_replica": 1})
    )
    m.check_skipped_run("scrutiny", "paused")
    m.ledger_checked("scrutiny")
    m.bookie_request("10.2.0.1:3181", "read_entry", error="timeout")
    m.set_lost_bookies(0)
    m.set_under_replication(1, 10.0, 0)
    m.finding_reported(SimpleNamespace(category=Category.ENTRY_NO_REPLICA, severity="critical"))
    m.finding_resolved("entry_no_replica")
    m.ledgers_marked.inc()
    m.bookie_audits_delayed.inc()
    m.delayed_bookie_audits_cancelled.inc()
    m.recheck_queue_depth.set(0)
    m.recheck_outcomes.labels("confirmed").inc()
    m.task_up("scrutiny", True)
    m.task_failed("scrutiny")
    m.task_restarted("scrutiny")
    m.state_replaced("checks/scrutiny")
    store = FindingStore()
    store.add(
        Finding.of(
            Category.ENTRY_NO_REPLICA,
            "ledger 1",
            ledger=LedgerId.of(1),
            pulsar={"managedLedger": "public/default/persistent/t", "topic": "persistent://public/default/t"},
        )
    )
    m.sync_findings(store)
    return _labels(m.exposition().decode())


@functools.cache
def repair_exposed() -> dict[str, frozenset[str]]:
    """The same for the repair role's RepairMetrics (its pods' metrics, on the dashboard's repair panels)."""
    repair = RepairMetrics(cluster="pulsar-zookeeper:2181/ledgers")
    repair.observe("repaired", "", 3, 300, 0.5)
    repair.observe("blocked", "data_loss", 0, 0, 0.1)
    repair.set_blocked({"data_loss": 1})
    repair.corrupt("healed", 1)
    repair.recovered("closed")
    return _labels(generate_latest(repair.registry).decode())


def _labels(text: str) -> dict[str, frozenset[str]]:
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        assert family.samples, f"{family.name} has no series"
        for s in family.samples:
            labels.setdefault(s.name, set()).update(s.labels)
    return {k: frozenset(v) for k, v in labels.items()}


def _known() -> dict[str, frozenset[str]]:
    return {**exposed(), **repair_exposed()}


TARGET_LABELS = {"namespace", "instance", "pod", "job", "container", "endpoint"}
_SELECTOR = re.compile(r"\b(bk_auditor_[a-z_]+)\b(\{[^}]*\})?")
_GROUPING = re.compile(r"\b(?:by|on)\s*\(([^)]*)\)")


def check_promql(expr: str, where: str) -> set[str]:
    """Every bk_auditor_* name in `expr` is exposed, its matchers use its labels, and the category and check
    values are real ones. Returns the names used."""
    names = set()
    known_checks = documented_checks()
    for m in _SELECTOR.finditer(expr):
        name, matchers = m.group(1), m.group(2) or ""
        assert name in _known(), f"{where}: {name} is not a metric of AuditorMetrics or RepairMetrics"
        names.add(name)
        for label, op, value in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', matchers):
            assert label in _known()[name] | TARGET_LABELS, f"{where}: {name} has no label {label}"
            if label == "category" and op in ("=", "=~"):
                for v in value.split("|"):
                    assert v in {c.value for c in Category}, f"{where}: unknown category {v}"
            if label == "check" and op == "=":
                assert value in known_checks, f"{where}: unknown check {value}"
    used_labels = {lbl.strip() for g in _GROUPING.findall(expr) for lbl in g.split(",") if lbl.strip()}
    all_labels = set().union(*(_known()[n] for n in names)) | TARGET_LABELS if names else TARGET_LABELS
    assert used_labels <= all_labels, f"{where}: grouping by unknown labels {used_labels - all_labels}"
    return names


@functools.cache
def documented_checks() -> frozenset[str]:
    """The check (task) names docs/metrics.md gives for the `check` label."""
    text = (ROOT / "docs" / "metrics.md").read_text()
    m = re.search(r"`check` is a task name \(([^)]*)\)", text)
    assert m, "docs/metrics.md no longer lists the check names"
    return frozenset(re.findall(r"`(\w+)`", m.group(1)))
