"""The alert rules: the required alerts, `promtool check rules`, `promtool test rules` (series in, alerts out),
and every metric name and label they use checked against a real `AuditorMetrics`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.artifacts import DEPLOY_DOC, one, render_docs
from tests.deploy.promql import alert_rules, check_promql, promtool, write_rules_file

# ------------------------------------------------------------------------------------------ alert rules


REQUIRED_ALERTS = {
    "BkAuditorEntryNoReplica",
    "BkAuditorEntryBelowAckQuorum",
    "BkAuditorEntryBelowWriteQuorum",
    "BkAuditorTruncationRisk",
    "BkAuditorUnderReplicatedTooLong",
    "BkAuditorBookieUnreachable",
    "BkAuditorNoLeader",
    "BkAuditorCheckStale",
    "BkAuditorRecheckQueueGrowing",
    "BkAuditorDigestMismatch",
    "BkAuditorTaskFailing",
    "BkAuditorRepairBlocked",
    "BkAuditorLedgerMissing",
}


def test_required_alerts_exist_with_severities() -> None:
    rules = alert_rules()
    names = {r["alert"] for r in rules}
    assert REQUIRED_ALERTS <= names
    severity = {r["alert"]: r["labels"]["severity"] for r in rules}
    for name in (
        "BkAuditorEntryNoReplica",
        "BkAuditorEntryBelowAckQuorum",
        "BkAuditorTruncationRisk",
        "BkAuditorDigestMismatch",
        "BkAuditorLedgerMissing",
    ):
        assert severity[name] == "critical"
    for r in rules:
        assert r["labels"]["severity"] in ("critical", "warning", "info")
        assert {"summary", "description", "runbook"} <= set(r["annotations"]), r["alert"]
    # one staleness rule per check with a non-zero default interval
    stale = [r for r in rules if r["alert"] == "BkAuditorCheckStale"]
    assert len(stale) == 5


@pytest.mark.parametrize("scenario", ["default", "all-features", "victoria-metrics"])
def test_promtool_check_rules(scenario: str, tmp_path: Path) -> None:
    path = write_rules_file(tmp_path, scenario)
    proc = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "FAILED" not in out, out  # lint findings (duplicates) print FAILED
    m = re.search(r"SUCCESS: (\d+) rules found", out)
    assert m and int(m.group(1)) == len(alert_rules(scenario)), out


def test_promtool_rejects_a_broken_rule(tmp_path: Path) -> None:
    """promtool really parses the expressions (so the passing check above means something)."""
    path = tmp_path / "broken.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {"name": "x", "rules": [{"alert": "Broken", "expr": "max by (namespace (bk_auditor_is_leader)"}]}
                ]
            }
        )
    )
    proc = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode != 0


def _annotations(
    rule: dict[str, Any], value: str, labels: dict[str, str], humanized: str | None = None
) -> dict[str, str]:
    """The annotations Prometheus renders for `rule`, for the template constructs our rules use."""
    out = {}
    for k, text in rule["annotations"].items():
        for label, words in (("bookkeeper_cluster", "of cluster"), ("namespace", "in namespace")):
            v = labels.get(label)
            text = text.replace(
                f"{{{{ with $labels.{label} }}}} {words} {{{{ . }}}}{{{{ end }}}}", f" {words} {v}" if v else ""
            )
        for name in ("$value | humanizeDuration", "$value | humanizePercentage"):
            if "{{ " + name + " }}" in text:
                assert humanized is not None, f"{rule['alert']}: give the humanized value"
                text = text.replace("{{ " + name + " }}", humanized)
        text = text.replace("{{ $value }}", value)
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)
        assert "{{" not in text, text
        out[k] = text
    return out


def run_promtool_tests(tmp_path: Path, rule_files: list[Path], tests: list[dict[str, Any]]) -> str:
    """`promtool test rules` of `tests` (series in, alerts out) over `rule_files`; returns its output,
    asserting success."""
    test_file = tmp_path / "rules_test.yaml"
    test_file.write_text(
        yaml.safe_dump(
            {"rule_files": [p.name for p in rule_files], "evaluation_interval": "1m", "tests": tests}, sort_keys=False
        )
    )
    proc = subprocess.run([promtool(), "test", "rules", test_file.name], capture_output=True, text=True, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "SUCCESS" in out, out
    return out


def _rule(rules: list[dict[str, Any]], alert: str, check: str | None = None) -> dict[str, Any]:
    hits = [
        r
        for r in rules
        if r["alert"] == alert
        and (check is None or f'check="{check}"' in r["expr"] or r["labels"].get("check") == check)
    ]
    assert len(hits) == 1, (alert, check, len(hits))
    return hits[0]


def test_promtool_unit_tests(tmp_path: Path) -> None:
    """Series in, alerts out, for several alerts of the default rules (promtool test rules)."""
    rules_path = write_rules_file(tmp_path)
    rules = alert_rules()
    cluster = 'bookkeeper_cluster="zk:2181/ledgers"'
    leader = f'{cluster}, namespace="pulsar", instance="10.1.0.1:8000", pod="bk-auditor-0", job="bk-auditor"'
    standby = f'{cluster}, namespace="pulsar", instance="10.1.0.2:8000", pod="bk-auditor-1", job="bk-auditor"'
    crit = {"bookkeeper_cluster": "zk:2181/ledgers", "namespace": "pulsar", "severity": "critical"}
    warn = {"bookkeeper_cluster": "zk:2181/ledgers", "namespace": "pulsar", "severity": "warning"}

    def alert(
        rule: dict[str, Any],
        labels: dict[str, str],
        value: str,
        humanized: str | None = None,
        extra: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        all_labels = {**labels, **(extra or {})}
        return {"exp_labels": all_labels, "exp_annotations": _annotations(rule, value, all_labels, humanized)}

    no_replica = _rule(rules, "BkAuditorEntryNoReplica")
    below_wq = _rule(rules, "BkAuditorEntryBelowWriteQuorum")
    repair_blocked = _rule(rules, "BkAuditorRepairBlocked")
    no_leader = _rule(rules, "BkAuditorNoLeader")
    stale = _rule(rules, "BkAuditorCheckStale", "scrutiny")
    never = _rule(rules, "BkAuditorCheckNeverSucceeded", "open")
    queue = _rule(rules, "BkAuditorRecheckQueueGrowing")
    errors = _rule(rules, "BkAuditorBookieRequestErrors")
    tests = [
        {  # the findings, read across replicas: the standby mirrors what the leader persisted
            "name": "entry_no_replica pages from the findings",
            "interval": "1m",
            "input_series": [
                {"series": f"bk_auditor_is_leader{{{leader}}}", "values": "1x90"},
                {"series": f"bk_auditor_is_leader{{{standby}}}", "values": "0x90"},
                {
                    "series": f'bk_auditor_ledgers_with_findings{{{leader}, category="entry_no_replica"}}',
                    "values": "0 0 0 3x87",
                },
                {
                    "series": f'bk_auditor_ledgers_with_findings{{{standby}, category="entry_no_replica"}}',
                    "values": "0 0 0 0 3x86",
                },
                {
                    "series": f'bk_auditor_ledgers_with_findings{{{leader}, category="entry_below_write_quorum"}}',
                    "values": "0 2x89",
                },
                {
                    "series": f'bk_auditor_ledgers_with_findings{{{leader}, category="repair_blocked"}}',
                    "values": "0 0 1x88",
                },
            ],
            "alert_rule_test": [
                {"eval_time": "2m", "alertname": "BkAuditorEntryNoReplica", "exp_alerts": []},
                {
                    "eval_time": "4m",
                    "alertname": "BkAuditorEntryNoReplica",
                    "exp_alerts": [alert(no_replica, crit, "3")],
                },
                # a blocked repair warns after 5 minutes
                {"eval_time": "6m", "alertname": "BkAuditorRepairBlocked", "exp_alerts": []},
                {
                    "eval_time": "8m",
                    "alertname": "BkAuditorRepairBlocked",
                    "exp_alerts": [alert(repair_blocked, warn, "1")],
                },
                # below write quorum must last an hour
                {"eval_time": "50m", "alertname": "BkAuditorEntryBelowWriteQuorum", "exp_alerts": []},
                {
                    "eval_time": "70m",
                    "alertname": "BkAuditorEntryBelowWriteQuorum",
                    "exp_alerts": [alert(below_wq, warn, "2")],
                },
            ],
        },
        {  # both replicas standing by: after 5 minutes, no leader
            "name": "no leader",
            "interval": "1m",
            "input_series": [
                {"series": f"bk_auditor_is_leader{{{leader}}}", "values": "1 1 0x20"},
                {"series": f"bk_auditor_is_leader{{{standby}}}", "values": "0x22"},
            ],
            "alert_rule_test": [
                {"eval_time": "5m", "alertname": "BkAuditorNoLeader", "exp_alerts": []},
                {"eval_time": "9m", "alertname": "BkAuditorNoLeader", "exp_alerts": [alert(no_leader, warn, "0")]},
            ],
        },
        {  # nothing scraped at all also means no leader
            "name": "no replica scraped",
            "interval": "1m",
            "input_series": [{"series": 'up{job="other"}', "values": "1x20"}],
            "alert_rule_test": [
                {
                    "eval_time": "9m",
                    "alertname": "BkAuditorNoLeader",
                    # absent() keeps the release's matchers as labels
                    "exp_alerts": [
                        alert(no_leader, {"namespace": "pulsar", "job": "bk-auditor", "severity": "warning"}, "1")
                    ],
                },
            ],
        },
        {  # scrutiny (every 86400 s) last succeeded at t=1h: stale once older than 2 d (+10 m for)
            "name": "scrutiny stale",
            "interval": "1m",
            "input_series": [
                {"series": f"bk_auditor_is_leader{{{leader}}}", "values": "1x3000"},
                {
                    "series": f'bk_auditor_check_last_success_timestamp_seconds{{{leader}, check="scrutiny"}}',
                    "values": "_x60 3600x2940",
                },
                {
                    "series": f'bk_auditor_check_last_success_timestamp_seconds{{{leader}, check="open"}}',
                    "values": "_x130 7800x2870",
                },
            ],
            "alert_rule_test": [
                {
                    "eval_time": "48h30m",
                    "alertname": "BkAuditorCheckStale",
                    "exp_alerts": [
                        alert(
                            _rule(rules, "BkAuditorCheckStale", "open"),
                            {**warn, "check": "open"},
                            "166800",
                            humanized="1d 22h 20m 0s",
                        )
                    ],
                },
                {
                    "eval_time": "49h30m",
                    "alertname": "BkAuditorCheckStale",
                    "exp_alerts": [
                        alert(stale, {**warn, "check": "scrutiny"}, "174600", humanized="2d 0h 30m 0s"),
                        # open-ledger check (every 3600 s) last succeeded at 130 min: stale too
                        alert(
                            _rule(rules, "BkAuditorCheckStale", "open"),
                            {**warn, "check": "open"},
                            "170400",
                            humanized="1d 23h 20m 0s",
                        ),
                    ],
                },
            ],
        },
        {  # a leader whose open-ledger check (every 3600 s) never succeeds: after 2 h
            "name": "open-ledger check never succeeded",
            "interval": "1m",
            "input_series": [{"series": f"bk_auditor_is_leader{{{leader}}}", "values": "1x200"}],
            "alert_rule_test": [
                {"eval_time": "110m", "alertname": "BkAuditorCheckNeverSucceeded", "exp_alerts": []},
                {
                    "eval_time": "130m",
                    "alertname": "BkAuditorCheckNeverSucceeded",
                    "exp_alerts": [alert(never, warn, "1", extra={"check": "open"})],
                },
            ],
        },
        {  # the leader's queue grows 5 per minute; the standby's (ignored) grows faster
            "name": "re-check queue growing",
            "interval": "1m",
            "input_series": [
                {"series": f"bk_auditor_is_leader{{{leader}}}", "values": "1x150"},
                {"series": f"bk_auditor_is_leader{{{standby}}}", "values": "0x150"},
                {"series": f"bk_auditor_recheck_queue_depth{{{leader}}}", "values": "0+5x150"},
                {"series": f"bk_auditor_recheck_queue_depth{{{standby}}}", "values": "0+50x150"},
            ],
            "alert_rule_test": [
                {"eval_time": "60m", "alertname": "BkAuditorRecheckQueueGrowing", "exp_alerts": []},
                {
                    "eval_time": "120m",
                    "alertname": "BkAuditorRecheckQueueGrowing",
                    "exp_alerts": [alert(queue, warn, "600")],
                },
            ],
        },
        {  # 80 % of requests to one bookie fail, 1 % to another
            "name": "bookie request errors",
            "interval": "1m",
            "input_series": [
                {
                    "series": f'bk_auditor_bookie_requests_total{{{leader}, bookie="10.2.0.1:3181", operation="read_entry"}}',
                    "values": "0+100x60",
                },
                {
                    "series": f'bk_auditor_bookie_request_errors_total{{{leader}, bookie="10.2.0.1:3181", operation="read_entry", error="timeout"}}',
                    "values": "0+80x60",
                },
                {
                    "series": f'bk_auditor_bookie_requests_total{{{leader}, bookie="10.2.0.2:3181", operation="read_entry"}}',
                    "values": "0+100x60",
                },
                {
                    "series": f'bk_auditor_bookie_request_errors_total{{{leader}, bookie="10.2.0.2:3181", operation="read_entry", error="timeout"}}',
                    "values": "0+1x60",
                },
            ],
            "alert_rule_test": [
                {"eval_time": "10m", "alertname": "BkAuditorBookieRequestErrors", "exp_alerts": []},
                {
                    "eval_time": "40m",
                    "alertname": "BkAuditorBookieRequestErrors",
                    "exp_alerts": [alert(errors, {**warn, "bookie": "10.2.0.1:3181"}, "0.8", humanized="80%")],
                },
            ],
        },
    ]
    run_promtool_tests(tmp_path, [rules_path], tests)


def test_promtool_unit_test_can_fail(tmp_path: Path) -> None:
    """The same machinery reports a wrong expectation (here: expecting a page when no replica has a finding)."""
    rules_path = write_rules_file(tmp_path)
    standby = (
        'bookkeeper_cluster="c", namespace="pulsar", instance="10.1.0.2:8000", pod="bk-auditor-1", job="bk-auditor"'
    )
    tests = [
        {
            "interval": "1m",
            "input_series": [
                {"series": f"bk_auditor_is_leader{{{standby}}}", "values": "0x10"},
                {
                    "series": f'bk_auditor_ledgers_with_findings{{{standby}, category="entry_no_replica"}}',
                    "values": "0x10",
                },
            ],
            "alert_rule_test": [
                {
                    "eval_time": "5m",
                    "alertname": "BkAuditorEntryNoReplica",
                    "exp_alerts": [
                        {"exp_labels": {"bookkeeper_cluster": "c", "namespace": "pulsar", "severity": "critical"}}
                    ],
                }
            ],
        }
    ]
    test_file = tmp_path / "rules_test.yaml"
    test_file.write_text(yaml.safe_dump({"rule_files": [rules_path.name], "tests": tests}))
    proc = subprocess.run([promtool(), "test", "rules", test_file.name], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode != 0


# ------------------------------------------------------------------------------------------ two releases


def _release_rules(tmp_path: Path, release: str, uri: str) -> tuple[Path, list[dict[str, Any]]]:
    """The rules of one release in namespace pulsar, as Prometheus loads them from its PrometheusRule."""
    _, docs = render_docs({"config": {"metadata_service_uri": uri}}, name=release, namespace="pulsar")
    rule = one(list(docs), "PrometheusRule")
    assert one(list(docs), "PodMonitor")["spec"]["jobLabel"] == "app.kubernetes.io/instance"  # job=<release>
    path = tmp_path / f"rules-{release}.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    return path, [r for g in rule["spec"]["groups"] for r in g["rules"]]


def test_two_releases_for_two_clusters_in_one_namespace(tmp_path: Path) -> None:
    """Two releases (two BookKeeper clusters) in one namespace, one Prometheus loading both rule sets: each
    alert fires once, for its cluster; two leaders (one per cluster) are not "multiple leaders"; two
    releases auditing the same cluster are."""
    eu_path, eu_rules = _release_rules(tmp_path, "bk-auditor-eu", "zk+hierarchical://zk-eu:2181/ledgers")
    us_path, us_rules = _release_rules(tmp_path, "bk-auditor-us", "zk+hierarchical://zk-us:2181/ledgers")
    eu_c, us_c = "zk-eu:2181/ledgers", "zk-us:2181/ledgers"

    def pod(release: str, cluster: str, n: int, ip: str) -> str:
        return (
            f'bookkeeper_cluster="{cluster}", namespace="pulsar", job="{release}", pod="{release}-{n}", '
            f'instance="{ip}:8000", container="bk-auditor", endpoint="http-metrics"'
        )

    eu0, eu1 = pod("bk-auditor-eu", eu_c, 0, "10.1.0.1"), pod("bk-auditor-eu", eu_c, 1, "10.1.0.2")
    us0, us1 = pod("bk-auditor-us", us_c, 0, "10.1.0.3"), pod("bk-auditor-us", us_c, 1, "10.1.0.4")

    def alert(rule: dict[str, Any], labels: dict[str, str], value: str) -> dict[str, Any]:
        return {"exp_labels": labels, "exp_annotations": _annotations(rule, value, labels)}

    def series(metric: str, values: dict[str, str], extra: str = "") -> list[dict[str, str]]:
        """One input series of `metric` per pod (given by its labels), with its values."""
        return [{"series": f"{metric}{{{pod}{extra}}}", "values": v} for pod, v in values.items()]

    findings = ', category="entry_no_replica"'
    no_replica = _rule(eu_rules, "BkAuditorEntryNoReplica")
    no_leader = _rule(us_rules, "BkAuditorNoLeader")
    tests = [
        {
            "name": "one leader per cluster, data loss in one cluster",
            "interval": "1m",
            "input_series": [
                *series("bk_auditor_is_leader", {eu0: "1x30", eu1: "0x30", us0: "1x30", us1: "0x30"}),
                # the standbys export the findings their leader persisted
                *series(
                    "bk_auditor_ledgers_with_findings", {eu0: "3x30", eu1: "3x30", us0: "0x30", us1: "0x30"}, findings
                ),
            ],
            "alert_rule_test": [
                {
                    "eval_time": "10m",
                    "alertname": "BkAuditorEntryNoReplica",
                    "exp_alerts": [
                        alert(
                            no_replica, {"bookkeeper_cluster": eu_c, "namespace": "pulsar", "severity": "critical"}, "3"
                        )
                    ],
                },
                {"eval_time": "10m", "alertname": "BkAuditorMultipleLeaders", "exp_alerts": []},
                {"eval_time": "10m", "alertname": "BkAuditorNoLeader", "exp_alerts": []},
            ],
        },
        {
            "name": "one cluster loses its leader",
            "interval": "1m",
            "input_series": series("bk_auditor_is_leader", {eu0: "1x22", eu1: "0x22", us0: "1 1 0x20", us1: "0x22"}),
            "alert_rule_test": [
                {
                    "eval_time": "9m",
                    "alertname": "BkAuditorNoLeader",
                    "exp_alerts": [
                        alert(
                            no_leader, {"bookkeeper_cluster": us_c, "namespace": "pulsar", "severity": "warning"}, "0"
                        )
                    ],
                },
                {"eval_time": "9m", "alertname": "BkAuditorMultipleLeaders", "exp_alerts": []},
            ],
        },
        {
            "name": "two releases audit the same cluster",
            "interval": "1m",
            "input_series": series("bk_auditor_is_leader", {eu0: "1x30", us0.replace(us_c, eu_c): "1x30"}),
            "alert_rule_test": [
                {
                    "eval_time": "10m",
                    "alertname": "BkAuditorMultipleLeaders",
                    "exp_alerts": [
                        alert(
                            _rule(rules, "BkAuditorMultipleLeaders"),
                            {"bookkeeper_cluster": eu_c, "namespace": "pulsar", "job": job, "severity": "warning"},
                            "2",
                        )
                        for job, rules in (("bk-auditor-eu", eu_rules), ("bk-auditor-us", us_rules))
                    ],
                },
            ],
        },
    ]
    run_promtool_tests(tmp_path, [eu_path, us_path], tests)


# ------------------------------------------------------------------------------------------ metric names


@pytest.mark.parametrize("scenario", ["default", "all-features"])
def test_rule_metric_names_exist(scenario: str) -> None:
    used: set[str] = set()
    for r in alert_rules(scenario):
        used |= check_promql(r["expr"], r["alert"])
    # the rules read the findings, leader, checks, bookies, under-replication and queue metrics
    assert {
        "bk_auditor_ledgers_with_findings",
        "bk_auditor_is_leader",
        "bk_auditor_check_last_success_timestamp_seconds",
        "bk_auditor_bookie_request_errors_total",
        "bk_auditor_bookie_requests_total",
        "bk_auditor_underreplicated_past_grace_ledgers",
        "bk_auditor_recheck_queue_depth",
        "bk_auditor_lost_bookies",
    } <= used
    assert ("bk_auditor_paused" in used) == (scenario == "default")  # all-features disables that alert


def test_name_check_catches_an_invented_metric() -> None:
    with pytest.raises(AssertionError):
        check_promql("max(bk_auditor_entries_lost) > 0", "invented")
    with pytest.raises(AssertionError):
        check_promql('bk_auditor_findings{category="entries_lost"} > 0', "invented category")
    with pytest.raises(AssertionError):
        check_promql('bk_auditor_is_leader{check="scrutiny"} == 1', "label the metric does not have")


# ------------------------------------------------------------------------------------------ failover


def test_findings_alerts_survive_a_failover(tmp_path: Path) -> None:
    """Every replica exports the findings (the leader from its store, a standby from what the leader
    persisted in ZooKeeper). The leader's pod goes away for 2 minutes (its series stale) while the standby's
    go on, then the standby leads and the old pod comes back as a standby: the data-loss alert keeps firing
    throughout, from the same moment (its ALERTS_FOR_STATE, the time it became active, never changes: no
    resolve, no second firing); the pause alert likewise."""
    rules_path = write_rules_file(tmp_path)
    rules = alert_rules()
    base = 'bookkeeper_cluster="zk:2181/ledgers", namespace="pulsar", job="bk-auditor"'
    pod0 = f'{base}, instance="10.1.0.1:8000", pod="bk-auditor-0"'
    pod1 = f'{base}, instance="10.1.0.2:8000", pod="bk-auditor-1"'
    crit = {"bookkeeper_cluster": "zk:2181/ledgers", "namespace": "pulsar", "severity": "critical"}
    no_replica = _rule(rules, "BkAuditorEntryNoReplica")
    paused = _rule(rules, "BkAuditorPausedTooLong")
    findings = ', category="entry_no_replica"'
    # minute:   0..2 nothing; 3 the finding; 10 the leader's last scrape; 11-12 gone; 13.. pod-0 back, standby
    old_leader = "0 0 0 3x7 stale _ 3x40"
    tests = [
        {
            "name": "failover: the leader's series stop for 2 minutes, the standby takes over",
            "interval": "1m",
            "input_series": [
                {"series": f"bk_auditor_is_leader{{{pod0}}}", "values": "1x10 stale _ 0x40"},
                {"series": f"bk_auditor_is_leader{{{pod1}}}", "values": "0x12 1x40"},
                {"series": f"bk_auditor_ledgers_with_findings{{{pod0}{findings}}}", "values": old_leader},
                {"series": f"bk_auditor_ledgers_with_findings{{{pod1}{findings}}}", "values": "0 0 0 0 3x48"},
                {"series": f"bk_auditor_paused{{{pod0}}}", "values": "1x10 stale _ 1x40"},
                {"series": f"bk_auditor_paused{{{pod1}}}", "values": "1x52"},
            ],
            "alert_rule_test": [
                {"eval_time": "2m", "alertname": "BkAuditorEntryNoReplica", "exp_alerts": []},
                *(
                    {
                        "eval_time": f"{minute}m",
                        "alertname": "BkAuditorEntryNoReplica",
                        "exp_alerts": [{"exp_labels": crit, "exp_annotations": _annotations(no_replica, "3", crit)}],
                    }
                    for minute in range(3, 31)
                ),
            ],
            "promql_expr_test": [
                {  # active since minute 3 (180 s), at every evaluation of the failover and after it
                    "expr": 'min_over_time(ALERTS_FOR_STATE{alertname="BkAuditorEntryNoReplica"}[28m])',
                    "eval_time": "30m",
                    "exp_samples": [{"labels": _alert_series(no_replica, crit), "value": 180}],
                },
                {
                    "expr": 'max_over_time(ALERTS_FOR_STATE{alertname="BkAuditorEntryNoReplica"}[28m])',
                    "eval_time": "30m",
                    "exp_samples": [{"labels": _alert_series(no_replica, crit), "value": 180}],
                },
                {  # firing at each of the 28 evaluations from minute 3 to 30: no gap
                    "expr": 'count_over_time(ALERTS{alertname="BkAuditorEntryNoReplica", alertstate="firing"}[27m59s])',
                    "eval_time": "30m",
                    "exp_samples": [{"labels": _alert_series(no_replica, crit, alertstate="firing"), "value": 28}],
                },
                {  # the pause (24 h for) stays pending from minute 0 through the failover
                    "expr": 'max_over_time(ALERTS_FOR_STATE{alertname="BkAuditorPausedTooLong"}[30m])',
                    "eval_time": "30m",
                    "exp_samples": [
                        {
                            "labels": _alert_series(paused, {**crit, "severity": paused["labels"]["severity"]}),
                            "value": 0,
                        }
                    ],
                },
            ],
        },
        {
            "name": "the finding resolves on the leader (the standby follows): the alert resolves",
            "interval": "1m",
            "input_series": [
                {"series": f"bk_auditor_is_leader{{{pod0}}}", "values": "1x30"},
                {"series": f"bk_auditor_is_leader{{{pod1}}}", "values": "0x30"},
                {"series": f"bk_auditor_ledgers_with_findings{{{pod0}{findings}}}", "values": "3x10 0x20"},
                {"series": f"bk_auditor_ledgers_with_findings{{{pod1}{findings}}}", "values": "3x11 0x19"},
            ],
            "alert_rule_test": [
                {
                    "eval_time": "9m",
                    "alertname": "BkAuditorEntryNoReplica",
                    "exp_alerts": [{"exp_labels": crit, "exp_annotations": _annotations(no_replica, "3", crit)}],
                },
                {"eval_time": "12m", "alertname": "BkAuditorEntryNoReplica", "exp_alerts": []},
                {"eval_time": "25m", "alertname": "BkAuditorEntryNoReplica", "exp_alerts": []},
            ],
        },
    ]
    run_promtool_tests(tmp_path, [rules_path], tests)


def _alert_series(rule: dict[str, Any], labels: dict[str, str], **extra: str) -> str:
    """The labels of an active alert's ALERTS / ALERTS_FOR_STATE series of `rule`, after a function over
    them (no metric name), as promtool prints them."""
    all_labels = {"alertname": rule["alert"], **labels, **extra}
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(all_labels.items())) + "}"


def test_findings_and_pause_rules_read_across_replicas_the_rest_from_the_leader() -> None:
    """The findings and the pause flag are exported by every replica with one meaning: no leader filter.
    Under-replication, lost bookies and the re-check queue are the leader's alone."""
    for r in alert_rules():
        expr = r["expr"]
        if "bk_auditor_ledgers_with_findings" in expr or "bk_auditor_paused" in expr:
            assert "bk_auditor_is_leader" not in expr, r["alert"]
            assert expr.startswith("max by (bookkeeper_cluster, namespace) ("), r["alert"]
        for name in (
            "bk_auditor_underreplicated_past_grace_ledgers",
            "bk_auditor_lost_bookies",
            "bk_auditor_recheck_queue_depth",
        ):
            if name in expr:
                assert "bk_auditor_is_leader" in expr, r["alert"]


