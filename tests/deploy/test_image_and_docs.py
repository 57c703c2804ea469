"""The Dockerfile (Docker cannot run here: what the image promises, checked against the manifests and the
repository) and docs/deploy.md (a runbook per alert; the values it tells people to set exist)."""

from __future__ import annotations

import re
from typing import Any

import helm_python

from tests.deploy.artifacts import CHART, DEPLOY_DOC, DOCKERFILE, ROOT, one, plain_docs
from tests.deploy.promql import alert_rules

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
