"""The typed client identities of `admin.authorized_clients`: `dns:NAME`, `uri:URI`, `email:ADDRESS`,
`ip:ADDRESS` (subject alternative names of those types) and `cn:NAME` (the subject CN of a certificate
that has no subject alternative names at all).

Typed, because the client CA is often the cluster's own issuer (cert-manager's), which also signs broker
and bookie certificates: an untyped "ops" would be matched by any name of any type that spells it, an
email or URI SAN a broker's certificate request may carry included. Each entry and each certificate name
is brought to one spelling (`canonical`), so matching is a plain set intersection:

* `dns`: lower case (DNS names are case-insensitive); an exact name, never a pattern (`*` is refused);
* `uri`: exact, case-sensitive (a SPIFFE ID's path is); an absolute URI (with a scheme);
* `email`: the domain in lower case, the local part exact (RFC 5321: only the domain is case-insensitive);
* `ip`: the address as Python's `ipaddress` writes it (`fd00:0::1` and `fd00::1` are one address);
* `cn`: exact.
"""

from __future__ import annotations

import ipaddress
import urllib.parse

KINDS = ("dns", "uri", "email", "ip", "cn")


def canonical(kind: str, value: str) -> str:
    """`kind:value` in its one spelling; no validation (certificate names pass through here too)."""
    if kind == "dns":
        value = value.lower()
    elif kind == "email" and "@" in value:
        local, _, domain = value.rpartition("@")
        value = f"{local}@{domain.lower()}"
    elif kind == "ip":
        try:
            value = str(ipaddress.ip_address(value))
        except ValueError:
            pass
    return f"{kind}:{value}"


def _hint(text: str) -> str:
    """The typed entry the operator most likely meant, for an untyped one."""
    try:
        ipaddress.ip_address(text)
        return f"write ip:{text}"
    except ValueError:
        pass
    if "://" in text:
        return f"write uri:{text}"
    if "@" in text:
        return f"write email:{text}"
    return (
        f"write dns:{text} (a DNS subject alternative name) or cn:{text} (the CN of a certificate without "
        "subject alternative names)"
    )


def _problem(kind: str, value: str) -> str | None:
    if not value or value != value.strip():
        return "is empty or has surrounding spaces"
    if kind == "dns" and ("*" in value or any(c.isspace() for c in value)):
        return "is not one exact DNS name (no wildcards, no spaces)"
    if kind == "uri" and not urllib.parse.urlsplit(value).scheme:
        return "is not an absolute URI (e.g. uri:spiffe://cluster.local/ns/pulsar/sa/ops)"
    if kind == "email" and not all(value.rpartition("@")[0::2]):
        return "is not an email address (local@domain)"
    if kind == "ip":
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return "is not an IP address"
    return None


def client_name(text: str) -> str:
    """An `admin.authorized_clients` entry in its canonical spelling; ValueError, one line naming the entry
    and what to write instead, for an untyped or malformed one."""
    kind, sep, value = text.partition(":")
    kind = kind.lower()
    if not sep or kind not in KINDS:
        raise ValueError(f"admin client name {text!r} has no type: {_hint(text)}")
    problem = _problem(kind, value)
    if problem is not None:
        raise ValueError(f"admin client name {text!r}: {kind}:{value!r} {problem}")
    return canonical(kind, value)


def client_names(entries: list[str]) -> list[str]:
    """Every entry canonical; ValueError naming every bad one in one line."""
    out, problems = [], []
    for entry in entries:
        try:
            out.append(client_name(entry))
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ValueError("; ".join(problems))
    return out
