"""`admin.authorized_clients` names typed identities (`dns:`, `uri:`, `email:`, `ip:`, `cn:`), matched
against the verified client certificate itself over a real mutual-TLS gRPC server on loopback: a name of
one type never matches a name of another type (the attack: a certificate of the same CA, CN=some-broker,
with an email or URI SAN spelled like the authorized DNS name), and `cn:` matches only a certificate
without subject alternative names. An untyped entry is a one-line settings error (exit 2) with a hint."""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509

from auditor.admin.access import AccessPolicy, Peer, certificate_names
from auditor.admin.client import AdminClient, AdminClientError
from auditor.admin.server import AdminServer
from auditor.daemon.backend import StateBackend
from auditor.daemon.state import DaemonState
from auditor.settings import ConfigError, load_settings
from auditor.settings.clientnames import client_name
from devcluster.certs import CertAuthority, Issued

pytestmark = pytest.mark.usefixtures("no_bkaudit_env")

BIN = Path(sys.executable).with_name("bk-auditor")
SPIFFE = "spiffe://cluster.local/ns/pulsar/sa/ops-admin"

Pause = Callable[[Issued], Awaitable[grpc.StatusCode | None]]


@pytest.fixture
def ca(tmp_path: Path) -> CertAuthority:
    return CertAuthority(tmp_path / "pki", "cluster-issuer")  # issues brokers, bookies and operators alike


def issue(ca: CertAuthority, cn: str, *sans: x509.GeneralName, stem: str) -> Issued:
    return ca.issue(cn, [], sans=sans, stem=stem)


@pytest.fixture
async def server(ca: CertAuthority) -> AsyncIterator[Callable[[list[str]], Awaitable[Pause]]]:
    """Start a mutual-TLS admin server with `authorized_clients`; returns `pause(client)`: None when the
    Pause call went through (and the daemon is then paused), else the status it was refused with."""
    started: list[AdminServer] = []
    own = ca.issue("bk-auditor", ["localhost", "127.0.0.1"])

    async def start(authorized: list[str]) -> Pause:
        state = DaemonState("identity-0")
        s = AdminServer(
            StateBackend(state),
            "127.0.0.1:0",
            tls_cert=own.cert_file,
            tls_key=own.key_file,
            tls_client_ca=ca.cert_file,
            authorized_clients=authorized,
        )
        port = await s.start()
        started.append(s)

        async def pause(client: Issued) -> grpc.StatusCode | None:
            async with AdminClient(
                f"127.0.0.1:{port}", timeout=10, tls_ca=ca.cert_file, tls_cert=client.cert_file, tls_key=client.key_file
            ) as c:
                await c.status()  # a read: every certificate of the CA may
                try:
                    await c.pause("identity test")
                except AdminClientError as exc:
                    assert not state.pause.paused
                    return exc.code
            assert state.pause.paused
            state.pause.resume()  # for the next certificate
            return None

        return pause

    yield start
    for s in started:
        await s.stop(0)


DENIED = grpc.StatusCode.PERMISSION_DENIED


async def test_dns_entry_is_not_matched_by_an_email_or_uri_san_or_the_cn(server: Any, ca: CertAuthority) -> None:
    pause = await server(["dns:ops-admin"])
    assert await pause(issue(ca, "some-broker", x509.RFC822Name("ops-admin"), stem="email")) is DENIED
    assert await pause(issue(ca, "some-broker", x509.UniformResourceIdentifier("ops-admin"), stem="uri")) is DENIED
    assert await pause(issue(ca, "ops-admin", stem="cn-only")) is DENIED  # a CN is not a DNS name
    assert await pause(issue(ca, "ops-admin", x509.DNSName("ops-admin.evil"), stem="other-dns")) is DENIED
    assert await pause(issue(ca, "some-broker", x509.DNSName("ops-admin"), stem="dns")) is None
    assert await pause(issue(ca, "x", x509.DNSName("localhost"), x509.DNSName("OPS-Admin"), stem="case")) is None


