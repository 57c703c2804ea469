"""A requests-per-second limiter shared by the bookie client and the ZooKeeper bridge."""

from __future__ import annotations

import asyncio
import time


class TokenBucket:
    """Requests-per-second limiter. Reservations may drive the level negative; each caller sleeps
    for its share of the deficit, so waiters are served in arrival order at the configured rate."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = rate
        self.capacity = max(1.0, burst if burst is not None else rate)
        self._tokens = self.capacity
        self._stamp = time.monotonic()

    def reserve(self) -> float:
        """Take one token; return how long to wait before using it."""
        now = time.monotonic()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    async def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            await asyncio.sleep(wait)
