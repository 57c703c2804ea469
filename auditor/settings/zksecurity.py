"""The `zookeeper.tls` and `zookeeper.auth` settings turned into the metadata layer's `ZkSecurity`, with
every refusal (fail closed) worded as one problem naming the setting: a mechanism or login module we do
not implement, TLS material without TLS, ACLs without credentials, a store that does not load."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from auditor.errors import ConfigError
from auditor.metadata.zk.security import DigestLogin, KeyStore, KeyStoreError, SaslLogin, ZkSecurity, ZkTls, store_kind

from .jaas import read_jaas
from .model import Settings

DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"

Say = Callable[[str, str], None]  # (our dotted name, problem)


def _password(inline: str | None, file: Path | None, name: str, say: Say) -> str | None:
    """A password given inline or in a file (trimmed as BookKeeper and ZooKeeper trim them)."""
    if inline is not None and file is not None:
        say(f"{name}_file", f"set either {name} or {name}_file, not both")
        return None
    if file is None:
        return inline
    try:
        return file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        say(f"{name}_file", f"{file}: cannot read: {getattr(exc, 'strerror', None) or exc}")
        return None


def _tls(s: Settings, say: Say) -> ZkTls | None:
    t = s.zookeeper.tls
    p = "zookeeper.tls."
    material = {
        "ca_file": t.ca_file,
        "cert_file": t.cert_file,
        "key_file": t.key_file,
        "keystore": t.keystore,
        "truststore": t.truststore,
    }
    if not t.enabled:
        given = [k for k, v in material.items() if v is not None]
        if given:
            say(
                p + given[0],
                "TLS material is given but zookeeper.tls.enabled (zookeeper.client.secure) is false: "
                "set it to true, or remove the material (we never connect in plaintext when TLS is configured)",
            )
        return None
    for name, path in material.items():
        if path is not None and not path.is_file():
            say(p + name, f"{path}: no such file")
    if t.ca_file is not None and t.truststore is not None:
        say(p + "truststore", "set either ca_file or truststore, not both")
    if t.keystore is not None and (t.cert_file or t.key_file):
        say(p + "keystore", "set either keystore or cert_file/key_file, not both")
    if (t.cert_file is None) != (t.key_file is None):
        say(p + ("key_file" if t.cert_file else "cert_file"), "a client certificate needs both cert_file and key_file")
    stores: dict[str, KeyStore] = {}
    for which in ("keystore", "truststore"):
        path = getattr(t, which)
        if path is None or not path.is_file():
            continue
        password = _password(
            getattr(t, f"{which}_password"), getattr(t, f"{which}_password_file"), p + which + "_password", say
        )
        try:
            stores[which] = KeyStore(
                path, store_kind(path, getattr(t, f"{which}_type"), p + which), password, p + which
            )
        except KeyStoreError as exc:
            say(exc.setting, f"{exc.path}: {exc.problem}")
    tls = ZkTls(
        ca_file=t.ca_file,
        cert_file=t.cert_file,
        key_file=t.key_file,
        key_password=t.key_password,
        keystore=stores.get("keystore"),
        truststore=stores.get("truststore"),
        verify_hostname=t.verify_hostname,
    )
    files_exist = all(v is None or v.is_file() for v in material.values())
    if files_exist:
        try:
            tls.check(p)
        except KeyStoreError as exc:
            say(exc.setting, f"{exc.path}: {exc.problem}")
    return tls


def _sasl(s: Settings, say: Say) -> SaslLogin | None:
    a = s.zookeeper.auth
    p = "zookeeper.auth."
    if not a.sasl_enabled:
        return None
    mechanism = a.sasl_mechanism.strip().upper()
    if mechanism != "DIGEST-MD5":
        what = "GSSAPI (Kerberos)" if mechanism == "GSSAPI" else repr(a.sasl_mechanism)
        say(p + "sasl_mechanism", f"{what} is not supported: bk-auditor implements SASL DIGEST-MD5 only")
        return None
    if a.sasl_username is not None or a.sasl_password is not None or a.sasl_password_file is not None:
        if a.jaas_file is not None:
            say(p + "sasl_username", "set either jaas_file or sasl_username/sasl_password, not both")
            return None
        password = _password(a.sasl_password, a.sasl_password_file, p + "sasl_password", say)
        if a.sasl_username is None or password is None:
            say(p + "sasl_username", "SASL needs both sasl_username and sasl_password (or sasl_password_file)")
            return None
        return SaslLogin(a.sasl_username, password, a.sasl_service, "zookeeper.auth.sasl_username")
    if a.jaas_file is None:
        return None
    try:
        sections = read_jaas(a.jaas_file, p + "jaas_file")
    except ConfigError as exc:
        say(p + "jaas_file", str(exc).split(": ", 1)[-1])
        return None
    where = f"{a.jaas_file}: section {a.jaas_section}"
    modules = sections.get(a.jaas_section)
    if modules is None:
        # Java's ZooKeeper client fails authentication when the configured section is missing.
        say(
            p + "jaas_file", f"{a.jaas_file}: has no section {a.jaas_section!r} (have: {', '.join(sections) or 'none'})"
        )
        return None
    unsupported = [m.name for m in modules if m.name != DIGEST_LOGIN_MODULE]
    if unsupported or len(modules) != 1:
        say(
            p + "jaas_file",
            f"{where}: login module {unsupported[0] if unsupported else 'list'} is not supported: bk-auditor "
            f"implements exactly one {DIGEST_LOGIN_MODULE} (SASL DIGEST-MD5); Kerberos and others are refused",
        )
        return None
    options = modules[0].options
    if "username" not in options or "password" not in options:
        say(p + "jaas_file", f"{where}: {DIGEST_LOGIN_MODULE} needs username and password options")
        return None
    return SaslLogin(options["username"], options["password"], a.sasl_service, where)


def _digest(s: Settings, say: Say) -> DigestLogin | None:
    a = s.zookeeper.auth
    p = "zookeeper.auth."
    password = _password(a.digest_password, a.digest_password_file, p + "digest_password", say)
    if a.digest_username is None and password is None:
        return None
    if a.digest_username is None or password is None:
        say(p + "digest_username", "digest auth needs both digest_username and digest_password (or its file)")
        return None
    if ":" in a.digest_username:
        say(p + "digest_username", "must not contain ':'")
        return None
    return DigestLogin(a.digest_username, password)


def security_problems(s: Settings, say: Say) -> ZkSecurity | None:
    """The ZooKeeper security the settings ask for; each problem goes to `say` (None when any)."""
    problems: list[tuple[str, str]] = []

    def note(dotted: str, msg: str) -> None:
        problems.append((dotted, msg))
        say(dotted, msg)

    security = ZkSecurity(
        tls=_tls(s, note), sasl=_sasl(s, note), digest=_digest(s, note), secure_acls=s.zookeeper.auth.secure_acls
    )
    if security.secure_acls and not (security.sasl or security.digest) and not problems:
        note(
            "zookeeper.auth.secure_acls",
            "zkEnableSecurity needs ZooKeeper credentials (zookeeper.auth.jaas_file, sasl_username or "
            "digest_username): the znodes we create would be owned by nobody",
        )
    return None if problems else security


def zookeeper_security(s: Settings) -> ZkSecurity:
    """The ZooKeeper security for a connection; ConfigError (exit 2) naming each bad setting."""
    problems: list[str] = []
    security = security_problems(s, lambda dotted, msg: problems.append(f"{dotted}: {msg}"))
    if security is None:
        raise ConfigError(problems)
    return security
