"""The chart's security values: TLS material and credentials mounted from Secrets (every file a setting
names is a mounted Secret key; nothing secret in the ConfigMap), the admin API on the pod IP with mutual
TLS and its rendered probes run against a real TLS admin server, and the NetworkPolicy."""

from __future__ import annotations

import asyncio
import copy
import os
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import helm_python
import pytest
import yaml

from auditor.settings import load_settings
from devcluster.certs import CertAuthority
from tests.deploy.artifacts import CHART, SCENARIOS, one, render_manifests, rendered

SECRET_ROOTS = ("/pulsar/certs/", "/etc/bk-auditor/auth/")
POD_IP = "127.0.0.1"  # what $(POD_IP) stands for in these tests (loopback only)


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]


def _config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return yaml.safe_load(one(docs, "ConfigMap", "bk-auditor")["data"]["config.yaml"])


def _strings(tree: Any) -> list[str]:
    if isinstance(tree, dict):
        return [s for v in tree.values() for s in _strings(v)]
    if isinstance(tree, list):
        return [s for v in tree for s in _strings(v)]
    return [tree] if isinstance(tree, str) else []


def _secret_files(docs: list[dict[str, Any]]) -> dict[str, str]:
    """Every file the pod gets from a Secret: path -> Secret name (with items: those keys only)."""
    pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    files: dict[str, str] = {}
    for m in pod["containers"][0]["volumeMounts"]:
        secret = volumes[m["name"]].get("secret")
        if secret is None:
            continue
        assert m.get("readOnly") is True, m
        assert secret["defaultMode"] == 0o440
        for item in secret.get("items") or [{"path": "*"}]:
            files[f"{m['mountPath']}/{item['path']}"] = secret["secretName"]
    return files


def _mounted(path: str, files: dict[str, str]) -> bool:
    return path in files or f"{PurePosixPath(path).parent}/*" in files


@pytest.mark.parametrize("scenario", ["admin-tls", "secured"])
def test_every_file_a_setting_names_is_a_mounted_secret(scenario: str) -> None:
    docs = rendered(scenario)
    files = _secret_files(docs)
    env = {e["name"]: e.get("value", "") for e in _container(docs)["env"]}
    named = [s for s in _strings(_config(docs)) + list(env.values()) if s.startswith(SECRET_ROOTS)]
    assert named
    for path in named:
        assert _mounted(path, files), f"{path} is not mounted from a Secret: {sorted(files)}"
    # nothing secret in clear text: only file paths, never a password or key material
    text = one(docs, "ConfigMap", "bk-auditor")["data"]["config.yaml"]
    assert "PRIVATE KEY" not in text and "password:" not in text


def test_secret_names_and_paths_follow_the_pulsar_chart() -> None:
    docs = rendered("secured")
    files = _secret_files(docs)
    assert files["/pulsar/certs/ca/ca.crt"] == "pulsar-ca-tls"
    assert files["/pulsar/certs/bk-auditor/tls.crt"] == files["/pulsar/certs/bk-auditor/tls.key"] == "bk-auditor-tls"
    assert files["/pulsar/certs/admin-client-ca/ca.crt"] == "ops-ca"
    assert files["/pulsar/certs/bk-auditor-client/tls.crt"] == "pulsar-tls-toolset"
    assert files["/pulsar/certs/zookeeper-client/tls.key"] == "pulsar-tls-recovery"
    assert files["/pulsar/certs/bookie-client/tls.crt"] == "pulsar-tls-recovery"
    assert files["/etc/bk-auditor/auth/zookeeper/*"] == "bk-auditor-zk-jaas"
    pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    (ca_item,) = next(v for v in pod["volumes"] if v["name"] == "tls-admin-client-ca")["secret"]["items"]
    assert ca_item == {"key": "ops-ca.pem", "path": "ca.crt"}