async def test_uri_entry_matches_the_spiffe_id_exactly(server: Any, ca: CertAuthority) -> None:
    pause = await server([f"uri:{SPIFFE}"])
    assert await pause(issue(ca, "x", x509.UniformResourceIdentifier(SPIFFE), stem="spiffe")) is None
    assert await pause(issue(ca, "x", x509.UniformResourceIdentifier(SPIFFE + "-2"), stem="longer")) is DENIED
    assert await pause(issue(ca, "x", x509.UniformResourceIdentifier(SPIFFE.upper()), stem="upper")) is DENIED
    assert await pause(issue(ca, SPIFFE, stem="cn")) is DENIED


async def test_email_entry_matches_an_email_san_only(server: Any, ca: CertAuthority) -> None:
    pause = await server(["email:ops@example.com"])
    assert await pause(issue(ca, "x", x509.RFC822Name("ops@Example.COM"), stem="email")) is None  # domain: any case
    assert await pause(issue(ca, "x", x509.RFC822Name("OPS@example.com"), stem="local")) is DENIED
    assert await pause(issue(ca, "x", x509.UniformResourceIdentifier("mailto:ops@example.com"), stem="uri")) is DENIED
    assert await pause(issue(ca, "ops@example.com", stem="cn")) is DENIED


async def test_ip_entry_matches_an_ip_san_as_an_address(server: Any, ca: CertAuthority) -> None:
    pause = await server(["ip:10.1.2.3", "ip:FD00:0::1"])
    assert await pause(issue(ca, "x", x509.IPAddress(ipaddress.ip_address("10.1.2.3")), stem="v4")) is None
    assert await pause(issue(ca, "x", x509.IPAddress(ipaddress.ip_address("fd00::1")), stem="v6")) is None
    assert await pause(issue(ca, "x", x509.DNSName("10.1.2.3"), stem="dns")) is DENIED
    assert await pause(issue(ca, "10.1.2.3", stem="cn")) is DENIED


