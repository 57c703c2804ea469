"""TLS material from files as a client `ssl.SSLContext`: PEM files as they are, Java key and trust stores
(PKCS12 read with `cryptography`, JKS with `pyjks`) converted in memory, never hand-parsed.

Every problem is a `TlsFileError` (a `ConfigError`: exit 2) whose `setting` names the field of
`TlsFiles` it is about, so the settings layer can name the key as the operator wrote it.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from auditor import redact
from auditor.errors import ConfigError
from auditor.logging import get_logger

log = get_logger("auditor.tlsfiles")

StoreType = Literal["PKCS12", "JKS"]
TLS_VERSIONS: dict[str, ssl.TLSVersion] = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsFileError(ConfigError):
    """TLS material that cannot be used; `setting` is the `TlsFiles` field it comes from."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting
        self.message = message


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Where a client's TLS material is. Trust: `ca_file` (PEM) or `truststore`; own certificate (only
    when a peer demands one): `cert_file` + `key_file` (PEM) or `keystore`. Passwords are given inline
    or as a file (Java's `...PasswordPath`: the file's content, surrounding white space removed)."""

    ca_file: Path | None = None
    truststore: Path | None = None
    truststore_type: StoreType = "PKCS12"
    truststore_password: str | None = field(default=None, repr=False)  # secrets: never printed
    truststore_password_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    key_password: str | None = field(default=None, repr=False)
    key_password_file: Path | None = None
    keystore: Path | None = None
    keystore_type: StoreType = "PKCS12"
    keystore_password: str | None = field(default=None, repr=False)
    keystore_password_file: Path | None = None
    verify_hostname: bool = True
    protocols: Sequence[str] = field(default_factory=tuple)  # e.g. ("TLSv1.2", "TLSv1.3"); () = library default
    ciphers: str | None = None  # an OpenSSL cipher list (TLS 1.2 and older)


def _read(setting: str, path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TlsFileError(setting, f"{path}: cannot read the {what}: {exc.strerror or exc}") from None


def _password(setting: str, inline: str | None, path: Path | None) -> str | None:
    if inline is None and path is not None:
        inline = _read(setting, path, "password file").decode("utf-8", "replace").strip()
    redact.hide(inline)  # never in a log line, whoever writes it
    return inline


def certificates_pem(ders: Sequence[bytes]) -> bytes:
    """DER certificates (as `read_store` gives them) as PEM."""
    return b"".join(ssl.DER_cert_to_PEM_cert(d).encode("ascii") for d in ders)


def identity_pem(key_der: bytes, cert_ders: Sequence[bytes]) -> bytes:
    """A PKCS#8 DER key and its certificate chain as one PEM file's content (what Python's
    `load_cert_chain` and kazoo's `certfile`/`keyfile` read)."""
    key = ssl.DER_cert_to_PEM_cert(key_der).replace("CERTIFICATE", "PRIVATE KEY").encode("ascii")
    return key + certificates_pem(cert_ders)


def _pkcs12(setting: str, path: Path, password: str | None) -> tuple[bytes | None, list[bytes]]:
    """(PKCS#8 DER key or None, DER certificates: the key's own first, then the others)."""
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12

    data = _read(setting, path, "PKCS12 store")
    try:
        p12 = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        raise TlsFileError(setting, f"{path}: not a PKCS12 store, or a wrong password ({exc})") from None
    key = p12.key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption()) if p12.key is not None else None
    certs = ([p12.cert.certificate] if p12.cert is not None else []) + [c.certificate for c in p12.additional_certs]
    return key, [c.public_bytes(Encoding.DER) for c in certs]


def _jks(setting: str, path: Path, password: str | None) -> tuple[bytes | None, list[bytes]]:
    try:
        import jks  # pyjks
    except ImportError:
        raise TlsFileError(
            setting, f"{path}: JKS stores need the 'pyjks' package, which is not installed; convert the store to PKCS12"
        ) from None
    data = _read(setting, path, "JKS store")
    try:
        store = jks.KeyStore.loads(data, password or "")
    except Exception as exc:  # pyjks raises its own errors, and struct/ValueError on junk
        raise TlsFileError(setting, f"{path}: not a JKS store, or a wrong password ({exc})") from None
    keys = list(store.private_keys.values())
    if len(keys) > 1:
        raise TlsFileError(setting, f"{path}: holds {len(keys)} private keys; bk-auditor needs exactly one")
    if keys:
        entry = keys[0]
        if not entry.is_decrypted():
            entry.decrypt(password or "")
        return bytes(entry.pkey_pkcs8), [bytes(der) for _kind, der in entry.cert_chain]
    return None, [bytes(c.cert) for c in store.certs.values()]


def read_store(setting: str, path: Path, kind: StoreType, password: str | None) -> tuple[bytes | None, list[bytes]]:
    """A Java store's private key (PKCS#8 DER, or None) and certificates (DER)."""
    if kind == "PKCS12":
        return _pkcs12(setting, path, password)
    if kind == "JKS":
        return _jks(setting, path, password)
    raise TlsFileError(setting, f"unsupported store type {kind!r}; supported: PEM, PKCS12, JKS")