def test_zookeeper_and_bookie_settings_point_at_the_mounts() -> None:
    """The names of the ZooKeeper and bookie TLS/auth settings (zookeeper.tls.*, zookeeper.auth.*,
    bookie_client.tls.*), as the daemon's settings define them."""
    cfg = _config(rendered("secured"))
    assert cfg["zookeeper"]["tls"] == {
        "enabled": True,
        "ca_file": "/pulsar/certs/ca/ca.crt",
        "cert_file": "/pulsar/certs/zookeeper-client/tls.crt",
        "key_file": "/pulsar/certs/zookeeper-client/tls.key",
        "verify_hostname": True,
    }
    assert cfg["zookeeper"]["auth"] == {
        "jaas_file": "/etc/bk-auditor/auth/zookeeper/jaas.conf",
        "secure_acls": False,
    }
    assert cfg["bookie_client"]["tls"] == {
        "enabled": True,
        "ca_file": "/pulsar/certs/ca/ca.crt",
        "cert_file": "/pulsar/certs/bookie-client/tls.crt",
        "key_file": "/pulsar/certs/bookie-client/tls.key",
        "verify_hostname": False,
    }
    assert cfg["bookie_client"]["requests_per_second"] == 1000  # the rest of the section is kept
    out = render_manifests.render_chart(
        {"auth": {"zookeeper": {"enabled": True, "secretName": "zk", "scheme": "digest", "username": "bk"}}}
    )
    auth = yaml.safe_load(yaml.safe_load(out["bk-auditor/templates/configmap.yaml"])["data"]["config.yaml"])
    assert auth["zookeeper"]["auth"] == {
        "digest_username": "bk",
        "digest_password_file": "/etc/bk-auditor/auth/zookeeper/password",
        "sasl_enabled": False,
        "secure_acls": False,
    }
    assert "tls" not in _config(rendered("default")).get("zookeeper", {})


def _pod_environment(container: dict[str, Any], certs: Path) -> dict[str, str]:
    """The BKAUDIT_* variables the pod gets, with $(POD_IP) and the mount root made local."""
    out = {}
    for e in container["env"]:
        if "value" in e and e["name"].startswith("BKAUDIT_"):
            out[e["name"]] = e["value"].replace("$(POD_IP)", POD_IP).replace("/pulsar/certs", str(certs))
    return out


def _materialise(certs: Path, ca: CertAuthority, server_name: str, client_cn: str) -> None:
    """Files where the Secrets would be mounted (under `certs` instead of /pulsar/certs)."""
    server = ca.issue("bk-auditor", [server_name])
    client = ca.issue(client_cn, [client_cn])  # as the Pulsar chart's: its CN is also a DNS name
    for d, src in (("bk-auditor", server), ("bk-auditor-client", client)):
        (certs / d).mkdir(parents=True, exist_ok=True)
        (certs / d / "tls.crt").write_bytes(src.cert_file.read_bytes())
        (certs / d / "tls.key").write_bytes(src.key_file.read_bytes())
    for d in ("ca", "admin-client-ca"):
        (certs / d).mkdir(parents=True, exist_ok=True)
        (certs / d / "ca.crt").write_bytes(ca.cert_file.read_bytes())


def test_admin_tls_config_loads_with_the_pods_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = rendered("admin-tls")
    certs = tmp_path / "certs"
    _materialise(certs, CertAuthority(tmp_path / "pki", "ca"), "bk-auditor.pulsar.svc.cluster.local", "x")
    path = tmp_path / "config.yaml"
    path.write_text(one(docs, "ConfigMap", "bk-auditor")["data"]["config.yaml"].replace("/pulsar/certs", str(certs)))
    for key in [k for k in os.environ if k.upper().startswith("BKAUDIT_")]:
        monkeypatch.delenv(key)
    for name, value in _pod_environment(_container(docs), certs).items():
        monkeypatch.setenv(name, value)
    a = load_settings(path).admin
    assert a.bind == f"{POD_IP}:7979" and a.probe_bind == f"{POD_IP}:7978"
    assert a.tls_cert == certs / "bk-auditor/tls.crt" and a.tls_client_ca == certs / "admin-client-ca/ca.crt"
    assert a.authorized_clients == ["dns:pulsar-toolset"] and not a.unauthenticated_reads


