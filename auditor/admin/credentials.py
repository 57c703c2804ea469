"""The admin server's TLS credentials, re-read when their files change: cert-manager renews certificates
in place (the Pulsar chart's every 75 days or so) and a Secret volume swaps the files atomically, so a
renewed certificate or client CA is served from the next handshake on, without a restart.

gRPC asks `fetch` at every new TLS handshake (from one of its own threads); it stats the files and, only
when they changed, reads and checks them. Files that changed but cannot be used (half written, a key that
does not match the certificate) keep the previous credentials in service, with a warning naming the file.
"""

from __future__ import annotations

import ssl
import threading
from pathlib import Path

import grpc

from auditor.logging import get_logger

log = get_logger("auditor.admin")


class ServerTls:
    """`admin.tls_cert` + `admin.tls_key` (+ `admin.tls_client_ca`: clients must then present a certificate
    it verifies). Construction reads and checks the files, raising OSError naming the setting."""

    def __init__(self, cert: Path, key: Path, client_ca: Path | None = None) -> None:
        self.files = {"admin.tls_cert": Path(cert), "admin.tls_key": Path(key)}
        if client_ca is not None:
            self.files["admin.tls_client_ca"] = Path(client_ca)
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._initial = self._configuration()
        self.reloads = 0

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._initial, self.fetch, require_client_authentication="admin.tls_client_ca" in self.files
        )

    def _stat(self) -> tuple[tuple[int, int], ...] | None:
        try:
            return tuple((s.st_mtime_ns, s.st_size) for s in (p.stat() for p in self.files.values()))
        except OSError:
            return None

    def _configuration(self) -> grpc.ServerCertificateConfiguration:
        pem: dict[str, bytes] = {}
        for name, path in self.files.items():
            try:
                pem[name] = path.read_bytes()
            except OSError as exc:
                raise OSError(f"admin API: {name} {path}: {exc.strerror or exc}") from None
        try:  # a key that does not match its certificate would only fail later, in every handshake
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                self.files["admin.tls_cert"], self.files["admin.tls_key"]
            )
        except (ssl.SSLError, ValueError) as exc:
            raise OSError(
                f"admin API: admin.tls_key {self.files['admin.tls_key']} does not go with admin.tls_cert "
                f"{self.files['admin.tls_cert']} (or one is not PEM): {exc}"
            ) from None
        return grpc.ssl_server_certificate_configuration(
            [(pem["admin.tls_key"], pem["admin.tls_cert"])], root_certificates=pem.get("admin.tls_client_ca")
        )

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's hook, at every handshake: new credentials when the files changed, else None (keep)."""
        with self._lock:
            stamp = self._stat()
            if stamp is None or stamp == self._stamp:
                return None
            self._stamp = stamp
            try:
                config = self._configuration()
            except OSError as exc:
                log.warning(
                    "admin API: TLS files changed but cannot be used; keeping the previous ones", error=str(exc)
                )
                return None
            self.reloads += 1
            log.info(
                "admin API: TLS files changed; new handshakes use them", files=[str(p) for p in self.files.values()]
            )
            return config
