"""An asyncio client for one bookie: one TCP connection carrying many pipelined read-only requests.

* Requests are matched to replies on (txnId, operation); txn ids come from one counter per client and
  never repeat. Every reply must use up something the connection waits for: a pending request; one
  late reply of a request that timed out or was cancelled (the last LATE_REPLY_MEMORY of them are
  remembered), dropped quietly; or one tolerated reply with the right txn but the wrong operation. A
  reply naming a txn id never sent, a second reply for a txn, or a second wrong-operation reply is
  hostile: the connection is closed (so a replayed reply cannot keep the event loop busy forever).
* At most `max_in_flight` requests are on the wire at once, and at most `rate_limit` per second
  (token bucket), so an audit can never overload a bookie. Requests queue per client and leave in order
  (`_pump`): no task or coroutine per request, and every request that may go in one loop iteration goes
  out in one write (one system call for a batch, not one per request). `send_*` methods return a `Sent`:
  a ledger's requests to all its bookies go out before its first answer is awaited. With `adaptive` the bucket's rate moves below
  that cap on the bookie's own signals (auditor/aio/adaptive.py): up while it answers fast and the
  limiter holds callers back, halved on ETOOMANYREQUESTS or a timeout, lowered while its answers are slow.
* Each request has its own timeout, which also bounds waiting for a connection that does not drain (a
  peer that stops reading). Timeouts do not close the connection (a bookie answers late, or never —
  DbLedgerStorage and GET_LIST — without being broken). Only when several requests in a row time out
  with no reply received does the client assume the connection is dead and reconnect; bytes that never
  complete a reply (a trickling peer) do not count as life.
* Anything that is not the protocol (bad length, garbage, missing required fields, an unknown txn)
  closes the connection with an error naming the bookie; every request in flight on it ends UNKNOWN.
* Connecting is retried with exponential backoff; while backing off, requests fail fast as UNKNOWN.
* With TLS configured (`BookieClientConfig.tls`) every connection starts with START_TLS and a TLS
  handshake (spec bookie-protocol.md §1.5), then one ping proves the bookie accepted the session (a TLS
  1.3 server rejects a client certificate only after the client's side of the handshake is done). A
  bookie that refuses the upgrade, or whose certificate fails verification, is a connect failure naming
  the bookie and the reason; nothing is ever sent to it in plaintext, and its answers stay UNKNOWN.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import logging
import math
import random
import socket
import ssl
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Self, TypedDict, TypeVar, cast

from google.protobuf.message import Message

from auditor.aio.adaptive import AdaptivePolicy, AdaptiveRate
from auditor.aio.cooperative import finish
from auditor.aio.ratelimit import TokenBucket
from auditor.durability.entrylist import EntryList, EntryListError
from auditor.durability.ids import LedgerId
from auditor.durability.schedule import StripedSet
from auditor.durability.sharelist import decode_share

from . import protocol as P
from .protocol import Op, Reply, Status
from .results import (
    ABSENT_STATUSES,
    AuthProbeResult,
    BookieInfoResult,
    Capability,
    EntryListResult,
    Outcome,
    ReadEntryResult,
    ReadLacResult,
)

log = logging.getLogger(__name__)

Address = tuple[str, int]
# What a queued request is built from at its turn, given its txn id: a message for the client's gate, or a
# frame the read-only gate's module wrote already (`protocol.GatedFrame`).
Build = Callable[[int], "Message | P.GatedFrame"]
Resolver = Callable[[str], Address | Awaitable[Address]]


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


@dataclass(frozen=True, slots=True)
class BookieClientConfig:
    request_timeout: float = 5.0  # per request, from write to reply (Java default read timeout: 5 s)
    connect_timeout: float = 5.0
    max_in_flight: int = 128  # concurrency limit: requests on the wire at once
    rate_limit: float | None = None  # requests per second; None = only the concurrency limit
    rate_burst: float | None = None  # token bucket size; default max(1, rate_limit)
    adaptive: AdaptivePolicy | None = None  # with rate_limit: the rate adapts below it (None: fixed)
    max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE
    backoff_initial: float = 0.1
    backoff_max: float = 10.0
    backoff_multiplier: float = 2.0
    liveness_timeout: float = 2.0  # for the GET_BOOKIE_INFO ping that tells "alive" from "silent"
    entry_list_probe_timeout: float = 1.0  # for probe_entry_list_support
    dead_after_timeouts: int = 3  # consecutive timeouts with nothing received -> reconnect
    keepalive: bool = True
    tls: BookieTls | None = None  # None: plaintext; set: START_TLS on every connection, never plaintext

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        if self.rate_limit is not None and self.rate_limit <= 0:
            raise ValueError("rate_limit must be > 0 or None")
        if self.max_frame_size < 64:
            raise ValueError("max_frame_size is unreasonably small")


@dataclass(slots=True)
class ClientStats:
    sent: int = 0
    replies: int = 0
    late_replies: int = 0  # replies for requests that had already timed out: dropped
    mismatched_replies: int = 0  # right txn, wrong operation: dropped
    timeouts: int = 0
    connects: int = 0
    connect_failures: int = 0
    protocol_errors: int = 0
    connection_losses: int = 0
    last_error: str | None = None


class _TimedOut(str):
    """The failure message of a request that got no reply in time (as opposed to a broken link)."""


@dataclass(slots=True)
class _Pending:
    """The connection's own exchange (the TLS upgrade and its check) on the wire, waiting for its reply in
    `future`. (A submitted request waits as its `_Request`.) Never swept: the exchange has its own timeout."""

    op: Op
    future: asyncio.Future[Reply | str]
    sent_at: float
    mismatched: bool = False  # one reply with the right txn but the wrong operation was dropped
    deadline: float = math.inf
    limit: float = 0.0

    @property
    def done(self) -> bool:
        return self.future.done()

    def resolve(self, value: Reply | str) -> None:
        if not self.future.done():
            self.future.set_result(value)


class _Batch:
    """The outcomes of many requests to one bookie, gathered without a future per request: each request's
    outcome lands in its place, and the one future completes when the last is in (one wake-up of the
    caller for the whole batch). Cancelling the future withdraws every request of the batch."""

    __slots__ = ("values", "left", "future")

    def __init__(self, n: int, future: asyncio.Future[None]) -> None:
        self.values: list[tuple[Reply | str, float] | None] = [None] * n
        self.left = n
        self.future = future


class _Request:
    """A submitted request: queued until it may go (its turn in the rate limiter, a window slot, a
    connection that takes writes), then on the wire (as its connection's pending entry for its txn) until
    its reply, its deadline or the connection's end. Its outcome (the Reply or why there is none, and
    seconds from leaving the queue to the outcome) goes to its own future, or to its place in a `_Batch`."""

    __slots__ = (
        "client",
        "op",
        "build",
        "limit",
        "future",
        "batch",
        "index",
        "queued_at",
        "not_before",
        "sent_at",
        "deadline",
        "conn",
        "txn",
        "finished",
        "mismatched",
    )

    def __init__(
        self,
        client: BookieTransport,
        op: Op,
        build: Build,
        limit: float,
        queued_at: float,
        future: asyncio.Future[tuple[Reply | str, float]] | None = None,
        batch: _Batch | None = None,
        index: int = 0,
    ) -> None:
        self.client = client
        self.op = op
        self.build = build
        self.limit = limit
        self.future = future
        self.batch = batch
        self.index = index
        self.queued_at = queued_at
        self.not_before = 0.0  # its turn in the rate limiter
        self.sent_at = 0.0  # when it left the queue
        self.deadline = math.inf  # when it times out, once sent
        self.conn: _Connection | None = None
        self.txn = 0
        self.finished = False  # its outcome is in, or it was withdrawn: its window slot is back
        self.mismatched = False  # one reply with the right txn but the wrong operation was dropped

    @property
    def done(self) -> bool:
        """As a pending entry (`_expire`): its outcome is in. A request whose caller went away is still
        expired normally until its withdrawal runs (`_withdrawn`), so its late reply stays expected."""
        return self.finished

    @property
    def settled(self) -> bool:
        """Its outcome is in, or nobody waits for it any more (cancelled): nothing more to send or tell."""
        if self.finished:
            return True
        waiter = self.future if self.future is not None else self.batch.future if self.batch is not None else None
        return waiter is not None and waiter.done()

    def resolve(self, value: Reply | str) -> None:
        """Its outcome on the wire: the reply, its timeout or the connection's end."""
        self.client._answered(self, value)

    def deliver(self, value: tuple[Reply | str, float]) -> None:
        if self.future is not None:
            if not self.future.done():
                self.future.set_result(value)
            return
        batch = self.batch
        assert batch is not None
        if batch.future.done() or batch.values[self.index] is not None:
            return
        batch.values[self.index] = value
        batch.left -= 1
        if batch.left == 0:
            batch.future.set_result(None)

    def refuse(self, exc: BaseException) -> None:
        """The request gate refused it: the caller gets the exception."""
        waiter = self.future if self.future is not None else self.batch.future if self.batch is not None else None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


