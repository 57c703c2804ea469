"""The task board: per check task its state, last start / success / error, progress, rate-based ETA and
cursor, for the scheduler and the supervisor to update and the admin API and the metrics to read. No I/O;
the clock is injectable.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, replace
from typing import Any

from auditor.aio import error_text

from . import Clock


class TaskState(str, enum.Enum):
    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"
    DISABLED = "disabled"
    FAILED = "failed"  # the task itself crashed; the supervisor restarts it at `restart_at`

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """A snapshot of one task. Times are epoch seconds (None = never)."""

    name: str
    state: TaskState = TaskState.IDLE
    interval_seconds: float | None = None
    last_start: float | None = None
    last_finish: float | None = None
    last_success: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    done: int = 0
    total: int | None = None
    cursor: str | None = None
    next_run: float | None = None
    runs: int = 0
    failures: int = 0
    eta_seconds: float | None = None
    rate_per_second: float | None = None
    restarts: int = 0  # times the supervisor restarted the task after a crash
    restart_at: float | None = None  # while FAILED: when it is restarted

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(1.0, self.done / self.total)


@dataclass
class _Task:
    info: TaskInfo
    state_before_pause: TaskState | None = None


class TaskBoard:
    """Per-task status for the scheduler to update and the API/metrics to read."""

    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock
        self._tasks: dict[str, _Task] = {}

    def register(self, name: str, *, enabled: bool = True, interval_seconds: float | None = None) -> TaskInfo:
        """Add a task (idempotent: an existing task only gets its enabled state and interval updated)."""
        t = self._tasks.get(name)
        state = TaskState.IDLE if enabled else TaskState.DISABLED
        if t is None:
            t = self._tasks[name] = _Task(TaskInfo(name, state, interval_seconds))
        else:
            new_state = state if t.info.state in (TaskState.IDLE, TaskState.DISABLED) else t.info.state
            t.info = replace(t.info, state=new_state, interval_seconds=interval_seconds)
        return self.get(name)

    def names(self) -> list[str]:
        return list(self._tasks)

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def _task(self, name: str) -> _Task:
        try:
            return self._tasks[name]
        except KeyError:
            raise KeyError(f"unknown task {name!r}; known: {', '.join(self._tasks) or 'none'}") from None

    def _set(self, name: str, **changes: Any) -> TaskInfo:
        t = self._task(name)
        t.info = replace(t.info, **changes)
        return t.info

    def start(self, name: str, *, total: int | None = None, cursor: str | None = None) -> TaskInfo:
        return self._set(
            name,
            state=TaskState.RUNNING,
            last_start=self._clock(),
            done=0,
            total=total,
            cursor=cursor,
            runs=self._task(name).info.runs + 1,
        )

    def progress(self, name: str, done: int, *, total: int | None = None, cursor: str | None = None) -> TaskInfo:
        """Set absolute progress (units done so far in this run)."""
        info = self._task(name).info
        return self._set(
            name,
            done=done,
            total=info.total if total is None else total,
            cursor=info.cursor if cursor is None else cursor,
        )

    def advance(self, name: str, n: int = 1, *, cursor: str | None = None) -> TaskInfo:
        info = self._task(name).info
        return self.progress(name, info.done + n, cursor=cursor)

    def succeed(self, name: str) -> TaskInfo:
        now = self._clock()
        return self._set(name, state=self._finished_state(name), last_finish=now, last_success=now)

    def fail(self, name: str, error: BaseException | str) -> TaskInfo:
        """A run ended with an error (the task goes on)."""
        now = self._clock()
        info = self._task(name).info
        return self._set(
            name,
            state=self._finished_state(name),
            last_finish=now,
            last_error=error_text(error),
            last_error_at=now,
            failures=info.failures + 1,
        )

    def note_error(self, name: str, error: BaseException | str) -> TaskInfo:
        """Something went wrong and was dealt with (e.g. corrupt state replaced): shown as the last error."""
        return self._set(name, last_error=error_text(error), last_error_at=self._clock())

    def crash(self, name: str, error: BaseException | str, *, restart_at: float | None) -> TaskInfo:
        """The task itself died; it is restarted at `restart_at`."""
        now = self._clock()
        info = self._task(name).info
        return self._set(
            name,
            state=TaskState.FAILED,
            last_error=error_text(error),
            last_error_at=now,
            failures=info.failures + 1,
            restart_at=restart_at,
        )

    def stopped(self, name: str) -> TaskInfo:
        """The task was stopped on purpose (stepping down): no longer running, nor waiting for a restart."""
        info = self._task(name).info
        state = TaskState.IDLE if info.state in (TaskState.RUNNING, TaskState.FAILED) else info.state
        return self._set(name, state=state, restart_at=None)

    def restarted(self, name: str) -> TaskInfo:
        info = self._task(name).info
        state = TaskState.IDLE if info.state is TaskState.FAILED else info.state
        return self._set(name, state=state, restarts=info.restarts + 1, restart_at=None)

    def _finished_state(self, name: str) -> TaskState:
        """A run that ends while paused stays paused, and goes back to idle (not running) on resume."""
        t = self._task(name)
        if t.info.state is TaskState.PAUSED:
            t.state_before_pause = TaskState.IDLE
            return TaskState.PAUSED
        return TaskState.IDLE

    def schedule(self, name: str, next_run: float | None) -> TaskInfo:
        return self._set(name, next_run=next_run)

    def set_state(self, name: str, state: TaskState) -> TaskInfo:
        return self._set(name, state=TaskState(state))

    def pause_all(self) -> None:
        """Mark every enabled task paused (remembering what it was doing)."""
        for t in self._tasks.values():
            if t.info.state is not TaskState.DISABLED and t.info.state is not TaskState.PAUSED:
                t.state_before_pause = t.info.state
                t.info = replace(t.info, state=TaskState.PAUSED)

    def resume_all(self) -> None:
        for t in self._tasks.values():
            if t.info.state is TaskState.PAUSED:
                t.info = replace(t.info, state=t.state_before_pause or TaskState.IDLE)
                t.state_before_pause = None

    def get(self, name: str) -> TaskInfo:
        """A snapshot with the rate and ETA computed at the current time."""
        info = self._task(name).info
        now = self._clock()
        rate = eta = None
        if (
            info.state in (TaskState.RUNNING, TaskState.PAUSED)
            and info.last_start is not None
            and (info.last_finish is None or info.last_finish < info.last_start)
        ):
            elapsed = now - info.last_start
            if elapsed > 0 and info.done > 0:
                rate = info.done / elapsed
                if info.total is not None:
                    eta = max(0, info.total - info.done) / rate
        return replace(info, rate_per_second=rate, eta_seconds=eta)

    def snapshot(self) -> list[TaskInfo]:
        return [self.get(n) for n in self._tasks]