def _trust(ctx: ssl.SSLContext, files: TlsFiles) -> None:
    if files.ca_file is not None and files.truststore is not None:
        raise TlsFileError("truststore", "give either ca_file (PEM) or truststore (PKCS12/JKS), not both")
    if files.ca_file is not None:
        try:
            ctx.load_verify_locations(cafile=str(files.ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise TlsFileError("ca_file", f"{files.ca_file}: not usable as PEM CA certificates ({exc})") from None
        return
    if files.truststore is None:
        raise TlsFileError("ca_file", "TLS needs the CA certificates to trust: set ca_file (PEM) or truststore")
    password = _password("truststore_password_file", files.truststore_password, files.truststore_password_file)
    _key, certs = read_store("truststore", files.truststore, files.truststore_type, password)
    if not certs:
        raise TlsFileError("truststore", f"{files.truststore}: holds no certificates")
    try:
        ctx.load_verify_locations(cadata=certificates_pem(certs).decode("ascii"))
    except ssl.SSLError as exc:
        raise TlsFileError("truststore", f"{files.truststore}: certificates not usable ({exc})") from None


def _own_certificate(ctx: ssl.SSLContext, files: TlsFiles) -> None:
    pem_given = files.cert_file is not None or files.key_file is not None
    if pem_given and files.keystore is not None:
        raise TlsFileError("keystore", "give either cert_file + key_file (PEM) or keystore (PKCS12/JKS), not both")
    if pem_given:
        if files.cert_file is None or files.key_file is None:
            given, missing = ("key_file", "cert_file") if files.cert_file is None else ("cert_file", "key_file")
            raise TlsFileError(given, f"is set without {missing}: our certificate needs both cert_file and key_file")
        password = _password("key_password_file", files.key_password, files.key_password_file)
        try:
            ctx.load_cert_chain(str(files.cert_file), str(files.key_file), password=password or None)
        except (OSError, ssl.SSLError) as exc:
            raise TlsFileError(
                "key_file", f"{files.cert_file} / {files.key_file}: not a usable certificate and key ({exc})"
            ) from None
        return
    if files.keystore is None:
        return
    password = _password("keystore_password_file", files.keystore_password, files.keystore_password_file)
    key, certs = read_store("keystore", files.keystore, files.keystore_type, password)
    if key is None or not certs:
        raise TlsFileError("keystore", f"{files.keystore}: holds no private key with its certificate")
    # load_cert_chain reads files only: the key goes to a private temporary file, removed at once.
    fd, name = tempfile.mkstemp(prefix="bk-auditor-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(identity_pem(key, certs))
        ctx.load_cert_chain(name)
    except ssl.SSLError as exc:
        raise TlsFileError("keystore", f"{files.keystore}: key and certificate not usable ({exc})") from None
    finally:
        os.unlink(name)


def client_context(files: TlsFiles) -> ssl.SSLContext:
    """A client context that verifies the peer against the configured CAs (never the system's: a
    cluster's private CA is the only one that may vouch for its servers), checks the host name when
    `verify_hostname`, and presents a certificate when one is configured."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.check_hostname = files.verify_hostname
    _trust(ctx, files)
    _own_certificate(ctx, files)
    if files.protocols:
        unknown = [p for p in files.protocols if p not in TLS_VERSIONS]
        if unknown:
            raise TlsFileError(
                "protocols", f"unsupported TLS protocol(s) {unknown}; supported: {', '.join(TLS_VERSIONS)}"
            )
        versions = sorted(TLS_VERSIONS[p] for p in files.protocols)
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if files.ciphers:
        try:
            ctx.set_ciphers(files.ciphers)
        except ssl.SSLError:
            raise TlsFileError("ciphers", f"no usable cipher in {files.ciphers!r} (an OpenSSL cipher list)") from None
    return ctx


class ReloadingContext:
    """`client_context(files)`, rebuilt when one of its files changed (a renewed certificate, a rotated
    CA): call it for every new connection. A rebuild that fails keeps the last good context and logs why
    (once per change), so a half-written renewal cannot cut the auditor off."""

    def __init__(self, files: TlsFiles, build: Callable[[TlsFiles], ssl.SSLContext] = client_context) -> None:
        self._files = files
        self._build = build
        self._paths = [
            p
            for p in (
                files.ca_file,
                files.truststore,
                files.truststore_password_file,
                files.cert_file,
                files.key_file,
                files.key_password_file,
                files.keystore,
                files.keystore_password_file,
            )
            if p is not None
        ]
        self._stamp = self._stamps()
        self._context = build(files)  # the first build's errors are the caller's (exit 2 at start)

    def _stamps(self) -> tuple[tuple[int, int] | None, ...]:
        out: list[tuple[int, int] | None] = []
        for p in self._paths:
            try:
                st = p.stat()
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append(None)
        return tuple(out)

    def __call__(self) -> ssl.SSLContext:
        stamp = self._stamps()
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._context = self._build(self._files)
                log.info("TLS files changed: reloaded %s", ", ".join(str(p) for p in self._paths))
            except TlsFileError as exc:
                log.warning("TLS files changed but cannot be used; keeping the previous ones: %s: %s", exc.setting, exc)
        return self._context
