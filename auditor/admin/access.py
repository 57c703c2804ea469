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

Names are typed (auditor/settings/clientnames.py) and read from the verified certificate itself (gRPC's
`x509_pem_cert`), never from gRPC's untyped `x509_common_name`/`x509_subject_alternative_name`, which
would let an email or URI SAN pass for a DNS name. `cn:` names a certificate only when it has no subject
alternative name of any type (RFC 6125 §6.4.4 falls back to the CN only without DNS/URI SANs; we go
further, so that a SAN the issuer validated always wins over a CN it may not have) and exactly one CN.

Without admin TLS the API is plaintext and open to whoever reaches it (keep it on loopback), as before.
Pure: the server hands in the call's gRPC auth context.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import NameOID

from auditor.settings.clientnames import canonical, client_name

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


_SAN_KINDS: dict[type[x509.GeneralName], str] = {
    x509.DNSName: "dns",
    x509.UniformResourceIdentifier: "uri",
    x509.RFC822Name: "email",
    x509.IPAddress: "ip",
}


@functools.lru_cache(maxsize=256)  # one parse per client certificate, not per call
def certificate_names(pem: bytes) -> tuple[str, ...]:
    """The typed names (`dns:...`, `uri:...`, `email:...`, `ip:...`, or `cn:...` when there is no SAN) of
    a PEM certificate; () when it cannot be parsed (fail closed: no name, no mutation)."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
        try:
            sans = list(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
        except x509.ExtensionNotFound:
            sans = []
        names = [canonical(_SAN_KINDS[type(g)], str(g.value)) for g in sans if type(g) in _SAN_KINDS]
        if not sans:  # a SAN of any type (otherName, directoryName, ... included) rules the CN out
            cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
            if len(cns) == 1:  # several CNs: which one names the client is ambiguous, so none does
                names.append(canonical("cn", str(cns[0].value)))
    except ValueError:  # cryptography's error for malformed DER, names or extensions
        return ()
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True, slots=True)
class Peer:
    """The caller as its TLS handshake proved it: `names` are its certificate's typed names
    (`certificate_names`; empty when it presented no certificate)."""

    authenticated: bool
    subject: str = ""
    names: tuple[str, ...] = ()

    @classmethod
    def from_auth_context(cls, auth: Mapping[str, Iterable[bytes]]) -> Peer:
        """gRPC puts x509_* properties in the auth context only for a certificate the handshake verified."""
        subject = next((v.decode("utf-8", "replace") for v in auth.get("x509_subject", ())), "")
        pem = next(iter(auth.get("x509_pem_cert", ())), b"")
        return cls(authenticated=bool(subject or pem), subject=subject, names=certificate_names(pem) if pem else ())


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    tls: bool = False
    authorized_clients: frozenset[str] = frozenset()  # typed names (clientnames.py), any spelling
    unauthenticated_reads: bool = False

    def __post_init__(self) -> None:
        # canonical, and ValueError for an untyped name: never a silent match of any name of any type
        object.__setattr__(self, "authorized_clients", frozenset(client_name(n) for n in self.authorized_clients))

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
