"""The Grafana dashboard (deploy/grafana): its structure, its queries parsed by promtool, and every metric
name they use checked against a real `AuditorMetrics`."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.artifacts import DASHBOARD
from tests.deploy.promql import check_promql, exposed, promtool

# ------------------------------------------------------------------------------------------ dashboard


def dashboard_queries() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            out.append((f"variable {v['name']}", v["definition"]))
    return out


def _grafana_to_promql(expr: str) -> str:
    return (
        expr.replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$__range", "1d")
        .replace("$namespace", ".*")
        .replace("$bookkeeper_cluster", "zk:2181/ledgers")
    )


def test_dashboard_structure() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] == "bk-auditor" and dash["title"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    names = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "namespace", "bookkeeper_cluster"} <= names
    titles = " | ".join(p["title"] for p in dash["panels"]).lower()
    for topic in (
        "findings",
        "last success",
        "run time",
        "leader",
        "re-check queue",
        "bookie request errors",
        "under-replicated",
        "oldest",
    ):
        assert topic in titles, topic
    for p in dash["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        for t in p.get("targets", []):
            assert t["datasource"]["uid"] == "${datasource}"


def test_dashboard_metric_names_exist() -> None:
    used: set[str] = set()
    for title, expr in dashboard_queries():
        if expr.startswith("label_values("):
            name = re.match(r"label_values\((\w+)", expr).group(1)
            assert name in exposed(), title
            continue
        used |= check_promql(_grafana_to_promql(expr), title)
    for must in (
        "bk_auditor_ledgers_with_findings",
        "bk_auditor_check_last_success_timestamp_seconds",
        "bk_auditor_check_duration_seconds_sum",
        "bk_auditor_is_leader",
        "bk_auditor_recheck_queue_depth",
        "bk_auditor_bookie_request_errors_total",
        "bk_auditor_underreplicated_ledgers",
        "bk_auditor_underreplicated_oldest_marker_age_seconds",
    ):
        assert must in used, must


def test_dashboard_queries_parse(tmp_path: Path) -> None:
    """promtool parses every dashboard query (as a recording rule)."""
    rules = [
        {"record": f"dashboard:query_{i}", "expr": _grafana_to_promql(expr)}
        for i, (title, expr) in enumerate(dashboard_queries())
        if not expr.startswith("label_values(")
    ]
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout + proc.stderr


def test_every_panel_query_is_for_the_chosen_cluster() -> None:
    """One dashboard for every cluster: a `bookkeeper_cluster` variable (one value, from the series of the
    chosen namespaces), and every metric selector of every panel query restricted to it."""
    dash = json.loads(DASHBOARD.read_text())
    (var,) = [v for v in dash["templating"]["list"] if v["name"] == "bookkeeper_cluster"]
    assert var["definition"] == 'label_values(bk_auditor_is_leader{namespace=~"$namespace"}, bookkeeper_cluster)'
    assert var["multi"] is False and var["includeAll"] is False
    selectors = 0
    for title, expr in dashboard_queries():
        if expr.startswith("label_values("):
            continue
        for m in re.finditer(r"\b(bk_auditor_[a-z_]+)\b(\{[^}]*\})?", expr):
            assert m.group(2) and 'bookkeeper_cluster="$bookkeeper_cluster"' in m.group(2), (title, m.group(0))
            selectors += 1
    assert selectors >= 26


def _panel(title: str) -> dict[str, Any]:
    (p,) = [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["title"] == title]
    return p


def test_findings_panels_read_across_replicas() -> None:
    """Every replica exports the findings (a standby those the leader persisted): the findings panels take
    the max over replicas, with no leader filter, so a failover does not blank them; the under-replication
    panels stay on the leader."""
    for title in ("Ledgers with data at risk", "Ledgers with active findings, by category"):
        for t in _panel(title)["targets"]:
            assert "bk_auditor_is_leader" not in t["expr"], title
            assert t["expr"].removeprefix("sum(").startswith("max by"), title
    (risk,) = _panel("Ledgers with data at risk")["targets"]
    categories = set(re.search(r'category=~"([^"]*)"', risk["expr"]).group(1).split("|"))
    assert {"entry_no_replica", "entry_below_ack_quorum", "ledger_missing", "digest_mismatch"} <= categories
    panels = json.loads(DASHBOARD.read_text())["panels"]
    under = [t["expr"] for p in panels if p["title"] == "Under-replicated ledgers" for t in p["targets"]]
    assert under and all("bk_auditor_is_leader" in e for e in under)


def test_data_safety_and_repair_panels() -> None:
    """Is my data safe now (ledgers and entries at risk by severity), what is being repaired (the repair
    workers' throughput), and how long until durable again (remaining work over the repair rate)."""
    exprs = {
        title: [t["expr"] for t in _panel(title)["targets"]]
        for title in (
            "Ledgers at risk, by severity",
            "Entries still short of copies, by severity",
            "Repair throughput",
            "Estimated time to full durability",
        )
    }
    assert "max by (severity) (bk_auditor_ledgers_at_risk" in exprs["Ledgers at risk, by severity"][0]
    assert "max by (severity) (bk_auditor_entries_at_risk" in exprs["Entries still short of copies, by severity"][0]
    throughput = " ".join(exprs["Repair throughput"])
    for name in ("bk_auditor_repair_entries_copied_total", "bk_auditor_repair_bytes_copied_total"):
        assert f"rate({name}" in throughput
    eta = exprs["Estimated time to full durability"]
    assert len(eta) == 2 and all(" / (sum(rate(" in e and e.endswith("> 0)") for e in eta)
    assert _panel("Estimated time to full durability")["fieldConfig"]["defaults"]["unit"] == "s"
