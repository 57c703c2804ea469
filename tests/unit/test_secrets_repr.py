"""No object that holds a secret prints it: repr() (what a log line, a traceback or a debugger shows) of
every one of them, and a configuration error about a secret setting, leave the secret out."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment
from auditor.durability.repackage import ledger_credentials
from auditor.errors import ConfigError
from auditor.files.tls import TlsFiles
from auditor.metadata.zk.security import DigestLogin, KeyStore, SaslLogin, ZkSecurity, ZkTls
from auditor.repair.attempt import RepairOptions
from auditor.repair.fencing import FencePermit
from auditor.repair.gate import RecoveryAddPermit
from auditor.settings.jaas import parse_jaas
from auditor.settings.load import load_settings
from auditor.settings.model import Settings

SECRET = "Zq9-s3cret-7Hx"


def metadata(password: bytes | None) -> LedgerMetadata:
    return LedgerMetadata(
        LedgerId(0, 7), 3, 2, 2, LedgerState.CLOSED, 9, 100, (Segment(0, ("a:1", "b:1", "c:1")),),
        DigestType.HMAC, password,
    )  # fmt: skip


def holders() -> list[object]:
    pw = SECRET.encode()
    creds = ledger_credentials(metadata(pw))
    store = KeyStore(Path("/k.p12"), "PKCS12", SECRET, "zookeeper.tls.keystore")
    return [
        metadata(pw),
        creds,
        ledger_credentials(metadata(None), SECRET, DigestType.HMAC),
        RepairOptions(recovery_password=pw),
        SaslLogin("bob", SECRET),
        DigestLogin("bob", SECRET),
        store,
        ZkTls(key_password=SECRET, keystore=store, truststore=store),
        ZkSecurity(tls=ZkTls(key_password=SECRET), sasl=SaslLogin("bob", SECRET), digest=DigestLogin("bob", SECRET)),
        TlsFiles(truststore_password=SECRET, key_password=SECRET, keystore_password=SECRET),
        parse_jaas(f'Client {{ DigestLoginModule required username="bob" password="{SECRET}"; }};', "jaas"),
        RecoveryAddPermit.for_ledger(7, "b:1", creds),
        FencePermit(7, "b:1", creds.master_key),
        Settings(
            zookeeper={
                "auth": {"sasl_password": SECRET, "digest_password": SECRET},
                "tls": {"key_password": SECRET, "keystore_password": SECRET, "truststore_password": SECRET},
            },
            repair={"recovery_password": SECRET},
        ),
    ]


def forms(secret: str) -> list[str]:
    """The secret as text, as bytes' repr, and the keys derived from it (hex and bytes' repr)."""
    derived = [hashlib.sha1(p + secret.encode()).digest() for p in (b"ledger", b"mac")]
    return [secret, repr(secret.encode()), *(d.hex() for d in derived), *(repr(d) for d in derived)]


@pytest.mark.parametrize("holder", holders(), ids=lambda h: type(h).__name__)
def test_repr_never_shows_the_secret(holder: object) -> None:
    shown = repr(holder) + str(holder)
    assert not [f for f in forms(SECRET) if f in shown], shown


@pytest.mark.parametrize("key", ["sasl_password", "digest_password"])
def test_a_config_error_about_a_secret_does_not_show_it(tmp_path: Path, key: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"zookeeper:\n  auth:\n    {key}: [{SECRET}]\n")  # a list where text belongs
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    assert key in str(err.value) and SECRET not in str(err.value), str(err.value)


def test_a_library_line_showing_a_configured_secret_is_scrubbed() -> None:
    """kazoo logs every request it sends at debug level, the digest login's Auth(user:password) included."""
    import io
    import logging

    from kazoo.protocol.serialization import Auth

    from auditor.logging import configure_logging, get_logger

    login = DigestLogin("bob", SECRET + "-kz")  # any holder of a configured secret registers it
    for fmt in ("json", "console"):
        out = io.StringIO()
        configure_logging("debug", fmt, stream=out)
        try:
            auth = Auth(0, "digest", f"{login.username}:{login.password}")
            logging.getLogger("kazoo.protocol.connection").debug("Sending request(xid=%s): %s", None, auth)
            logging.getLogger("somelib").error("login %r refused", auth)  # any library, any line
            get_logger("auditor.test").warning("oops", detail=f"said {login.password!r}")
        finally:
            configure_logging("info", "json")
        assert login.password not in out.getvalue() and out.getvalue().count("<hidden>") == 2, out.getvalue()
        assert "Sending request(xid=None): <Auth>" in out.getvalue()  # kazoo's trace: no payload at all


def test_a_secret_settings_value_is_never_described() -> None:
    from auditor.settings.origins import describe, secret_names

    assert {"repair.recovery_password", "zookeeper.auth.digest_password"} <= secret_names()
    err = {"type": "literal_error", "ctx": {"expected": "'a' or 'b'"}, "input": SECRET}
    assert SECRET in describe(err, SECRET) and SECRET not in describe(err, SECRET, secret=True)


def test_kazoos_trace_of_znode_data_is_not_logged() -> None:
    """kazoo's debug trace of responses holds znode data: a ledger's metadata, its password included."""
    import io
    import logging

    from auditor.logging import configure_logging
    from auditor.metadata.codecs.formats import serialize_ledger_metadata

    data = serialize_ledger_metadata(metadata(SECRET.encode()))
    out = io.StringIO()
    configure_logging("debug", "json", stream=out)
    try:
        logging.getLogger("kazoo.client").debug("Received response(xid=%s): %r", 7, (data, None))
        logging.getLogger("kazoo.client").debug("Sending request(xid=%s): %s", 8, ("SetData", data))
    finally:
        configure_logging("info", "json")
    text = out.getvalue()
    assert "Received response(xid=7): '<tuple>'" in text and "Sending request(xid=8)" in text, text
    assert SECRET not in text and "BookieMetadataFormatVersion" not in text, text