R = TypeVar("R")


class Sent(Generic[R]):
    """A request already on its way (queued or on the wire): `await sent.result()` is its judged outcome.
    Several can be sent before the first is awaited, so one coroutine asks many bookies at once without
    a task per request. `cancel()` withdraws it (a reply that still comes is dropped quietly)."""

    __slots__ = ("_future", "_judge", "_value")

    def __init__(
        self,
        future: asyncio.Future[tuple[Reply | str, float]] | None,
        judge: Callable[[Reply | str, float], Awaitable[R]] | None,
        value: R | None = None,
    ) -> None:
        self._future = future
        self._judge = judge
        self._value = value

    @classmethod
    def ready(cls, value: R) -> Sent[R]:
        """An outcome known without sending anything."""
        return cls(None, None, value)

    async def result(self) -> R:
        if self._future is None or self._judge is None:
            return self._value  # type: ignore[return-value]
        reply, elapsed = await self._future
        return await self._judge(reply, elapsed)

    def cancel(self) -> None:
        if self._future is not None:
            self._future.cancel()


# A deadline this close is treated as come (timers may fire a little early): no re-arm for a millisecond.
SWEEP_SLACK = 0.002

# An entry list of at most this many bytes (about 2,700 runs) is decoded in one go where the caller does
# not await each answer: well under a millisecond. Larger ones take the stepwise, awaited path.
SMALL_ENTRY_LIST = 64 * 1024

# The modules whose BookieTransport subclasses may encode requests: the auditor's read-only client here,
# the repair role's recovery-add client and its fencing client for opt-in ledger recovery (docs/repair.md,
# "The write gate", "Recovering open ledgers").
_GATE_MODULES = frozenset({__name__, "auditor.repair.writer", "auditor.repair.fencing"})

# Txn ids of requests that timed out (or were cancelled) remembered per connection, so that each may
# still get exactly one late reply; older ones are forgotten (their late reply then closes the link).
LATE_REPLY_MEMORY = 4096


class _Connection(asyncio.Protocol):
    def __init__(self, client: BookieTransport, first_txn: int) -> None:
        self.client = client
        self.first_txn = first_txn
        self.transport: asyncio.Transport | None = None
        self.decoder = P.FrameDecoder(client.config.max_frame_size)
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
                self.client._on_reply(self, P.decode_response(body))
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


class _LedgerCall(TypedDict):
    """The fields every result of a per-ledger request carries."""

    bookie_id: str
    elapsed: float
    ledger_id: int


class _EntryCall(_LedgerCall):
    entry_id: int


