"""Who may make which admin call: the access policy, decided from the caller's verified client certificate.

gRPC's server credentials either require a client certificate at the TLS handshake or never ask for one
(there is no "optional" mode), so an unauthenticated caller reaches us in two ways only: over the plaintext
probe listener (`admin.probe_bind`, for the kubelet), or over TLS when no client CA is configured. The
policy, with admin TLS configured:

* health (the standard health service) and reflection are never gated: probes must work;
* reads (`READ_METHODS`) need a client certificate unless `admin.unauthenticated_reads`;
* everything else is mutating (pause, resume, trigger, the recovery delay and replication switches, and
  any control added later: fail closed) and needs a client certificate, naming one of
  `admin.authorized_clients` when that list is not empty.

Without admin TLS the API is plaintext and open to whoever reaches it (keep it on loopback), as before.
Pure: the server hands in the call's gRPC auth context.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import PermissionDeniedError, UnauthenticatedError

# Reads, as the CLI's reads; everything else mutates (SetRecoveryDelay and SetReplication change what
# Java's shell changes, so they need the same authority as pause).
READ_METHODS = frozenset(
    {
        "Status",
        "ListFindings",
        "ExplainLedger",
        "CanDecommission",
        "ListUnderreplicated",
        "WhoIsAuditor",
        "GetRecoveryDelay",
        "GetReplication",
        "GetRepairLimits",
    }
)


@dataclass(frozen=True, slots=True)
class Peer:
    """The caller as its TLS handshake proved it: `names` are its certificate's common name and subject
    alternative names (empty when it presented no certificate)."""

    authenticated: bool
    subject: str = ""
    names: tuple[str, ...] = ()

    @classmethod
    def from_auth_context(cls, auth: Mapping[str, Iterable[bytes]]) -> Peer:
        """gRPC puts x509_* properties in the auth context only for a certificate the handshake verified."""

        def values(key: str) -> list[str]:
            return [v.decode("utf-8", "replace") for v in auth.get(key, ())]

        subject = next(iter(values("x509_subject")), "")
        names = tuple(dict.fromkeys(values("x509_common_name") + values("x509_subject_alternative_name")))
        return cls(authenticated=bool(subject or names), subject=subject, names=names)


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    tls: bool = False
    authorized_clients: frozenset[str] = frozenset()
    unauthenticated_reads: bool = False

    def check(self, method: str, peer: Peer) -> None:
        """Raise UnauthenticatedError / PermissionDeniedError unless `peer` may call AdminService `method`."""
        if not self.tls:
            return
        is_read = method in READ_METHODS
        if is_read and self.unauthenticated_reads:
            return
        if not peer.authenticated:
            kind = "a read" if is_read else "a mutating call"
            raise UnauthenticatedError(
                f"{method} refused: {kind} needs an authenticated client, and this connection has no client "
                "certificate (use the TLS admin port with a certificate signed by admin.tls_client_ca: "
                "bk-auditor --tls-cert/--tls-key)"
            )
        if is_read or not self.authorized_clients:
            return
        if not self.authorized_clients.intersection(peer.names):
            raise PermissionDeniedError(
                f"{method} refused: client certificate {peer.subject or '(no subject)'} (names: "
                f"{', '.join(peer.names) or 'none'}) is not in admin.authorized_clients"
            )
