"""Drive a stepwise computation (`auditor.durability.steps`) on the event loop, letting other tasks
(health checks, timeouts, the election) run between its steps, so CPU-heavy decoding of a large bookie
answer never blocks the loop for longer than one step."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")


async def finish(steps: Generator[None, None, T]) -> T:
    """Run `steps` (a `durability.steps.Steps[T]`) to its result, one step per loop iteration."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result
        await asyncio.sleep(0)
