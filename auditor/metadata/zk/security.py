"""How we talk to a secured ZooKeeper: TLS material, SASL DIGEST-MD5 and `digest` credentials, and the
ACL of every znode we create (`ZkSecurity.znode_acl`, the one place: it becomes the kazoo client's
default ACL, and the only create with an ACL of its own asks it for its path).

kazoo reads TLS material from PEM files only, and again on every reconnect. JKS and PKCS12 stores (what
Java clients are given) are read as the bookie client reads its own (`auditor.files.tls.read_store`:
`cryptography` for PKCS12, `pyjks` for JKS) and written as PEM into a private directory that lives as
long as the connection (`ZkSecurity.client_arguments`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE

from auditor import redact
from auditor.files.tls import certificates_pem, identity_pem
from auditor.metadata.errors import MetadataConfigError

StoreKind = Literal["PEM", "JKS", "PKCS12"]
STORE_KINDS: tuple[StoreKind, ...] = ("PEM", "JKS", "PKCS12")
# ZooKeeper infers a store's type from its file name when none is given (KeyStoreFileType).
_KIND_BY_SUFFIX: dict[str, StoreKind] = {".pem": "PEM", ".jks": "JKS", ".p12": "PKCS12"}


# Znodes BookKeeper creates with OPEN_ACL_UNSAFE whatever zkEnableSecurity says, so that every
# principal may change them (idgen-long and its HOB- children are the others; we never create those).
ALWAYS_OPEN = frozenset({"lostBookieRecoveryDelay"})


class KeyStoreError(MetadataConfigError):
    """A keystore or truststore cannot be used: unreadable, wrong password, wrong type, no key."""

    def __init__(self, setting: str, path: Path, problem: str) -> None:
        super().__init__(f"{setting}: {path}: {problem}")
        self.setting = setting
        self.path = path
        self.problem = problem


class ZooKeeperAuthError(MetadataConfigError):
    """ZooKeeper refused us: authentication failed, or is required and we have none (exit 2)."""


def store_kind(path: Path, given: str | None, setting: str) -> StoreKind:
    """The store type: as given, else from the file name as ZooKeeper does (`.jks`, `.pem`, `.p12`)."""
    if given:
        kind = given.strip().upper()
        if kind == "PKCS#12":
            kind = "PKCS12"
        if kind not in STORE_KINDS:
            raise KeyStoreError(
                setting, path, f"unsupported store type {given!r} (supported: {', '.join(STORE_KINDS)})"
            )
        return kind
    inferred = _KIND_BY_SUFFIX.get(path.suffix.lower())
    if inferred is None:
        raise KeyStoreError(setting, path, "store type unknown: name it .pem, .jks or .p12, or set its type")
    return inferred


@dataclass(frozen=True, slots=True)
class KeyStore:
    """A Java-style key or trust store: a PEM file, a JKS or a PKCS12 store."""

    path: Path
    kind: StoreKind
    password: str | None = field(repr=False)  # a secret: never printed
    setting: str  # the setting that named it, for errors

    def __post_init__(self) -> None:
        redact.hide(self.password)  # nor logged, by anyone

    def _read(self) -> bytes:
        try:
            return self.path.read_bytes()
        except OSError as exc:
            raise KeyStoreError(self.setting, self.path, f"cannot read: {exc.strerror or exc}") from None

    def _java_store(self) -> tuple[bytes | None, list[bytes]]:
        """(PKCS#8 DER key or None, DER certificates) of a JKS/PKCS12 store, read as the bookie client
        reads its stores (auditor.files.tls: `cryptography` for PKCS12, `pyjks` for JKS)."""
        from auditor.files.tls import TlsFileError, read_store

        assert self.kind != "PEM"
        try:
            return read_store(self.setting, self.path, self.kind, self.password)
        except TlsFileError as exc:
            raise KeyStoreError(self.setting, self.path, exc.message.removeprefix(f"{self.path}: ")) from None

    def identity_pem(self) -> bytes:
        """The private key (PKCS#8, unencrypted) followed by its certificate chain, as PEM."""
        if self.kind == "PEM":
            return self._read()
        key, certs = self._java_store()
        if key is None or not certs:
            raise KeyStoreError(self.setting, self.path, "holds no private key with its certificate")
        return identity_pem(key, certs)

    def trusted_pem(self) -> bytes:
        """The CA certificates the store trusts, as PEM."""
        if self.kind == "PEM":
            return self._read()
        _, certs = self._java_store()
        if not certs:
            raise KeyStoreError(self.setting, self.path, "holds no certificate to trust")
        return certificates_pem(certs)

    def check(self, *, identity: bool) -> None:
        """Load the store now (at start), so a bad store is a configuration error, not a retry loop."""
        from cryptography import x509
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        pem = self.identity_pem() if identity else self.trusted_pem()
        try:
            certs = x509.load_pem_x509_certificates(pem)
        except ValueError:
            raise KeyStoreError(self.setting, self.path, "holds no PEM certificate") from None
        if identity:
            try:
                password = self.password.encode() if self.password and self.kind == "PEM" else None
                load_pem_private_key(pem, password)
            except (ValueError, TypeError) as exc:
                raise KeyStoreError(self.setting, self.path, f"no usable private key ({exc})") from None
        if not certs:
            raise KeyStoreError(self.setting, self.path, "holds no certificate")


@dataclass(frozen=True, slots=True)
class ZkTls:
    """TLS to ZooKeeper. Trust: `ca_file` or `truststore`; identity: `cert_file`+`key_file` or `keystore`."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    key_password: str | None = field(default=None, repr=False)
    keystore: KeyStore | None = None
    truststore: KeyStore | None = None
    verify_hostname: bool = True

    def __post_init__(self) -> None:
        redact.hide(self.key_password)

    def check(self, setting_prefix: str = "zookeeper.tls.") -> None:
        """Load all material now (at start), as kazoo will on each connection: a bad file or store is a
        configuration error naming its setting, not a connection retried until a timeout."""
        import ssl

        if self.keystore is not None:
            self.keystore.check(identity=True)
        if self.truststore is not None:
            self.truststore.check(identity=False)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if self.ca_file is not None:
            try:
                context.load_verify_locations(str(self.ca_file))
            except (ssl.SSLError, OSError, ValueError) as exc:
                raise KeyStoreError(
                    setting_prefix + "ca_file", self.ca_file, f"no usable PEM CA certificate ({exc})"
                ) from None
        if self.cert_file is not None and self.key_file is not None:
            try:
                context.load_cert_chain(str(self.cert_file), str(self.key_file), self.key_password)
            except (ssl.SSLError, OSError, ValueError) as exc:
                raise KeyStoreError(
                    setting_prefix + "cert_file", self.cert_file, f"certificate and key do not load ({exc})"
                ) from None


@dataclass(frozen=True, slots=True)
class SaslLogin:
    """SASL DIGEST-MD5 (the only mechanism we implement), as a JAAS `Client` section gives it."""

    username: str
    password: str = field(repr=False)
    service: str = "zookeeper"
    source: str = ""  # where it came from (a JAAS file and section), for messages

    def __post_init__(self) -> None:
        redact.hide(self.password)


@dataclass(frozen=True, slots=True)
class DigestLogin:
    """ZooKeeper's `digest` scheme (`addauth digest user:password`)."""

    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        redact.hide(self.password)  # kazoo logs its Auth request (user:password) at debug level


@dataclass(frozen=True, slots=True)
class ZkSecurity:
    tls: ZkTls | None = None
    sasl: SaslLogin | None = None
    digest: DigestLogin | None = None
    # BookKeeper's zkEnableSecurity: znodes we create are readable and writable by the creator's
    # authenticated identities only (ZooKeeper's CREATOR_ALL_ACL), as BookKeeper's own are.
    secure_acls: bool = False

    def znode_acl(self, path: str = "") -> list[ACL]:
        """The ACL of a znode we create: BookKeeper's choice for the same znode. That is ZkUtils.getACLs
        (creator-all when zkEnableSecurity, else open) for markers, our subtree, election votes and the
        `disable` switch, and always open for the few BookKeeper leaves open (`lostBookieRecoveryDelay`,
        which an operator command may create). Without `path`: the default, the kazoo client's."""
        if path.rsplit("/", 1)[-1] in ALWAYS_OPEN:
            return list(OPEN_ACL_UNSAFE)
        return list(CREATOR_ALL_ACL if self.secure_acls else OPEN_ACL_UNSAFE)

    def describe(self) -> str:
        """How we connect, for messages: 'TLS, SASL user bk', 'plaintext, no credentials'."""
        parts = ["TLS" if self.tls else "plaintext"]
        if self.sasl:
            parts.append(f"SASL DIGEST-MD5 user {self.sasl.username}")
        if self.digest:
            parts.append(f"digest user {self.digest.username}")
        if not (self.sasl or self.digest):
            parts.append("no credentials")
        return ", ".join(parts)

    @contextmanager
    def client_arguments(self) -> Iterator[dict[str, Any]]:
        """KazooClient's keyword arguments for this security, valid inside the block (converted stores
        live in a private directory that is removed at its end)."""
        kwargs: dict[str, Any] = {"default_acl": self.znode_acl()}
        if self.sasl is not None:
            kwargs["sasl_options"] = {
                "mechanism": "DIGEST-MD5",
                "username": self.sasl.username,
                "password": self.sasl.password,
                "service": self.sasl.service,
            }
        if self.digest is not None:
            kwargs["auth_data"] = [("digest", f"{self.digest.username}:{self.digest.password}")]
        if self.tls is None:
            yield kwargs
            return
        t = self.tls
        workdir = Path(tempfile.mkdtemp(prefix="bk-auditor-zk-tls-"))  # mode 0700
        try:
            ca, cert, key = t.ca_file, t.cert_file, t.key_file
            if t.truststore is not None:
                ca = _private_file(workdir / "ca.pem", t.truststore.trusted_pem())
            if t.keystore is not None:
                cert = key = _private_file(workdir / "identity.pem", t.keystore.identity_pem())
            kwargs.update(
                use_ssl=True,
                verify_certs=True,
                check_hostname=t.verify_hostname,
                ca=str(ca) if ca else None,
                certfile=str(cert) if cert else None,
                keyfile=str(key) if key else None,
                keyfile_password=_key_password(t),
            )
            yield kwargs
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def _key_password(t: ZkTls) -> str | None:
    """The password of the private key kazoo loads: converted stores are written unencrypted."""
    if t.keystore is None:
        return t.key_password
    return (t.keystore.password or t.key_password) if t.keystore.kind == "PEM" else None


def _private_file(path: Path, data: bytes) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


PLAINTEXT = ZkSecurity()
