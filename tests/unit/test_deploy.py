"""The deployment artifacts, checked offline with real tools:

* the Helm chart (helm/bk-auditor) is rendered and linted by Helm v4 itself (helm-python-sdk embeds it),
  with its values.schema.json enforced by Helm;
* every rendered Kubernetes object and every plain manifest (deploy/kubernetes) is validated against the
  Kubernetes OpenAPI schemas of several versions in strict mode (kubernetes-validate); the
  prometheus-operator / VictoriaMetrics objects against strict schemas of the fields we use, written here;
* the alert rules are checked by `promtool check rules` and unit-tested by `promtool test rules`
  (series in, alerts out); the dashboard's queries are parsed by promtool too;
* every metric name (and label) the rules and the dashboard use is checked against the exposition of a real
  `AuditorMetrics`; the config file the chart writes is loaded by the daemon's own `load_settings`.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import helm_python
import jsonschema
import kubernetes_validate
import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from auditor.daemon.metrics import AuditorMetrics, RunSummary
from auditor.durability.findings import Category
from auditor.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "bk-auditor"
PLAIN = ROOT / "deploy" / "kubernetes"
DASHBOARD = ROOT / "deploy" / "grafana" / "bk-auditor.json"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DEPLOY_DOC = ROOT / "docs" / "deploy.md"

K8S_VERSIONS = ["1.25.0", "1.27.0", "1.30.0", kubernetes_validate.latest_version()]
CORE_KINDS = {"ServiceAccount", "ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget"}
CRD_KINDS = {"PodMonitor", "PrometheusRule", "VMPodScrape", "VMRule"}


def _load_render_manifests() -> Any:
    spec = importlib.util.spec_from_file_location("render_manifests", ROOT / "deploy" / "render_manifests.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


render_manifests = _load_render_manifests()


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is missing: scripts/setup.sh installs Debian's prometheus package"
    return path


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
        "selector": 'namespace="pulsar"',
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
SCENARIOS: dict[str, dict[str, Any]] = {
    "default": {},
    "all-features": ALL_FEATURES,
    "minimal": MINIMAL,
    "exec-probes": {"probes": {"type": "exec"}},
    "victoria-metrics": {"victoriaMetrics": {"enabled": True}, "grafanaDashboard": {"enabled": True}},
}


@functools.cache
def _render(name: str) -> tuple[dict[str, str], tuple[dict[str, Any], ...]]:
    out = render_manifests.render_chart(copy.deepcopy(SCENARIOS[name]), name="bk-auditor", namespace="pulsar")
    docs = tuple(
        d for path, text in sorted(out.items()) if path.endswith(".yaml") for d in yaml.safe_load_all(text) if d
    )
    return out, docs


def rendered(name: str) -> list[dict[str, Any]]:
    return copy.deepcopy(list(_render(name)[1]))


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


# ------------------------------------------------------------------------------------------ CRD schemas
# prometheus-operator's PodMonitor/PrometheusRule and VictoriaMetrics' VMPodScrape/VMRule are not in the
# Kubernetes schemas. These strict schemas cover the fields we emit (names and types as in the operators'
# CRDs); anything else is an error, like kubeconform -strict would report.

DURATION = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
LABEL_NAME = r"^[a-zA-Z_][a-zA-Z0-9_]*$"
RELABELINGS = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "sourceLabels": {"type": "array", "items": {"type": "string"}},
            "separator": {"type": "string"},
            "targetLabel": {"type": "string"},
            "regex": {"type": "string"},
            "modulus": {"type": "integer"},
            "replacement": {"type": "string"},
            "action": {
                "enum": [
                    "replace",
                    "keep",
                    "drop",
                    "hashmod",
                    "labelmap",
                    "labeldrop",
                    "labelkeep",
                    "lowercase",
                    "uppercase",
                    "keepequal",
                    "dropequal",
                ]
            },
        },
    },
}


def _scrape_schema(api_version: str, kind: str, relabel_key: str, metric_relabel_key: str) -> dict[str, Any]:
    endpoint = {
        "type": "object",
        "additionalProperties": False,
        "required": ["port"],
        "properties": {
            "port": {"type": "string", "minLength": 1},
            "path": {"type": "string", "pattern": "^/"},
            "interval": DURATION,
            "scrapeTimeout": DURATION,
            relabel_key: RELABELINGS,
            metric_relabel_key: RELABELINGS,
        },
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "required": ["selector", "podMetricsEndpoints"],
                "properties": {
                    "jobLabel": {"type": "string"},
                    "selector": {"type": "object"},
                    "podMetricsEndpoints": {"type": "array", "minItems": 1, "items": endpoint},
                },
            },
        },
    }


def _rule_schema(api_version: str, kind: str) -> dict[str, Any]:
    rule = {
        "type": "object",
        "additionalProperties": False,
        "required": ["expr"],
        "properties": {
            "alert": {"type": "string", "minLength": 1},
            "record": {"type": "string"},
            "expr": {"type": ["string", "integer"]},
            "for": DURATION,
            "keep_firing_for": DURATION,
            "labels": {**STRING_MAP, "propertyNames": {"pattern": LABEL_NAME}},
            "annotations": {**STRING_MAP, "propertyNames": {"pattern": LABEL_NAME}},
        },
        "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
    }
    group = {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "rules"],
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "interval": DURATION,
            "rules": {"type": "array", "items": rule},
        },
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "required": ["groups"],
                "properties": {"groups": {"type": "array", "minItems": 1, "items": group}},
            },
        },
    }


CRD_SCHEMAS = {
    "PodMonitor": _scrape_schema("monitoring.coreos.com/v1", "PodMonitor", "relabelings", "metricRelabelings"),
    "VMPodScrape": _scrape_schema(
        "operator.victoriametrics.com/v1beta1", "VMPodScrape", "relabelConfigs", "metricRelabelConfigs"
    ),
    "PrometheusRule": _rule_schema("monitoring.coreos.com/v1", "PrometheusRule"),
    "VMRule": _rule_schema("operator.victoriametrics.com/v1beta1", "VMRule"),
}


_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def check_api_server_rules(doc: dict[str, Any]) -> None:
    """Name and label rules the API server enforces and the OpenAPI schemas do not express."""
    meta = doc["metadata"]
    name = meta["name"]
    if doc["kind"] in ("Service", "StatefulSet"):  # DNS labels (StatefulSet: pod names add -N)
        assert _DNS_LABEL.match(name) and len(name) <= (63 if doc["kind"] == "Service" else 52), name
    else:
        assert len(name) <= 253 and _DNS_SUBDOMAIN.match(name), name
    label_sets = [meta.get("labels") or {}]
    if doc["kind"] == "StatefulSet":
        label_sets.append(doc["spec"]["template"]["metadata"]["labels"])
    for labels in label_sets:
        for k, v in labels.items():
            assert _QUALIFIED_NAME.match(k) and len(k.split("/")[0]) <= 253, f"label key {k!r}"
            assert isinstance(v, str) and _LABEL_VALUE.match(v), f"label {k}={v!r}"
    for k in meta.get("annotations") or {}:
        assert _QUALIFIED_NAME.match(k), f"annotation key {k!r}"


def validate_object(doc: dict[str, Any], version: str) -> None:
    """Strict validation of one object against Kubernetes `version` (CRDs: our schema + real ObjectMeta and
    LabelSelector validation through Kubernetes' own schemas), plus the API server's name/label rules."""
    if doc["kind"] in CRD_KINDS:
        jsonschema.validate(doc, CRD_SCHEMAS[doc["kind"]])
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"]}, version, strict=True
        )
        if "selector" in doc["spec"]:
            kubernetes_validate.validate(
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": {"name": "x"},
                    "spec": {"selector": doc["spec"]["selector"]},
                },
                version,
                strict=True,
            )
    else:
        kubernetes_validate.validate(doc, version, strict=True)
    check_api_server_rules(doc)


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
        ({"config": {"admin": {"tls_cert": "/certs/tls.crt", "tls_key": "/certs/tls.key"}}}, "probes.type=exec"),
    ],
)
def test_render_refuses_inconsistent_config(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=re.escape(message)):
        helm_python.Chart.load(str(CHART)).render(bad, name="bk-auditor")


# ------------------------------------------------------------------------------------------ Kubernetes schemas

EXPECTED_KINDS = {
    "default": {
        "ServiceAccount",
        "ConfigMap",
        "Service",
        "StatefulSet",
        "PodDisruptionBudget",
        "PodMonitor",
        "PrometheusRule",
    },
    "all-features": {
        "ServiceAccount",
        "ConfigMap",
        "Service",
        "StatefulSet",
        "PodDisruptionBudget",
        "PodMonitor",
        "PrometheusRule",
    },
    "minimal": {"ConfigMap", "Service", "StatefulSet"},
    "exec-probes": {
        "ServiceAccount",
        "ConfigMap",
        "Service",
        "StatefulSet",
        "PodDisruptionBudget",
        "PodMonitor",
        "PrometheusRule",
    },
    "victoria-metrics": {
        "ServiceAccount",
        "ConfigMap",
        "Service",
        "StatefulSet",
        "PodDisruptionBudget",
        "VMPodScrape",
        "VMRule",
    },
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_rendered_objects_validate_against_kubernetes(scenario: str) -> None:
    docs = rendered(scenario)
    assert {d["kind"] for d in docs} == EXPECTED_KINDS[scenario]
    for version in K8S_VERSIONS:
        for doc in docs:
            try:
                validate_object(doc, version)
            except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as exc:
                pytest.fail(
                    f"{scenario}: {doc['kind']}/{doc['metadata']['name']} invalid for k8s {version}: "
                    f"{'.'.join(map(str, exc.path))}: {exc.message}"
                )


def test_validation_catches_mistakes() -> None:
    """The validators used above do reject what Kubernetes and the operators would reject."""
    sts = one(rendered("default"), "StatefulSet")
    sts["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["grpc"]["port"] = "grpc-admin"  # must be int
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_object(sts, "1.30.0")
    sts = one(rendered("default"), "StatefulSet")
    sts["spec"]["template"]["spec"]["securityContext"]["runAsNonroot"] = True  # typo: strict mode rejects it
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_object(sts, "1.30.0")
    rule = one(rendered("default"), "PrometheusRule")
    rule["spec"]["groups"][0]["rules"][0]["for"] = "5 minutes"
    with pytest.raises(jsonschema.ValidationError):
        validate_object(rule, "1.30.0")
    pm = one(rendered("default"), "PodMonitor")
    pm["spec"]["podMetricsEndpoints"][0]["scrape_timeout"] = "10s"
    with pytest.raises(jsonschema.ValidationError):
        validate_object(pm, "1.30.0")
    pm = one(rendered("default"), "PodMonitor")
    pm["metadata"]["labels"]["replicas"] = 2  # label values are strings
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_object(pm, "1.30.0")
    pm = one(rendered("default"), "PodMonitor")
    pm["spec"]["selector"]["matchExpressions"] = [{"key": "app"}]  # no operator
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_object(pm, "1.30.0")
    pm = one(rendered("default"), "PodMonitor")
    pm["metadata"]["labels"]["bad label!"] = "x"  # what the API server checks beyond the schema
    with pytest.raises(AssertionError):
        validate_object(pm, "1.30.0")
    svc = one(rendered("default"), "Service", "bk-auditor")
    svc["metadata"]["name"] = "Bk_Auditor"
    with pytest.raises(AssertionError):
        validate_object(svc, "1.30.0")


# ------------------------------------------------------------------------------------------ plain manifests


def test_plain_manifests_are_the_chart_rendered() -> None:
    stale = render_manifests.stale_files()
    assert stale == [], f"run .venv/bin/python deploy/render_manifests.py: {stale}"


def test_plain_manifests_validate_against_kubernetes() -> None:
    docs = plain_docs()
    assert {d["kind"] for d in docs} == EXPECTED_KINDS["default"]
    assert len(docs) == 8  # two Services
    for version in K8S_VERSIONS:
        for doc in docs:
            validate_object(doc, version)
    for doc in docs:
        assert "namespace" not in doc["metadata"], "plain manifests are namespace-agnostic"
        labels = doc["metadata"]["labels"]
        assert "helm.sh/chart" not in labels and "app.kubernetes.io/managed-by" not in labels
        assert labels["app.kubernetes.io/name"] == "bk-auditor"


def test_kustomization_lists_every_manifest() -> None:
    k = yaml.safe_load((PLAIN / "kustomization.yaml").read_text())
    assert k["kind"] == "Kustomization"
    files = sorted(p.name for p in PLAIN.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(k["resources"]) == files
    sts = one(plain_docs(), "StatefulSet")
    image = sts["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.split(":")[0] == k["images"][0]["name"]


def test_plain_statefulset_matches_the_brief() -> None:
    docs = plain_docs()
    sts = one(docs, "StatefulSet")
    spec = sts["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    env = {e["name"]: e for e in c["env"]}
    assert env["BKAUDIT_ELECTION__IDENTITY"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert c["livenessProbe"]["grpc"] == {"port": 7979, "service": "liveness"}
    assert c["readinessProbe"]["grpc"] == {"port": 7979, "service": "readiness"}
    assert one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    config = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
    assert config["admin"]["bind"] == "0.0.0.0:7979"
    assert config["metrics"]["bind"] == "0.0.0.0:8000"
    assert config["log"]["format"] == "json"
    assert config["metadata_service_uri"] == "zk+hierarchical://zookeeper:2181/ledgers"
    services = [d for d in docs if d["kind"] == "Service"]
    assert sorted(s["metadata"]["name"] for s in services) == ["bk-auditor", "bk-auditor-metrics"]
    assert one(docs, "Service", "bk-auditor")["spec"]["clusterIP"] == "None"


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
    assert ports == {"grpc-admin": values["ports"]["admin"], "http-metrics": values["ports"]["metrics"]}
    probes = {k: c[k] for k in ("livenessProbe", "readinessProbe", "startupProbe") if k in c}
    assert ("startupProbe" in probes) == values["probes"]["startup"]["enabled"]
    service_of = {"livenessProbe": "liveness", "readinessProbe": "readiness", "startupProbe": "liveness"}
    for k, probe in probes.items():
        if values["probes"]["type"] == "grpc":
            assert probe["grpc"] == {"port": values["ports"]["admin"], "service": service_of[k]}
        else:
            cmd = probe["exec"]["command"]
            assert cmd[:4] == ["bk-auditor", "health", "--service", service_of[k]]
            assert cmd[cmd.index("--admin") + 1] == f"127.0.0.1:{values['ports']['admin']}"
            assert float(cmd[cmd.index("--timeout") + 1]) < probe["timeoutSeconds"]
    env = {e["name"]: e for e in c["env"]}
    assert env["BKAUDIT_ELECTION__IDENTITY"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    # selectors of every Service / PDB / PodMonitor match the pods
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    for d in docs:
        if d["kind"] == "Service":
            assert d["spec"]["selector"].items() <= pod_labels.items()
            for p in d["spec"]["ports"]:
                assert p["targetPort"] in ports
        if d["kind"] in ("PodDisruptionBudget", "PodMonitor", "VMPodScrape"):
            assert d["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        if d["kind"] in ("PodMonitor", "VMPodScrape"):
            assert [e["port"] for e in d["spec"]["podMetricsEndpoints"]] == ["http-metrics"]
    if values["replicaCount"] > 1:
        assert values["pdb"]["enabled"] and one(docs, "PodDisruptionBudget")
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
            assert m.group(2) and 'namespace="pulsar"' in m.group(2), (r["alert"], m.group(0))
    assert one(docs, "PrometheusRule")["spec"]["groups"][0]["interval"] == "1m"
    by_name = {r["alert"]: r for r in rules}
    assert by_name["BkAuditorNoLeader"]["for"] == "10m"
    assert by_name["BkAuditorEntryBelowWriteQuorum"]["for"] == "2h"
    # staleness: scrutiny every 43200 s (config), ledger check 302400 s is a Java key so the default
    # applies, open-ledger check off (0): no rules for it; factor 3
    stale = {re.search(r'check="(\w+)"', r["expr"]).group(1): r for r in rules if r["alert"] == "BkAuditorCheckStale"}
    assert set(stale) == {"bookies", "ledger", "scrutiny"}
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
    out = render_manifests.render_chart(values)
    rule = yaml.safe_load(out["bk-auditor/templates/prometheusrule.yaml"])
    rules = rule["spec"]["groups"][0]["rules"]
    stale = {re.search(r'check="(\w+)"', r["expr"]).group(1): r for r in rules if r["alert"] == "BkAuditorCheckStale"}
    assert set(stale) == {"bookies", "scrutiny", "open"}
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

    from auditor.daemon.admin import AdminServer, StateBackend
    from auditor.daemon.state import DaemonState

    for key in [k for k in __import__("os").environ if k.upper().startswith("BKAUDIT_")]:
        monkeypatch.delenv(key)
    grpc_c = one(rendered("default"), "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    exec_c = one(rendered("exec-probes"), "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    server = AdminServer(StateBackend(DaemonState("bk-auditor-0")), "127.0.0.1:0")
    port = await server.start()

    def exec_cmd(probe: str) -> list[str]:
        cmd = list(exec_c[probe]["exec"]["command"])
        cmd[cmd.index("--admin") + 1] = f"127.0.0.1:{port}"  # the pod's 7979 may be taken on this machine
        return cmd

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
            monkeypatch.setenv(e["name"], e["value"])
    settings = load_settings(path)
    assert settings.admin.bind == f"0.0.0.0:{values['ports']['admin']}"
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


# ------------------------------------------------------------------------------------------ alert rules


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
    ):
        assert severity[name] == "critical"
    for r in rules:
        assert r["labels"]["severity"] in ("critical", "warning", "info")
        assert {"summary", "description", "runbook"} <= set(r["annotations"]), r["alert"]
    # one staleness rule per check with a non-zero default interval
    stale = [r for r in rules if r["alert"] == "BkAuditorCheckStale"]
    assert len(stale) == 4


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
        ns = labels.get("namespace")
        text = text.replace(
            "{{ with $labels.namespace }} in namespace {{ . }}{{ end }}", f" in namespace {ns}" if ns else ""
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
    leader = 'namespace="pulsar", instance="10.1.0.1:8000", pod="bk-auditor-0", job="bk-auditor"'
    standby = 'namespace="pulsar", instance="10.1.0.2:8000", pod="bk-auditor-1", job="bk-auditor"'
    crit = {"namespace": "pulsar", "severity": "critical"}
    warn = {"namespace": "pulsar", "severity": "warning"}

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
    no_leader = _rule(rules, "BkAuditorNoLeader")
    stale = _rule(rules, "BkAuditorCheckStale", "scrutiny")
    never = _rule(rules, "BkAuditorCheckNeverSucceeded", "open")
    queue = _rule(rules, "BkAuditorRecheckQueueGrowing")
    errors = _rule(rules, "BkAuditorBookieRequestErrors")
    tests = [
        {  # findings count only on the leader: the standby's stale value is ignored
            "name": "entry_no_replica pages from the leader's findings only",
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
                    "values": "5x90",
                },
                {
                    "series": f'bk_auditor_ledgers_with_findings{{{leader}, category="entry_below_write_quorum"}}',
                    "values": "0 2x89",
                },
            ],
            "alert_rule_test": [
                {"eval_time": "2m", "alertname": "BkAuditorEntryNoReplica", "exp_alerts": []},
                {
                    "eval_time": "4m",
                    "alertname": "BkAuditorEntryNoReplica",
                    "exp_alerts": [alert(no_replica, crit, "3")],
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
                    "exp_alerts": [alert(no_leader, {"severity": "warning"}, "1")],
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
    test_file = tmp_path / "rules_test.yaml"
    test_file.write_text(
        yaml.safe_dump({"rule_files": [rules_path.name], "evaluation_interval": "1m", "tests": tests}, sort_keys=False)
    )
    proc = subprocess.run([promtool(), "test", "rules", test_file.name], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def test_promtool_unit_test_can_fail(tmp_path: Path) -> None:
    """The same machinery reports a wrong expectation (here: expecting a page from the standby's value)."""
    rules_path = write_rules_file(tmp_path)
    standby = 'namespace="pulsar", instance="10.1.0.2:8000", pod="bk-auditor-1"'
    tests = [
        {
            "interval": "1m",
            "input_series": [
                {"series": f"bk_auditor_is_leader{{{standby}}}", "values": "0x10"},
                {
                    "series": f'bk_auditor_ledgers_with_findings{{{standby}, category="entry_no_replica"}}',
                    "values": "5x10",
                },
            ],
            "alert_rule_test": [
                {
                    "eval_time": "5m",
                    "alertname": "BkAuditorEntryNoReplica",
                    "exp_alerts": [{"exp_labels": {"namespace": "pulsar", "severity": "critical"}}],
                }
            ],
        }
    ]
    test_file = tmp_path / "rules_test.yaml"
    test_file.write_text(yaml.safe_dump({"rule_files": [rules_path.name], "tests": tests}))
    proc = subprocess.run([promtool(), "test", "rules", test_file.name], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode != 0


# ------------------------------------------------------------------------------------------ metric names


@functools.cache
def exposed() -> dict[str, frozenset[str]]:
    """Sample name -> label names, from the exposition of a real AuditorMetrics with every series present."""
    m = AuditorMetrics(CollectorRegistry(), checks=["bookies", "ledger", "scrutiny", "open"])
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
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(m.exposition().decode()):
        assert family.samples, f"{family.name} has no series"
        for s in family.samples:
            labels.setdefault(s.name, set()).update(s.labels)
    return {k: frozenset(v) for k, v in labels.items()}


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
        assert name in exposed(), f"{where}: {name} is not a metric of AuditorMetrics"
        names.add(name)
        for label, op, value in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', matchers):
            assert label in exposed()[name] | TARGET_LABELS, f"{where}: {name} has no label {label}"
            if label == "category" and op in ("=", "=~"):
                for v in value.split("|"):
                    assert v in {c.value for c in Category}, f"{where}: unknown category {v}"
            if label == "check" and op == "=":
                assert value in known_checks, f"{where}: unknown check {value}"
    used_labels = {lbl.strip() for g in _GROUPING.findall(expr) for lbl in g.split(",") if lbl.strip()}
    all_labels = set().union(*(exposed()[n] for n in names)) | TARGET_LABELS if names else TARGET_LABELS
    assert used_labels <= all_labels, f"{where}: grouping by unknown labels {used_labels - all_labels}"
    return names


@functools.cache
def documented_checks() -> frozenset[str]:
    """The check (task) names docs/metrics.md gives for the `check` label."""
    text = (ROOT / "docs" / "metrics.md").read_text()
    m = re.search(r"`check` is a task name \(([^)]*)\)", text)
    assert m, "docs/metrics.md no longer lists the check names"
    return frozenset(re.findall(r"`(\w+)`", m.group(1)))


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
    )


def test_dashboard_structure() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] == "bk-auditor" and dash["title"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    names = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "namespace"} <= names
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


# ------------------------------------------------------------------------------------------ Dockerfile, docs


def test_dockerfile() -> None:
    """Docker cannot run here; check what the image promises against the manifests and the repository."""
    text = DOCKERFILE.read_text()
    stages = re.findall(r"^FROM (\S+)", text, re.M)
    assert stages and all(s == "python:3.11-slim" for s in stages)
    assert re.search(r'^ENTRYPOINT \["bk-auditor"\]$', text, re.M)
    assert re.search(r'^CMD \["run", "--config", "/etc/bk-auditor/config\.yaml"\]$', text, re.M)
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and user[-1].split(":")[0] not in ("0", "root")
    sts = one(plain_docs(), "StatefulSet")
    pod = sts["spec"]["template"]["spec"]
    assert user[-1] == f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}"
    c = pod["containers"][0]
    assert c["args"] == ["run", "--config", "/etc/bk-auditor/config.yaml"]
    exposed_ports = {int(p) for line in re.findall(r"^EXPOSE (.+)$", text, re.M) for p in line.split()}
    assert exposed_ports == {p["containerPort"] for p in c["ports"]}
    # every COPY source exists and gets through the .dockerignore; protos are generated before the wheel
    ignore = (ROOT / "deploy" / "Dockerfile.dockerignore").read_text()
    for line in re.findall(r"^COPY (?!--from)(.+)$", text, re.M):
        for src in line.split()[:-1]:
            assert (ROOT / src).exists(), src
            assert f"!{src}" in ignore.splitlines(), src
    assert text.index("gen_protos.py") < text.index("pip wheel")


def test_deploy_doc_has_a_runbook_per_alert() -> None:
    doc = DEPLOY_DOC.read_text()
    headings = set(re.findall(r"^#### (BkAuditor\w+)$", doc, re.M))
    alerts = {r["alert"] for r in alert_rules()}
    assert alerts == headings, (alerts - headings, headings - alerts)
    # the values it tells people to set exist
    values = helm_python.Chart.load(str(CHART)).values
    for key in re.findall(r"--set ([a-zA-Z_.]+)=", doc):
        node: Any = values
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, key
            node = node[part]


def test_notes_render() -> None:
    out, _ = _render("default")
    notes = out["bk-auditor/templates/NOTES.txt"]
    assert "placeholder" in notes and "bk-auditor-0 -- bk-auditor status" in notes
    out, _ = _render("all-features")
    notes = out["bk-auditor/templates/NOTES.txt"]
    assert "placeholder" not in notes
    assert "bk-auditor status --admin 127.0.0.1:7980" in notes  # a non-default admin port


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