async def test_cn_entry_matches_only_a_certificate_without_sans(server: Any, ca: CertAuthority) -> None:
    pause = await server(["cn:ops"])
    assert await pause(issue(ca, "ops", stem="cn-only")) is None
    for i, san in enumerate(
        [
            x509.DNSName("localhost"),
            x509.RFC822Name("someone@example.com"),
            x509.UniformResourceIdentifier("spiffe://x/y"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]
    ):  # whoever asked the issuer for a SAN is identified by it, not by a CN it also wrote
        assert await pause(issue(ca, "ops", san, stem=f"with-san-{i}")) is DENIED
    assert await pause(issue(ca, "other", x509.DNSName("ops"), stem="dns-ops")) is DENIED
    assert await pause(issue(ca, "Ops", stem="case")) is DENIED


def test_refusal_names_the_typed_names_of_the_certificate(ca: CertAuthority) -> None:
    peer = Peer.from_auth_context(
        {
            "x509_subject": [b"CN=some-broker"],
            "x509_pem_cert": [issue(ca, "some-broker", x509.RFC822Name("ops-admin"), stem="e").cert_file.read_bytes()],
            # what gRPC also hands us, untyped: never used for the decision
            "x509_common_name": [b"ops-admin"],
            "x509_subject_alternative_name": [b"ops-admin"],
        }
    )
    assert peer.authenticated and peer.names == ("email:ops-admin",)
    with pytest.raises(Exception, match=r"CN=some-broker \(names: email:ops-admin\) is not in admin.authorized"):
        AccessPolicy(tls=True, authorized_clients=frozenset({"dns:ops-admin"})).check("SetReplication", peer)


def test_certificate_names_are_typed_and_canonical(ca: CertAuthority) -> None:
    cert = issue(
        ca,
        "ignored-cn",
        x509.DNSName("Bk.Example"),
        x509.UniformResourceIdentifier(SPIFFE),
        x509.RFC822Name("Ops@EXAMPLE.com"),
        x509.IPAddress(ipaddress.ip_address("fd00:0::1")),
        stem="all",
    )
    assert certificate_names(cert.cert_file.read_bytes()) == (
        "dns:bk.example",
        f"uri:{SPIFFE}",
        "email:Ops@example.com",
        "ip:fd00::1",
    )
    assert certificate_names(issue(ca, "ops", stem="cn").cert_file.read_bytes()) == ("cn:ops",)
    assert certificate_names(b"not a certificate") == ()


# ------------------------------------------------------------------------------------------ settings


@pytest.mark.parametrize(
    ("entry", "canonical"),
    [
        ("dns:Ops.Example", "dns:ops.example"),
        ("DNS:ops", "dns:ops"),
        (f"uri:{SPIFFE}", f"uri:{SPIFFE}"),
        ("email:ops@Example.com", "email:ops@example.com"),
        ("ip:::1", "ip:::1"),
        ("ip:10.0.0.001", None),  # not an address (leading zeros are ambiguous)
        ("ip:0:0::1", "ip:::1"),
        ("cn:ops", "cn:ops"),
        ("cn:", None),
        ("dns:*.pulsar.svc", None),
        ("dns:a b", None),
        ("uri:ops-admin", None),  # not an absolute URI
        ("email:ops", None),
    ],
)
def test_typed_entries(entry: str, canonical: str | None) -> None:
    if canonical is None:
        with pytest.raises(ValueError, match=r"^admin client name "):
            client_name(entry)
    else:
        assert client_name(entry) == canonical


def _settings_problems(tmp_path: Path, clients: str) -> list[str]:
    f = tmp_path / "c.yaml"
    for name in ("cert", "key", "ca"):
        (tmp_path / f"{name}.pem").write_text("x")
    f.write_text(
        "metadata_service_uri: zk+hierarchical://127.0.0.1:2181/ledgers\nadmin:\n"
        f"  tls_cert: {tmp_path}/cert.pem\n  tls_key: {tmp_path}/key.pem\n  tls_client_ca: {tmp_path}/ca.pem\n"
        f"  authorized_clients: {clients}\n"
    )
    try:
        load_settings(f)
    except ConfigError as exc:
        return [p.removeprefix(f"config file {f}: ") for p in exc.problems]
    return []


def test_untyped_entries_are_a_settings_error_with_a_migration_hint(tmp_path: Path) -> None:
    assert _settings_problems(tmp_path, "[ops]") == [
        "admin.authorized_clients: admin client name 'ops' has no type: write dns:ops (a DNS subject "
        "alternative name) or cn:ops (the CN of a certificate without subject alternative names)"
    ]
    got = _settings_problems(tmp_path, "['spiffe://td/ns/x/sa/y', '10.0.0.1', 'a@b.c', 'ldap:x']")
    assert len(got) == 1, got
    for hint in ("write uri:spiffe://td/ns/x/sa/y", "write ip:10.0.0.1", "write email:a@b.c", "'ldap:x' has no type"):
        assert hint in got[0]
    assert _settings_problems(tmp_path, "[dns:ops, 'uri:spiffe://td/x', cn:Legacy]") == []


def test_the_daemon_refuses_to_start_with_an_untyped_entry(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    _settings_problems(tmp_path, "[]")
    f.write_text(
        "metadata_service_uri: zk+hierarchical://127.0.0.1:1/ledgers\nadmin:\n"
        f"  tls_cert: {tmp_path}/cert.pem\n  tls_key: {tmp_path}/key.pem\n  tls_client_ca: {tmp_path}/ca.pem\n"
        "  authorized_clients: [ops-admin]\n"
    )
    r = subprocess.run([str(BIN), "run", "--config", str(f)], capture_output=True, text=True, timeout=60)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "admin.authorized_clients: admin client name 'ops-admin' has no type: write dns:ops-admin" in lines[0]


def test_a_policy_with_an_untyped_name_cannot_be_built() -> None:
    """Fail closed where settings are bypassed (the server built in code): no silent CN-or-any-SAN match."""
    with pytest.raises(ValueError, match="'ops' has no type"):
        AccessPolicy(tls=True, authorized_clients=frozenset({"ops"}))