class BookieTransport:
    """One bookie connection: pipelining, txn matching, timeouts, reconnects with backoff, TLS.

    It has no operations of its own and no way to send a frame it did not encode itself: every request
    goes through `_call`, which encodes it with the subclass's `_encode` (its request gate) before a byte
    is written. `BookieClient` below is the auditor's read-only client (`protocol.encode_request`); the
    repair role's recovery-add client (auditor/repair/writer.py) is the only other subclass. The
    connection's own START_TLS and ping always go through the read-only gate.
    """

    def __init__(
        self, bookie_id: str, address: Address | Resolver | None = None, config: BookieClientConfig | None = None
    ) -> None:
        self.bookie_id = bookie_id
        self.config = config or BookieClientConfig()
        if address is None:
            address = parse_bookie_id_address(bookie_id)
        self._resolver: Resolver = (lambda _id: address) if isinstance(address, tuple) else address
        self.stats = ClientStats()
        self.entry_list_support = Capability.UNKNOWN
        self._conn: _Connection | None = None
        self._connecting: asyncio.Future[_Connection | str] | None = None
        self._failures = 0
        self._retry_at = 0.0
        self._next_txn = 1
        self._queue: collections.deque[_Request] = collections.deque()  # submitted, not yet sent
        self._slots = 0  # requests on the wire (at most config.max_in_flight)
        self._pump_scheduled = False
        self._pump_timer: asyncio.TimerHandle | None = None
        self._bucket: TokenBucket | None = None
        self._adaptive: AdaptiveRate | None = None
        if self.config.rate_limit:
            rate = self.config.rate_limit
            if self.config.adaptive is not None:
                self._adaptive = AdaptiveRate(self.config.adaptive, rate, time.monotonic())
                rate = self._adaptive.rate
            self._bucket = TokenBucket(rate, self.config.rate_burst)
        self._closed = False
        self._liveness_check: asyncio.Future[bool] | None = None
        self._last_tls_error: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.bookie_id!r}, connected={self.connected})"

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closing

    @property
    def in_flight(self) -> int:
        return len(self._conn.pending) if self._conn else 0

    @property
    def adapted_rate(self) -> float | None:
        """The adaptive request rate it has reached (None: not adaptive): where a later client for the same
        bookie may start (`BookiePool(start_rates=...)`) instead of at the policy's cautious start."""
        return self._adaptive.rate if self._adaptive is not None else None

    async def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            self._conn.fail("client closed")
            self._conn = None
        self._fail_queue(f"bookie {self.bookie_id}: client closed")

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Only the two gates may define how requests are encoded: a subclass elsewhere that brought its
        # own `_encode` would be a third gate nobody reviews. (Import contracts keep the repair gate
        # itself away from the auditor's packages: .importlinter.)
        super().__init_subclass__(**kwargs)
        if "_encode" in cls.__dict__ and cls.__module__ not in _GATE_MODULES:
            raise TypeError(f"{cls.__module__}.{cls.__qualname__} may not define its own request gate (_encode)")

    def _encode(self, request: Message | P.GatedFrame) -> bytes:
        """The framed bytes of `request`, after this client's request gate; raises if the gate refuses."""
        raise NotImplementedError(f"{type(self).__name__} has no request gate")

    # ----- machinery -------------------------------------------------------------------------------
    async def _call(self, op: Op, build: Build, timeout: float | None) -> tuple[Reply | str, float]:
        """Send one request; return the Reply, or a string saying why there is none, and the elapsed time."""
        return await self._submit(op, build, timeout)

    def _submit(self, op: Op, build: Build, timeout: float | None) -> asyncio.Future[tuple[Reply | str, float]]:
        """Queue one request; the returned future gets (Reply or why none, elapsed). Requests leave the queue
        in order (`_pump`), a batch per loop iteration in one write, with no task or coroutine per request.
        The request gate runs as each is encoded, before anything is written; its refusal is the future's
        exception."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[tuple[Reply | str, float]] = loop.create_future()
        if self._closed:
            fut.set_result((f"bookie {self.bookie_id}: client closed", 0.0))
            return fut
        req = self._enqueue(_Request(self, op, build, self._limit(timeout), time.monotonic(), future=fut))
        fut.add_done_callback(lambda f: self._withdrawn(req) if f.cancelled() else None)
        self._schedule_pump()
        return fut

    def _submit_many(self, op: Op, builds: list[Build], timeout: float | None) -> tuple[_Batch, list[_Request]]:
        """Queue many requests at once (`_submit` without a future, a done-callback or a pump per
        request): their outcomes fill one `_Batch`, whose future completes when the last is in."""
        batch = _Batch(len(builds), asyncio.get_running_loop().create_future())
        if not builds:
            batch.future.set_result(None)
            return batch, []
        if self._closed:
            batch.values = [(f"bookie {self.bookie_id}: client closed", 0.0)] * len(builds)
            batch.left = 0
            batch.future.set_result(None)
            return batch, []
        now = time.monotonic()
        limit = self._limit(timeout)
        reqs = [
            self._enqueue(_Request(self, op, build, limit, now, batch=batch, index=i)) for i, build in enumerate(builds)
        ]
        self._schedule_pump()
        return batch, reqs

    def _limit(self, timeout: float | None) -> float:
        return self.config.request_timeout if timeout is None else timeout

    def _enqueue(self, req: _Request) -> _Request:
        """Queue a request, taking its turn from the rate limiter."""
        now = req.queued_at
        if self._bucket is not None:
            wait = self._bucket.reserve()
            if wait > 0:
                if self._adaptive is not None:
                    self._adaptive.waited()
                req.not_before = now + wait
        self._queue.append(req)
        return req

    def _schedule_pump(self) -> None:
        if not self._pump_scheduled:
            self._pump_scheduled = True
            asyncio.get_running_loop().call_soon(self._pump)

    def _pump_at(self, when: float) -> None:
        """Pump again at `when` (monotonic): a rate-limited turn, or a paused transport's deadline."""
        if self._pump_timer is not None:
            self._pump_timer.cancel()
        loop = asyncio.get_running_loop()
        self._pump_timer = loop.call_later(max(0.0, when - time.monotonic()), self._schedule_pump)

    def _pump(self) -> None:
        """Send what may go now: in queue order, while the rate limiter allows, a window slot is free and
        the connection takes writes; every frame of the batch in one write."""
        self._pump_scheduled = False
        queue = self._queue
        if self._closed:
            self._fail_queue(f"bookie {self.bookie_id}: client closed")
            return
        conn = self._conn if self._conn is not None and not self._conn.closing else None
        frames: list[bytes] = []
        now = time.monotonic()
        while queue:
            req = queue[0]
            if req.settled:  # withdrawn while queued
                queue.popleft()
                continue
            if self._slots >= self.config.max_in_flight:
                break  # a reply, timeout or withdrawal frees a slot and pumps again
            if req.not_before > now:
                self._pump_at(req.not_before)
                break
            if conn is None or conn.transport is None:
                self._connect_then_pump()
                break
            if not conn.writable:
                # A peer that stops reading pauses the transport: waiting for it counts against the
                # request's own timeout, or the request would wait forever.
                since = max(req.queued_at, conn.paused_at)
                if now - since < req.limit:
                    self._pump_at(since + req.limit)
                    break
                queue.popleft()
                self.stats.timeouts += 1
                self._count_silence(conn, since)
                req.finished = True
                message = f"bookie {self.bookie_id}: {req.op.name} not sent within {req.limit:g} s (the connection does not drain)"
                req.deliver((_TimedOut(message), now - since))
                conn = self._conn if self._conn is not None and not self._conn.closing else None
                continue
            queue.popleft()
            txn = self._next_txn
            self._next_txn += 1
            try:
                frame = self._encode(req.build(txn))  # the gate raises before anything is written
            except Exception as exc:
                req.finished = True
                req.refuse(exc)
                continue
            req.conn, req.txn, req.sent_at = conn, txn, now
            req.deadline = deadline = now + req.limit
            self._slots += 1
            conn.pending[txn] = req
            if deadline < conn.sweep_at:
                self._arm_sweep(conn, deadline)
            frames.append(frame)
        if frames and conn is not None and conn.transport is not None:
            conn.transport.write(frames[0] if len(frames) == 1 else b"".join(frames))
            self.stats.sent += len(frames)

    def _answered(self, req: _Request, value: Reply | str) -> None:
        """A sent request's outcome: its reply, its timeout, or the end of its connection."""
        if req.finished:
            return
        req.finished = True
        self._slots -= 1
        elapsed = time.monotonic() - req.sent_at
        if self._adaptive is not None:
            self._adapt(req.op, value, elapsed)
        req.deliver((value, elapsed))
        if self._queue:
            self._schedule_pump()

    def _withdrawn(self, req: _Request) -> None:
        """The caller cancelled: a queued request is skipped; a sent one frees its slot now, and the one
        reply that may still come for it is dropped quietly."""
        if req.finished:
            return
        req.finished = True
        if req.conn is None:
            return
        self._slots -= 1
        if req.conn.pending.pop(req.txn, None) is not None:
            req.conn.expect_late_reply(req.txn, req.op)
        if self._queue:
            self._schedule_pump()

    def _fail_queue(self, message: str) -> None:
        """Every request still queued ends with `message` (no connection to send it on)."""
        queue, self._queue = self._queue, collections.deque()
        for req in queue:
            if not req.settled:
                req.finished = True
                req.deliver((message, 0.0))

    def _connect_then_pump(self) -> None:
        """No usable connection: connect (one attempt for everything queued), or, while backing off after
        failures, end what is queued at once as UNKNOWN."""
        if self._connecting is not None:
            return  # an attempt is under way, or just ended and its end (`_connected`) is still to run
        wait = self._retry_at - time.monotonic()
        if wait > 0:
            self._fail_queue(
                f"bookie {self.bookie_id}: not connected ({self.stats.last_error}); next attempt in {wait:.2f} s"
            )
            return
        self._connecting = connecting = asyncio.ensure_future(self._connect())
        connecting.add_done_callback(self._connected)

    def _connected(self, connecting: asyncio.Future[_Connection | str]) -> None:
        if self._connecting is connecting:
            self._connecting = None
        if connecting.cancelled():
            self._fail_queue(f"bookie {self.bookie_id}: connecting was cancelled")
            return
        exc = connecting.exception()
        conn = connecting.result() if exc is None else f"bookie {self.bookie_id}: cannot connect: {exc!r}"
        if isinstance(conn, str):
            self._fail_queue(conn)
        elif conn.closing:
            self._fail_queue(
                f"bookie {self.bookie_id}: connection closed right after connecting ({self.stats.last_error})"
            )
        else:
            self._schedule_pump()

    def _adapt(self, op: Op, result: Reply | str, latency: float) -> None:
        """Feed one request's outcome to the adaptive rate; retune the bucket when it moves. A GET_LIST
        timeout says nothing (DbLedgerStorage bookies never answer it)."""
        if self._adaptive is None or self._bucket is None:
            return
        timed_out = isinstance(result, _TimedOut) and op is not Op.GET_LIST_OF_ENTRIES_OF_LEDGER
        refused = isinstance(result, Reply) and result.status is Status.ETOOMANYREQUESTS
        answered = isinstance(result, Reply)
        if self._bucket.backlogged():
            self._adaptive.waited()
        new = self._adaptive.observe(latency if answered else None, timed_out or refused, time.monotonic())
        if new is None:
            return
        self._bucket.retune(new, self.config.rate_burst)
        level = logging.WARNING if (timed_out or refused) else logging.DEBUG
        log.log(level, "bookie %s: request rate now %.0f/s (%s)", self.bookie_id, new, _why(timed_out, refused))

    def _arm_sweep(self, conn: _Connection, when: float) -> None:
        if conn.sweep_timer is not None:
            conn.sweep_timer.cancel()
        conn.sweep_at = when
        delay = max(0.0, when - time.monotonic())
        conn.sweep_timer = asyncio.get_running_loop().call_later(delay, self._sweep, conn)

    def _sweep(self, conn: _Connection) -> None:
        """Expire every pending request whose deadline has come; arm for the next one."""
        conn.sweep_timer, conn.sweep_at = None, math.inf
        due = time.monotonic() + SWEEP_SLACK
        later = math.inf
        for txn, p in list(conn.pending.items()):
            if p.deadline <= due:
                self._expire(conn, txn, p.limit)
            elif p.deadline < later:
                later = p.deadline
        if later < math.inf and not conn.closing:
            self._arm_sweep(conn, later)

    def _expire(self, conn: _Connection, txn: int, limit: float) -> None:
        p = conn.pending.pop(txn, None)
        if p is None or p.done:
            return
        self.stats.timeouts += 1
        conn.expect_late_reply(txn, p.op)
        p.resolve(_TimedOut(f"bookie {self.bookie_id}: no reply to {p.op.name} within {limit:g} s"))
        # GET_LIST timeouts are excluded: DbLedgerStorage bookies never answer them on a healthy link.
        if p.op is not Op.GET_LIST_OF_ENTRIES_OF_LEDGER:
            self._count_silence(conn, p.sent_at)

    def _count_silence(self, conn: _Connection, since: float) -> None:
        """No reply at all since `since`: count towards "the connection is dead". Only whole replies
        count as life: a peer trickling bytes of a frame it never finishes is as dead as a silent one."""
        if conn.last_reply >= since or conn.closing:
            return
        conn.silent_timeouts += 1
        if conn.silent_timeouts >= self.config.dead_after_timeouts:
            conn.fail(f"{conn.silent_timeouts} requests timed out with no reply received; reconnecting")

    def _on_reply(self, conn: _Connection, reply: Reply) -> None:
        # Every frame must use up something this connection waits for: a pending request, one late reply
        # of an expired one, or a pending request's one tolerated mismatch. Anything else (a replayed
        # reply, a txn never sent) is not a bookie talking: close, so a flood cannot keep the loop busy.
        p = conn.pending.get(reply.txn_id)
        if p is None:
            if reply.op is Op.START_TLS and reply.txn_id == conn.start_tls_txn:
                # The bookie's second START_TLS reply (§1.5 step 6): its side of the handshake failed,
                # or its auth plugin did not accept us after it.
                conn.fail(
                    f"the bookie rejected the TLS session after the handshake ({self._status_name(reply)}: its "
                    "auth plugin, e.g. certificate roles, did not accept our certificate)"
                )
                return
            if conn.expired.pop(reply.txn_id, None) is not None:
                self.stats.late_replies += 1  # its request timed out or was cancelled: drop quietly
                conn.last_reply = time.monotonic()
                conn.silent_timeouts = 0
                if reply.op is Op.GET_LIST_OF_ENTRIES_OF_LEDGER and reply.status is Status.EOK:
                    # Slow, not unable: undo an UNSUPPORTED concluded from that timeout.
                    self.entry_list_support = Capability.SUPPORTED
                return
            if conn.first_txn <= reply.txn_id < self._next_txn:
                raise P.ProtocolError(
                    f"second reply for txn id {reply.txn_id} (or a late reply too late to be remembered)"
                )
            raise P.ProtocolError(f"reply for txn id {reply.txn_id}, which was never sent on this connection")
        if p.op is not reply.op:
            if p.mismatched:
                raise P.ProtocolError(
                    f"second reply with the wrong operation ({reply.op.name}) for txn {reply.txn_id} ({p.op.name})"
                )
            p.mismatched = True
            self.stats.mismatched_replies += 1  # (txnId, operation) does not match: not our reply
            log.debug(
                "bookie %s: reply txn %d is %s, expected %s; dropped",
                self.bookie_id,
                reply.txn_id,
                reply.op.name,
                p.op.name,
            )
            return
        del conn.pending[reply.txn_id]
        conn.last_reply = time.monotonic()
        conn.silent_timeouts = 0
        self.stats.replies += 1
        if reply.op is not Op.START_TLS:  # the upgrade's answer does not prove the link works yet
            conn.valid_replies += 1
            if conn.valid_replies == 1:
                self._failures = 0
        p.resolve(reply)

    def _on_connection_failed(self, conn: _Connection, message: str) -> None:
        self.stats.last_error = message
        if conn.valid_replies == 0 and not self._closed:
            # The link never worked: treat like a failed connect so reconnects back off.
            self._schedule_retry(message)
        if self._conn is conn:
            self._conn = None
            self.stats.connection_losses += 1
        # Our own close of the pool is routine (one line per bookie at the end of every check): debug.
        log.log(logging.DEBUG if self._closed else logging.INFO, "%s", message)

    def _schedule_retry(self, message: str) -> None:
        self._failures += 1
        c = self.config
        delay = min(c.backoff_max, c.backoff_initial * c.backoff_multiplier ** (self._failures - 1))
        self._retry_at = time.monotonic() + delay * random.uniform(0.8, 1.2)
        self.stats.last_error = message

    async def _connect(self) -> _Connection | str:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.config.connect_timeout):
                resolved = self._resolver(self.bookie_id)
                host, port = await resolved if inspect.isawaitable(resolved) else resolved
                conn = _Connection(self, self._next_txn)
                await loop.create_connection(lambda: conn, host, port)
        except TimeoutError:
            return self._connect_failed(f"connect timed out after {self.config.connect_timeout:g} s")
        except (OSError, ValueError, LookupError) as exc:
            return self._connect_failed(f"cannot connect: {exc}")
        except Exception as exc:  # a resolver may raise anything; it is still "cannot reach"
            return self._connect_failed(f"cannot resolve or connect: {exc!r}")
        if self._closed:
            conn.fail("client closed")
            return f"bookie {self.bookie_id}: client closed"
        if self.config.tls is not None:
            problem = await self._start_tls(conn, self.config.tls, host)
            if problem is not None:
                message = f"bookie {self.bookie_id}: TLS: {problem}"
                if message != self._last_tls_error:  # once per distinct reason, not every retry
                    log.warning("%s", message)
                self._last_tls_error = message
                self.stats.connect_failures += 1
                if conn.closing:
                    # Already failed by the peer (the retry is scheduled): requests refused while backing
                    # off name this reason, not the bare reset that ended the link.
                    self.stats.last_error = message
                    return message
                conn.fail(f"TLS: {problem}")  # the link never worked: schedules the retry
                self.stats.last_error = message
                return message
            self._last_tls_error = None
        self.stats.connects += 1
        self._conn = conn
        return conn

    async def _exchange(self, conn: _Connection, op: Op, request: P.Request, limit: float) -> Reply | str:
        """One request on a connection that is not yet handed out (the TLS upgrade and its check)."""
        frame = P.encode_request(request)  # the gate holds here too
        txn = request.header.txnId
        if conn.transport is None or conn.closing:
            return "connection closed"
        fut: asyncio.Future[Reply | str] = asyncio.get_running_loop().create_future()
        conn.pending[txn] = _Pending(op, fut, time.monotonic())
        conn.transport.write(frame)
        self.stats.sent += 1
        try:
            async with asyncio.timeout(limit):
                return await fut
        except TimeoutError:
            return f"no reply to {op.name} within {limit:g} s"
        finally:
            conn.pending.pop(txn, None)

    def _take_txn(self) -> int:
        txn = self._next_txn
        self._next_txn += 1
        return txn

    async def _start_tls(self, conn: _Connection, tls: BookieTls, host: str) -> str | None:
        """Upgrade a fresh connection to TLS; None when done, else why not (the caller closes it)."""
        limit = tls.handshake_timeout
        reply = await self._exchange(conn, Op.START_TLS, P.start_tls_request(self._take_txn()), limit)
        if isinstance(reply, str):
            return f"START_TLS failed: {reply.removeprefix(f'bookie {self.bookie_id}: ')}"
        if reply.status is Status.EBADREQ:
            return "the bookie refused the upgrade (START_TLS answered EBADREQ: TLS is not configured on it)"
        if reply.status is not Status.EOK:
            return f"the bookie refused the upgrade (START_TLS answered {self._status_name(reply)})"
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
        ping = await self._exchange(conn, Op.GET_BOOKIE_INFO, P.bookie_info_request(self._take_txn(), 0), limit)
        if isinstance(ping, str):
            why = ping.removeprefix(f"bookie {self.bookie_id}: ")
            return f"the TLS session failed before its first answer{_alert_meaning(why, tls)}: {why}"
        if ping.status is Status.EUA:
            return "the bookie did not authorise us after the handshake (EUA: its auth plugin, e.g. certificate roles, refused our certificate)"
        if ping.status is not Status.EOK:
            return f"the first request over TLS was answered {self._status_name(ping)}"
        return None

    def _connect_failed(self, reason: str) -> str:
        message = f"bookie {self.bookie_id}: {reason}"
        self.stats.connect_failures += 1
        self._schedule_retry(message)
        return message

    def _read_entry_result(self, reply: Reply | str, elapsed: float, lid: int, entry_id: int) -> ReadEntryResult:
        """A READ_ENTRY reply judged: PRESENT (with its body), ABSENT, or UNKNOWN naming why. Shared by the
        read-only client and the recovery role's fencing reads, whose replies are the same."""
        base = _EntryCall(bookie_id=self.bookie_id, elapsed=elapsed, ledger_id=lid, entry_id=entry_id)
        if isinstance(reply, str):
            return ReadEntryResult(outcome=Outcome.UNKNOWN, status=None, error=reply, **base)
        if reply.status is None:
            return ReadEntryResult(outcome=Outcome.UNKNOWN, status=None, error=self._explain(reply), **base)
        sub = reply.sub
        if sub is None:  # only top-level error paths (EUA, EBADREQ, ...) omit the sub-response
            return ReadEntryResult(outcome=Outcome.UNKNOWN, status=reply.status, error=self._explain(reply), **base)
        if sub.ledgerId != lid or sub.entryId != entry_id:
            return ReadEntryResult(
                outcome=Outcome.UNKNOWN,
                status=reply.status,
                error=(
                    f"bookie {self.bookie_id} answered for ledger {sub.ledgerId} entry "
                    f"{sub.entryId}, asked {lid}/{entry_id}"
                ),
                **base,
            )
        if reply.status in ABSENT_STATUSES:
            return ReadEntryResult(outcome=Outcome.ABSENT, status=reply.status, error=None, **base)
        if reply.status is not Status.EOK:
            return ReadEntryResult(outcome=Outcome.UNKNOWN, status=reply.status, error=self._explain(reply), **base)
        if not sub.HasField("body"):
            return ReadEntryResult(
                outcome=Outcome.UNKNOWN,
                status=reply.status,
                error=f"bookie {self.bookie_id} answered EOK without a body",
                **base,
            )
        return ReadEntryResult(
            outcome=Outcome.PRESENT,
            status=reply.status,
            error=None,
            body=sub.body,
            max_lac=sub.maxLAC if sub.HasField("maxLAC") else None,
            **base,
        )

    def _status_name(self, reply: Reply) -> str:
        return reply.status.name if reply.status is not None else f"unknown({reply.raw_status})"

    def _explain(self, reply: Reply) -> str:
        if reply.problem:
            return f"bookie {self.bookie_id}: {reply.problem}"
        return f"bookie {self.bookie_id} answered {self._status_name(reply)}"


