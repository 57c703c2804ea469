"""The admin server's TLS credentials, re-read when their files change: cert-manager renews certificates
in place (the Pulsar chart's every 75 days or so) and a Secret volume swaps the files atomically, so a
renewed certificate or client CA is served from the next handshake on, without a restart.

gRPC asks `fetch` at every new TLS handshake (from one of its own threads); it stats the files and, only
when they changed, reads and checks them whole: the certificate file and the client CA bundle must each be
one or more PEM blocks, every one a certificate that parses (no other block, nothing truncated), and the
key must go with the certificate. Files that changed but cannot be used (empty, half written, garbage, a
key that does not match) keep the previous credentials in service: gRPC is handed nothing new, so the old
CA really is still the one it checks clients against. Such a refusal is one error log line naming the
setting, the file and what is wrong, and `result="rejected"` of the reload metric; a usable change is
`result="accepted"` (`reloaded`, the daemon's `bk_auditor_admin_tls_reloads_total`).

Why whole: handed a CA bundle without one loadable certificate gRPC keeps its old one but only says so on
stderr, and handed an empty one it admits no client at all; OpenSSL's key check reads only the first
certificate of the chain file, so a truncated intermediate would go unnoticed.
"""

from __future__ import annotations

import re
import ssl
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

import grpc
from cryptography import x509

from auditor.logging import get_logger

log = get_logger("auditor.admin")

# The settings the files come from, as messages name them (the agent passes its own flags).
ADMIN_NAMES = {"cert": "admin.tls_cert", "key": "admin.tls_key", "client_ca": "admin.tls_client_ca"}

_PEM_BLOCK = re.compile(rb"-----BEGIN ([^\r\n-]+)-----(.*?)-----END \1-----", re.S)
_PEM_BEGIN = re.compile(rb"-----BEGIN [^\r\n-]+-----")


def pem_certificates_problem(data: bytes) -> str | None:
    """What makes `data` not a usable PEM certificate bundle, or None: at least one block, every block a
    complete CERTIFICATE that parses (text between blocks, e.g. comments, is allowed)."""
    if not data.strip():
        return "is empty"
    blocks = list(_PEM_BLOCK.finditer(data))
    begins = len(_PEM_BEGIN.findall(data))
    if begins == 0:
        return "holds no PEM certificate (no -----BEGIN CERTIFICATE----- line)"
    if len(blocks) < begins:
        return f"is truncated: {begins - len(blocks)} of its {begins} PEM blocks have no END line"
    for n, block in enumerate(blocks, 1):
        label = block.group(1).decode("ascii", "replace")
        if label != "CERTIFICATE":
            return f"PEM block {n} is a {label}, not a CERTIFICATE"
        try:
            x509.load_pem_x509_certificate(block.group(0))
        except ValueError as exc:
            return f"certificate {n} of {len(blocks)} does not parse ({exc})"
    return None


class ServerTls:
    """`admin.tls_cert` + `admin.tls_key` (+ `admin.tls_client_ca`: clients must then present a certificate
    it verifies). Construction reads and checks the files, raising OSError naming the setting."""

    def __init__(
        self,
        cert: Path,
        key: Path,
        client_ca: Path | None = None,
        reloaded: Callable[[str], None] | None = None,
        *,
        names: Mapping[str, str] = ADMIN_NAMES,
        what: str = "admin API",
    ) -> None:
        self._cert, self._key, self._ca = names["cert"], names["key"], names["client_ca"]
        self._what = what
        self.files = {self._cert: Path(cert), self._key: Path(key)}
        if client_ca is not None:
            self.files[self._ca] = Path(client_ca)
        self._lock = threading.Lock()
        self._reloaded = reloaded  # told "accepted" or "rejected" at each change of the files (the metric)
        self._stamp = self._stat()
        self._initial = self._configuration()
        self.reloads = 0  # changes accepted: new handshakes use them
        self.rejected = 0  # changes refused: the previous credentials stay in use

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._initial, self.fetch, require_client_authentication=self._ca in self.files
        )

    def _stat(self) -> tuple[tuple[int, int], ...]:
        """Each file's (mtime, size); (-1, -1) for one that is gone, so that its loss is a change (refused,
        with the file named) and its return another."""
        out = []
        for p in self.files.values():
            try:
                st = p.stat()
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((-1, -1))
        return tuple(out)

    def _configuration(self) -> grpc.ServerCertificateConfiguration:
        pem: dict[str, bytes] = {}
        for name, path in self.files.items():
            try:
                pem[name] = path.read_bytes()
            except OSError as exc:
                raise OSError(f"{self._what}: {name} {path}: {exc.strerror or exc}") from None
        for name in (self._cert, self._ca):
            problem = pem_certificates_problem(pem[name]) if name in pem else None
            if problem is not None:
                raise OSError(f"{self._what}: {name} {self.files[name]} {problem}")
        try:  # a key that does not match its certificate would only fail later, in every handshake
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                self.files[self._cert], self.files[self._key]
            )
        except (ssl.SSLError, ValueError) as exc:
            raise OSError(
                f"{self._what}: {self._key} {self.files[self._key]} does not go with {self._cert} "
                f"{self.files[self._cert]} (or one is not PEM): {exc}"
            ) from None
        return grpc.ssl_server_certificate_configuration(
            [(pem[self._key], pem[self._cert])], root_certificates=pem.get(self._ca)
        )

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's hook, at every handshake: new credentials when the files changed and are usable as a
        whole, else None (gRPC keeps what it has)."""
        with self._lock:
            stamp = self._stat()
            if stamp == self._stamp:
                return None
            self._stamp = stamp  # judged once per change, not at every handshake
            try:
                config = self._configuration()
            except OSError as exc:
                self.rejected += 1
                self._tell("rejected")
                log.error(
                    f"{self._what}: TLS files changed but cannot be used; keeping the previous ones", error=str(exc)
                )
                return None
            self.reloads += 1
            self._tell("accepted")
            log.info(
                f"{self._what}: TLS files changed; new handshakes use them", files=[str(p) for p in self.files.values()]
            )
            return config

    def _tell(self, result: str) -> None:
        if self._reloaded is not None:
            self._reloaded(result)
