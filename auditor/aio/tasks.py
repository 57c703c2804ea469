"""Background tasks that are never lost and never fail silently (the idea of kopf's guarded tasks).

The event loop keeps only a weak reference to a task: a task nobody holds can be garbage-collected
mid-flight, and an exception nobody retrieves is reported late or never. `spawn` starts a task, keeps it
in a set until it ends (the caller's set, or this module's), and hands its failure to `on_failure`
(default: one error line with the traceback). Cancellation is not a failure.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

from auditor.logging import get_logger

T = TypeVar("T")
FailureHandler = Callable[[str, BaseException], None]

log = get_logger("auditor.tasks")

_RUNNING: set[asyncio.Task[Any]] = set()  # tasks spawned without a caller's set


def error_text(error: BaseException | str) -> str:
    """`Type: message` (or the type alone) for an exception; text as is."""
    if isinstance(error, str):
        return error
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def log_failure(name: str, exc: BaseException) -> None:
    """The default failure handler: one error line naming the task, with the traceback."""
    log.error("background task failed", task=name, error=error_text(exc), exc_info=exc)


def spawn(
    coro: Coroutine[Any, Any, T],
    *,
    name: str,
    keep: set[asyncio.Task[Any]] | None = None,
    on_failure: FailureHandler | None = None,
) -> asyncio.Task[T]:
    """Run `coro` in the background as task `name`; it stays in `keep` (or a module-wide set) until it
    ends, and its exception, if any, goes to `on_failure` (default `log_failure`)."""
    task = asyncio.ensure_future(coro)
    task.set_name(name)
    running = _RUNNING if keep is None else keep
    running.add(task)
    task.add_done_callback(running.discard)
    task.add_done_callback(functools.partial(_finished, name, on_failure or log_failure))
    return task


def _finished(name: str, on_failure: FailureHandler, task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        on_failure(name, exc)


async def gather_all(coros: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """Run `coros` concurrently and return their results in order; on the first failure (or when the
    caller is cancelled) the rest are cancelled and awaited before the error is raised, so none runs
    on unowned and none is lost (plain `asyncio.gather` leaves the others running)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
