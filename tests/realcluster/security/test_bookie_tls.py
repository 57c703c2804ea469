"""Bookie TLS against real BookKeeper 4.17.3 bookies (START_TLS, spec bookie-protocol.md §1.5): ledgers
written over TLS by the real Java client, read over TLS by bk-auditor's checks; client certificates; a
bookie whose certificate we must not trust; a bookie without TLS; the bookie's own bk_server.conf used as
bk-auditor's configuration. Certificates are made by the test (devcluster/certs.py).

One cluster for the module (ports from devcluster/ports.py, TLS_*):
  bookies 1-3  TLS, certificates from our CA naming their address (127.0.0.N)
  bookie 4     TLS with tlsClientAuthentication=true: demands a client certificate from our CA
  bookie 5     TLS with a certificate from another CA (the Java writer trusts both CAs; we trust only ours)
  bookie 6     no TLS at all: answers START_TLS with EBADREQ
  bookie 7     TLS, client certificate required, and certificate roles (BookieAuthZFactory,
               authorizedRoles=auditor): only a certificate whose OU carries the role is authorised
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.bookie.client import BookieClient
from auditor.checks.build import bookie_config
from auditor.durability.findings import Category, Finding
from devcluster import ports
from devcluster.certs import STORE_PASSWORD, CertAuthority
from devcluster.checks_util import actionable, audit, rewrite_ensemble, settings_for
from devcluster.cluster import Cluster

pytestmark = pytest.mark.realcluster

FACTORY = "org.apache.bookkeeper.tls.TLSContextFactory"
AUTHZ = "org.apache.bookkeeper.tls.BookieAuthZFactory"
BIN = Path(sys.executable).with_name("bk-auditor")


def _bookie_tls(ca_file: Path, cert: Path, key: Path, client_auth: bool = False) -> dict[str, str]:
    # PEM key store and trust store with tlsProviderFactoryClass, as spec security.md §4/§6 and the
    # Apache Pulsar chart configure bookies. The JDK provider: netty-tcnative need not be on the path.
    conf = {
        "tlsProviderFactoryClass": FACTORY,
        "tlsProvider": "JDK",
        "tlsKeyStoreType": "PEM",
        "tlsKeyStore": str(key),
        "tlsCertificatePath": str(cert),
        "tlsTrustStoreType": "PEM",
        "tlsTrustStore": str(ca_file),
    }
    if client_auth:
        conf["tlsClientAuthentication"] = "true"
    return conf


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("bookie-pki")
    ca = CertAuthority(d / "ca", "bk-auditor-test-ca")
    rogue = CertAuthority(d / "rogue", "someone-elses-ca")
    both = d / "both-cas.pem"
    both.write_bytes(ca.cert_file.read_bytes() + rogue.cert_file.read_bytes())
    bookies = {n: ca.issue(f"bookie{n}", [f"127.0.0.{n}"]) for n in (1, 2, 3, 4)}
    bookies[5] = rogue.issue("bookie5", ["127.0.0.5"])
    bookies[7] = ca.issue("bookie7", ["127.0.0.7"])
    return {
        "ca": ca,
        "rogue": rogue,
        "both": both,
        "bookies": bookies,
        "client": ca.issue("auditor", ["bk-auditor"]),
        "role": ca.issue("auditor-role", ["bk-auditor"], ou="0:auditor;1:test"),  # CertUtils' OU format
        "writer": ca.issue("writer", ["java-writer"]),
    }


@pytest.fixture(scope="module")
def tls_cluster(pki: dict[str, Any], request: pytest.FixtureRequest) -> Iterator[Cluster]:
    ca, bookies, writer = pki["ca"], pki["bookies"], pki["writer"]
    bookie_conf = {
        n: _bookie_tls(ca.cert_file, b.cert_file, b.key_file, client_auth=n in (4, 7)) for n, b in bookies.items()
    }
    bookie_conf[7] |= {"bookieAuthProviderFactoryClass": AUTHZ, "authorizedRoles": "auditor"}
    # The Java writer trusts both CAs (so it can write to bookie 5) and has a certificate (for bookie 4).
    client_conf = {
        "tlsProviderFactoryClass": FACTORY,
        "tlsProvider": "JDK",
        "tlsClientAuthentication": "true",
        "tlsKeyStoreType": "PEM",
        "tlsKeyStore": str(writer.key_file),
        "tlsCertificatePath": str(writer.cert_file),
        "tlsTrustStoreType": "PEM",
        "tlsTrustStore": str(pki["both"]),
    }
    workdir = Path(tempfile.mkdtemp(prefix="bk-auditor-tls-"))
    c = Cluster(
        workdir,
        num_bookies=7,
        zk_port=ports.TLS_ZK_PORT,
        port_base=ports.TLS_PORT_BASE,
        http_base=ports.TLS_HTTP_BASE,
        bookie_conf=bookie_conf,
        client_conf=client_conf,
    )
    failed_before = request.session.testsfailed
    try:
        c.start()
        yield c
    finally:
        c.stop()
        if request.session.testsfailed > failed_before or os.environ.get("KEEP_CLUSTER_LOGS"):
            print(f"\nTLS cluster logs kept in {c.logs_dir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def ids(cluster: Cluster, *ns: int) -> list[str]:
    return [cluster.bookie(n).bookie_id for n in ns]


def tls_settings(cluster: Cluster, pki: dict[str, Any], *, client_cert: bool = True, **tls: Any) -> Any:
    t: dict[str, Any] = {"enabled": True, "ca_file": str(pki["ca"].cert_file), **tls}
    if client_cert:
        t |= {"cert_file": str(pki["client"].cert_file), "key_file": str(pki["client"].key_file)}
    return settings_for(cluster, bookie_client={"tls": t}, recheck={"delays_seconds": [0.3, 0.3], "attempts": 2})


def unreachable(findings: list[Finding]) -> dict[str, str]:
    return {f.bookie: f.detail["error"] for f in findings if f.category is Category.BOOKIE_UNREACHABLE}


def test_the_bookies_own_conf_is_enough_to_check_over_tls(tls_cluster: Cluster, tmp_path: Path) -> None:
    """An operator points bk-auditor at the bookie's bk_server.conf: TLS keys translated, the check reads
    the Java client's TLS ledgers over TLS; with an auth plugin we do not implement it refuses to start."""
    r = tls_cluster.create_ledger(
        ensemble=3, write_quorum=2, ack_quorum=2, entries=20, bookies=ids(tls_cluster, 1, 2, 3)
    )
    assert r["state"] == "CLOSED"
    conf = tls_cluster.bookie(1).conf_path
    done = subprocess.run(
        [str(BIN), "check", "--config", str(conf), "--checks", "scrutiny"],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0 and "no findings" in done.stdout, (done.returncode, done.stdout, done.stderr[-3000:])
    sasl = tmp_path / "bookkeeper.conf"
    sasl.write_text(
        conf.read_text() + "clientAuthProviderFactoryClass=org.apache.bookkeeper.sasl.SASLClientProviderFactory\n"
    )
    refused = subprocess.run(
        [str(BIN), "check", "--config", str(sasl)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert refused.returncode == 2, refused.stderr
    assert f"config file {sasl}: clientAuthProviderFactoryClass: bookie authentication plugin" in refused.stderr


def test_healthy_over_tls_and_a_planted_fault_is_found(tls_cluster: Cluster, pki: dict[str, Any]) -> None:
    b = ids(tls_cluster, 1, 2, 3, 4)
    healthy = tls_cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=30, bookies=b[:3])
    planted = tls_cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=30, bookies=b[:3])
    rewrite_ensemble(tls_cluster, planted["ledgerId"], b[2], b[3])  # bookie 4 never got those entries
    settings = tls_settings(tls_cluster, pki)
    findings, _ = audit(tls_cluster, [healthy["ledgerId"], planted["ledgerId"]], settings=settings)
    got = actionable(findings)
    # Bookie 4 (client certificate required) answered over TLS that it does not hold them: real data.
    assert [(f.category, f.ledger.ledger) for f in got] == [(Category.ENTRY_BELOW_ACK_QUORUM, planted["ledgerId"])]
    findings, _ = audit(tls_cluster, [healthy["ledgerId"]], checks=("ledger",), settings=settings)
    assert actionable(findings) == []  # entries read over TLS, digests verified


def test_client_certificate_for_a_bookie_that_demands_one(tls_cluster: Cluster, pki: dict[str, Any]) -> None:
    b = ids(tls_cluster, 1, 2, 4)
    r = tls_cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=20, bookies=b)
    with_cert, _ = audit(tls_cluster, [r["ledgerId"]], settings=tls_settings(tls_cluster, pki))
    assert actionable(with_cert) == []
    # The same certificate from Java stores: a PKCS12 key store and a JKS trust store (keytool's).
    password = pki["client"].dir / "stores.pass"
    password.write_text(STORE_PASSWORD)
    stores = {
        "enabled": True,
        "keystore": str(pki["client"].pkcs12()),
        "keystore_type": "PKCS12",
        "keystore_password_file": str(password),
        "truststore": str(pki["ca"].truststore("JKS")),
        "truststore_type": "JKS",
        "truststore_password_file": str(password),
    }
    from_stores = settings_for(tls_cluster, bookie_client={"tls": stores})
    found, _ = audit(tls_cluster, [r["ledgerId"]], settings=from_stores)
    assert actionable(found) == []
    without, _ = audit(tls_cluster, [r["ledgerId"]], settings=tls_settings(tls_cluster, pki, client_cert=False))
    got = actionable(without)
    # Bookie 4 refuses us: its answers are unknown, never missing copies.
    assert [f.category for f in got] == [Category.BOOKIE_UNREACHABLE], got
    error = unreachable(got)[b[2]]
    # The bookie's alert, or (when its close overtakes the alert) a reset: either way the reason is named.
    assert f"bookie {b[2]}: TLS: the TLS session failed before its first answer (" in error, error
    assert "the bookie demands a client certificate and none is configured)" in error, error


