"""Every rendered Kubernetes object and every plain manifest (deploy/kubernetes) validated against the
Kubernetes OpenAPI schemas of several versions in strict mode (kubernetes-validate); the
prometheus-operator / VictoriaMetrics objects against strict schemas of the fields we use, written here."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.deploy.artifacts import PLAIN, SCENARIOS, one, plain_docs, render_manifests, rendered

K8S_VERSIONS = ["1.25.0", "1.27.0", "1.30.0", kubernetes_validate.latest_version()]
CORE_KINDS = {"ServiceAccount", "ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget"}
CRD_KINDS = {"PodMonitor", "PrometheusRule", "VMPodScrape", "VMRule", "ServiceMonitor", "VMServiceScrape"}


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


def _scrape_schema(
    api_version: str, kind: str, relabel_key: str, metric_relabel_key: str, endpoints_key: str = "podMetricsEndpoints"
) -> dict[str, Any]:
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
                "required": ["selector", endpoints_key],
                "properties": {
                    "jobLabel": {"type": "string"},
                    "selector": {"type": "object"},
                    endpoints_key: {"type": "array", "minItems": 1, "items": endpoint},
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
    # the repair workers' scrape with repair.scrape: serviceMonitor
    "ServiceMonitor": _scrape_schema(
        "monitoring.coreos.com/v1", "ServiceMonitor", "relabelings", "metricRelabelings", "endpoints"
    ),
    "VMServiceScrape": _scrape_schema(
        "operator.victoriametrics.com/v1beta1", "VMServiceScrape", "relabelConfigs", "metricRelabelConfigs", "endpoints"
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


# ------------------------------------------------------------------------------------------ Kubernetes schemas

_CORE = {"ServiceAccount", "ConfigMap", "Service", "StatefulSet", "NetworkPolicy", "PodDisruptionBudget"}
_PROMETHEUS_OPERATOR = {"PodMonitor", "PrometheusRule"}
EXPECTED_KINDS = {
    "default": _CORE | _PROMETHEUS_OPERATOR,
    "all-features": _CORE | _PROMETHEUS_OPERATOR,
    "minimal": {"ConfigMap", "Service", "StatefulSet", "NetworkPolicy"},
    "exec-probes": _CORE | _PROMETHEUS_OPERATOR,
    "victoria-metrics": _CORE | {"VMPodScrape", "VMRule"},
    "no-operator": _CORE,  # without the monitoring APIs
    "no-operator-forced": _CORE | _PROMETHEUS_OPERATOR,  # enabled: true without them
}
# admin TLS and the rest of the security values add no kinds of objects (Secrets are the user's)
EXPECTED_KINDS["admin-tls"] = EXPECTED_KINDS["secured"] = EXPECTED_KINDS["default"]
EXPECTED_KINDS["agents"] = EXPECTED_KINDS["default"]  # the token Secret is the user's
EXPECTED_KINDS["repair"] = EXPECTED_KINDS["default"] | {"Deployment"}  # the repair workers


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
    assert len(docs) == 9  # two Services
    for version in K8S_VERSIONS:
        for doc in docs:
            validate_object(doc, version)
    for doc in docs:
        assert "namespace" not in doc["metadata"], "plain manifests are namespace-agnostic"
        if doc["kind"] == "PrometheusRule":  # so are the rules: this release's series by job alone
            for rule in (r for g in doc["spec"]["groups"] for r in g["rules"]):
                assert "namespace=" not in rule["expr"] and 'job="bk-auditor"' in rule["expr"], rule["alert"]
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
    # the admin API listens on the pod IP (downward API), not on every interface
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["BKAUDIT_ADMIN__BIND"]["value"] == "$(POD_IP):7979"
    config = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
    assert "admin" not in config
    assert config["metrics"]["bind"] == "0.0.0.0:8000"
    assert config["log"]["format"] == "json"
    assert config["metadata_service_uri"] == "zk+hierarchical://zookeeper:2181/ledgers"
    services = [d for d in docs if d["kind"] == "Service"]
    assert sorted(s["metadata"]["name"] for s in services) == ["bk-auditor", "bk-auditor-metrics"]
    assert one(docs, "Service", "bk-auditor")["spec"]["clusterIP"] == "None"
