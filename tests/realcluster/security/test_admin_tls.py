"""`bk-auditor run` against the real cluster with its admin API on mutual TLS and a plaintext probe
listener (as the chart configures it), driven by the real `bk-auditor` command in child processes with
certificates the test makes: authorized mutations work, a missing or foreign certificate, or one of the
right CA whose authorized-looking name has the wrong type, is refused with one line and exit 2, the probe
listener answers health only; an unusable renewal of the client CA is refused, logged and counted."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from devcluster import ports
from devcluster.certs import CertAuthority
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon

pytestmark = pytest.mark.realcluster

BIN = Path(sys.executable).with_name("bk-auditor")
# Ports of our own, above the ones daemon_util hands out (DAEMON_PORT_BASE + 0..99), below the chaos ones.
_ports = itertools.count(ports.DAEMON_PORT_BASE + 150)


@pytest.fixture
def daemon(cluster: Cluster, tmp_path: Path) -> Iterator[tuple[Daemon, CertAuthority]]:
    ca = CertAuthority(tmp_path / "pki", "admin-ca")
    server = ca.issue("bk-auditor-0", ["localhost", "127.0.0.1"])
    live_ca = tmp_path / "live" / "ca.crt"  # as a Secret volume mounts it: renewed in place
    live_ca.parent.mkdir()
    shutil.copyfile(ca.cert_file, live_ca)
    probe_port = next(_ports)
    d = Daemon(
        cluster,
        "tls-auditor-0",
        tmp_path,
        admin_port=next(_ports),
        metrics_port=next(_ports),
        admin={
            "tls_cert": str(server.cert_file),
            "tls_key": str(server.key_file),
            "tls_client_ca": str(live_ca),
            "authorized_clients": ["dns:ops"],
            "probe_bind": f"127.0.0.1:{probe_port}",
        },
        schedule={"scrutiny_seconds": 0, "bookie_check_seconds": 0},
    )
    ops = ca.issue("ops", ["ops"])
    d.client_tls = {"tls_ca": ca.cert_file, "tls_cert": ops.cert_file, "tls_key": ops.key_file}
    d.start()
    try:
        d.wait(lambda: d.status().identity == "tls-auditor-0", 60, "the admin API over mutual TLS")
        yield d, ca
    finally:
        d.stop()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    return subprocess.run([str(BIN), *args], env=env, capture_output=True, text=True, timeout=60)


def one_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def test_daemon_admin_api_mutual_tls_end_to_end(daemon: tuple[Daemon, CertAuthority], tmp_path: Path) -> None:
    d, ca = daemon
    addr = f"127.0.0.1:{d.admin_port}"
    probe = d.config["admin"]["probe_bind"]
    ops = ca.issue("ops", ["ops"])
    ok = ["--tls-ca", str(ca.cert_file), "--tls-cert", str(ops.cert_file), "--tls-key", str(ops.key_file)]

    r = cli("pause", "--admin", addr, "--reason", "tls test", *ok)
    assert (r.returncode, r.stdout.strip()) == (0, "paused"), r.stderr
    assert d.status().paused and d.status().pause_reason == "tls test"

    # no client certificate: the TLS handshake is refused; one line, exit 2
    r = cli("resume", "--admin", addr, "--tls-ca", str(ca.cert_file))
    assert r.returncode == 2 and "TLS handshake" in one_line(r) and d.status().paused
    # a client certificate of another CA, with the same name
    rogue = CertAuthority(tmp_path / "rogue", "rogue-ca").issue("ops", ["localhost", "127.0.0.1"])
    r = cli(
        "resume",
        "--admin",
        addr,
        "--tls-ca",
        str(ca.cert_file),
        "--tls-cert",
        str(rogue.cert_file),
        "--tls-key",
        str(rogue.key_file),
    )
    assert r.returncode == 2 and "TLS handshake" in one_line(r) and d.status().paused
    # a certificate of the right CA whose name is not authorized: reads yes, mutations no
    reader = ca.issue("reader", ["reader"])
    as_reader = ["--tls-ca", str(ca.cert_file), "--tls-cert", str(reader.cert_file), "--tls-key", str(reader.key_file)]
    r = cli("status", "--admin", addr, *as_reader)
    assert r.returncode == 0 and "tls-auditor-0" in r.stdout, r.stderr
    r = cli("resume", "--admin", addr, *as_reader)
    assert r.returncode == 2 and "PERMISSION_DENIED" in one_line(r) and d.status().paused
    # the operator's switches: reading is a read; changing them is a mutation, as pause is
    delay = f"{d.cluster.ledgers_root}/underreplication/lostBookieRecoveryDelay"
    before = d.cluster.kazoo.exists(delay) and d.cluster.kazoo.get(delay)[0]
    r = cli("recovery-delay", "--admin", addr, *as_reader)
    assert r.returncode == 0 and r.stdout.startswith("lostBookieRecoveryDelay: "), r.stderr
    for change in (["recovery-delay", "4321", "--yes"], ["replication", "disable", "--yes"]):
        r = cli(*change, "--admin", addr, *as_reader)
        line = one_line(r)
        assert r.returncode == 2 and "PERMISSION_DENIED" in line and "not in admin.authorized_clients" in line
    # the same CA's certificate for a broker, whose email and URI SANs spell the authorized DNS name:
    # a name of another type is not that name (no CN or any-SAN match)
    broker = ca.issue(
        "some-broker", [], sans=(x509.RFC822Name("ops"), x509.UniformResourceIdentifier("ops")), stem="broker"
    )
    as_broker = ["--tls-ca", str(ca.cert_file), "--tls-cert", str(broker.cert_file), "--tls-key", str(broker.key_file)]
    r = cli("replication", "disable", "--yes", "--admin", addr, *as_broker)
    line = one_line(r)
    assert r.returncode == 2 and "PERMISSION_DENIED" in line and "(names: email:ops, uri:ops)" in line
    assert (d.cluster.kazoo.exists(delay) and d.cluster.kazoo.get(delay)[0]) == before
    assert not d.cluster.kazoo.exists(f"{d.cluster.ledgers_root}/underreplication/disable")
    r = cli("recovery-delay", "4321", "--yes", "--admin", probe)
    assert r.returncode == 2 and "needs an authenticated client" in one_line(r)

    # the probe listener: health in plaintext, nothing else
    r = cli("health", "--admin", probe, "--service", "liveness")
    assert (r.returncode, r.stdout.strip()) == (0, "SERVING"), r.stderr
    d.wait(lambda: cli("health", "--admin", probe, "--service", "readiness").returncode == 0, 60, "readiness")
    r = cli("resume", "--admin", probe)
    assert r.returncode == 2 and "UNAUTHENTICATED" in one_line(r) and d.status().paused
    r = cli("status", "--admin", probe)
    assert r.returncode == 2 and "needs an authenticated client" in one_line(r)

    r = cli("resume", "--admin", addr, *ok)
    assert (r.returncode, r.stdout.strip()) == (0, "resumed") and not d.status().paused
    assert d.running
    started = next(e for e in d.logs() if e.get("event") == "bk-auditor started")
    assert started["adminTls"] == "mutual" and started["probePort"] == int(probe.rsplit(":", 1)[1])


def test_daemon_keeps_its_client_ca_when_the_renewal_is_unusable(
    daemon: tuple[Daemon, CertAuthority], tmp_path: Path
) -> None:
    d, ca = daemon
    addr = f"127.0.0.1:{d.admin_port}"
    ops = ca.issue("ops", ["ops"])
    ok = ["--tls-ca", str(ca.cert_file), "--tls-cert", str(ops.cert_file), "--tls-key", str(ops.key_file)]
    live = Path(d.config["admin"]["tls_client_ca"])
    assert d.metric("bk_auditor_admin_tls_reloads_total", result="rejected") == 0
    good = live.read_bytes()
    half = live.with_suffix(".new")
    half.write_bytes(good[: len(good) // 2])  # a renewal cut short
    os.replace(half, live)
    r = cli("status", "--admin", addr, *ok)
    assert r.returncode == 0, r.stderr  # the old CA still admits its client
    d.wait(lambda: d.metric("bk_auditor_admin_tls_reloads_total", result="rejected") == 1, 30, "the refusal counted")
    assert d.metric("bk_auditor_admin_tls_reloads_total", result="accepted") == 0
    refusals = [e for e in d.logs() if e.get("event", "").startswith("admin API: TLS files changed but cannot")]
    assert len(refusals) == 1 and refusals[0]["level"] == "error", refusals
    assert f"admin.tls_client_ca {live} is truncated" in refusals[0]["error"]
    assert not [e for e in d.logs() if e.get("event") == "admin API: TLS files changed; new handshakes use them"]
