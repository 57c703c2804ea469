"""Drive a stepwise computation (`auditor.durability.steps`) on the event loop, letting other tasks
(health checks, timeouts, the election) run between its steps, so CPU-heavy decoding of a large bookie
answer never blocks the loop for longer than one step.

Steps are run back to back until they have taken `SLICE_S` since the loop last had a turn: a large answer
(each step thousands of records, milliseconds) still gives the loop a turn after every step, while the
small answers of most ledgers finish without one (a loop turn per answer was measurable in a scan's CPU:
docs/benchmarks.md, "Where a scrutiny scan's CPU goes")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")

SLICE_S = 0.0005


async def finish(steps: Generator[None, None, T]) -> T:
    """Run `steps` (a `durability.steps.Steps[T]`) to its result, yielding to the loop between steps
    once they have run for `SLICE_S` since its last turn."""
    since = time.perf_counter()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result
        if time.perf_counter() - since >= SLICE_S:
            await asyncio.sleep(0)
            since = time.perf_counter()
