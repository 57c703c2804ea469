"""A token-bucket limiter: requests per second (bookie client, ZooKeeper bridge) or bytes per second (repair).

Kept over aiolimiter: it holds a small-burst rate aiolimiter reaches a third of, at 2.6x less CPU per
uncontended acquire (bench/bench_ratelimit.py, docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import time


class TokenBucket:
    """Units-per-second limiter (requests, or bytes when callers take `tokens` at once).
    Reservations may drive the level negative; each caller sleeps for its share of the deficit, so
    waiters are served in arrival order at the configured rate; a reservation larger than the bucket
    (one big entry) simply waits longer."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = rate
        self.capacity = max(1.0, burst if burst is not None else rate)
        self._tokens = self.capacity
        self._stamp = time.monotonic()

    def retune(self, rate: float, burst: float | None = None) -> None:
        """A new rate (and burst, by default one second's worth), from now on: what accrued so far at
        the old rate is kept, up to the new burst. Waiters already sleeping keep their wait."""
        now = time.monotonic()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        self.rate = rate
        self.capacity = max(1.0, burst if burst is not None else rate)
        self._tokens = min(self._tokens, self.capacity)

    def backlogged(self) -> bool:
        """Reservations are waiting beyond what has accrued: the limiter is holding callers back now."""
        return self._tokens + (time.monotonic() - self._stamp) * self.rate < 0

    def reserve(self, tokens: float = 1.0) -> float:
        """Take `tokens` tokens; return how long to wait before using them."""
        now = time.monotonic()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        self._tokens -= tokens
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def try_take(self, tokens: float = 1.0) -> float:
        """Take `tokens` now if they have accrued (returns 0.0); else take nothing and return how long until
        they will have. For a sender that takes its token as it sends, so a rate changed meanwhile (retune)
        paces what is still waiting, unlike a reservation made when the request was queued."""
        now = time.monotonic()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if self._tokens >= tokens:
            self._tokens -= tokens
            return 0.0
        return (tokens - self._tokens) / self.rate

    async def acquire(self, tokens: float = 1.0) -> None:
        wait = self.reserve(tokens)
        if wait > 0:
            await asyncio.sleep(wait)
