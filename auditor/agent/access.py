"""Who may ask the agent: a bearer token, required by default, compared in constant time; and where it may
listen: plaintext without a token only with `--insecure`, and `--insecure` only on a loopback address.

The token file is re-read when it changes (a Kubernetes Secret volume swaps it atomically), so a rotated
token is accepted from the next call on; an unreadable or empty file keeps the previous token (and is
refused at start). TLS (and mutual TLS) is the admin server's code (auditor/admin/credentials.py).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import threading
from pathlib import Path

from auditor.errors import ConfigError

AUTHORIZATION = "authorization"  # gRPC metadata keys are lower case
SCHEME = "Bearer "


def is_loopback(host: str) -> bool:
    """Whether `host` names only this machine: 127.0.0.0/8, ::1, or `localhost`."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, *, token: bool, insecure: bool) -> None:
    """Fail closed: ConfigError unless a token is required, or `--insecure` was asked for on loopback."""
    if token:
        return
    if not insecure:
        raise ConfigError(
            "agent: --token-file is required (every call must carry its bearer token); "
            "only --insecure, on a loopback --listen, serves without one"
        )
    if not is_loopback(host):
        raise ConfigError(f"agent: --insecure refused on {host}: it serves without a token, so loopback only")


def read_token(path: Path) -> bytes:
    """The token in `path`, surrounding white space removed; ConfigError naming the file."""
    try:
        token = path.read_bytes().strip()
    except OSError as exc:
        raise ConfigError(f"agent: --token-file {path}: {exc.strerror or exc}") from None
    if not token:
        raise ConfigError(f"agent: --token-file {path} is empty")
    if any(c < 0x21 or c > 0x7E for c in token):
        raise ConfigError(f"agent: --token-file {path}: a token is printable ASCII without spaces")
    return token


class TokenFile:
    """The expected token, re-read when the file's (mtime, size, inode) changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._token = read_token(path)
        self._stamp = self._stat()
        self._lock = threading.Lock()

    def _stat(self) -> tuple[int, int, int]:
        try:
            st = os.stat(self.path)
        except OSError:
            return (-1, -1, -1)
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def current(self) -> bytes:
        with self._lock:
            stamp = self._stat()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._token = read_token(self.path)
                except ConfigError:
                    pass  # half-written or gone: the previous token stays (logged by the caller's metrics)
            return self._token

    def admits(self, authorization: str | None) -> bool:
        """Whether an `authorization` metadata value carries the token."""
        if not authorization or not authorization.startswith(SCHEME):
            return False
        return hmac.compare_digest(authorization[len(SCHEME) :].encode("ascii", "replace"), self.current())
