"""A renewed admin TLS file that cannot be used is refused whole, over a real mutual-TLS gRPC server on
loopback: a client CA replaced by garbage, a truncated PEM, an empty file or a key that is not a
certificate is never reported as in use; the refusal is an error log line naming the file and what is
wrong, and `bk_auditor_admin_tls_reloads_total{result="rejected"}`; the old CA keeps admitting its clients;
a good file afterwards is accepted and counted."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog

from auditor.admin.client import AdminClient, AdminClientError
from auditor.admin.credentials import ServerTls
from auditor.admin.server import AdminServer
from auditor.daemon.backend import StateBackend
from auditor.daemon.metrics import AuditorMetrics
from auditor.daemon.state import DaemonState
from devcluster.certs import CertAuthority, Issued

pytestmark = pytest.mark.usefixtures("no_bkaudit_env")


def _replace(dst: Path, data: bytes) -> None:
    """As a Secret volume does: the new content appears at once (written aside, renamed over)."""
    tmp = dst.with_suffix(".new")
    tmp.write_bytes(data)
    os.replace(tmp, dst)


@dataclass
class Live:
    ca: CertAuthority
    client: Issued
    ca_file: Path
    cert_file: Path
    key_file: Path
    server: AdminServer
    metrics: AuditorMetrics
    addr: str

    def count(self, result: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "bk_auditor_admin_tls_reloads_total", {"result": result, "bookkeeper_cluster": "test"}
        )
        assert value is not None
        return value

    async def admitted(self, client: Issued | None = None, ca: CertAuthority | None = None) -> bool:
        """Does a new connection with `client` (default: the old CA's client) complete a call?"""
        c = client or self.client
        try:
            async with AdminClient(
                self.addr,
                timeout=10,
                tls_ca=(ca or self.ca).cert_file,
                tls_cert=c.cert_file,
                tls_key=c.key_file,
            ) as admin:
                await admin.status()
            return True
        except AdminClientError:
            return False


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    ca = CertAuthority(tmp_path / "pki", "admin-ca")
    server_cert, client = ca.issue("bk-auditor", ["localhost", "127.0.0.1"]), ca.issue("ops", ["ops"])
    d = tmp_path / "live"
    d.mkdir()
    ca_file, cert_file, key_file = d / "ca.crt", d / "tls.crt", d / "tls.key"
    _replace(ca_file, ca.cert_file.read_bytes())
    _replace(cert_file, server_cert.cert_file.read_bytes())
    _replace(key_file, server_cert.key_file.read_bytes())
    metrics = AuditorMetrics(cluster="test")
    server = AdminServer(
        StateBackend(DaemonState("reload-0")),
        "127.0.0.1:0",
        tls_cert=cert_file,
        tls_key=key_file,
        tls_client_ca=ca_file,
        tls_reloaded=metrics.admin_tls_reloaded,
    )
    port = await server.start()
    try:
        yield Live(ca, client, ca_file, cert_file, key_file, server, metrics, f"127.0.0.1:{port}")
    finally:
        await server.stop(0)


def _truncated(pem: bytes) -> bytes:
    return pem[: len(pem) // 2]


BAD_CA = {
    "garbage": lambda good: b"\x00\x01 this is not PEM at all \xff" * 20,
    "truncated": _truncated,
    "empty": lambda good: b"",
    "truncated second certificate": lambda good: good + _truncated(good),
    "a corrupt certificate body": lambda good: good.replace(good.splitlines()[3], b"A" * 64),
    "a key instead of a certificate": None,  # filled in with the client's key below
}


@pytest.mark.parametrize("bad", list(BAD_CA))
async def test_a_bad_client_ca_is_refused_logged_counted_and_the_old_one_stays(live: Live, bad: str) -> None:
    assert await live.admitted()
    good = live.ca_file.read_bytes()
    make = BAD_CA[bad]
    data = live.client.key_file.read_bytes() if make is None else make(good)
    _replace(live.ca_file, data)
    with structlog.testing.capture_logs() as logs:
        assert await live.admitted()  # the handshake that looks at the files: the old CA still admits
        assert await live.admitted()  # and keeps doing so (the refusal is not retried per handshake)
    refusals = [e for e in logs if e["log_level"] == "error"]
    assert len(refusals) == 1, logs
    assert str(live.ca_file) in refusals[0]["error"] and "admin.tls_client_ca" in refusals[0]["error"]
    assert not [e for e in logs if "new handshakes use them" in e["event"]], logs
    assert live.count("rejected") == 1 and live.count("accepted") == 0
    tls = live.server.tls
    assert isinstance(tls, ServerTls) and (tls.reloads, tls.rejected) == (0, 1)

    # the operator fixes the file: a new CA, accepted and counted; the old CA's client is no longer admitted
    new_ca = CertAuthority(live.ca.authority.dir.parent / "new", "new-ca")
    new_client = new_ca.issue("ops", ["ops"])
    _replace(live.ca_file, new_ca.cert_file.read_bytes())
    with structlog.testing.capture_logs() as logs:
        assert await live.admitted(new_client)  # server certificate: still the old CA's
    assert [e["event"] for e in logs if e["log_level"] == "info"] == [
        "admin API: TLS files changed; new handshakes use them"
    ]
    assert live.count("accepted") == 1 and live.count("rejected") == 1
    assert not await live.admitted()


async def test_what_is_wrong_is_named(live: Live) -> None:
    good = live.ca_file.read_bytes()
    expected = {
        b"": "empty",
        _truncated(good): "truncated",
        b"garbage": "no PEM certificate",
        good + _truncated(good): "truncated",
        live.client.key_file.read_bytes(): "PRIVATE KEY",
    }
    for n, (data, what) in enumerate(expected.items()):
        _replace(live.ca_file, data)
        with structlog.testing.capture_logs() as logs:
            assert await live.admitted()
        [refusal] = [e for e in logs if e["log_level"] == "error"]
        assert what in refusal["error"], (what, refusal)
        assert live.count("rejected") == n + 1
    assert live.count("accepted") == 0


async def test_a_truncated_server_certificate_chain_is_refused(live: Live, tmp_path: Path) -> None:
    """The certificate file is checked whole too: OpenSSL's key check reads only its first certificate."""
    good = live.cert_file.read_bytes()
    _replace(live.cert_file, good + _truncated(live.ca.cert_file.read_bytes()))
    with structlog.testing.capture_logs() as logs:
        assert await live.admitted()
    [refusal] = [e for e in logs if e["log_level"] == "error"]
    assert "admin.tls_cert" in refusal["error"] and "truncated" in refusal["error"]
    assert live.count("rejected") == 1


async def test_a_bad_client_ca_at_start_names_the_file(tmp_path: Path) -> None:
    ca = CertAuthority(tmp_path / "pki", "admin-ca")
    own = ca.issue("bk-auditor", ["localhost", "127.0.0.1"])
    bad = tmp_path / "ca.crt"
    bad.write_bytes(_truncated(ca.cert_file.read_bytes()))
    server = AdminServer(
        StateBackend(DaemonState("x")), "127.0.0.1:0", tls_cert=own.cert_file, tls_key=own.key_file, tls_client_ca=bad
    )
    with pytest.raises(OSError, match=rf"admin\.tls_client_ca {re.escape(str(bad))} is truncated"):
        await server.start()


def test_reload_counters_exist_at_zero() -> None:
    text = AuditorMetrics(cluster="test").exposition().decode()
    for result in ("accepted", "rejected"):
        assert f'bk_auditor_admin_tls_reloads_total{{bookkeeper_cluster="test",result="{result}"}} 0.0' in text