class BookieClient(BookieTransport):
    """Read-only client for one bookie. Safe to share between many concurrent tasks.

    Its gate is `protocol.encode_request`, fixed by the class (not a parameter): nothing the auditor
    holds can make it send a write or a fence.
    """

    def _encode(self, request: Message | P.GatedFrame) -> bytes:
        if type(request) is P.GatedFrame:  # GET_LIST / READ_ENTRY, proven of the one shape the gate passes
            return P.gated_bytes(request)
        if not isinstance(request, P.Request):
            raise P.UnsafeRequestError(f"not a bookie Request: {type(request).__name__}")
        return P.encode_request(request)  # raises UnsafeRequestError before anything is written

    # ----- public operations ------------------------------------------------------------------------
    async def read_entry(
        self, ledger_id: int | LedgerId, entry_id: int, *, timeout: float | None = None
    ) -> ReadEntryResult:
        """READ_ENTRY without fence or long poll. entry_id -1 reads the bookie's highest entry."""
        lid = _wire_ledger_id(ledger_id)
        P.check_entry_id(entry_id)  # a bad argument raises here, before anything is queued
        reply, elapsed = await self._call(Op.READ_ENTRY, lambda t: P.read_entry_request(t, lid, entry_id), timeout)
        return self._read_entry_result(reply, elapsed, lid, entry_id)

    async def read_last_entry(self, ledger_id: int | LedgerId, *, timeout: float | None = None) -> ReadEntryResult:
        return await self.read_entry(ledger_id, -1, timeout=timeout)

    async def read_entries(
        self, ledger_id: int | LedgerId, entry_ids: list[int], *, timeout: float | None = None
    ) -> list[ReadEntryResult]:
        """Many READ_ENTRYs pipelined on the one connection (bounded by the window and rate limit): all
        queued at once, no task per entry."""
        lid = _wire_ledger_id(ledger_id)
        return await self.read_entries_of([(lid, e) for e in entry_ids], timeout=timeout)

    async def read_entries_of(
        self, items: list[tuple[int, int]] | list[tuple[LedgerId, int]], *, timeout: float | None = None
    ) -> list[ReadEntryResult]:
        """READ_ENTRY of many (ledger, entry) pairs, of any ledgers, in one batch (`_batch`): results in
        order."""
        pairs = [(_wire_ledger_id(lid), e) for lid, e in items]
        for _, e in pairs:
            P.check_entry_id(e)  # a bad argument raises here, before anything is queued
        builds: list[Build] = [functools.partial(_read_entry_request, ledger_id=lid, entry_id=e) for lid, e in pairs]
        values = await self._batch(Op.READ_ENTRY, builds, timeout)
        return [self._read_entry_result(r, elapsed, lid, e) for (r, elapsed), (lid, e) in zip(values, pairs)]

    async def _batch(self, op: Op, builds: list[Build], timeout: float | None) -> list[tuple[Reply | str, float]]:
        """Send many requests of one operation and wait for all their outcomes, in order: queued together
        (bounded by the window and the rate limit as ever), one wake-up of the caller when the last is in.
        Cancelling withdraws every request not answered yet."""
        batch, reqs = self._submit_many(op, builds, timeout)
        try:
            await batch.future
        except BaseException:
            batch.future.cancel()  # the requests still queued are skipped, the sent ones withdrawn
            for req in reqs:
                self._withdrawn(req)
            raise
        return cast(list[tuple[Reply | str, float]], batch.values)

    async def read_lac(self, ledger_id: int | LedgerId, *, timeout: float | None = None) -> ReadLacResult:
        lid = _wire_ledger_id(ledger_id)
        reply, elapsed = await self._call(Op.READ_LAC, lambda t: P.read_lac_request(t, lid), timeout)
        base = _LedgerCall(bookie_id=self.bookie_id, elapsed=elapsed, ledger_id=lid)
        if isinstance(reply, str):
            return ReadLacResult(outcome=Outcome.UNKNOWN, status=None, error=reply, **base)
        sub = reply.sub
        lac_body = sub.lacBody if sub is not None and sub.HasField("lacBody") else None
        last = sub.lastEntryBody if sub is not None and sub.HasField("lastEntryBody") else None
        if sub is not None and sub.ledgerId != lid:
            return ReadLacResult(
                outcome=Outcome.UNKNOWN,
                status=reply.status,
                error=f"bookie {self.bookie_id} answered READ_LAC for ledger {sub.ledgerId}, asked {lid}",
                **base,
            )
        if lac_body is not None or last is not None:
            # Bodies are the bookie's data whatever the status says (one of its two reads may have failed).
            note = None if reply.status is Status.EOK else f"status {self._status_name(reply)} with data"
            return ReadLacResult(
                outcome=Outcome.PRESENT,
                status=reply.status,
                error=note,
                lac_body=lac_body,
                last_entry_body=last,
                **base,
            )
        if reply.status in ABSENT_STATUSES and sub is not None:
            # READ_LAC says ENOENTRY for unknown ledgers and also when its reads failed (spec §3.5).
            return ReadLacResult(
                outcome=Outcome.ABSENT,
                status=reply.status,
                error=None,
                conclusive=reply.status is Status.ENOLEDGER,
                **base,
            )
        return ReadLacResult(outcome=Outcome.UNKNOWN, status=reply.status, error=self._explain(reply), **base)

    async def get_bookie_info(
        self,
        requested: int = int(P.BookieInfoFlags.TOTAL_DISK_CAPACITY | P.BookieInfoFlags.FREE_DISK_SPACE),
        *,
        timeout: float | None = None,
    ) -> BookieInfoResult:
        reply, elapsed = await self._call(Op.GET_BOOKIE_INFO, lambda t: P.bookie_info_request(t, requested), timeout)
        if isinstance(reply, str):
            return BookieInfoResult(self.bookie_id, Outcome.UNKNOWN, None, reply, elapsed)
        if reply.status is not Status.EOK:
            return BookieInfoResult(self.bookie_id, Outcome.UNKNOWN, reply.status, self._explain(reply), elapsed)
        sub = reply.sub
        return BookieInfoResult(
            self.bookie_id,
            Outcome.PRESENT,
            reply.status,
            None,
            elapsed,
            sub.totalDiskCapacity if sub.HasField("totalDiskCapacity") else None,
            sub.freeDiskSpace if sub.HasField("freeDiskSpace") else None,
        )

    async def ping(self, *, timeout: float | None = None) -> BookieInfoResult:
        """GET_BOOKIE_INFO asking for nothing: the cheapest request that proves the bookie answers."""
        return await self.get_bookie_info(0, timeout=timeout)

    async def get_entry_list(self, ledger_id: int | LedgerId, *, timeout: float | None = None) -> EntryListResult:
        """GET_LIST_OF_ENTRIES_OF_LEDGER. On a bookie known not to answer it (DbLedgerStorage) this
        returns UNKNOWN with `unsupported=True` at once, without sending anything."""
        return await self.send_get_entry_list(ledger_id, timeout=timeout).result()

    def send_get_entry_list(self, ledger_id: int | LedgerId, *, timeout: float | None = None) -> Sent[EntryListResult]:
        """`get_entry_list`, sent now and awaited later (`await sent.result()`): a ledger's requests to all
        its bookies go out before the first answer is awaited, with no task per request."""
        lid = _wire_ledger_id(ledger_id)
        if self.entry_list_support is Capability.UNSUPPORTED:
            return Sent.ready(
                EntryListResult(
                    self.bookie_id, Outcome.UNKNOWN, None, self._unsupported_message(), 0.0, lid, None, True
                )
            )
        fut = self._submit(Op.GET_LIST_OF_ENTRIES_OF_LEDGER, lambda t: P.entry_list_request(t, lid), timeout)
        return Sent(fut, functools.partial(self._entry_list_result, lid))

    async def get_entry_lists(
        self,
        ledger_ids: list[int] | list[LedgerId],
        *,
        timeout: float | None = None,
        shares: Sequence[StripedSet | None] | None = None,
    ) -> list[EntryListResult]:
        """`get_entry_list` of many ledgers at once, in order: queued together (bounded by the window and
        the rate limit as ever), one wake-up of the caller when the last answer is in, and small answers
        judged without a coroutine each. Cancelling withdraws every request not answered yet. `shares`:
        per ledger, the entries this bookie should hold; a list that is exactly that is recognised
        without the general decode (`decode_share`: the same EntryList, its `share` set)."""
        lids = [_wire_ledger_id(x) for x in ledger_ids]
        if self.entry_list_support is Capability.UNSUPPORTED:
            return [await self.send_get_entry_list(lid, timeout=timeout).result() for lid in lids]
        builds: list[Build] = [functools.partial(_entry_list_request, ledger_id=lid) for lid in lids]
        values = await self._batch(Op.GET_LIST_OF_ENTRIES_OF_LEDGER, builds, timeout)
        out: list[EntryListResult] = []
        for i, (lid, (reply, elapsed)) in enumerate(zip(lids, values)):
            judged = self._entry_list_judged(lid, reply, elapsed, shares[i] if shares is not None else None)
            out.append(judged if judged is not None else await self._entry_list_result(lid, reply, elapsed))
        return out

    def _entry_list_judged(
        self, lid: int, reply: Reply | str, elapsed: float, share: StripedSet | None = None
    ) -> EntryListResult | None:
        """`_entry_list_result` without awaiting, for the common answers: an EOK list small enough to decode
        in one step (at once when it is exactly `share`), ENOLEDGER. None: the answer needs the awaited
        path (no reply, a large list, ...)."""
        if isinstance(reply, str) or reply.status is not Status.EOK and reply.status is not Status.ENOLEDGER:
            return None
        sub = reply.sub
        if sub is None or sub.ledgerId != lid:
            return None
        if reply.status is Status.ENOLEDGER:
            return EntryListResult(self.bookie_id, Outcome.ABSENT, reply.status, None, elapsed, lid, EntryList())
        if not sub.HasField("availabilityOfEntriesOfLedger"):
            return None
        raw = sub.availabilityOfEntriesOfLedger
        if len(raw) > SMALL_ENTRY_LIST:
            return None
        entries = decode_share(raw, share) if share is not None else None
        if entries is None:
            try:
                entries = EntryList.decode(raw)
            except EntryListError:
                return None  # the awaited path says what is wrong with it
        self.entry_list_support = Capability.SUPPORTED
        return EntryListResult(self.bookie_id, Outcome.PRESENT, reply.status, None, elapsed, lid, entries)

    async def _entry_list_result(self, lid: int, reply: Reply | str, elapsed: float) -> EntryListResult:
        if isinstance(reply, str):
            # Only silence is evidence; a broken link (e.g. a restart) says nothing about the capability.
            unsupported = self._entry_lists_unsupported() or (
                isinstance(reply, _TimedOut) and await self._maybe_unsupported(reply)
            )
            error = f"{reply}; {self._unsupported_message()}" if unsupported else reply
            return EntryListResult(self.bookie_id, Outcome.UNKNOWN, None, error, elapsed, lid, None, unsupported)
        sub = reply.sub
        if reply.status is None or sub is None:
            return EntryListResult(self.bookie_id, Outcome.UNKNOWN, reply.status, self._explain(reply), elapsed, lid)
        if sub.ledgerId != lid:
            return EntryListResult(
                self.bookie_id,
                Outcome.UNKNOWN,
                reply.status,
                f"bookie {self.bookie_id} listed ledger {sub.ledgerId}, asked {lid}",
                elapsed,
                lid,
            )
        if reply.status is Status.ENOLEDGER:
            return EntryListResult(self.bookie_id, Outcome.ABSENT, reply.status, None, elapsed, lid, EntryList())
        if reply.status is not Status.EOK:
            return EntryListResult(self.bookie_id, Outcome.UNKNOWN, reply.status, self._explain(reply), elapsed, lid)
        self.entry_list_support = Capability.SUPPORTED
        if not sub.HasField("availabilityOfEntriesOfLedger"):
            return EntryListResult(
                self.bookie_id,
                Outcome.UNKNOWN,
                reply.status,
                f"bookie {self.bookie_id} answered EOK without the entry list",
                elapsed,
                lid,
            )
        try:
            # Stepwise: a large list (up to the frame limit) must not hold the event loop for long.
            entries = await finish(EntryList.decode_steps(sub.availabilityOfEntriesOfLedger))
        except EntryListError as exc:
            return EntryListResult(
                self.bookie_id,
                Outcome.UNKNOWN,
                reply.status,
                f"bookie {self.bookie_id} sent an invalid entry list: {exc}",
                elapsed,
                lid,
            )
        return EntryListResult(self.bookie_id, Outcome.PRESENT, reply.status, None, elapsed, lid, entries)

    async def probe_entry_list_support(self, ledger_id: int | LedgerId, *, timeout: float | None = None) -> Capability:
        """Find out quickly whether this bookie answers GET_LIST for a ledger it is KNOWN to hold.

        A short GET_LIST; an answer means SUPPORTED; silence while a GET_BOOKIE_INFO ping is answered
        means UNSUPPORTED (DbLedgerStorage). ENOLEDGER says nothing (the bookie does not hold that
        ledger), nor does an unreachable bookie: the capability then stays UNKNOWN.
        """
        if self.entry_list_support is not Capability.UNKNOWN:
            return self.entry_list_support
        await self.get_entry_list(ledger_id, timeout=timeout or self.config.entry_list_probe_timeout)
        return self.entry_list_support

    async def auth_probe(self, *, timeout: float | None = None) -> AuthProbeResult:
        """AUTH naming AuthDisabledPlugin: harmless; tells whether the bookie runs without auth."""
        reply, elapsed = await self._call(Op.AUTH, lambda t: P.auth_probe_request(t), timeout)
        if isinstance(reply, str):
            return AuthProbeResult(self.bookie_id, Outcome.UNKNOWN, None, reply, elapsed)
        if reply.status is not Status.EOK:
            return AuthProbeResult(self.bookie_id, Outcome.UNKNOWN, reply.status, self._explain(reply), elapsed)
        return AuthProbeResult(self.bookie_id, Outcome.PRESENT, reply.status, None, elapsed, reply.sub.authPluginName)

    def reset_capabilities(self) -> None:
        """Forget what was learnt about the bookie (e.g. after it was reconfigured and restarted)."""
        self.entry_list_support = Capability.UNKNOWN

    def _entry_lists_unsupported(self) -> bool:
        """Known not to answer GET_LIST (read afresh: another request may have found out meanwhile)."""
        return self.entry_list_support is Capability.UNSUPPORTED

    async def _maybe_unsupported(self, failure: str) -> bool:
        """After a GET_LIST got no reply: if the bookie still answers a ping, it is one that never
        answers GET_LIST (DbLedgerStorage). Returns True when that is now known."""
        if self.entry_list_support is Capability.UNSUPPORTED:
            return True
        if self.entry_list_support is Capability.SUPPORTED:
            return False
        if self._liveness_check is None or self._liveness_check.done():
            self._liveness_check = asyncio.ensure_future(self._alive())
        alive = await asyncio.shield(self._liveness_check)
        if alive and self.entry_list_support is Capability.UNKNOWN:
            self.entry_list_support = Capability.UNSUPPORTED
            log.warning(
                "bookie %s does not answer GET_LIST_OF_ENTRIES_OF_LEDGER (%s); callers must read entries",
                self.bookie_id,
                failure,
            )
        return self.entry_list_support is Capability.UNSUPPORTED

    async def _alive(self) -> bool:
        return (await self.ping(timeout=self.config.liveness_timeout)).present

    def _unsupported_message(self) -> str:
        return (
            f"bookie {self.bookie_id} does not answer GET_LIST_OF_ENTRIES_OF_LEDGER for ledgers it holds "
            "(DbLedgerStorage); read the entries instead"
        )


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


