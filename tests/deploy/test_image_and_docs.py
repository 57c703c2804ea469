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


# ------------------------------------------------------------------------------------------ lock files

LOCKS = ROOT / "requirements"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(name: str) -> dict[str, tuple[str, str | None, int]]:
    """Package -> (version, marker, number of hashes) of requirements/<name>."""
    pins: dict[str, tuple[str, str | None, int]] = {}
    current = None
    for line in (LOCKS / name).read_text().splitlines():
        m = _PIN.match(line)
        if m:
            current = _canon(m.group(1))
            pins[current] = (m.group(2), m.group(3), 0)
        elif line.strip().startswith("--hash=sha256:") and current:
            v, marker, n = pins[current]
            pins[current] = (v, marker, n + 1)
    return pins


def test_locks_pin_every_dependency_with_hashes() -> None:
    """requirements/*.lock (scripts/lock.sh) pin what pyproject.toml asks for, at versions it allows, each
    with hashes; the runtime lock is the dev lock's versions without Spark or test tools."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    dev, runtime, build = read_lock("dev.lock"), read_lock("runtime.lock"), read_lock("build.lock")
    for lock in (dev, runtime, build):
        assert lock and all(n >= 1 for _, _, n in lock.values())
    groups = {
        "runtime": (project["project"]["dependencies"], (dev, runtime)),
        "spark": (project["project"]["optional-dependencies"]["spark"], (dev,)),
        "test": (project["project"]["optional-dependencies"]["test"], (dev,)),
        "build": (project["build-system"]["requires"], (build,)),
    }
    for group, (reqs, locks) in groups.items():
        for text in reqs:
            req = Requirement(text)
            for lock in locks:
                assert _canon(req.name) in lock, f"{req.name} ({group}) is not in the lock: run scripts/lock.sh"
                version = lock[_canon(req.name)][0]
                assert req.specifier.contains(version, prereleases=True), f"{req.name}=={version} vs {req}"
    assert "pyspark" not in runtime and "py4j" not in runtime and "pytest" not in runtime
    assert "pyspark" in dev
    for name, (version, _, _) in [*runtime.items(), *build.items()]:
        if name in dev:
            assert dev[name][0] == version, f"{name}: {version} here, {dev[name][0]} in dev.lock"
    # what installs from them: the image (hash-checked), make setup (hash-checked, through make venv's script)
    dockerfile = DOCKERFILE.read_text()
    assert "pip install --require-hashes -r /tmp/runtime.lock" in dockerfile
    assert "pip install --require-hashes -r requirements/build.lock" in dockerfile
    assert "--no-build-isolation" in dockerfile and "pip install --no-deps /tmp/dist/" in dockerfile
    assert '"$here/scripts/venv.sh"' in (ROOT / "scripts" / "setup.sh").read_text()
    setup = (ROOT / "scripts" / "venv.sh").read_text()
    assert "lock=requirements/dev.lock" in setup and '--require-hashes -r "$lock"' in setup


def test_this_environment_is_the_dev_lock() -> None:
    """`make setup` installed exactly the pinned versions (for the packages that apply on this platform)."""
    from importlib import metadata

    from packaging.markers import Marker

    for name, (version, marker, _) in read_lock("dev.lock").items():
        if marker and not Marker(marker).evaluate():
            continue
        assert metadata.version(name) == version, f"{name}: installed {metadata.version(name)}, locked {version}"


def test_metrics_doc_matches_the_code() -> None:
    """docs/metrics.md: its table is the daemon's metrics, one row each, and every `check` / `category`
    value it quotes is one the daemon uses."""
    from auditor.checks.per_ledger import CHECKS
    from auditor.daemon.replica import BOOKIE_WATCH
    from auditor.durability.findings import Category
    from tests.deploy.promql import documented_checks, exposed

    text = (ROOT / "docs" / "metrics.md").read_text()
    real_checks = set(CHECKS) | {BOOKIE_WATCH}
    assert real_checks <= documented_checks()
    for value in re.findall(r'check="(\w+)"', text):
        assert value in real_checks, f'docs/metrics.md: check="{value}" is not a check of the daemon'
    for value in re.findall(r'category="(\w+)"', text):
        assert value in {c.value for c in Category}, value
    rows = re.findall(r"^\| `(bk_auditor_\w+)` \|", text, re.M)
    assert len(rows) == len(set(rows))
    families = {re.sub(r"_(bucket|count|sum)$", "", n) for n in exposed() if n.startswith("bk_auditor")}
    assert set(rows) == families, (set(rows) - families, families - set(rows))
    for name, labels in exposed().items():
        assert "bookkeeper_cluster" in labels, name
