"""The delayed re-check queue.

A ledger whose check could not be completed (a bookie did not answer, a read timed out) is not reported:
it is put here and checked again after a delay, up to a number of attempts. Only what is still wrong
after the re-check is reported; what is still unknown after the last attempt becomes its own finding
(e.g. `bookie_unreachable`) decided by the caller.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(order=True)
class Due(Generic[T]):
    at: float
    seq: int
    key: Hashable = field(compare=False)
    item: T = field(compare=False)
    attempt: int = field(compare=False)  # 1 for the first re-check

    @property
    def is_last(self) -> bool:
        return self._last

    _last: bool = field(default=False, compare=False, repr=False)


class RecheckQueue(Generic[T]):
    """Items keyed by identity (e.g. ledger id); each re-check waits `delays[attempt-1]` seconds.

    Submitting a key already queued keeps the earlier due time (no duplicate work, no starvation).
    """

    def __init__(self, delays: Sequence[float], clock: Callable[[], float] = time.monotonic) -> None:
        if not delays or any(d < 0 for d in delays):
            raise ValueError(f"re-check delays must be a non-empty list of seconds >= 0, got {list(delays)}")
        self.delays = tuple(delays)
        self._clock = clock
        self._heap: list[Due[T]] = []
        self._queued: dict[Hashable, Due[T]] = {}
        self._seq = itertools.count()
        self._changed = asyncio.Event()

    @property
    def attempts(self) -> int:
        return len(self.delays)

    def __len__(self) -> int:
        return len(self._queued)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._queued

    def submit(self, key: Hashable, item: T, attempt: int = 1) -> bool:
        """Queue re-check number `attempt` (1-based). False when attempts are exhausted."""
        if attempt > len(self.delays):
            return False
        if key in self._queued:
            return True
        due = Due(self._clock() + self.delays[attempt - 1], next(self._seq), key, item, attempt)
        due._last = attempt == len(self.delays)
        heapq.heappush(self._heap, due)
        self._queued[key] = due
        self._changed.set()
        return True

    def waiting(self) -> list[Due[T]]:
        """What is queued, earliest due first (a worker process hands its suspects on to the leader)."""
        return sorted(self._queued.values())

    def discard(self, key: Hashable) -> None:
        """Forget a key (e.g. the ledger was deleted); its heap slot is skipped lazily."""
        self._queued.pop(key, None)

    def clear(self) -> None:
        self._heap.clear()
        self._queued.clear()
        self._changed.set()

    def pop_due(self) -> Due[T] | None:
        """The earliest item whose time has come, or None."""
        now = self._clock()
        while self._heap:
            head = self._heap[0]
            if self._queued.get(head.key) is not head:
                heapq.heappop(self._heap)  # discarded or superseded
                continue
            if head.at > now:
                return None
            heapq.heappop(self._heap)
            del self._queued[head.key]
            return head
        return None

    def next_due_in(self) -> float | None:
        while self._heap and self._queued.get(self._heap[0].key) is not self._heap[0]:
            heapq.heappop(self._heap)
        return max(0.0, self._heap[0].at - self._clock()) if self._heap else None

    async def get(self) -> Due[T]:
        """Wait for the next due item."""
        while True:
            due = self.pop_due()
            if due is not None:
                return due
            self._changed.clear()
            wait = self.next_due_in()
            try:
                async with asyncio.timeout(wait):
                    await self._changed.wait()
            except TimeoutError:
                pass