def _why(timed_out: bool, refused: bool) -> str:
    if refused:
        return "it answered ETOOMANYREQUESTS"
    if timed_out:
        return "a request timed out"
    return "adapting to its latency"


def _read_entry_request(txn: int, ledger_id: int, entry_id: int) -> P.GatedFrame:
    return P.read_entry_frame(txn, ledger_id, entry_id)


def _entry_list_request(txn: int, ledger_id: int) -> P.GatedFrame:
    return P.entry_list_frame(txn, ledger_id)


def _wire_ledger_id(ledger_id: int | LedgerId) -> int:
    if isinstance(ledger_id, LedgerId):
        if ledger_id.scope != 0:
            raise ValueError(f"ledger {ledger_id} has a scope id; the bookie v3 protocol carries 64-bit ids only")
        return ledger_id.ledger
    if isinstance(ledger_id, bool) or not isinstance(ledger_id, int) or not 0 <= ledger_id <= P.MAX_LONG:
        raise ValueError(f"ledger id {ledger_id!r} is not in 0..2^63-1")
    return ledger_id


def parse_bookie_id_address(bookie_id: str) -> Address:
    """The legacy reading of a bookie id as `host:port` (spec §7). Only a fallback: since BookKeeper
    4.12 ids can be arbitrary names and must be resolved through ZooKeeper registrations."""
    host, sep, port = bookie_id.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bookie id {bookie_id!r} is not host:port; it needs a resolver")
    return host, int(port)
