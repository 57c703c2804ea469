"""The deployment artifacts under test and how they are rendered: paths, the Helm chart rendered under each
scenario (by Helm v4 itself, through deploy/render_manifests.py), the plain manifests, and picking objects."""

from __future__ import annotations

import copy
import functools
import importlib.util
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "bk-auditor"
PLAIN = ROOT / "deploy" / "kubernetes"
DASHBOARD = ROOT / "deploy" / "grafana" / "bk-auditor.json"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DEPLOY_DOC = ROOT / "docs" / "deploy.md"


def _load_render_manifests() -> Any:
    spec = importlib.util.spec_from_file_location("render_manifests", ROOT / "deploy" / "render_manifests.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


render_manifests = _load_render_manifests()


# ------------------------------------------------------------------------------------------ scenarios

ALL_FEATURES: dict[str, Any] = {
    "replicaCount": 3,
    "commonLabels": {"team": "storage"},
    "image": {"repository": "registry.example/bk-auditor", "tag": "0.1.0-rc1", "pullPolicy": "Always"},
    "imagePullSecrets": [{"name": "regcred"}],
    "priorityClassName": "system-cluster-critical",
    "ports": {"admin": 7980, "metrics": 9000},
    "config": {
        "metadata_service_uri": "zk+hierarchical://pulsar-zookeeper:2181/my-cluster/ledgers",
        # null removes the chart's default, so the Java key below is the only ledger-check interval
        "schedule": {
            "scrutiny_seconds": 43200,
            "open_ledger_check_seconds": 0,
            "ledger_check_seconds": None,
            "windows": ["01:00-05:00"],
        },
        "bookie_client": {"requests_per_second": 20},
        "log": {"level": "debug", "format": "json"},
        "auditorPeriodicCheckInterval": 302400,  # a Java name, accepted by the daemon
    },
    "extraEnv": [{"name": "BKAUDIT_RECHECK__ATTEMPTS", "value": "5"}],
    "extraEnvFrom": [{"secretRef": {"name": "bk-auditor-extra"}}],
    "extraVolumes": [{"name": "certs", "secret": {"secretName": "zk-tls"}}],
    "extraVolumeMounts": [{"name": "certs", "mountPath": "/etc/certs", "readOnly": True}],
    "serviceAccount": {"create": True, "name": "auditor", "annotations": {"example.com/role": "auditor"}},
    "podLabels": {"tier": "ops"},
    "podAnnotations": {"example.com/owner": "storage"},
    "scrapeAnnotations": True,
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "pulsar", "effect": "NoSchedule"}],
    "antiAffinity": {"type": "requiredDuringSchedulingIgnoredDuringExecution"},
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "bk-auditor"}},
        }
    ],
    "service": {"annotations": {"example.com/a": "b"}},
    "metricsService": {"annotations": {"prometheus.io/scrape": "false"}},
    "pdb": {"maxUnavailable": "50%"},
    "podMonitor": {
        "labels": {"release": "kube-prometheus-stack"},
        "interval": "30s",
        "scrapeTimeout": "20s",
        "metricRelabelings": [{"sourceLabels": ["__name__"], "regex": "python_gc_.*", "action": "drop"}],
        "relabelings": [
            {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}
        ],
    },
    "prometheusRule": {
        "labels": {"release": "kube-prometheus-stack"},
        "alertLabels": {"team": "storage"},
        "selector": 'container="bk-auditor"',
        "interval": "1m",
        "runbookUrl": "https://docs.example/bk-auditor/deploy.md",
        "disabledAlerts": ["BkAuditorPausedTooLong"],
        "thresholds": {"noLeaderFor": "10m", "belowWriteQuorumFor": "2h", "checkStaleFactor": 3},
    },
    "grafanaDashboard": {"enabled": True, "annotations": {"grafana_folder": "Pulsar"}},
}
MINIMAL: dict[str, Any] = {
    "replicaCount": 1,
    "serviceAccount": {"create": False},
    "metricsService": {"enabled": False},
    "pdb": {"enabled": False},
    "podMonitor": {"enabled": False},
    "prometheusRule": {"enabled": False},
    "antiAffinity": {"enabled": False},
    "topologySpread": {"enabled": False},
    "probes": {"startup": {"enabled": False}},
    "restartPodsOnConfigMapChange": False,
}
# Admin TLS with client certificates: loadable by this daemon's settings (tests/deploy/test_security.py).
ADMIN_TLS: dict[str, Any] = {
    "tls": {
        "ca": {"secretName": "pulsar-ca-tls"},
        "admin": {"enabled": True, "secretName": "bk-auditor-tls", "authorizedClients": ["dns:pulsar-toolset"]},
    },
    "networkPolicy": {
        "adminClients": [{"podSelector": {"matchLabels": {"component": "toolset"}}}],
        "extraIngress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"port": 7979, "protocol": "TCP"}]}],
    },
}
# Everything secured, as on a hardened Pulsar cluster: admin, ZooKeeper and bookie TLS, ZooKeeper SASL.
SECURED: dict[str, Any] = {
    "tls": {
        "ca": {"secretName": "pulsar-ca-tls"},
        "admin": {
            "enabled": True,
            "secretName": "bk-auditor-tls",
            "clientCA": {"secretName": "ops-ca", "key": "ops-ca.pem"},
            "clientSecretName": "pulsar-tls-toolset",
            "serverName": "bk-auditor.example",
            "unauthenticatedReads": True,
        },
        "zookeeper": {"enabled": True, "secretName": "pulsar-tls-recovery"},
        "bookie": {"enabled": True, "secretName": "pulsar-tls-recovery", "verifyHostname": False},
    },
    "auth": {"zookeeper": {"enabled": True, "secretName": "bk-auditor-zk-jaas", "jaasKey": "jaas.conf"}},
    "probes": {"type": "exec"},
    "networkPolicy": {"prometheus": []},
}
SCENARIOS: dict[str, dict[str, Any]] = {
    "default": {},
    "all-features": ALL_FEATURES,
    "minimal": MINIMAL,
    "exec-probes": {"probes": {"type": "exec"}},
    "victoria-metrics": {"victoriaMetrics": {"enabled": True}, "grafanaDashboard": {"enabled": True}},
    # a cluster without prometheus-operator: default values, no monitoring APIs
    "no-operator": {},
    # no prometheus-operator in the cluster (yet), the objects asked for explicitly
    "no-operator-forced": {"podMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
    "admin-tls": ADMIN_TLS,
    # the bookie-side index agents (docs/agent.md): their port and the token Secret the auditors mount
    "agents": {"agent": {"enabled": True, "port": 7990, "tokenSecret": {"name": "bk-auditor-agent", "key": "tok"}}},
    "secured": SECURED,
    # the repair workers beside the auditors, on the secured cluster (the same TLS and auth reach them)
    "repair": {**SECURED, "repair": {"enabled": True, "replicas": 3}},
}
# The APIs the simulated cluster serves per scenario (helm template --api-versions); by default a cluster
# with prometheus-operator.
PROMETHEUS_OPERATOR_APIS: tuple[str, ...] = render_manifests.PROMETHEUS_OPERATOR_APIS
SCENARIO_APIS: dict[str, tuple[str, ...]] = {
    "victoria-metrics": render_manifests.VICTORIA_METRICS_APIS,
    "no-operator": (),
    "no-operator-forced": (),
}


def render_docs(
    values: dict[str, Any],
    *,
    name: str = "bk-auditor",
    namespace: str = "pulsar",
    api_versions: tuple[str, ...] = PROMETHEUS_OPERATOR_APIS,
) -> tuple[dict[str, str], tuple[dict[str, Any], ...]]:
    """The chart rendered by Helm: template path -> text, and the objects."""
    out = render_manifests.render_chart(
        copy.deepcopy(values), name=name, namespace=namespace, api_versions=api_versions
    )
    docs = tuple(
        d for path, text in sorted(out.items()) if path.endswith(".yaml") for d in yaml.safe_load_all(text) if d
    )
    return out, docs


@functools.cache
def render_scenario(name: str) -> tuple[dict[str, str], tuple[dict[str, Any], ...]]:
    return render_docs(SCENARIOS[name], api_versions=SCENARIO_APIS.get(name, PROMETHEUS_OPERATOR_APIS))


def rendered(name: str) -> list[dict[str, Any]]:
    return copy.deepcopy(list(render_scenario(name)[1]))


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    hits = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, got {len(hits)}"
    return hits[0]


def plain_docs() -> list[dict[str, Any]]:
    return [
        d
        for p in sorted(PLAIN.glob("*.yaml"))
        if p.name != "kustomization.yaml"
        for d in yaml.safe_load_all(p.read_text())
        if d
    ]
