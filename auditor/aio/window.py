"""A counting window: at most `size` holders at once, waiters served in arrival order.

What `asyncio.Semaphore` does, for the bookie client's per-connection request window and the ZooKeeper
bridge's reads in flight, without its cost under contention: on Python 3.11 every `acquire` calls
`locked()`, which scans all waiters, and a scan keeps hundreds of requests waiting on one bookie's window
(the profile in docs/benchmarks.md). Here a release hands its slot straight to the first waiter still
waiting, so taking a free slot and handing one over are both O(1).
"""

from __future__ import annotations

import asyncio
import collections
from types import TracebackType


class Window:
    __slots__ = ("_waiters", "held", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a window holds at least one")
        self.size = size
        self.held = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def try_acquire(self) -> bool:
        """Take a slot now if one is free and nobody waits for one (no overtaking); False otherwise."""
        if self.held < self.size and not self._waiters:
            self.held += 1
            return True
        return False

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed to us just as we were cancelled: pass it on
            raise

    def release(self) -> None:
        """Give a slot back: to the first waiter still waiting (the slot stays held), else to the pool."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():  # a cancelled waiter is done: skip it
                waiter.set_result(None)
                return
        if self.held <= 0:
            raise RuntimeError("window released more often than acquired")
        self.held -= 1

    @property
    def waiting(self) -> int:
        return sum(1 for w in self._waiters if not w.done())

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
