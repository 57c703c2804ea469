"""What waits for a bookie's reply: a submitted request (`_Request`), from its queue to its outcome; many
requests' outcomes gathered with one future (`_Batch`); the connection's own exchange (`_Pending`); and
`Sent`, a request on its way whose judged outcome is awaited later."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from google.protobuf.message import Message

from . import protocol as P
from .protocol import Op, Reply

if TYPE_CHECKING:
    from .connection import _Connection
    from .transport import BookieTransport

# What a queued request is built from at its turn, given its txn id: a message for the client's gate, or a
# frame the read-only gate's module wrote already (`protocol.GatedFrame`).
Build = Callable[[int], "Message | P.GatedFrame"]


class _TimedOut(str):
    """The failure message of a request that got no reply in time (as opposed to a broken link)."""


class _BadReply(str):
    """Why a reply that came could not be used (no known status, a problem decoding it): the bookie answered,
    so neither a timeout nor a broken link (`results.error_kind`)."""


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
