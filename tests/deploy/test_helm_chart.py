"""The Helm chart (helm/bk-auditor), rendered and linted by Helm v4 itself (helm-python-sdk embeds it) with its
values.schema.json enforced; what the values do to the objects; the probes it configures, run against a real
admin server; the config file it writes, loaded by the daemon's own `load_settings`; its NOTES."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from auditor.settings import load_settings
from tests.deploy.artifacts import (
    CHART,
    DASHBOARD,
    PROMETHEUS_OPERATOR_APIS,
    SCENARIOS,
    one,
    render_docs,
    render_manifests,
    render_scenario,
    rendered,
)
from tests.deploy.promql import alert_rules

# ------------------------------------------------------------------------------------------ Helm: lint, schema


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_chart_lints_clean(scenario: str) -> None:
    for kube in ("v1.25.0", "v1.30.0"):
        report = helm_python.lint(str(CHART), copy.deepcopy(SCENARIOS[scenario]), strict=True, kube_version=kube)
        assert report["errors"] == [], report
        serious = [m for m in report["messages"] if m["severity"] >= 2]  # 2 warning, 3 error
        assert serious == [], serious
        assert report["total_charts_linted"] == 1


def test_chart_metadata() -> None:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert meta["apiVersion"] == "v2"
    assert meta["kubeVersion"] == ">=1.25.0-0"
    import auditor

    assert meta["appVersion"] == auditor.__version__


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_values_schema_accepts_every_scenario(scenario: str) -> None:
    helm_python.Chart.load(str(CHART)).validate_schema(copy.deepcopy(SCENARIOS[scenario]))


@pytest.mark.parametrize(
    "bad, where",
    [
        ({"probes": {"type": "http"}}, "/probes/type"),
        ({"replicas": 2}, "replicas"),
        ({"replicaCount": "two"}, "/replicaCount"),
        ({"ports": {"admin": 70000}}, "/ports/admin"),
        ({"prometheusRule": {"thresholds": {"noLeaderFor": "5 minutes"}}}, "/prometheusRule/thresholds/noLeaderFor"),
        ({"prometheusRule": {"selector": '{namespace="x"}'}}, "/prometheusRule/selector"),
        ({"prometheusRule": {"disabledAlerts": ["NoSuchAlert"]}}, "/prometheusRule/disabledAlerts"),
        ({"antiAffinity": {"type": "sometimes"}}, "/antiAffinity/type"),
        ({"pdb": {"maxUnavailable": "half"}}, "/pdb/maxUnavailable"),
        ({"config": {"schedule": {"scrutiny_seconds": -1}}}, "/config/schedule/scrutiny_seconds"),
        # untyped (the daemon would refuse it too): dns:pulsar-toolset or cn:pulsar-toolset
        ({"tls": {"admin": {"authorizedClients": ["pulsar-toolset"]}}}, "/tls/admin/authorizedClients/0"),
    ],
)
def test_values_schema_rejects(bad: dict[str, Any], where: str) -> None:
    chart = helm_python.Chart.load(str(CHART))
    with pytest.raises(helm_python.HelmValuesError) as err:
        chart.validate_schema(bad)
    assert where in str(err.value)
    with pytest.raises(helm_python.HelmValuesError):  # render enforces the schema too
        chart.render(bad, name="bk-auditor")


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"config": {"admin": {"bind": "0.0.0.0:1234"}}}, "set ports.admin instead"),
        ({"config": {"metrics": {"bind": "0.0.0.0:1234"}}}, "set ports.metrics instead"),
        ({"config": {"admin": {"tls_cert": "/certs/tls.crt", "tls_key": "/certs/tls.key"}}}, "use tls.admin.*"),
        ({"config": {"admin": {"probe_bind": "0.0.0.0:1"}}}, "config.admin.probe_bind is set by the chart"),
        ({"tls": {"admin": {"enabled": True, "secretName": "s"}}}, "tls.ca.secretName is required"),
        ({"tls": {"ca": {"secretName": "ca"}, "admin": {"enabled": True}}}, "tls.admin.secretName is required"),
        (
            {"tls": {"ca": {"secretName": "ca"}, "admin": {"enabled": True, "secretName": "s", "probePort": 7979}}},
            "tls.admin.probePort must differ",
        ),
        ({"tls": {"bookie": {"enabled": True}}}, "tls.ca.secretName is required"),
        (
            {"tls": {"ca": {"secretName": "ca"}, "zookeeper": {"enabled": True}}, "config": {"zookeeper": {"tls": {}}}},
            "config.zookeeper.tls is set by the chart",
        ),
        ({"auth": {"zookeeper": {"enabled": True, "jaasKey": "j"}}}, "auth.zookeeper.secretName is required"),
        ({"agent": {"enabled": True}}, "agent.tokenSecret.name is required"),
        (
            {"agent": {"enabled": True, "tokenSecret": {"name": "t"}}, "config": {"agent": {"port": 1}}},
            "config.agent.port is set by the chart",
        ),
        ({"auth": {"zookeeper": {"enabled": True, "secretName": "s"}}}, "needs jaasKey"),
        (
            {"auth": {"zookeeper": {"enabled": True, "secretName": "s", "scheme": "digest", "jaasKey": "j"}}},
            "digest needs auth.zookeeper.username",
        ),
    ],
)
def test_render_refuses_inconsistent_config(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=re.escape(message)):
        helm_python.Chart.load(str(CHART)).render(bad, name="bk-auditor")


# ------------------------------------------------------------------------------------------ policies


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_statefulset_policies(scenario: str) -> None:
    values = helm_python.Chart.load(str(CHART)).merge_values(copy.deepcopy(SCENARIOS[scenario]))
    docs = rendered(scenario)
    sts = one(docs, "StatefulSet")
    pod = sts["spec"]["template"]["spec"]
    assert sts["spec"]["replicas"] == values["replicaCount"]
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["serviceName"] == one(docs, "Service", sts["metadata"]["name"])["metadata"]["name"]
    # Pod Security Standards "restricted"
    psc = pod["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0 and psc["seccompProfile"]["type"] == "RuntimeDefault"
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False
    # a writable /tmp next to the read-only root filesystem; the config where the command reads it
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["tmp"] == "/tmp"
    config_path = c["args"][c["args"].index("--config") + 1]
    assert c["args"][0] == "run" and Path(config_path).parent == Path(mounts["config"])
    (cm_vol,) = [v for v in pod["volumes"] if v["name"] == "config"]
    cm = one(docs, "ConfigMap", cm_vol["configMap"]["name"])
    assert Path(config_path).name in cm["data"]
    # resources: requests and limits
    assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and "memory" in c["resources"]["limits"]
    # the image is pinned
    assert not c["image"].endswith(":latest") and ":" in c["image"]
    # ports, probes on the admin port, identity from the pod name
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    admin_tls = values["tls"]["admin"]["enabled"]
    expected_ports = {"grpc-admin": values["ports"]["admin"], "http-metrics": values["ports"]["metrics"]}
    if admin_tls:  # the kubelet cannot do TLS: a plaintext, health-only port of its own
        expected_ports["grpc-probe"] = values["tls"]["admin"]["probePort"]
    assert ports == expected_ports
    probe_port = expected_ports["grpc-probe" if admin_tls else "grpc-admin"]
    probes = {k: c[k] for k in ("livenessProbe", "readinessProbe", "startupProbe") if k in c}
    assert ("startupProbe" in probes) == values["probes"]["startup"]["enabled"]
    service_of = {"livenessProbe": "liveness", "readinessProbe": "readiness", "startupProbe": "liveness"}
    for k, probe in probes.items():
        if values["probes"]["type"] == "grpc":
            assert probe["grpc"] == {"port": probe_port, "service": service_of[k]}
        else:
            cmd = probe["exec"]["command"]
            assert cmd[:4] == ["bk-auditor", "health", "--service", service_of[k]]
            assert "--admin" not in cmd  # the pod IP comes from BKAUDIT_ADMIN_ADDRESS
            assert float(cmd[cmd.index("--timeout") + 1]) < probe["timeoutSeconds"]
    env = {e["name"]: e for e in c["env"]}
    assert env["BKAUDIT_ELECTION__IDENTITY"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    # the admin API on the pod IP (never 0.0.0.0), and the in-pod CLI pointed at it
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert (
        env["BKAUDIT_ADMIN__BIND"]["value"]
        == env["BKAUDIT_ADMIN_ADDRESS"]["value"]
        == (f"$(POD_IP):{values['ports']['admin']}")
    )
    names = [e["name"] for e in c["env"]]
    assert names.index("POD_IP") < names.index("BKAUDIT_ADMIN__BIND")  # $(POD_IP) needs it defined before
    # selectors of every Service / PDB / PodMonitor match the pods (the repair workers' own match theirs)
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    auditors = [d for d in docs if d["metadata"]["labels"].get("app.kubernetes.io/component") != "repair"]
    for d in auditors:
        if d["kind"] == "Service":
            assert d["spec"]["selector"].items() <= pod_labels.items()
            for p in d["spec"]["ports"]:
                assert p["targetPort"] in ports
        if d["kind"] in ("PodDisruptionBudget", "PodMonitor", "VMPodScrape"):
            assert d["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        if d["kind"] in ("PodMonitor", "VMPodScrape"):
            assert [e["port"] for e in d["spec"]["podMetricsEndpoints"]] == ["http-metrics"]
    if values["replicaCount"] > 1:
        assert values["pdb"]["enabled"] and one(auditors, "PodDisruptionBudget")
        assert "podAntiAffinity" in pod["affinity"] and pod["topologySpreadConstraints"]
    assert ("checksum/config" in sts["spec"]["template"]["metadata"].get("annotations", {})) == values[
        "restartPodsOnConfigMapChange"
    ]


def test_all_features_values_reach_the_objects() -> None:
    docs = rendered("all-features")
    sts = one(docs, "StatefulSet")
    pod = sts["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["image"] == "registry.example/bk-auditor:0.1.0-rc1"
    assert {"name": "BKAUDIT_RECHECK__ATTEMPTS", "value": "5"} in c["env"]
    assert pod["serviceAccountName"] == "auditor" == one(docs, "ServiceAccount")["metadata"]["name"]
    assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert len(pod["topologySpreadConstraints"]) == 2
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "9000"
    for d in docs:
        assert d["metadata"]["labels"]["team"] == "storage"
    assert one(docs, "PodMonitor")["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    rules = alert_rules("all-features")
    assert "BkAuditorPausedTooLong" not in {r["alert"] for r in rules}
    for r in rules:
        assert r["labels"]["team"] == "storage"
        assert r["annotations"]["runbook_url"] == f"https://docs.example/bk-auditor/deploy.md#{r['alert'].lower()}"
        for m in re.finditer(r"(bk_auditor_[a-z_]+)(\{[^}]*\})?", r["expr"]):
            assert m.group(2) and 'container="bk-auditor"' in m.group(2), (r["alert"], m.group(0))
    assert one(docs, "PrometheusRule")["spec"]["groups"][0]["interval"] == "1m"
    by_name = {r["alert"]: r for r in rules}
    assert by_name["BkAuditorNoLeader"]["for"] == "10m"
    assert by_name["BkAuditorEntryBelowWriteQuorum"]["for"] == "2h"
    # staleness: scrutiny every 43200 s (config), ledger check 302400 s is a Java key so the default
    # applies, open-ledger check off (0): no rules for it; factor 3
    stale = {re.search(r'check="(\w+)"', r["expr"]).group(1): r for r in rules if r["alert"] == "BkAuditorCheckStale"}
    assert set(stale) == {"bookies", "ledger", "scrutiny", "references"}
    assert stale["scrutiny"]["expr"].rstrip().endswith(f"> {3 * 43200}")
    never = {r["labels"]["check"]: r for r in rules if r["alert"] == "BkAuditorCheckNeverSucceeded"}
    assert never["scrutiny"]["for"] == f"{3 * 43200}s"
    dash = one(docs, "ConfigMap", "bk-auditor-dashboard")
    assert dash["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dash["data"]["bk-auditor.json"]) == json.loads(DASHBOARD.read_text())


def test_check_intervals_override_for_staleness_alerts() -> None:
    # null removes the chart's schedule defaults, as when the intervals come from Java keys or the environment
    values = {
        "config": {"schedule": {"ledger_check_seconds": None, "scrutiny_seconds": None}},
        "prometheusRule": {"checkIntervals": {"ledger": 0, "scrutiny": 600}},
    }
    out, _ = render_docs(values)
    rule = yaml.safe_load(out["bk-auditor/templates/prometheusrule.yaml"])
    rules = rule["spec"]["groups"][0]["rules"]
    stale = {re.search(r'check="(\w+)"', r["expr"]).group(1): r for r in rules if r["alert"] == "BkAuditorCheckStale"}
    assert set(stale) == {"bookies", "scrutiny", "open", "references"}
    assert stale["scrutiny"]["expr"].rstrip().endswith("> 1200")
    assert stale["bookies"]["expr"].rstrip().endswith("> 172800")  # the daemon's default, 1 d


# ------------------------------------------------------------------------------------------ probes, for real


async def _run(cmd: list[str]) -> int:
    """Run a probe command as the kubelet would (a child process), without blocking the server's loop."""
    exe = Path(sys.executable).parent / cmd[0]
    assert exe.is_file(), f"{cmd[0]} is not installed next to {sys.executable}"
    proc = await asyncio.create_subprocess_exec(
        str(exe), *cmd[1:], stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode in (0, 1), err.decode()  # 2 would mean a usage or connection error
    return proc.returncode


async def test_probes_work_against_a_real_admin_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rendered gRPC probes' service names and the exec probes' command lines, used on the daemon's
    real admin server: liveness serves at once, readiness only once the daemon says so."""
    from grpc import aio
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from auditor.admin.server import AdminServer
    from auditor.daemon.backend import StateBackend
    from auditor.daemon.state import DaemonState

    for key in [k for k in __import__("os").environ if k.upper().startswith("BKAUDIT_")]:
        monkeypatch.delenv(key)
    grpc_c = one(rendered("default"), "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    exec_c = one(rendered("exec-probes"), "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    server = AdminServer(StateBackend(DaemonState("bk-auditor-0")), "127.0.0.1:0")
    port = await server.start()
    # the pod's address is $(POD_IP):7979, which may not be ours; the probe finds it in this variable
    assert any(e["name"] == "BKAUDIT_ADMIN_ADDRESS" for e in exec_c["env"])
    monkeypatch.setenv("BKAUDIT_ADMIN_ADDRESS", f"127.0.0.1:{port}")

    def exec_cmd(probe: str) -> list[str]:
        return list(exec_c[probe]["exec"]["command"])

    try:
        async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)

            async def grpc_probe(probe: str) -> int:
                service = grpc_c[probe]["grpc"]["service"]
                return (await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)).status

            serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
            assert await grpc_probe("livenessProbe") == serving
            assert await grpc_probe("startupProbe") == serving
            assert await grpc_probe("readinessProbe") == not_serving
            assert await _run(exec_cmd("livenessProbe")) == 0
            assert await _run(exec_cmd("readinessProbe")) == 1
            await server.set_health(ready=True)
            assert await grpc_probe("readinessProbe") == serving
            assert await _run(exec_cmd("readinessProbe")) == 0
    finally:
        await server.stop(0)


# ------------------------------------------------------------------------------------------ config file


def test_agents_token_mounted_and_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With agent.enabled both workloads mount the token Secret read-only where config.agent.token_file
    points, and the daemon's loader reads the agent settings the chart wrote."""
    docs = rendered("agents")
    sts = one(docs, "StatefulSet")
    pod = sts["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "agent-token"]
    assert volume["secret"]["secretName"] == "bk-auditor-agent"
    assert volume["secret"]["items"] == [{"key": "tok", "path": "token"}]
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "agent-token"]
    assert mount == {"name": "agent-token", "mountPath": "/etc/bk-auditor/agent", "readOnly": True}
    path = tmp_path / "config.yaml"
    path.write_text(one(docs, "ConfigMap", sts["metadata"]["name"])["data"]["config.yaml"])
    for key in [k for k in __import__("os").environ if k.upper().startswith("BKAUDIT_")]:
        monkeypatch.delenv(key)
    agent = load_settings(path).agent
    assert agent.port == 7990 and agent.token_file == Path("/etc/bk-auditor/agent/token")
    assert "agent" not in one(rendered("default"), "ConfigMap", sts["metadata"]["name"])["data"]["config.yaml"]


@pytest.mark.parametrize("scenario", ["default", "all-features"])
def test_configmap_is_a_valid_daemon_config(scenario: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon's own loader reads the rendered config.yaml plus the environment the pod gets."""
    docs = rendered(scenario)
    values = helm_python.Chart.load(str(CHART)).merge_values(copy.deepcopy(SCENARIOS[scenario]))
    sts = one(docs, "StatefulSet")
    c = sts["spec"]["template"]["spec"]["containers"][0]
    path = tmp_path / "config.yaml"
    path.write_text(one(docs, "ConfigMap", sts["metadata"]["name"])["data"]["config.yaml"])
    for key in [k for k in __import__("os").environ if k.upper().startswith("BKAUDIT_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("BKAUDIT_ELECTION__IDENTITY", f"{sts['metadata']['name']}-0")
    for e in c["env"]:
        if "value" in e and e["name"].startswith("BKAUDIT_"):
            monkeypatch.setenv(e["name"], e["value"].replace("$(POD_IP)", "10.1.2.3"))
    settings = load_settings(path)
    assert settings.admin.bind == f"10.1.2.3:{values['ports']['admin']}"
    assert settings.metrics.bind == f"0.0.0.0:{values['ports']['metrics']}"
    assert settings.metrics.enabled
    assert settings.log.format == "json"
    assert settings.election.identity == "bk-auditor-0"
    assert not settings.election.join_java_election
    assert settings.election_path == f"{settings.ledgers_root}/bk-auditor/election"
    assert settings.metadata_service_uri == values["config"]["metadata_service_uri"]
    settings.require_metadata()
    if scenario == "all-features":
        assert settings.ledgers_root == "/my-cluster/ledgers"
        assert settings.schedule.scrutiny_seconds == 43200
        assert settings.schedule.ledger_check_seconds == 302400  # from the Java key
        assert settings.recheck.attempts == 5  # from extraEnv


def test_notes_render() -> None:
    out, _ = render_scenario("default")
    notes = out["bk-auditor/templates/NOTES.txt"]
    assert "placeholder" in notes and "bk-auditor-0 -- bk-auditor status" in notes
    out, _ = render_scenario("all-features")
    notes = out["bk-auditor/templates/NOTES.txt"]
    assert "placeholder" not in notes
    assert "bk-auditor-0 -- bk-auditor status\n" in notes  # the address comes from the pod's environment
    assert "port 7980" in notes and "without authentication" in notes
    notes = render_scenario("admin-tls")[0]["bk-auditor/templates/NOTES.txt"]
    assert "with mutual TLS" in notes and "only for dns:pulsar-toolset" in notes and "plaintext port 7978" in notes


# ------------------------------------------------------------------------------------------ monitoring APIs

MONITORING_KINDS = {"PodMonitor", "PrometheusRule", "VMPodScrape", "VMRule"}


@pytest.mark.parametrize(
    "values, api_versions, expected",
    [
        # "auto" (the default): what the cluster serves
        ({}, PROMETHEUS_OPERATOR_APIS, {"PodMonitor", "PrometheusRule"}),
        ({}, (), set()),
        ({}, ("monitoring.coreos.com/v1/PodMonitor",), {"PodMonitor"}),
        ({"victoriaMetrics": {"enabled": True}}, PROMETHEUS_OPERATOR_APIS, set()),
        ({"victoriaMetrics": {"enabled": True}}, render_manifests.VICTORIA_METRICS_APIS, {"VMPodScrape", "VMRule"}),
        # explicit: whatever the cluster serves
        ({"podMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}, (), {"PodMonitor", "PrometheusRule"}),
        ({"podMonitor": {"enabled": False}, "prometheusRule": {"enabled": False}}, PROMETHEUS_OPERATOR_APIS, set()),
        ({"prometheusRule": {"enabled": False}}, PROMETHEUS_OPERATOR_APIS, {"PodMonitor"}),
    ],
)
def test_monitoring_objects_follow_the_cluster_apis(
    values: dict[str, Any], api_versions: tuple[str, ...], expected: set[str]
) -> None:
    out, docs = render_docs(values, api_versions=api_versions)
    assert {d["kind"] for d in docs} & MONITORING_KINDS == expected
    notes = out["bk-auditor/templates/NOTES.txt"]
    assert ("scraped by the" in notes) == bool(expected & {"PodMonitor", "VMPodScrape"})


def test_two_releases_in_one_namespace_do_not_collide() -> None:
    """Two releases (two clusters) in one namespace: distinct object names, selectors that pick only their
    own pods, a job label per release, and alert rules reading only their own release's series."""
    releases = {
        name: render_docs({"config": {"metadata_service_uri": uri}}, name=name)[1]
        for name, uri in (
            ("bk-auditor-eu", "zk+hierarchical://zk-eu:2181/ledgers"),
            ("bk-auditor-us", "zk+hierarchical://zk-us:2181/ledgers"),
        )
    }
    eu, us = releases["bk-auditor-eu"], releases["bk-auditor-us"]
    assert not {(d["kind"], d["metadata"]["name"]) for d in eu} & {(d["kind"], d["metadata"]["name"]) for d in us}
    for mine, other in ((eu, us), (us, eu)):
        other_pods = one(list(other), "StatefulSet")["spec"]["template"]["metadata"]["labels"]
        for d in mine:
            selector = d.get("spec", {}).get("selector")
            if isinstance(selector, dict):  # Services select with a plain map, the rest with matchLabels
                match = selector.get("matchLabels", selector)
                assert not match.items() <= other_pods.items(), (d["kind"], d["metadata"]["name"])
    for name, docs in releases.items():
        pm = one(list(docs), "PodMonitor")
        pod_labels = one(list(docs), "StatefulSet")["spec"]["template"]["metadata"]["labels"]
        assert pod_labels[pm["spec"]["jobLabel"]] == name  # job="<release>"
        rules = [r for g in one(list(docs), "PrometheusRule")["spec"]["groups"] for r in g["rules"]]
        for r in rules:
            scoped = re.findall(r"bk_auditor_[a-z_]+\{([^}]*)\}", r["expr"])
            assert any(f'job="{name}"' in m and 'namespace="pulsar"' in m for m in scoped), r
            if r["alert"] != "BkAuditorMultipleLeaders":  # the one rule that counts leaders across releases
                assert all(f'job="{name}"' in m for m in scoped), r


def test_repair_workers_run_in_a_deployment_of_their_own() -> None:
    """`repair.enabled`: N `bk-auditor repair` workers with the auditors' config, TLS and auth, labelled so
    that no selector of the auditors' objects matches them; none by default."""
    assert not [d for d in rendered("default") if d["kind"] == "Deployment"]
    docs = rendered("repair")
    dep = one(docs, "Deployment")
    sts = one(docs, "StatefulSet")
    assert dep["spec"]["replicas"] == 3 and dep["metadata"]["name"] == sts["metadata"]["name"] + "-repair"
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pod_labels["app.kubernetes.io/component"] == "repair"
    for d in docs:  # the auditors' StatefulSet, Services, PDB, PodMonitor, NetworkPolicy: none selects a worker
        sel = (d.get("spec") or {}).get("selector") or (d.get("spec") or {}).get("podSelector") or {}
        match = sel.get("matchLabels", sel) if isinstance(sel, dict) else {}
        if match and d is not dep:
            mine = d["metadata"]["name"] == dep["metadata"]["name"]  # the workers' own PDB and PodMonitor
            assert (match.items() <= pod_labels.items()) == mine, d["kind"]
    (worker,) = dep["spec"]["template"]["spec"]["containers"]
    (auditor,) = sts["spec"]["template"]["spec"]["containers"]
    assert worker["args"][0] == "repair" and worker["args"][1:] == auditor["args"][1:]
    names = lambda c: {e["name"] for e in c["env"]}  # noqa: E731
    assert names(worker) == names(auditor) and "BKAUDIT_ELECTION__IDENTITY" in names(worker)
    assert worker["volumeMounts"] == auditor["volumeMounts"]
    assert dep["spec"]["template"]["spec"]["volumes"] == sts["spec"]["template"]["spec"]["volumes"]
    assert worker["securityContext"] == auditor["securityContext"]
    assert [p["containerPort"] for p in worker["ports"]] == [
        p["containerPort"] for p in auditor["ports"] if p["name"] == "http-metrics"
    ]
    assert {"startupProbe", "livenessProbe", "readinessProbe"} <= worker.keys()  # HTTP, beside the metrics


# ------------------------------------------------------------------------------------------ repair workers


def _repair_objects(docs: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> dict[str, dict[str, Any]]:
    """The objects of the repair workers (component label "repair"), by kind."""
    objs = [d for d in docs if d["metadata"]["labels"].get("app.kubernetes.io/component") == "repair"]
    by_kind = {d["kind"]: d for d in objs}
    assert len(by_kind) == len(objs), [(d["kind"], d["metadata"]["name"]) for d in objs]
    return by_kind


def test_repair_workers_probes_resources_pdb_and_podmonitor() -> None:
    """repair.enabled: the Deployment's probes are HTTP GETs of /healthz and /readyz on the metrics port
    it declares, with requests and limits; a PDB and a PodMonitor of the workers' own select exactly its
    pods and scrape that port, job="<release>" as the auditors'. Valid for Kubernetes and the operator."""
    from tests.deploy.test_kubernetes import K8S_VERSIONS, validate_object

    docs = rendered("repair")
    objs = _repair_objects(docs)
    assert set(objs) == {"Deployment", "PodDisruptionBudget", "PodMonitor"}
    dep, pdb, pm = objs["Deployment"], objs["PodDisruptionBudget"], objs["PodMonitor"]
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    (worker,) = dep["spec"]["template"]["spec"]["containers"]
    port_names = {p["name"] for p in worker["ports"]}
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert worker[probe]["httpGet"] == {"path": path, "port": "http-metrics"}, probe
        assert worker[probe]["httpGet"]["port"] in port_names
        assert worker[probe]["timeoutSeconds"] >= 1
    assert worker["startupProbe"]["failureThreshold"] * worker["startupProbe"]["periodSeconds"] >= 60
    res = worker["resources"]
    assert res["requests"]["memory"] and res["requests"]["cpu"] and res["limits"]["memory"] and res["limits"]["cpu"]
    assert pdb["spec"]["maxUnavailable"] == 1
    for d in (pdb, pm):
        assert d["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        assert d["metadata"]["name"] == dep["metadata"]["name"]
    (endpoint,) = pm["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in port_names and endpoint["path"] == "/metrics"
    auditors_pm = one([d for d in docs if d not in objs.values()], "PodMonitor")
    assert pm["spec"]["jobLabel"] == auditors_pm["spec"]["jobLabel"]
    assert pod_labels[pm["spec"]["jobLabel"]] == "bk-auditor"  # job="<release name>"
    for version in K8S_VERSIONS:
        for d in objs.values():
            validate_object(d, version)


@pytest.mark.parametrize(
    "values, api_versions, expected",
    [
        # off by default: nothing of the workers renders
        ({}, PROMETHEUS_OPERATOR_APIS, set()),
        ({"repair": {"pdb": {"enabled": True}, "scrape": "serviceMonitor"}}, PROMETHEUS_OPERATOR_APIS, set()),
        ({"repair": {"enabled": True}}, PROMETHEUS_OPERATOR_APIS, {"Deployment", "PodDisruptionBudget", "PodMonitor"}),
        # the monitoring object only where the cluster serves its API ("auto"), or when asked for
        ({"repair": {"enabled": True}}, (), {"Deployment", "PodDisruptionBudget"}),
        (
            {"repair": {"enabled": True}, "podMonitor": {"enabled": True}},
            (),
            {"Deployment", "PodDisruptionBudget", "PodMonitor"},
        ),
        (
            {"repair": {"enabled": True, "pdb": {"enabled": False}, "scrape": "none"}},
            PROMETHEUS_OPERATOR_APIS,
            {"Deployment"},
        ),
        # a Service for the workers' metrics, and a ServiceMonitor on it where the API is served
        (
            {"repair": {"enabled": True, "scrape": "serviceMonitor"}},
            (*PROMETHEUS_OPERATOR_APIS, "monitoring.coreos.com/v1/ServiceMonitor"),
            {"Deployment", "PodDisruptionBudget", "Service", "ServiceMonitor"},
        ),
        (
            {"repair": {"enabled": True, "scrape": "serviceMonitor"}},
            PROMETHEUS_OPERATOR_APIS,
            {"Deployment", "PodDisruptionBudget", "Service"},
        ),
        (
            {"repair": {"enabled": True}, "victoriaMetrics": {"enabled": True}},
            render_manifests.VICTORIA_METRICS_APIS,
            {"Deployment", "PodDisruptionBudget", "VMPodScrape"},
        ),
        (
            {"repair": {"enabled": True, "scrape": "serviceMonitor"}, "victoriaMetrics": {"enabled": True}},
            (*render_manifests.VICTORIA_METRICS_APIS, "operator.victoriametrics.com/v1beta1/VMServiceScrape"),
            {"Deployment", "PodDisruptionBudget", "Service", "VMServiceScrape"},
        ),
    ],
)
def test_repair_objects_follow_the_values_and_the_cluster_apis(
    values: dict[str, Any], api_versions: tuple[str, ...], expected: set[str]
) -> None:
    from tests.deploy.test_kubernetes import validate_object

    _, docs = render_docs(values, api_versions=api_versions)
    objs = _repair_objects(docs)
    assert set(objs) == expected
    for d in objs.values():
        validate_object(d, "1.30.0")
    if "Service" in objs:  # the ServiceMonitor selects the workers' Service, which selects the workers
        svc, pod_labels = objs["Service"], objs["Deployment"]["spec"]["template"]["metadata"]["labels"]
        assert svc["spec"]["selector"].items() <= pod_labels.items()
        assert [p["name"] for p in svc["spec"]["ports"]] == ["http-metrics"]
        for kind in ("ServiceMonitor", "VMServiceScrape"):
            if kind in objs:
                sm = objs[kind]["spec"]
                assert sm["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
                assert [e["port"] for e in sm["endpoints"]] == ["http-metrics"]
                assert svc["metadata"]["labels"][sm["jobLabel"]] == "bk-auditor"


@pytest.mark.parametrize(
    "bad, where",
    [
        ({"repair": {"scrape": "both"}}, "/repair/scrape"),
        ({"repair": {"pdb": {"maxUnavailable": "half"}}}, "/repair/pdb/maxUnavailable"),
        ({"repair": {"probes": {"readiness": {"periodSeconds": 0}}}}, "/repair/probes/readiness/periodSeconds"),
    ],
)
def test_values_schema_rejects_bad_repair_values(bad: dict[str, Any], where: str) -> None:
    with pytest.raises(helm_python.HelmValuesError) as err:
        helm_python.Chart.load(str(CHART)).validate_schema(bad)
    assert where in str(err.value)


def test_render_refuses_repair_without_its_http_endpoint() -> None:
    bad = {"repair": {"enabled": True}, "config": {"metrics": {"enabled": False}}}
    with pytest.raises(helm_python.HelmRenderError, match=re.escape("config.metrics.enabled must not be false")):
        helm_python.Chart.load(str(CHART)).render(bad, name="bk-auditor")


def test_repair_probes_work_against_a_real_worker_health_server() -> None:
    """The rendered probes' paths asked of the worker's real HTTP endpoint (auditor/repair/health.py), bound
    where the rendered config puts the metrics: live and ready while connected, not ready (still live)
    without the ZooKeeper session, not ready once stopping."""
    import urllib.error
    import urllib.request

    from prometheus_client import CollectorRegistry

    from auditor.repair.health import RepairHealth, serve_with_health

    docs = rendered("repair")
    dep = one(docs, "Deployment")
    (worker,) = dep["spec"]["template"]["spec"]["containers"]
    config = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])  # its TLS files are the pod's
    [port] = [p["containerPort"] for p in worker["ports"] if p["name"] == worker["livenessProbe"]["httpGet"]["port"]]
    assert config["metrics"]["bind"] == f"0.0.0.0:{port}" and config["metrics"].get("enabled", True)

    def probe(name: str) -> int:
        url = f"http://127.0.0.1:{server.port}{worker[name]['httpGet']['path']}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return e.code

    state = ["CONNECTED"]
    health = RepairHealth(lambda: state[0])
    server = serve_with_health(CollectorRegistry(), "127.0.0.1:0", health)  # the pod's port may be taken here
    try:
        assert [probe(p) for p in ("startupProbe", "livenessProbe", "readinessProbe")] == [200, 200, 200]
        state[0] = "SUSPENDED"
        assert [probe(p) for p in ("livenessProbe", "readinessProbe")] == [200, 503]
        state[0] = "CONNECTED"
        health.stopping()
        assert [probe(p) for p in ("livenessProbe", "readinessProbe")] == [200, 503]
    finally:
        server.close()