def test_untrusted_certificate_is_a_clear_per_bookie_error(tls_cluster: Cluster, pki: dict[str, Any]) -> None:
    b = ids(tls_cluster, 1, 2, 5)
    r = tls_cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=20, bookies=b)
    findings, _ = audit(tls_cluster, [r["ledgerId"]], settings=tls_settings(tls_cluster, pki))
    got = actionable(findings)
    assert [f.category for f in got] == [Category.BOOKIE_UNREACHABLE], got
    error = unreachable(got)[b[2]]
    assert f"bookie {b[2]}: TLS: the bookie's certificate was rejected: unable to get local issuer certificate" in error


def test_hostname_verification_is_configurable(tls_cluster: Cluster, pki: dict[str, Any]) -> None:
    """Bookie 1's certificate names 127.0.0.1 only; reached as "localhost" it does not match."""
    b = ids(tls_cluster, 1, 2, 3)
    r = tls_cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=20, bookies=b)
    redirect = {b[0]: ("localhost", tls_cluster.bookie(1).port)}
    checked, _ = audit(tls_cluster, [r["ledgerId"]], settings=tls_settings(tls_cluster, pki), redirect=redirect)
    got = actionable(checked)
    assert [f.category for f in got] == [Category.BOOKIE_UNREACHABLE], got
    assert "Hostname mismatch" in unreachable(got)[b[0]], got
    relaxed = tls_settings(tls_cluster, pki, verify_hostname=False)
    unchecked, _ = audit(tls_cluster, [r["ledgerId"]], settings=relaxed, redirect=redirect)
    assert actionable(unchecked) == []