def test_runbook_url_by_default_points_at_each_runbook() -> None:
    """runbook_url is on by default: docs/deploy.md#<alert, lower case>, a heading of docs/deploy.md (GitHub's
    and most renderers' anchor of `#### BkAuditorX` is `bkauditorx`)."""
    headings = {m.group(1).lower() for m in re.finditer(r"^#{2,4} (BkAuditor\w+)$", DEPLOY_DOC.read_text(), re.M)}
    for r in alert_rules():
        url = r["annotations"]["runbook_url"]
        assert url == f"docs/deploy.md#{r['alert'].lower()}", url
        assert url.split("#")[1] in headings, r["alert"]


# ------------------------------------------------------------------------------------------ findings -> alerts


def _one_finding_of(category: Any) -> Any:
    """A finding of `category` shaped as the code that reports it shapes it: about a bookie (no ledger)
    for the bookie categories, about one ledger otherwise."""
    from auditor.durability.findings import Category, Finding
    from auditor.durability.ids import LedgerId
    from auditor.durability.verdicts import unreachable_bookie_finding

    if category is Category.BOOKIE_UNREACHABLE:
        return unreachable_bookie_finding("10.0.0.9:3181", registered=True, attempts=3)
    if category is Category.BOOKIE_REINCARNATED:
        return Finding.of(category, "bookie 10.0.0.9:3181 was reformatted", bookie="10.0.0.9:3181", confirmed=True)
    return Finding.of(category, "ledger 7: planted", ledger=LedgerId.of(7), segment_index=0, confirmed=True)


