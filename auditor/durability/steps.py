"""Stepwise computations: long pure work cut into steps, so that an event loop can run between them.

A stepwise function is a generator that yields None after each bounded piece of work and returns its
result (`Steps[T]`). The core stays free of asyncio: synchronous callers (Spark executors, tests) use
`run_steps`; the daemon's event loop drives the same generator with `auditor.aio.cooperative.finish`,
yielding to other tasks between steps.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")
Steps = Generator[None, None, T]


def run_steps(steps: Steps[T]) -> T:
    """Run every step now and return the result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
