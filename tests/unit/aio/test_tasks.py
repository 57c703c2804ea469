"""auditor.aio: the one task-spawning helper keeps each task referenced until it ends and logs its
failure; the election's coroutine callbacks go through it."""

from __future__ import annotations

import asyncio
import gc
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from auditor.aio import spawn
from auditor.aio import tasks as aio_tasks
from auditor.logging import configure_logging
from auditor.metadata.bookkeeper.election import LeaderElection


@contextmanager
def captured() -> Iterator[list[dict[str, Any]]]:
    buf = io.StringIO()
    lines: list[dict[str, Any]] = []
    configure_logging("info", "json", stream=buf)
    try:
        yield lines
    finally:
        configure_logging("info", "json")
        lines.extend(json.loads(line) for line in buf.getvalue().splitlines())


def failures(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["event"] == "background task failed"]


async def test_spawned_task_is_kept_until_it_ends_and_its_failure_logged() -> None:
    gate = asyncio.Event()

    async def broken() -> None:
        await gate.wait()
        raise KeyError("cursor")

    with captured() as lines:
        task = spawn(broken(), name="cursor-save")
        assert task in aio_tasks._RUNNING and task.get_name() == "cursor-save"
        del task
        gc.collect()  # only the helper's set holds the task now
        gate.set()
        for _ in range(3):
            await asyncio.sleep(0)
    assert not aio_tasks._RUNNING
    failed = failures(lines)
    assert len(failed) == 1 and failed[0]["task"] == "cursor-save" and failed[0]["level"] == "error"
    assert failed[0]["error"] == "KeyError: 'cursor'" and "KeyError" in failed[0]["exception"]


async def test_callers_set_and_handler_are_used_and_cancellation_is_not_a_failure() -> None:
    mine: set[asyncio.Task[Any]] = set()
    seen: list[tuple[str, str]] = []
    with captured() as lines:
        ok = spawn(asyncio.sleep(0, result=7), name="ok", keep=mine)
        stuck = spawn(asyncio.Event().wait(), name="stuck", keep=mine)
        assert mine == {ok, stuck} and not aio_tasks._RUNNING & mine
        stuck.cancel()
        assert await ok == 7
        await asyncio.gather(stuck, return_exceptions=True)
        await asyncio.sleep(0)

        async def raises() -> None:
            raise RuntimeError("boom")

        await asyncio.gather(
            spawn(raises(), name="r", keep=mine, on_failure=lambda n, e: seen.append((n, repr(e)))),
            return_exceptions=True,
        )
        await asyncio.sleep(0)
    assert not mine
    assert seen == [("r", "RuntimeError('boom')")]
    assert failures(lines) == []  # a handler replaces the log line; a cancelled task is no failure


async def test_a_failing_election_callback_coroutine_is_logged() -> None:
    async def on_elected() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("cannot start leader tasks")

    with captured() as lines:
        LeaderElection._fire([on_elected])
        for _ in range(5):
            await asyncio.sleep(0)
    failed = failures(lines)
    assert len(failed) == 1 and failed[0]["task"].startswith("election callback")
    assert failed[0]["error"] == "RuntimeError: cannot start leader tasks"
