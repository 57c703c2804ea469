"""Every background task of the daemon is started here, so none can fail silently or be lost.

* `keep(name, factory)`: a long-running task (a leader task, the loop watchdog). If it ends with an
  error it alone is restarted, after an exponential, bounded, jittered backoff; the error is logged with
  its traceback, counted (`bk_auditor_task_failures_total`, `bk_auditor_task_restarts_total`), shown by
  `bk_auditor_task_up` and, for a task on the TaskBoard, in the admin API status (state `failed`, last
  error, restarts, when it restarts). Its siblings never notice.
* `fire(name, coro)`: a one-shot task (a cursor save, a delayed bookie audit). A reference is kept until
  it ends, so the loop cannot garbage-collect it; an error is logged and counted, never swallowed.

Both start their task with `auditor.aio.spawn` (the one task-spawning helper), keeping it in this
supervisor's set and counting its failure here.

`close()` cancels everything and waits for it (stepping down, shutting down).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from auditor.aio import error_text, spawn
from auditor.board.tasks import TaskBoard
from auditor.logging import get_logger

log = get_logger("auditor.daemon.tasks")

Spawn = Callable[[str, Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]  # Supervisor.fire, as a parameter type


@dataclass(frozen=True)
class Backoff:
    """Delay before restart number `n` (1-based): initial * factor**(n-1), at most `cap`, then +-jitter
    (a fraction), and never above `cap`. A task that ran `stable_seconds` before failing starts over at 1."""

    initial: float = 1.0
    factor: float = 2.0
    cap: float = 60.0
    jitter: float = 0.2
    stable_seconds: float = 120.0

    def delay(self, n: int, rand: Callable[[], float] = random.random) -> float:
        base = min(self.cap, self.initial * self.factor ** max(0, n - 1))
        return max(0.0, min(self.cap, base * (1 + self.jitter * (2 * rand() - 1))))


class TaskMetrics(Protocol):
    def task_up(self, task: str, up: bool) -> None: ...
    def task_failed(self, task: str) -> None: ...
    def task_restarted(self, task: str) -> None: ...
    def task_stopped(self, task: str) -> None: ...


class Supervisor:
    def __init__(
        self,
        *,
        metrics: TaskMetrics | None = None,
        board: TaskBoard | None = None,
        backoff: Backoff = Backoff(),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.metrics = metrics
        self.board = board
        self.backoff = backoff
        self._sleep = sleep
        self._tasks: set[asyncio.Task[Any]] = set()
        self.failures: dict[str, int] = {}  # per task name, since this supervisor started
        self.restarts: dict[str, int] = {}
        self.last_error: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    # ----------------------------------------------------------------------------- starting tasks
    def keep(self, name: str, factory: Callable[[], Coroutine[Any, Any, Any]]) -> asyncio.Task[None]:
        """Run `factory()` until cancelled, restarting it with backoff whenever it raises."""
        return spawn(self._keep(name, factory), name=name, keep=self._tasks, on_failure=self._failed)

    def fire(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run `coro` once in the background; its failure is logged and counted under `name`."""
        return spawn(coro, name=name, keep=self._tasks, on_failure=self._failed)

    # ----------------------------------------------------------------------------- failures
    def _failed(self, name: str, exc: BaseException, **fields: Any) -> None:
        self.failures[name] = self.failures.get(name, 0) + 1
        self.last_error[name] = error_text(exc)
        log.error("background task failed", task=name, error=error_text(exc), exc_info=exc, **fields)
        if self.metrics is not None:
            self.metrics.task_failed(name)

    async def _keep(self, name: str, factory: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        consecutive = 0
        try:
            while True:
                started = time.monotonic()
                if self.metrics is not None:
                    self.metrics.task_up(name, True)
                try:
                    await factory()
                    log.info("background task ended", task=name)
                    return
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    ran = time.monotonic() - started
                    consecutive = 1 if ran >= self.backoff.stable_seconds else consecutive + 1
                    delay = self.backoff.delay(consecutive)
                    self._failed(name, exc, restartInSeconds=round(delay, 2), consecutiveFailures=consecutive)
                    if self.metrics is not None:
                        self.metrics.task_up(name, False)
                    if self.board is not None and name in self.board:
                        self.board.crash(name, exc, restart_at=time.time() + delay)
                await self._sleep(delay)
                self.restarts[name] = self.restarts.get(name, 0) + 1
                if self.metrics is not None:
                    self.metrics.task_restarted(name)
                if self.board is not None and name in self.board:
                    self.board.restarted(name)
                log.warning("restarting background task", task=name, restart=self.restarts[name])
        finally:
            if self.metrics is not None:
                self.metrics.task_stopped(name)
            if self.board is not None and name in self.board:
                self.board.stopped(name)

    # ----------------------------------------------------------------------------- stopping
    async def close(self) -> None:
        """Cancel every task and wait until they have all ended."""
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
