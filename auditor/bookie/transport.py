"""The transport of a bookie client (`BookieTransport`): one TCP connection carrying many pipelined requests.

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
  a ledger's requests to all its bookies go out before its first answer is awaited. With `adaptive` the bucket's rate (below
  that cap) and the window (up to the policy's window cap) move on the bookie's own signals
  (auditor/aio/adaptive.py): up while it answers fast and they hold requests back, halved on
  ETOOMANYREQUESTS or a timeout, lowered while its answers are slow. A request takes its token as it is sent.
* Each request has its own timeout, which also bounds waiting for a connection that does not drain (a
  peer that stops reading). Timeouts do not close the connection (a bookie answers late, or never —
  DbLedgerStorage and GET_LIST — without being broken). Only when several requests in a row time out
  with no reply received does the client assume the connection is dead and reconnect; bytes that never
  complete a reply (a trickling peer) do not count as life.
* Anything that is not the protocol (bad length, garbage, missing required fields, an unknown txn)
  closes the connection with an error naming the bookie; every request in flight on it ends UNKNOWN.
* Connecting is retried with exponential backoff; while backing off, requests fail fast as UNKNOWN.
* With TLS configured every connection is upgraded first (tls.py) and never used in plaintext.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import math
import random
import time
from dataclasses import dataclass
from typing import Any, Self, TypedDict, cast

from google.protobuf.message import Message

from auditor.aio.adaptive import AdaptiveRate
from auditor.aio.ratelimit import TokenBucket
from auditor.logging import get_logger

from . import protocol as P
from .config import Address, BookieClientConfig, Resolver, parse_bookie_id_address
from .connection import V3, WireCodec, _Connection
from .pending import Build, _BadReply, _Batch, _Request, _TimedOut
from .protocol import Op, Reply, Status
from .results import ABSENT_STATUSES, Capability, Outcome, ReadEntryResult
from .tls import start_tls

log = get_logger("auditor.bookie.transport")


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


# A deadline this close is treated as come (timers may fire a little early): no re-arm for a millisecond.
SWEEP_SLACK = 0.002

# The modules whose BookieTransport subclasses may encode requests: the auditor's read-only clients (client.py
# on v3, batch.py's v2 batch reader), the repair role's recovery-add client and its fencing client for opt-in
# ledger recovery (docs/repair.md, "The write gate", "Recovering open ledgers").
_GATE_MODULES = frozenset(
    {"auditor.bookie.client", "auditor.bookie.batch", "auditor.repair.writer", "auditor.repair.fencing"}
)


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
    is written. `BookieClient` (client.py) is the auditor's read-only client (`protocol.encode_request`); the
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
        self._slots = 0  # requests on the wire (at most self._window)
        self._pump_scheduled = False
        self._pump_timer: asyncio.TimerHandle | None = None
        self._bucket: TokenBucket | None = None
        self._adaptive: AdaptiveRate | None = None
        self._window = self.config.max_in_flight  # requests on the wire at once; adaptive: moves up to its cap
        if self.config.rate_limit:
            rate = self.config.rate_limit
            if self.config.adaptive is not None:
                self._adaptive = AdaptiveRate(self.config.adaptive, rate, time.monotonic(), self._window)
                rate, self._window = self._adaptive.rate, self._adaptive.window
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

    @property
    def adapted_window(self) -> int | None:
        """The adaptive window it has reached (None: not adaptive), carried like `adapted_rate`."""
        return self._adaptive.window if self._adaptive is not None else None

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

    def _new_codec(self) -> WireCodec:
        """How a new connection decodes and matches replies: v3 here; the v2 batch reader has its own."""
        return V3

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

    def _limit(self, timeout: float | None) -> float:
        return self.config.request_timeout if timeout is None else timeout

    def _enqueue(self, req: _Request) -> _Request:
        """Queue a request. It takes its token from the rate limiter as it is sent (`_pump`), not now: a
        turn reserved when queued would pace a whole queued batch at the rate of that moment, however the
        adaptive rate moved since (measured: 4,000 reads queued at 50/s ran at 51/s while the rate rose
        to its 1,000 cap)."""
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
        note_sent = conn.codec.sent if conn is not None else None
        now = time.monotonic()
        while queue:
            req = queue[0]
            if req.settled:  # withdrawn while queued
                queue.popleft()
                continue
            if self._slots >= self._window:
                if self._adaptive is not None:
                    self._adaptive.window_full()
                break  # a reply, timeout or withdrawal frees a slot and pumps again
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
            if self._bucket is not None:
                wait = self._bucket.try_take()
                if wait > 0:
                    if self._adaptive is not None:
                        self._adaptive.waited()
                    self._pump_at(now + wait)
                    break
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
            if note_sent is not None:
                note_sent(txn, frame)
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
            # The bookie's latency: up to when its reply's bytes reached us, not our decoding since.
            got = req.conn.last_rx if req.conn is not None and isinstance(value, Reply) else req.sent_at + elapsed
            self._adapt(req.op, value, max(0.0, got - req.sent_at))
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
        change = self._adaptive.observe(latency if answered else None, timed_out or refused, time.monotonic())
        if change is None:
            return
        self._bucket.retune(change.rate, self.config.rate_burst)
        self._window = change.window
        if self._queue:
            self._schedule_pump()  # what waited for a token or a place may go at the new limits
        level = logging.WARNING if (timed_out or refused) else logging.DEBUG
        log.log(
            level,
            "bookie %s: request rate now %.0f/s, window %d (%s)",
            self.bookie_id,
            change.rate,
            change.window,
            _why(timed_out, refused),
        )

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
            problem = await start_tls(self, conn, self.config.tls, host)
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

    def _take_txn(self) -> int:
        txn = self._next_txn
        self._next_txn += 1
        return txn

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
            return _BadReply(f"bookie {self.bookie_id}: {reply.problem}")
        return _BadReply(f"bookie {self.bookie_id} answered {self._status_name(reply)}")


def _why(timed_out: bool, refused: bool) -> str:
    if refused:
        return "it answered ETOOMANYREQUESTS"
    if timed_out:
        return "a request timed out"
    return "adapting to its latency"