def test_a_bookie_without_tls_is_never_spoken_to_in_plaintext(tls_cluster: Cluster, pki: dict[str, Any]) -> None:
    bookie = tls_cluster.bookie(6)

    async def ping() -> tuple[Any, int]:
        async with BookieClient(
            bookie.bookie_id, (bookie.host, bookie.port), bookie_config(tls_settings(tls_cluster, pki))
        ) as c:
            return await c.ping(), c.stats.sent

    result, sent = asyncio.run(ping())
    assert result.unknown
    assert f"bookie {bookie.bookie_id}: TLS: the bookie refused the upgrade (START_TLS answered EBADREQ" in result.error
    assert sent == 1  # START_TLS, and nothing after it


def test_certificate_roles_authorise_us_or_not(tls_cluster: Cluster, pki: dict[str, Any]) -> None:
    """Bookie 7 authorises by the role in the client certificate's OU (BookieAuthZFactory)."""
    bookie = tls_cluster.bookie(7)

    async def ping(issued: Any) -> Any:
        tls = {"enabled": True, "ca_file": str(pki["ca"].cert_file)}
        tls |= {"cert_file": str(issued.cert_file), "key_file": str(issued.key_file)}
        config = bookie_config(settings_for(tls_cluster, bookie_client={"tls": tls}))
        async with BookieClient(bookie.bookie_id, (bookie.host, bookie.port), config) as c:
            return await c.ping()

    assert asyncio.run(ping(pki["role"])).present
    refused = asyncio.run(ping(pki["client"]))  # our CA, but no role in its OU
    assert refused.unknown
    # The second START_TLS answer (spec bookie-protocol.md §1.5 step 6), EIO, arrives over TLS.
    assert refused.error == (
        f"bookie {bookie.bookie_id}: TLS: the TLS session failed before its first answer: the bookie rejected the "
        "TLS session after the handshake (EIO: its auth plugin, e.g. certificate roles, did not accept our certificate)"
    )
