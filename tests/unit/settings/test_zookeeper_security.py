"""ZooKeeper security settings: the Java/ZooKeeper client keys translated once, stores converted with
real files (PEM, PKCS12 made with `cryptography`), JAAS files parsed, and every refusal naming its key
(fail closed). The connections themselves are tested against real ZooKeepers in tests/realcluster/."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE

from auditor.metadata.zk.security import ZkSecurity
from auditor.settings import ConfigError, load_settings, zookeeper_security
from auditor.settings.jaas import JaasError, parse_jaas
from devcluster.cluster.zksecurity import STORE_PASSWORD, Pki

URI = "metadataServiceUri=zk+hierarchical://127.0.0.1:2181/ledgers\n"
DIGEST = "org.apache.zookeeper.server.auth.DigestLoginModule"


pytestmark = pytest.mark.usefixtures("no_bkaudit_env")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    p = Pki(tmp_path_factory.mktemp("pki"))
    p.leaf("client")
    return p


def props(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bk.properties"
    path.write_text(URI + text)
    return path


def refused(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load_settings(path)
    return exc.value.problems


def jaas(tmp_path: Path, body: str, name: str = "jaas.conf") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


# ----------------------------------------------------------------------------- translation


def test_java_tls_keys_translate_and_stores_convert(tmp_path: Path, pki: Pki) -> None:
    password = tmp_path / "ks.pass"
    password.write_text(f"{STORE_PASSWORD}\n")
    s = load_settings(
        props(
            tmp_path,
            "zookeeper.client.secure=true\n"
            "zookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty\n"
            "zookeeper.client.certReload=true\n"
            f"zookeeper.ssl.keyStore.location={pki.leaves['client'].p12}\n"
            f"zookeeper.ssl.keyStore.passwordPath={password}\n"
            f"zookeeper.ssl.trustStore.location={pki.ca_p12}\n"
            f"zookeeper.ssl.trustStore.password={STORE_PASSWORD}\n"
            "zookeeper.ssl.trustStore.type=PKCS12\n"
            "zookeeper.ssl.hostnameVerification=false\n",
        )
    )
    t = s.zookeeper.tls
    assert (t.enabled, t.keystore, t.truststore_type, t.verify_hostname) == (
        True,
        pki.leaves["client"].p12,
        "PKCS12",
        False,
    )
    assert s.ignored_java_keys == ()
    security = zookeeper_security(s)
    assert security.tls is not None and security.tls.keystore is not None
    assert security.tls.keystore.kind == "PKCS12" and security.tls.keystore.password == STORE_PASSWORD
    with security.client_arguments() as kwargs:
        assert kwargs["use_ssl"] and kwargs["verify_certs"] and not kwargs["check_hostname"]
        identity = Path(kwargs["certfile"]).read_bytes()
        assert kwargs["keyfile"] == kwargs["certfile"] and b"PRIVATE KEY" in identity
        assert pki.leaves["client"].crt.read_bytes() in identity  # the certificate, converted to PEM
        assert Path(kwargs["ca"]).read_bytes() == pki.ca_crt.read_bytes()
        assert oct(Path(kwargs["certfile"]).stat().st_mode & 0o777) == "0o600"
        workdir = Path(kwargs["ca"]).parent
    assert not workdir.exists()  # converted material is removed with the connection


def test_pem_store_type_from_the_file_name(tmp_path: Path, pki: Pki) -> None:
    s = load_settings(
        props(
            tmp_path,
            "zookeeper.client.secure=true\n"
            f"zookeeper.ssl.keyStore.location={pki.leaves['client'].combined}\n"
            f"zookeeper.ssl.trustStore.location={pki.ca_crt}\nzookeeper.ssl.trustStore.type=PEM\n",
        )
    )
    sec = zookeeper_security(s)
    assert sec.tls is not None and sec.tls.keystore is not None and sec.tls.keystore.kind == "PEM"
    assert sec.tls.verify_hostname  # ZooKeeper's default


def test_jaas_client_section_gives_the_sasl_login(tmp_path: Path) -> None:
    file = jaas(tmp_path, f'Client {{\n  {DIGEST} required\n  username="bk"\n  password="p w";\n}};\n')
    s = load_settings(props(tmp_path, f"zkEnableSecurity=true\njava.security.auth.login.config={file}\n"))
    sec = zookeeper_security(s)
    assert sec.sasl is not None and (sec.sasl.username, sec.sasl.password, sec.sasl.service) == (
        "bk",
        "p w",
        "zookeeper",
    )
    assert sec.secure_acls and sec.znode_acl() == list(CREATOR_ALL_ACL)
    with sec.client_arguments() as kwargs:
        assert kwargs["sasl_options"] == {
            "mechanism": "DIGEST-MD5",
            "username": "bk",
            "password": "p w",
            "service": "zookeeper",
        }
        assert "use_ssl" not in kwargs and kwargs["default_acl"] == list(CREATOR_ALL_ACL)


def test_section_name_and_service_from_zookeeper_keys(tmp_path: Path) -> None:
    file = jaas(tmp_path, f'ZkClient {{ {DIGEST} required username="a" password="b"; }};')
    s = load_settings(
        props(
            tmp_path,
            f"java.security.auth.login.config={file}\nzookeeper.sasl.clientconfig=ZkClient\n"
            "zookeeper.sasl.client.username=zk\n",
        )
    )
    sasl = zookeeper_security(s).sasl
    assert sasl is not None and (sasl.username, sasl.service) == ("a", "zk")
    off = load_settings(props(tmp_path, f"java.security.auth.login.config={file}\nzookeeper.sasl.client=false\n"))
    assert zookeeper_security(off).sasl is None  # zookeeper.sasl.client=false: no SASL at all


def test_digest_auth(tmp_path: Path) -> None:
    s = load_settings(props(tmp_path, "zookeeper.auth.digest_username=auditor\nzookeeper.auth.digest_password=pw\n"))
    sec = zookeeper_security(s)
    assert sec.digest is not None and not sec.secure_acls and sec.znode_acl() == list(OPEN_ACL_UNSAFE)
    with sec.client_arguments() as kwargs:
        assert kwargs["auth_data"] == [("digest", "auditor:pw")]


def test_plaintext_by_default() -> None:
    s = load_settings(overrides={"metadata_service_uri": "zk+hierarchical://127.0.0.1:2181/ledgers"})
    assert zookeeper_security(s) == ZkSecurity()
    assert ZkSecurity().describe() == "plaintext, no credentials"


# ----------------------------------------------------------------------------- refusals (fail closed)


def test_zk_enable_security_is_no_longer_ignored(tmp_path: Path) -> None:
    """Regression (issue 13): zkEnableSecurity=true was logged as ignored and we wrote open znodes; it now
    asks for credentials, refused at start when there are none."""
    (line,) = refused(props(tmp_path, "zkEnableSecurity=true\n"))
    assert line.startswith(f"config file {tmp_path / 'bk.properties'}: zkEnableSecurity: ")
    assert "needs ZooKeeper credentials" in line


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("zookeeper.ssl.crl", "true", "certificate revocation (CRL)"),
        ("zookeeper.ssl.ocsp", "true", "certificate revocation (OCSP)"),
        ("zookeeper.ssl.protocol", "TLSv1.2", "not supported"),
        ("zookeeper.ssl.enabledProtocols", "TLSv1.3", "not supported"),
        ("zookeeper.ssl.ciphersuites", "TLS_AES_128_GCM_SHA256", "not supported"),
        ("zookeeper.ssl.context.supplier.class", "x.Y", "not supported"),
        ("zookeeper.server.principal", "zookeeper/host@REALM", "Kerberos"),
        ("zookeeper.clientCnxnSocket", "com.example.Socket", "unknown ZooKeeper client socket"),
    ],
)
def test_unimplemented_zookeeper_keys_are_refused(tmp_path: Path, key: str, value: str, words: str) -> None:
    (line,) = refused(props(tmp_path, f"{key}={value}\n"))
    assert f": {key}: " in line and words in line


def test_revocation_off_is_accepted(tmp_path: Path) -> None:
    load_settings(props(tmp_path, "zookeeper.ssl.crl=false\nzookeeper.ssl.ocsp=false\n"))


def test_kerberos_jaas_module_is_refused(tmp_path: Path) -> None:
    file = jaas(
        tmp_path,
        'Client {\n  com.sun.security.auth.module.Krb5LoginModule required\n  useKeyTab=true keyTab="/k" principal="bk";\n};\n',
    )
    (line,) = refused(props(tmp_path, f"java.security.auth.login.config={file}\n"))
    assert ": java.security.auth.login.config: " in line
    assert "Krb5LoginModule is not supported" in line and "section Client" in line


def test_gssapi_mechanism_is_refused(tmp_path: Path) -> None:
    (line,) = refused(props(tmp_path, "zookeeper.auth.sasl_mechanism=GSSAPI\n"))
    assert "zookeeper.auth.sasl_mechanism: GSSAPI (Kerberos) is not supported" in line


def test_missing_jaas_section_is_refused(tmp_path: Path) -> None:
    file = jaas(tmp_path, f'Server {{ {DIGEST} required user_bk="x"; }};')
    (line,) = refused(props(tmp_path, f"java.security.auth.login.config={file}\n"))
    assert "has no section 'Client' (have: Server)" in line


def test_tls_material_without_tls_is_refused(tmp_path: Path, pki: Pki) -> None:
    (line,) = refused(props(tmp_path, f"zookeeper.ssl.trustStore.location={pki.ca_crt}\n"))
    assert ": zookeeper.ssl.trustStore.location: " in line and "zookeeper.client.secure" in line


def test_wrong_store_password_is_refused(tmp_path: Path, pki: Pki) -> None:
    (line,) = refused(
        props(
            tmp_path,
            "zookeeper.client.secure=true\n"
            f"zookeeper.ssl.keyStore.location={pki.leaves['client'].p12}\nzookeeper.ssl.keyStore.password=nope\n",
        )
    )
    assert ": zookeeper.ssl.keyStore.location: " in line and "wrong password" in line


def test_unknown_store_type_is_refused(tmp_path: Path, pki: Pki) -> None:
    store = tmp_path / "store.bcfks"
    store.write_bytes(b"x")
    (line,) = refused(props(tmp_path, f"zookeeper.client.secure=true\nzookeeper.ssl.keyStore.location={store}\n"))
    assert "store type unknown" in line
    (line,) = refused(
        props(
            tmp_path,
            f"zookeeper.client.secure=true\nzookeeper.ssl.keyStore.location={store}\nzookeeper.ssl.keyStore.type=BCFKS\n",
        )
    )
    assert ": zookeeper.ssl.keyStore.type: " in line


# ----------------------------------------------------------------------------- the JAAS reader


def test_jaas_syntax() -> None:
    parsed = parse_jaas(
        '// comment\nClient { a.B required k="v \\" q" n=bare; /* c */ c.D optional; };\nOther { };', "f"
    )
    assert [(m.name, m.flag, m.options) for m in parsed["Client"]] == [
        ("a.B", "required", {"k": 'v " q', "n": "bare"}),
        ("c.D", "optional", {}),
    ]
    assert parsed["Other"] == []


@pytest.mark.parametrize(
    "text, words",
    [
        ("Client {", "unexpected end of file"),
        ("Client { a.B always; };", "control flag 'always'"),
        ("Client { a.B required k; };", "line 1: expected '='"),
        ("A { }; A { };", "section A is defined twice"),
        ('Client { a.B required k="unterminated; };', "unexpected"),
    ],
)
def test_jaas_errors_name_the_file(text: str, words: str) -> None:
    with pytest.raises(JaasError, match="^f: ") as exc:
        parse_jaas(text, "f")
    assert words in str(exc.value)


def test_unusable_pem_files_are_refused_at_start(tmp_path: Path, pki: Pki) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    (line,) = refused(props(tmp_path, f"zookeeper.tls.enabled=true\nzookeeper.tls.ca_file={junk}\n"))
    assert f": zookeeper.tls.ca_file: {junk}: no usable PEM CA certificate" in line
    other = Pki(tmp_path / "other")
    stranger = other.leaf("stranger")
    (line,) = refused(
        props(
            tmp_path,
            "zookeeper.tls.enabled=true\n"
            f"zookeeper.tls.cert_file={pki.leaves['client'].crt}\nzookeeper.tls.key_file={stranger.key}\n",
        )
    )
    assert ": zookeeper.tls.cert_file: " in line and "do not load" in line


def test_lost_bookie_recovery_delay_stays_open_as_bookkeeper_leaves_it() -> None:
    secure = ZkSecurity(secure_acls=True)
    assert secure.znode_acl("/ledgers/underreplication/lostBookieRecoveryDelay") == list(OPEN_ACL_UNSAFE)
    assert secure.znode_acl("/ledgers/underreplication/disable") == list(CREATOR_ALL_ACL)
    assert secure.znode_acl("/ledgers/underreplication/ledgers/0000/0000/0000/urL0000000001") == list(CREATOR_ALL_ACL)