def test_one_real_finding_of_each_alerting_category_fires_its_alert(tmp_path: Path) -> None:
    """Each findings alert reads a gauge that a real finding of its category moves: the store holds one
    finding as the daemon reports it, a real AuditorMetrics exports it, and promtool fires the alert on
    those values. (A bookie's findings name no ledger: an alert on ledgers_with_findings never fired.)"""
    from prometheus_client import CollectorRegistry
    from prometheus_client.parser import text_string_to_metric_families

    from auditor.board.findings import FindingStore
    from auditor.daemon.metrics import AuditorMetrics
    from auditor.durability.findings import Category

    rules_path = write_rules_file(tmp_path)
    rules = alert_rules()
    pod = 'namespace="pulsar", job="bk-auditor", instance="10.1.0.1:8000"'
    tests = []
    for rule in rules:
        m = re.search(r'(bk_auditor_(?:ledgers_with_findings|findings))\{category="(\w+)"', rule["expr"])
        if m is None:
            continue
        gauge, category = m.group(1), Category(m.group(2))
        store = FindingStore()
        store.add(_one_finding_of(category), "scrutiny")
        metrics = AuditorMetrics(CollectorRegistry(), cluster="zk:2181/ledgers", checks=["scrutiny"])
        metrics.sync_findings(store)
        exported = {
            s.labels["category"]: s.value
            for fam in text_string_to_metric_families(metrics.exposition().decode())
            for s in fam.samples
            if s.name == gauge and "category" in s.labels
        }
        value = exported.get(category.value, 0.0)
        labels = f'bookkeeper_cluster="zk:2181/ledgers", {pod}'
        firing = {"bookkeeper_cluster": "zk:2181/ledgers", "namespace": "pulsar", **rule["labels"]}
        tests.append(
            {
                "name": f"{rule['alert']}: one {category.value} finding",
                "interval": "1m",
                "input_series": [
                    {"series": f'{gauge}{{{labels}, category="{category.value}"}}', "values": f"{value:g}x90"},
                    {"series": f"bk_auditor_is_leader{{{labels}}}", "values": "1x90"},
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "90m",
                        "alertname": rule["alert"],
                        "exp_alerts": [
                            {"exp_labels": firing, "exp_annotations": _annotations(rule, f"{value:g}", firing)}
                        ],
                    }
                ],
            }
        )
    assert len(tests) >= 10, [t["name"] for t in tests]
    run_promtool_tests(tmp_path, [rules_path], tests)
