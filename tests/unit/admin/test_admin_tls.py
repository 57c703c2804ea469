"""Admin API TLS with client certificates, over real gRPC on loopback, with certificates the test makes:
mutual TLS end to end through the CLI; no client certificate, a certificate of another CA, or one not in
admin.authorized_clients -> refused with one clear line and exit 2; health (and the plaintext probe
listener) open to probes; the access policy's statuses."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from typer.testing import CliRunner

from auditor._proto import admin_pb2 as pb
from auditor.admin.access import READ_METHODS, AccessPolicy, Peer
from auditor.admin.client import AdminClient, AdminClientError
from auditor.admin.errors import PermissionDeniedError, UnauthenticatedError
from auditor.admin.server import SERVICE_NAME, AdminServer
from auditor.cli import app
from auditor.daemon.backend import StateBackend
from auditor.daemon.state import DaemonState
from devcluster.certs import CertAuthority, Issued

BIN = Path(sys.executable).with_name("bk-auditor")


pytestmark = pytest.mark.usefixtures("no_bkaudit_env")


@dataclass
class Pki:
    ca: CertAuthority
    server: Issued
    ops: Issued  # a client named in authorized_clients (dns:ops)
    other: Issued  # signed by the same CA, not named
    rogue_ca: CertAuthority
    rogue: Issued  # signed by another CA


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca = CertAuthority(tmp_path / "pki", "admin-ca")
    rogue_ca = CertAuthority(tmp_path / "rogue", "rogue-ca")
    return Pki(
        ca,
        ca.issue("bk-auditor", ["localhost", "127.0.0.1"]),
        ca.issue("ops", ["ops"]),
        ca.issue("reader", ["reader"]),
        rogue_ca,
        rogue_ca.issue("ops", ["ops"]),
    )


@dataclass
class Served:
    state: DaemonState
    server: AdminServer
    addr: str
    probe: str | None
    triggered: list[str]


@pytest.fixture
async def serve(pki: Pki) -> AsyncIterator[Any]:
    started: list[AdminServer] = []

    async def start(**kw: Any) -> Served:
        state = DaemonState("tls-0")
        state.tasks.register("scrutiny")
        assert state.leadership is not None
        state.leadership.set(True)  # trigger is leader-only
        triggered: list[str] = []

        async def trigger(check: str) -> bool:
            triggered.append(check)
            return True

        kw.setdefault("tls_cert", pki.server.cert_file)
        kw.setdefault("tls_key", pki.server.key_file)
        server = AdminServer(StateBackend(state, trigger=trigger), "127.0.0.1:0", **kw)
        port = await server.start()
        started.append(server)
        probe = f"127.0.0.1:{server.probe_port}" if server.probe_port else None
        return Served(state, server, f"127.0.0.1:{port}", probe, triggered)

    yield start
    for s in started:
        await s.stop(0)


def _invoke(args: list[str], env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, args, env=env)


async def cli(*args: str, env: dict[str, str] | None = None) -> Any:
    return await asyncio.to_thread(_invoke, list(args), env)


def creds(pki: Pki, client: Issued | None = None, ca: Path | None = None) -> list[str]:
    out = ["--tls-ca", str(ca or pki.ca.cert_file)]
    if client is not None:
        out += ["--tls-cert", str(client.cert_file), "--tls-key", str(client.key_file)]
    return out


def one_error_line(result: Any) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


# ------------------------------------------------------------------------------------------ mutual TLS


async def test_mutual_tls_end_to_end_through_the_cli(serve: Any, pki: Pki) -> None:
    d = await serve(tls_client_ca=pki.ca.cert_file)
    ok = creds(pki, pki.ops)
    r = await cli("pause", "--admin", d.addr, "--reason", "maintenance", *ok)
    assert r.exit_code == 0, r.output
    assert d.state.pause.paused and d.state.pause.reason == "maintenance"
    r = await cli("status", "--admin", d.addr, "--format", "json", *ok)
    assert r.exit_code == 0 and '"paused": true' in r.stdout
    r = await cli("trigger", "scrutiny", "--admin", d.addr, *ok)
    assert r.exit_code == 0 and d.triggered == ["scrutiny"]
    r = await cli("resume", "--admin", d.addr, *ok)
    assert r.exit_code == 0 and not d.state.pause.paused
    r = await cli("health", "--admin", d.addr, "--service", "liveness", *ok)
    assert r.exit_code == 0 and r.stdout.strip() == "SERVING"


async def test_client_tls_material_from_the_environment(serve: Any, pki: Pki) -> None:
    d = await serve(tls_client_ca=pki.ca.cert_file)
    env = {
        "BKAUDIT_ADMIN_ADDRESS": d.addr,
        "BKAUDIT_CLI_TLS_CA": str(pki.ca.cert_file),
        "BKAUDIT_CLI_TLS_CERT": str(pki.ops.cert_file),
        "BKAUDIT_CLI_TLS_KEY": str(pki.ops.key_file),
    }
    r = await cli("pause", env=env)
    assert r.exit_code == 0, r.output
    assert d.state.pause.paused


async def test_server_name_override_checks_the_certificate_against_that_name(
    serve: Any, pki: Pki, tmp_path: Path
) -> None:
    """Dialling a pod IP whose certificate only names the Service: --tls-server-name says which name to check."""
    named = pki.ca.issue("svc", ["bk-auditor.pulsar.svc"])
    d = await serve(tls_cert=named.cert_file, tls_key=named.key_file, tls_client_ca=pki.ca.cert_file)
    r = await cli("status", "--admin", d.addr, *creds(pki, pki.ops))
    assert r.exit_code == 2
    line = one_error_line(r)
    assert "TLS handshake" in line and "Hostname Verification" in line and "--tls-server-name" in line
    r = await cli("status", "--admin", d.addr, "--tls-server-name", "bk-auditor.pulsar.svc", *creds(pki, pki.ops))
    assert r.exit_code == 0, r.output


async def test_no_client_certificate_is_refused_with_one_clear_line(serve: Any, pki: Pki) -> None:
    d = await serve(tls_client_ca=pki.ca.cert_file)
    r = await cli("pause", "--admin", d.addr, *creds(pki))
    assert r.exit_code == 2
    line = one_error_line(r)
    assert f"TLS handshake with the bk-auditor admin API at {d.addr} failed" in line
    assert "--tls-cert/--tls-key" in line
    assert not d.state.pause.paused


async def test_client_certificate_of_another_ca_is_refused(serve: Any, pki: Pki) -> None:
    d = await serve(tls_client_ca=pki.ca.cert_file)
    r = await cli("pause", "--admin", d.addr, *creds(pki, pki.rogue))
    assert r.exit_code == 2 and "TLS handshake" in one_error_line(r)
    assert not d.state.pause.paused


async def test_server_certificate_of_another_ca_is_refused(serve: Any, pki: Pki) -> None:
    d = await serve(tls_client_ca=pki.ca.cert_file)
    r = await cli("status", "--admin", d.addr, *creds(pki, pki.ops, ca=pki.rogue_ca.cert_file))
    assert r.exit_code == 2
    assert "CERTIFICATE_VERIFY_FAILED" in one_error_line(r)


async def test_plaintext_client_is_refused(serve: Any, pki: Pki) -> None:
    d = await serve(tls_client_ca=pki.ca.cert_file)
    r = await cli("pause", "--admin", d.addr)
    assert r.exit_code == 2 and not d.state.pause.paused


async def test_authorized_clients_limit_mutations_not_reads(serve: Any, pki: Pki) -> None:
    d = await serve(tls_client_ca=pki.ca.cert_file, authorized_clients=["dns:ops"])
    r = await cli("pause", "--admin", d.addr, *creds(pki, pki.other))
    assert r.exit_code == 2
    line = one_error_line(r)
    assert "Pause refused: client certificate CN=reader (names: dns:reader)" in line
    assert "is not in admin.authorized_clients" in line
    assert "PERMISSION_DENIED" in line and not d.state.pause.paused
    r = await cli("status", "--admin", d.addr, *creds(pki, pki.other))
    assert r.exit_code == 0, r.output
    r = await cli("pause", "--admin", d.addr, *creds(pki, pki.ops))
    assert r.exit_code == 0 and d.state.pause.paused


async def test_refusals_carry_the_status_codes_of_the_table(serve: Any, pki: Pki) -> None:
    d = await serve(tls_client_ca=pki.ca.cert_file, authorized_clients=["dns:ops"], probe_bind="127.0.0.1:0")
    assert d.probe is not None
    async with AdminClient(d.probe, timeout=5) as plain:
        with pytest.raises(AdminClientError) as exc:
            await plain.pause("x")
        assert exc.value.code is grpc.StatusCode.UNAUTHENTICATED
    async with AdminClient(
        d.addr, timeout=5, tls_ca=pki.ca.cert_file, tls_cert=pki.other.cert_file, tls_key=pki.other.key_file
    ) as reader:
        with pytest.raises(AdminClientError) as exc:
            await reader.trigger("scrutiny")
        assert exc.value.code is grpc.StatusCode.PERMISSION_DENIED
    assert d.triggered == [] and not d.state.pause.paused


# ------------------------------------------------------------------------------------------ probes


async def test_probe_listener_serves_health_in_plaintext_and_refuses_everything_else(serve: Any, pki: Pki) -> None:
    d = await serve(tls_client_ca=pki.ca.cert_file, probe_bind="127.0.0.1:0")
    assert d.probe is not None
    await d.server.set_health(ready=True)
    for service in ("liveness", "readiness", ""):
        r = await cli("health", "--admin", d.probe, "--service", service)
        assert (r.exit_code, r.stdout.strip()) == (0, "SERVING"), r.output
    r = await cli("pause", "--admin", d.probe)
    assert r.exit_code == 2
    line = one_error_line(r)
    assert "Pause refused: a mutating call needs an authenticated client" in line and "UNAUTHENTICATED" in line
    r = await cli("status", "--admin", d.probe)
    assert r.exit_code == 2 and "Status refused: a read needs an authenticated client" in one_error_line(r)
    assert not d.state.pause.paused


async def test_unauthenticated_reads_open_reads_but_never_mutations(serve: Any, pki: Pki) -> None:
    d = await serve(tls_client_ca=pki.ca.cert_file, probe_bind="127.0.0.1:0", unauthenticated_reads=True)
    assert d.probe is not None
    for args in (["status"], ["findings"]):
        r = await cli(*args, "--admin", d.probe)
        assert r.exit_code == 0, r.output
    for args in (["pause"], ["resume"], ["trigger", "scrutiny"]):
        r = await cli(*args, "--admin", d.probe)
        assert r.exit_code == 2 and "needs an authenticated client" in one_error_line(r)
    assert d.triggered == [] and not d.state.pause.paused


async def test_tls_without_client_ca_serves_health_and_refuses_mutations(serve: Any, pki: Pki) -> None:
    d = await serve()
    r = await cli("health", "--admin", d.addr, "--service", "liveness", *creds(pki))
    assert (r.exit_code, r.stdout.strip()) == (0, "SERVING")
    r = await cli("pause", "--admin", d.addr, *creds(pki))
    assert r.exit_code == 2 and "needs an authenticated client" in one_error_line(r)
    assert not d.state.pause.paused


async def test_plaintext_api_without_tls_stays_open(serve: Any, pki: Pki) -> None:
    """No admin TLS: the API is open to whoever reaches it (loopback by default), as before."""
    d = await serve(tls_cert=None, tls_key=None)
    r = await cli("pause", "--admin", d.addr)
    assert r.exit_code == 0 and d.state.pause.paused


async def test_the_real_command_prints_one_line_when_refused(serve: Any, pki: Pki) -> None:
    """The installed `bk-auditor` in a child process: gRPC's own logging must not add lines to stderr."""
    d = await serve(tls_client_ca=pki.ca.cert_file)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    proc = await asyncio.create_subprocess_exec(
        str(BIN),
        "pause",
        "--admin",
        d.addr,
        *creds(pki, pki.rogue),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert proc.returncode == 2, err.decode()
    assert len(lines) == 1 and lines[0].startswith("error: TLS handshake"), err.decode()
    assert not d.state.pause.paused


# ------------------------------------------------------------------------------------------ the policy


def test_every_admin_method_is_a_read_or_gated_as_mutating() -> None:
    """Reads are named; everything else (a repair control added later included) needs a certificate."""
    methods = {m.name for m in pb.DESCRIPTOR.services_by_name["AdminService"].methods}
    assert READ_METHODS <= methods
    assert methods - READ_METHODS == {
        "TriggerCheck",
        "Pause",
        "Resume",
        "SetRecoveryDelay",
        "SetReplication",
        "SetRepairLimits",
    }
    assert SERVICE_NAME == "bkauditor.admin.v1.AdminService"
    policy = AccessPolicy(tls=True, unauthenticated_reads=True)
    anonymous = Peer(authenticated=False)
    for method in [*sorted(methods - READ_METHODS), "RepairLedger"]:
        with pytest.raises(UnauthenticatedError, match=f"^{method} refused"):
            policy.check(method, anonymous)


def test_peer_names_come_from_the_verified_certificate_only(pki: Pki) -> None:
    """Typed names parsed from the certificate gRPC verified (x509_pem_cert); gRPC's untyped lists are not
    used (test_admin_identity.py has the cases)."""
    assert not Peer.from_auth_context({"transport_security_type": [b"ssl"]}).authenticated
    cert = pki.ca.issue("ops", ["ops.example", "127.0.0.1"], stem="ops-example")
    peer = Peer.from_auth_context(
        {
            "x509_subject": [b"CN=ops"],
            "x509_pem_cert": [cert.cert_file.read_bytes()],
            "x509_common_name": [b"ops"],
            "x509_subject_alternative_name": [b"ops.example", b"127.0.0.1", b"other"],
        }
    )
    assert peer.authenticated and peer.names == ("dns:ops.example", "ip:127.0.0.1")
    AccessPolicy(tls=True, authorized_clients=frozenset({"dns:ops.example"})).check("Pause", peer)
    for other in ("dns:other", "cn:ops", "uri:ops.example://x"):
        with pytest.raises(PermissionDeniedError):
            AccessPolicy(tls=True, authorized_clients=frozenset({other})).check("Pause", peer)


async def test_missing_tls_file_names_the_setting(pki: Pki, tmp_path: Path) -> None:
    server = AdminServer(
        StateBackend(DaemonState("x")),
        "127.0.0.1:0",
        tls_cert=pki.server.cert_file,
        tls_key=pki.server.key_file,
        tls_client_ca=tmp_path / "gone.crt",
    )
    with pytest.raises(OSError, match=r"admin\.tls_client_ca .*gone\.crt"):
        await server.start()


# ------------------------------------------------------------------------------------------ renewal


def _replace(dst: Path, src: Path) -> None:
    """As a Secret volume does: the new content appears at once (written aside, renamed over)."""
    tmp = dst.with_suffix(".new")
    tmp.write_bytes(src.read_bytes())
    os.replace(tmp, dst)


async def test_renewed_certificate_and_client_ca_are_served_without_a_restart(
    serve: Any, pki: Pki, tmp_path: Path
) -> None:
    live = tmp_path / "live"
    live.mkdir()
    cert, key, client_ca = live / "tls.crt", live / "tls.key", live / "ca.crt"
    for dst, src in ((cert, pki.server.cert_file), (key, pki.server.key_file), (client_ca, pki.ca.cert_file)):
        _replace(dst, src)
    d = await serve(tls_cert=cert, tls_key=key, tls_client_ca=client_ca)
    new_ca = CertAuthority(tmp_path / "new", "new-ca")
    new_server, new_ops = (
        new_ca.issue("bk-auditor", ["localhost", "127.0.0.1"]),
        new_ca.issue("ops", ["localhost", "127.0.0.1"]),
    )
    with_new = creds(pki, new_ops, ca=new_ca.cert_file)
    r = await cli("status", "--admin", d.addr, *with_new)
    assert r.exit_code == 2 and "TLS handshake" in one_error_line(r)
    # cert-manager renews under a new CA: certificate, key and client CA change together
    for dst, src in ((cert, new_server.cert_file), (key, new_server.key_file), (client_ca, new_ca.cert_file)):
        _replace(dst, src)
    r = await cli("status", "--admin", d.addr, *with_new)
    assert r.exit_code == 0, r.output
    assert d.server.tls is not None and d.server.tls.reloads == 1
    r = await cli("status", "--admin", d.addr, *creds(pki, pki.ops))  # the old CA is no longer trusted
    assert r.exit_code == 2


async def test_unusable_renewal_keeps_the_previous_certificate(serve: Any, pki: Pki, tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "tls.crt", live / "tls.key"
    _replace(cert, pki.server.cert_file)
    _replace(key, pki.server.key_file)
    d = await serve(tls_cert=cert, tls_key=key, tls_client_ca=pki.ca.cert_file)
    _replace(key, pki.other.key_file)  # a key that does not go with the certificate
    r = await cli("status", "--admin", d.addr, *creds(pki, pki.ops))
    assert r.exit_code == 0, r.output
    assert d.server.tls is not None and d.server.tls.reloads == 0


async def test_key_that_does_not_match_the_certificate_is_refused_at_start(pki: Pki) -> None:
    server = AdminServer(
        StateBackend(DaemonState("x")), "127.0.0.1:0", tls_cert=pki.server.cert_file, tls_key=pki.other.key_file
    )
    with pytest.raises(OSError, match=r"admin\.tls_key .* does not go with admin\.tls_cert"):
        await server.start()
