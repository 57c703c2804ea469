"""TLS to bookies: the client context (`BookieTls`), the upgrade of every new connection, and the words
for a JDK bookie's refusal of our certificate.

With TLS configured (`BookieClientConfig.tls`) every connection starts with START_TLS and a TLS
handshake (spec bookie-protocol.md §1.5), then one ping proves the bookie accepted the session (a TLS
1.3 server rejects a client certificate only after the client's side of the handshake is done). A
bookie that refuses the upgrade, or whose certificate fails verification, is a connect failure naming
the bookie and the reason; nothing is ever sent to it in plaintext, and its answers stay UNKNOWN.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import protocol as P
from .pending import _Pending
from .protocol import Op, Reply, Status

if TYPE_CHECKING:
    from .connection import _Connection
    from .transport import BookieTransport


@dataclass(frozen=True, slots=True)
class BookieTls:
    """TLS to bookies: the client context (CA, hostname check, own certificate), or a callable asked for
    it at every new connection (so renewed certificates are used without a restart), and the time
    allowed for START_TLS, the handshake and the first answer (Java's startTLSTimeoutSecs, 10 s)."""

    context: ssl.SSLContext | Callable[[], ssl.SSLContext]
    handshake_timeout: float = 10.0
    client_certificate: bool = False  # whether the context presents one (only for wording errors)

    def current_context(self) -> ssl.SSLContext:
        return self.context if isinstance(self.context, ssl.SSLContext) else self.context()


async def start_tls(client: BookieTransport, conn: _Connection, tls: BookieTls, host: str) -> str | None:
    """Upgrade a fresh connection to TLS; None when done, else why not (the caller closes it)."""
    limit = tls.handshake_timeout
    reply = await _exchange(client, conn, Op.START_TLS, P.start_tls_request(client._take_txn()), limit)
    if isinstance(reply, str):
        return f"START_TLS failed: {reply.removeprefix(f'bookie {client.bookie_id}: ')}"
    if reply.status is Status.EBADREQ:
        return "the bookie refused the upgrade (START_TLS answered EBADREQ: TLS is not configured on it)"
    if reply.status is not Status.EOK:
        return f"the bookie refused the upgrade (START_TLS answered {client._status_name(reply)})"
    conn.start_tls_txn = reply.txn_id
    transport = conn.transport
    if transport is None or conn.closing:
        return "connection closed during START_TLS"
    loop = asyncio.get_running_loop()
    try:
        upgraded = await loop.start_tls(
            transport, conn, tls.current_context(), server_hostname=host, ssl_handshake_timeout=limit
        )
    except ssl.SSLCertVerificationError as exc:
        return f"the bookie's certificate was rejected: {exc.verify_message or exc.reason or exc}"
    except (ssl.SSLError, OSError, TimeoutError, ConnectionError, RuntimeError) as exc:
        return f"handshake failed: {exc or type(exc).__name__}"
    if upgraded is None:
        return "handshake failed: the connection closed"
    conn.transport = upgraded
    # A TLS 1.3 server checks our certificate after our side of the handshake ended: one ping proves
    # the session was accepted before any request relies on it.
    ping = await _exchange(client, conn, Op.GET_BOOKIE_INFO, P.bookie_info_request(client._take_txn(), 0), limit)
    if isinstance(ping, str):
        why = ping.removeprefix(f"bookie {client.bookie_id}: ")
        return f"the TLS session failed before its first answer{_alert_meaning(why, tls)}: {why}"
    if ping.status is Status.EUA:
        return "the bookie did not authorise us after the handshake (EUA: its auth plugin, e.g. certificate roles, refused our certificate)"
    if ping.status is not Status.EOK:
        return f"the first request over TLS was answered {client._status_name(ping)}"
    return None


async def _exchange(
    client: BookieTransport, conn: _Connection, op: Op, request: P.Request, limit: float
) -> Reply | str:
    """One request on a connection that is not yet handed out (the TLS upgrade and its check)."""
    frame = P.encode_request(request)  # the gate holds here too
    txn = request.header.txnId
    if conn.transport is None or conn.closing:
        return "connection closed"
    fut: asyncio.Future[Reply | str] = asyncio.get_running_loop().create_future()
    conn.pending[txn] = _Pending(op, fut, time.monotonic())
    conn.transport.write(frame)
    client.stats.sent += 1
    try:
        async with asyncio.timeout(limit):
            return await fut
    except TimeoutError:
        return f"no reply to {op.name} within {limit:g} s"
    finally:
        conn.pending.pop(txn, None)


# TLS alerts a bookie sends about our certificate after our side of a TLS 1.3 handshake ended. A JDK
# bookie answers a missing certificate with bad_certificate, so the words depend on whether we sent one.
_CERTIFICATE_ALERTS = ("CERTIFICATE_REQUIRED", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN", "UNKNOWN_CA", "EXPIRED")


# How a JDK bookie's refusal of our certificate can arrive instead of its alert: the alert and the close
# race, and a reset can overtake the alert (seen under load with TLS 1.3).
_CLOSED_AFTER_HANDSHAKE = ("CONNECTION RESET", "CONNECTION LOST", "CONNECTION CLOSED", "EOF")


def _alert_meaning(text: str, tls: BookieTls) -> str:
    upper = text.upper()
    if any(alert in upper for alert in _CERTIFICATE_ALERTS):
        if not tls.client_certificate:
            return " (the bookie demands a client certificate and none is configured)"
        return " (the bookie rejected our client certificate)"
    if any(word in upper for word in _CLOSED_AFTER_HANDSHAKE):
        if not tls.client_certificate:
            return " (most likely the bookie demands a client certificate and none is configured)"
        return " (most likely the bookie rejected our client certificate)"
    return ""
