"""Bookie TLS settings: the Java client's keys translated as BookKeeper 4.17.3 reads them, our own
`bookie_client.tls` names, and every refusal (fail closed: a security setting we do not implement is an
error naming the key, never ignored). Certificates are generated for the test (devcluster/certs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.checks.build import bookie_config
from auditor.files.tls import ReloadingContext, TlsFileError, TlsFiles, client_context
from auditor.settings import ConfigError, load_settings
from devcluster.certs import STORE_PASSWORD, CertAuthority, Issued

URI = "metadataServiceUri=zk+hierarchical://127.0.0.1:2181/ledgers\n"
FACTORY = "tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory\n"


pytestmark = pytest.mark.usefixtures("no_bkaudit_env")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[CertAuthority, Issued, Path]:
    d = tmp_path_factory.mktemp("pki")
    ca = CertAuthority(d)
    client = ca.issue("client", ["localhost", "127.0.0.1"])
    password = d / "store.pass"
    password.write_text(STORE_PASSWORD + "\n")  # Java trims the password file; so do we
    return ca, client, password


def conf(tmp_path: Path, text: str, name: str = "bookkeeper.conf") -> Path:
    p = tmp_path / name
    p.write_text(URI + text)
    return p


def refused(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load_settings(path)
    return exc.value.problems


# ------------------------------------------------------------------------------- Java keys translated


def test_pulsar_chart_bookie_conf_enables_tls_with_the_ca(tmp_path: Path, pki: tuple) -> None:
    ca, client, _ = pki
    # What the Apache Pulsar chart writes into bookkeeper.conf (spec security.md §4.3).
    s = load_settings(
        conf(
            tmp_path,
            FACTORY + f"tlsCertificatePath={client.cert_file}\ntlsKeyStoreType=PEM\ntlsKeyStore={client.key_file}\n"
            f"tlsTrustStoreType=PEM\ntlsTrustStore={ca.cert_file}\ntlsCertFilesRefreshDurationSeconds=300\n",
        )
    )
    t = s.bookie_client.tls
    assert t.enabled and t.ca_file == ca.cert_file and t.truststore is None
    # Java's client presents a certificate only with tlsClientAuthentication=true: the bookie's own key
    # material in the same file is not ours to present.
    assert (t.cert_file, t.key_file, t.keystore) == (None, None, None)
    assert {"tlsCertificatePath", "tlsKeyStore", "tlsKeyStoreType", "tlsCertFilesRefreshDurationSeconds"} <= set(
        s.ignored_java_keys
    )
    assert t.verify_hostname is True  # our default (Java's is false), documented in docs/security.md
    tls = bookie_config(s).tls
    assert tls is not None and tls.handshake_timeout == 10.0


def test_client_authentication_pem_and_client_keys_win(tmp_path: Path, pki: tuple) -> None:
    ca, client, _ = pki
    s = load_settings(
        conf(
            tmp_path,
            FACTORY + "tlsClientAuthentication=true\ntlsHostnameVerificationEnabled=false\nstartTLSTimeoutSecs=3\n"
            f"tlsCertificatePath={client.cert_file}\nclientKeyStoreType=PEM\nclientKeyStore={client.key_file}\n"
            f"tlsKeyStoreType=JKS\ntlsKeyStore=/nonexistent.jks\n"
            f"clientTrustStoreType=PEM\nclientTrustStore={ca.cert_file}\ntlsTrustStore=/nonexistent\n"
            "tlsEnabledProtocols=TLSv1.2,TLSv1.3\ntlsProvider=JDK\n",
        )
    )
    t = s.bookie_client.tls
    assert (t.cert_file, t.key_file, t.ca_file) == (client.cert_file, client.key_file, ca.cert_file)
    assert t.verify_hostname is False and t.handshake_timeout_seconds == 3
    assert t.protocols == ["TLSv1.2", "TLSv1.3"]


@pytest.mark.parametrize("kind", ["PKCS12", "JKS"])
def test_java_stores_with_password_files(tmp_path: Path, pki: tuple, kind: str) -> None:
    ca, client, password = pki
    store = client.pkcs12() if kind == "PKCS12" else client.jks()
    s = load_settings(
        conf(
            tmp_path,
            FACTORY + f"tlsClientAuthentication=true\ntlsKeyStoreType={kind}\ntlsKeyStore={store}\n"
            f"tlsKeyStorePasswordPath={password}\ntlsTrustStoreType={kind}\ntlsTrustStore={ca.truststore(kind)}\n"
            f"tlsTrustStorePasswordPath={password}\n",
        )
    )
    t = s.bookie_client.tls
    assert (t.keystore, t.keystore_type, t.truststore_type) == (store, kind, kind)
    ctx = client_context(t.files())
    assert len(ctx.get_ca_certs()) == 1


def test_without_the_factory_java_speaks_plaintext_and_so_do_we(tmp_path: Path, pki: tuple) -> None:
    ca, _, _ = pki
    s = load_settings(conf(tmp_path, f"tlsTrustStoreType=PEM\ntlsTrustStore={ca.cert_file}\ntlsProvider=OpenSSL\n"))
    assert not s.bookie_client.tls.enabled and s.bookie_client.tls.ca_file is None
    assert {"tlsTrustStore", "tlsTrustStoreType", "tlsProvider"} <= set(s.ignored_java_keys)
    assert bookie_config(s).tls is None


def test_our_own_names_in_yaml(tmp_path: Path, pki: tuple) -> None:
    ca, client, _ = pki
    p = tmp_path / "a.yaml"
    p.write_text(
        "metadata_service_uri: zk+hierarchical://127.0.0.1:2181/ledgers\n"
        f"bookie_client:\n  tls:\n    enabled: true\n    ca_file: {ca.cert_file}\n"
        f"    cert_file: {client.cert_file}\n    key_file: {client.key_file}\n    protocols: [TLSv1.3]\n"
    )
    t = load_settings(p).bookie_client.tls
    assert t.enabled and t.protocols == ["TLSv1.3"]


# ------------------------------------------------------------------------------------------ refusals

REFUSED = [
    (
        "clientAuthProviderFactoryClass=org.apache.bookkeeper.sasl.SASLClientProviderFactory\n",
        "clientAuthProviderFactoryClass: bookie authentication plugin 'org.apache.bookkeeper.sasl."
        "SASLClientProviderFactory' (SASL/Kerberos or other) is not implemented",
    ),
    (
        "bookieAuthProviderFactoryClass=org.apache.bookkeeper.sasl.SASLBookieAuthProviderFactory\n",
        "bookieAuthProviderFactoryClass: the bookies demand authentication with",
    ),
    (
        "bookieAuthProviderFactoryClass=org.apache.bookkeeper.tls.BookieAuthZFactory\n",
        "bookieAuthProviderFactoryClass: the bookies authorise clients by certificate role",
    ),
    ("tlsProvider=BoringSSL\n", "tlsProvider: unsupported TLS provider 'BoringSSL'"),
    ("tlsProviderFactoryClass=com.example.MyTls\n", "tlsProviderFactoryClass: unsupported security handler factory"),
    (FACTORY, "tlsTrustStore: not set"),
    (FACTORY + "tlsTrustStoreType=PEMX\ntlsTrustStore=/x\n", "tlsTrustStoreType: unsupported trust store type"),
    (
        FACTORY + "tlsTrustStoreType=PEM\ntlsTrustStore={ca}\ntlsEnabledCipherSuites=TLS_AES_128_GCM_SHA256\n",
        "tlsEnabledCipherSuites: Java cipher suite names cannot be applied",
    ),
    (
        FACTORY + "tlsTrustStoreType=PEM\ntlsTrustStore={ca}\ntlsClientAuthentication=true\n",
        "tlsKeyStore: not set, but tlsClientAuthentication=true needs our key",
    ),
    (
        FACTORY + "tlsTrustStoreType=PEM\ntlsTrustStore={ca}\ntlsClientAuthentication=true\ntlsKeyStoreType=PEM\n"
        "tlsKeyStore={key}\n",
        "tlsCertificatePath: not set, but a PEM key store needs its certificate",
    ),
    (FACTORY + "tlsTrustStoreType=PEM\ntlsTrustStore=/no/such/ca.pem\n", "tlsTrustStore: /no/such/ca.pem: not usable"),
    (FACTORY + "tlsTrustStore={ca}\n", "tlsTrustStore: {ca}: not a JKS store"),  # Java's default type: JKS
    (
        FACTORY + "tlsTrustStoreType=PEM\ntlsTrustStore={ca}\ntlsClientAuthentication=true\ntlsKeyStoreType=PKCS12\n"
        "tlsKeyStore={p12}\ntlsKeyStorePasswordPath={wrong}\n",
        "tlsKeyStore: {p12}: not a PKCS12 store, or a wrong password",
    ),
]


@pytest.mark.parametrize("text, words", REFUSED, ids=[w.split(":")[0] + f"-{i}" for i, (_, w) in enumerate(REFUSED)])
def test_security_settings_we_do_not_implement_are_refused(tmp_path: Path, pki: tuple, text: str, words: str) -> None:
    ca, client, _ = pki
    wrong = tmp_path / "wrong.pass"
    wrong.write_text("not-the-password")
    fill = {"ca": ca.cert_file, "key": client.key_file, "p12": client.pkcs12(), "wrong": wrong}
    path = conf(tmp_path, text.format(**fill))
    lines = refused(path)
    assert any(line.startswith(f"config file {path}: ") and words.format(**fill) in line for line in lines), lines


def test_tls_material_while_tls_is_off_is_refused(tmp_path: Path, pki: tuple) -> None:
    ca, _, _ = pki
    p = tmp_path / "a.yaml"
    p.write_text(f"bookie_client:\n  tls:\n    ca_file: {ca.cert_file}\n")
    assert refused(p) == [
        f"config file {p}: bookie_client.tls.ca_file: is set but TLS to bookies is off (bookie_client.tls.enabled, "
        "Java's tlsProviderFactoryClass): enable it or remove the setting"
    ]


def test_our_names_refused_with_the_name_as_written(tmp_path: Path, pki: tuple) -> None:
    ca, client, _ = pki
    p = tmp_path / "a.yaml"
    p.write_text(
        f"bookie_client:\n  tls:\n    enabled: true\n    ca_file: {ca.cert_file}\n    cert_file: {client.cert_file}\n"
    )
    assert refused(p) == [
        f"config file {p}: bookie_client.tls.cert_file: is set without key_file: our certificate needs both "
        "cert_file and key_file"
    ]
    p.write_text("bookie_client:\n  tls:\n    enabled: true\n")
    assert refused(p) == [
        "bookie_client.tls.ca_file: TLS needs the CA certificates to trust: set ca_file (PEM) or truststore"
    ]


def test_tlsfiles_errors_name_their_setting(tmp_path: Path, pki: tuple) -> None:
    ca, client, _ = pki
    with pytest.raises(TlsFileError) as exc:
        client_context(TlsFiles(ca_file=ca.cert_file, protocols=("SSLv3",)))
    assert exc.value.setting == "protocols"
    with pytest.raises(TlsFileError) as exc:
        client_context(TlsFiles(ca_file=ca.cert_file, keystore=client.cert_file))  # a PEM file is no PKCS12
    assert exc.value.setting == "keystore"
    with pytest.raises(TlsFileError) as exc:
        client_context(TlsFiles(ca_file=ca.cert_file, ciphers="NO-SUCH-CIPHER"))
    assert exc.value.setting == "ciphers"


def test_renewed_files_are_used_for_new_connections_and_bad_ones_never(tmp_path: Path) -> None:
    first, second = CertAuthority(tmp_path / "a", "first-ca"), CertAuthority(tmp_path / "b", "second-ca")
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(first.cert_file.read_bytes())
    reloading = ReloadingContext(TlsFiles(ca_file=ca_file))

    def trusted() -> list[str]:
        return [dict(x[0] for x in c["subject"])["commonName"] for c in reloading().get_ca_certs()]

    assert trusted() == ["first-ca"]
    ca_file.write_bytes(second.cert_file.read_bytes())  # rotated (size or mtime differ)
    assert trusted() == ["second-ca"]
    ca_file.write_bytes(b"half-written renewal")
    assert trusted() == ["second-ca"]  # the last good one stays


def test_environment_variables_nest(monkeypatch: pytest.MonkeyPatch, pki: tuple) -> None:
    ca, _, _ = pki
    monkeypatch.setenv("BKAUDIT_BOOKIE_CLIENT__TLS__ENABLED", "true")
    monkeypatch.setenv("BKAUDIT_BOOKIE_CLIENT__TLS__CA_FILE", str(ca.cert_file))
    monkeypatch.setenv("BKAUDIT_BOOKIE_CLIENT__TLS__PROTOCOLS", "TLSv1.3")
    t = load_settings().bookie_client.tls
    assert (t.enabled, t.ca_file, t.protocols) == (True, ca.cert_file, ["TLSv1.3"])
    monkeypatch.setenv("BKAUDIT_BOOKIE_CLIENT__TLS__PROTOCOLS", "SSLv3")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert exc.value.problems[0].startswith("environment: BKAUDIT_BOOKIE_CLIENT__TLS__PROTOCOLS: ")
