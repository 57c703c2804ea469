"""Drive a stepwise computation (`auditor.durability.steps`) on the event loop, letting other tasks
(health checks, timeouts, the election) run between its steps, so CPU-heavy decoding of a large bookie
answer never blocks the loop for longer than one step."""

from __future__ import annotations

import asyncio
from typing import TypeVar

from auditor.durability.steps import Steps

T = TypeVar("T")


async def finish(steps: Steps[T]) -> T:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        await asyncio.sleep(0)