async def _run(cmd: list[str], env: dict[str, str]) -> tuple[int, str]:
    exe = Path(sys.executable).parent / cmd[0]
    proc = await asyncio.create_subprocess_exec(
        str(exe), *cmd[1:], env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, (out + err).decode()


@pytest.mark.parametrize("scenario", ["admin-tls", "secured"])
async def test_rendered_probes_and_in_pod_cli_work_against_a_real_tls_admin_server(
    scenario: str, tmp_path: Path
) -> None:
    """The admin server as the pod's settings configure it (mutual TLS, probe listener), on loopback
    ports: the kubelet's gRPC probes over the plaintext probe port, or the exec probes and the in-pod CLI
    with the pod's environment over mutual TLS."""
    from grpc import aio
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from auditor.admin.server import AdminServer
    from auditor.daemon.backend import StateBackend
    from auditor.daemon.state import DaemonState

    docs = rendered(scenario)
    c = _container(docs)
    values = helm_python.Chart.load(str(CHART)).merge_values(copy.deepcopy(SCENARIOS[scenario]))
    certs = tmp_path / "certs"
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    env.update(_pod_environment(c, certs))
    _materialise(certs, CertAuthority(tmp_path / "pki", "ca"), env["BKAUDIT_CLI_TLS_SERVER_NAME"], "pulsar-toolset")
    cfg = yaml.safe_load(
        one(docs, "ConfigMap", "bk-auditor")["data"]["config.yaml"].replace("/pulsar/certs", str(certs))
    )["admin"]
    state = DaemonState("bk-auditor-0")
    server = AdminServer(
        StateBackend(state),
        f"{POD_IP}:0",  # the pod's ports may be taken on this machine
        tls_cert=Path(cfg["tls_cert"]),
        tls_key=Path(cfg["tls_key"]),
        tls_client_ca=Path(cfg["tls_client_ca"]),
        authorized_clients=cfg["authorized_clients"],
        unauthenticated_reads=cfg["unauthenticated_reads"],
        probe_bind=f"{POD_IP}:0",
    )
    port = await server.start()
    env["BKAUDIT_ADMIN_ADDRESS"] = f"{POD_IP}:{port}"
    try:
        if values["probes"]["type"] == "grpc":
            assert c["livenessProbe"]["grpc"]["port"] == values["tls"]["admin"]["probePort"]
            async with aio.insecure_channel(f"{POD_IP}:{server.probe_port}") as channel:  # the kubelet: no TLS
                stub = health_pb2_grpc.HealthStub(channel)
                for probe in ("livenessProbe", "startupProbe"):
                    req = health_pb2.HealthCheckRequest(service=c[probe]["grpc"]["service"])
                    assert (await stub.Check(req, timeout=10)).status == health_pb2.HealthCheckResponse.SERVING
        else:
            assert await _run(c["livenessProbe"]["exec"]["command"], env) == (0, "SERVING\n")
            assert (await _run(c["readinessProbe"]["exec"]["command"], env))[0] == 1  # not ready yet
            await server.set_health(ready=True)
            assert (await _run(c["readinessProbe"]["exec"]["command"], env))[0] == 0
        # kubectl exec <pod> -- bk-auditor ...: the CLI authenticates with the pod's client certificate: the
        # server's own (CN bk-auditor) in admin-tls, which authorizedClients does not name, so reads only;
        # the toolset's (clientSecretName) in secured, where any certificate of the client CA may pause
        code, out = await _run(["bk-auditor", "status", "--format", "json"], env)
        assert code == 0 and '"identity": "bk-auditor-0"' in out, out
        code, out = await _run(["bk-auditor", "pause", "--reason", "test"], env)
        if values["tls"]["admin"]["authorizedClients"]:
            assert code == 2 and "client certificate CN=bk-auditor" in out and "PERMISSION_DENIED" in out, out
            assert not state.pause.paused
        else:
            assert (code, state.pause.paused) == (0, True), out
    finally:
        await server.stop(0)


# ------------------------------------------------------------------------------------------ NetworkPolicy


def _ingress(scenario: str) -> list[dict[str, Any]]:
    policy = one(rendered(scenario), "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress: ZooKeeper and bookies, wherever they are
    sts = one(rendered(scenario), "StatefulSet")
    assert policy["spec"]["podSelector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]
    rules = policy["spec"]["ingress"]
    for rule in rules:
        assert rule.get("from"), f"a rule without peers admits everyone: {rule}"
    return rules


def test_network_policy_admits_prometheus_and_the_replicas_only() -> None:
    rules = _ingress("default")
    by_port = {r["ports"][0]["port"]: r["from"] for r in rules}
    assert set(by_port) == {"http-metrics", "grpc-admin"}
    assert {p["podSelector"]["matchLabels"]["app.kubernetes.io/name"] for p in by_port["http-metrics"]} == {
        "prometheus",
        "vmagent",
    }
    sts = one(rendered("default"), "StatefulSet")
    assert by_port["grpc-admin"] == [{"podSelector": {"matchLabels": sts["spec"]["selector"]["matchLabels"]}}]
    ports = {p["name"] for p in sts["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert set(by_port) <= ports  # named ports the pod has


def test_network_policy_named_clients_and_extra_rules() -> None:
    rules = _ingress("admin-tls")
    admin = next(r for r in rules if r["ports"][0]["port"] == "grpc-admin")
    assert {"podSelector": {"matchLabels": {"component": "toolset"}}} in admin["from"]
    assert {"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"port": 7979, "protocol": "TCP"}]} in rules
    # the probe port is admitted from nowhere: the kubelet's probes come from the node, always admitted
    assert all(r["ports"][0]["port"] not in ("grpc-probe", 7978) for r in rules)


def test_network_policy_without_prometheus_peers_has_no_open_metrics_rule() -> None:
    rules = _ingress("secured")  # networkPolicy.prometheus: []
    assert [r["ports"][0]["port"] for r in rules] == ["grpc-admin"]


def test_network_policy_can_be_left_out() -> None:
    out = render_manifests.render_chart({"networkPolicy": {"enabled": False}})
    assert not [d for d in yaml.safe_load_all(out["bk-auditor/templates/networkpolicy.yaml"]) if d]


def test_secured_config_loads_with_the_pods_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Everything secured (admin, ZooKeeper and bookie TLS, ZooKeeper SASL): the settings the chart writes
    are ones the daemon knows, and they load with the mounted files in place."""
    docs = rendered("secured")
    certs, auth = tmp_path / "certs", tmp_path / "auth"
    ca = CertAuthority(tmp_path / "pki", "ca")
    _materialise(certs, ca, "bk-auditor.pulsar.svc.cluster.local", "pulsar-toolset")
    for d in ("zookeeper-client", "bookie-client"):
        leaf = ca.issue(d, ["localhost"])
        (certs / d).mkdir(parents=True, exist_ok=True)
        (certs / d / "tls.crt").write_bytes(leaf.cert_file.read_bytes())
        (certs / d / "tls.key").write_bytes(leaf.key_file.read_bytes())
    (auth / "zookeeper").mkdir(parents=True)
    (auth / "zookeeper" / "jaas.conf").write_text(
        'Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username="bk"\n  password="s";\n};\n'
    )
    text = one(docs, "ConfigMap", "bk-auditor")["data"]["config.yaml"]
    path = tmp_path / "config.yaml"
    path.write_text(text.replace("/pulsar/certs", str(certs)).replace("/etc/bk-auditor/auth", str(auth)))
    for key in [k for k in os.environ if k.upper().startswith("BKAUDIT_")]:
        monkeypatch.delenv(key)
    for name, value in _pod_environment(_container(docs), certs).items():
        monkeypatch.setenv(name, value)
    s = load_settings(path)
    assert s.zookeeper.tls.enabled and s.zookeeper.tls.cert_file == certs / "zookeeper-client/tls.crt"
    assert s.zookeeper.auth.jaas_file == auth / "zookeeper/jaas.conf"
    assert s.bookie_client.tls.enabled and s.bookie_client.tls.key_file == certs / "bookie-client/tls.key"
    assert s.admin.tls_client_ca == certs / "admin-client-ca/ca.crt"
