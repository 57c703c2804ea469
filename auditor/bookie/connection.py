"""One TCP (or TLS) connection to a bookie, as an asyncio protocol (`_Connection`): it decodes reply frames
for its client, holds the requests on the wire by txn id and remembers the txn ids that may still get one
late reply; on any failure it closes and ends every request in flight on it UNKNOWN."""

from __future__ import annotations

import asyncio
import math
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from . import protocol as P
from .protocol import Op, Reply

if TYPE_CHECKING:
    from .pending import _Pending, _Request
    from .transport import BookieTransport

# Txn ids of requests that timed out (or were cancelled) remembered per connection, so that each may
# still get exactly one late reply; older ones are forgotten (their late reply then closes the link).
LATE_REPLY_MEMORY = 4096


class WireCodec(Protocol):
    """What a connection's protocol version decides: how a reply body is decoded into a `Reply` whose txn id
    says which request it answers, and (`sent`, None when nothing is needed) what is noted of each frame
    sent so its reply can be matched. Framing (the length prefix) is the same in v2 and v3."""

    def decode(self, body: bytes) -> Reply: ...

    @property
    def sent(self) -> Callable[[int, bytes], None] | None: ...


class V3Codec:
    """The v3 protocol: replies carry their txn id; nothing to note of what is sent."""

    __slots__ = ()
    sent = None

    @staticmethod
    def decode(body: bytes) -> Reply:
        return P.decode_response(body)


V3 = V3Codec()


class _Connection(asyncio.Protocol):
    def __init__(self, client: BookieTransport, first_txn: int) -> None:
        self.client = client
        self.first_txn = first_txn
        self.transport: asyncio.Transport | None = None
        self.decoder = P.FrameDecoder(client.config.max_frame_size)
        self.codec: WireCodec = client._new_codec()
        self.pending: dict[int, _Request | _Pending] = {}
        self.expired: OrderedDict[int, Op] = OrderedDict()  # may still get one late reply each
        self.closing = False
        self.last_rx = 0.0  # any bytes
        self.last_reply = 0.0  # a whole reply this connection was waiting for (in time or late)
        self.valid_replies = 0
        self.silent_timeouts = 0
        self.start_tls_txn: int | None = None  # the START_TLS request's txn, once answered EOK
        self.writable = True  # False while the transport is paused (a peer that stops reading)
        self.paused_at = 0.0  # when the transport last paused writing (a peer that stops reading)
        # One timer per connection for every request's deadline (not one per request): armed for the
        # earliest deadline among those pending, it expires what is due and re-arms (`_sweep`).
        self.sweep_at = math.inf
        self.sweep_timer: asyncio.TimerHandle | None = None

    # asyncio.Protocol ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not an isinstance check: uvloop's transports do not derive from asyncio.Transport.
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.client.config.keepalive:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            except OSError:  # not fatal: only latency / dead-peer detection suffer
                pass

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.last_rx = time.monotonic()
        try:
            bodies = self.decoder.feed(data)
            for body in bodies:
                self.client._on_reply(self, self.codec.decode(body))
                if self.closing:
                    return
        except P.ProtocolError as exc:
            self.client.stats.protocol_errors += 1
            self.fail(f"protocol error: {exc}")
        except Exception as exc:  # never let hostile bytes crash the event loop's callback
            self.client.stats.protocol_errors += 1
            self.fail(f"unexpected error decoding reply: {exc!r}")

    def eof_received(self) -> bool | None:
        self.fail("connection closed by the bookie")
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(f"connection lost ({exc})" if exc else "connection closed by the bookie")

    def pause_writing(self) -> None:
        self.writable = False
        self.paused_at = time.monotonic()

    def resume_writing(self) -> None:
        self.writable = True
        self._resume_senders()

    def _resume_senders(self) -> None:
        if not self.client._closed:
            self.client._schedule_pump()

    # ours -----------------------------------------------------------------------------------------
    def fail(self, reason: str) -> None:
        """Close the connection; every request in flight on it ends UNKNOWN with the reason."""
        if self.closing:
            return
        self.closing = True
        self.writable = True
        message = f"bookie {self.client.bookie_id}: {reason}"
        if self.sweep_timer is not None:
            self.sweep_timer.cancel()
            self.sweep_timer = None
        self.client._on_connection_failed(self, message)
        pending, self.pending = self.pending, {}
        for p in pending.values():
            p.resolve(message)
        if self.transport is not None:
            self.transport.abort()
        self._resume_senders()

    def expect_late_reply(self, txn: int, op: Op) -> None:
        self.expired[txn] = op
        while len(self.expired) > LATE_REPLY_MEMORY:
            self.expired.popitem(last=False)
