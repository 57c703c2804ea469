"""The supervisor of the daemon's background tasks: a failing task is restarted alone with a bounded,
jittered exponential backoff, visible on the task board and in the metrics; one-shot tasks are kept
referenced and their failures counted; close() ends everything."""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from prometheus_client import CollectorRegistry

from auditor.board.tasks import TaskBoard, TaskState
from auditor.daemon.metrics import AuditorMetrics
from auditor.daemon.supervisor import Backoff, Supervisor
from auditor.logging import configure_logging


def sample(m: AuditorMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, {"bookkeeper_cluster": m.cluster, **labels})


def test_backoff_is_exponential_bounded_and_jittered() -> None:
    b = Backoff(initial=1.0, factor=2.0, cap=60.0, jitter=0.2)
    assert [b.delay(n, rand=lambda: 0.5) for n in (1, 2, 3, 4, 7, 8, 50)] == [1, 2, 4, 8, 60, 60, 60]
    assert b.delay(3, rand=lambda: 0.0) == pytest.approx(4 * 0.8)
    assert b.delay(3, rand=lambda: 1.0) == pytest.approx(4 * 1.2)
    assert b.delay(10, rand=lambda: 1.0) == 60.0  # jitter never goes past the cap
    import random

    rng = random.Random(7)
    delays = [b.delay(n, rand=rng.random) for n in range(1, 200)]
    assert all(0 < d <= 60.0 for d in delays) and len({round(d, 6) for d in delays[:5]}) == 5


async def test_a_failing_task_is_restarted_alone_with_backoff_and_is_visible() -> None:
    metrics = AuditorMetrics(CollectorRegistry(), cluster="zk:2181/ledgers")
    board = TaskBoard()
    board.register("scrutiny")
    slept: list[float] = []
    resume = asyncio.Event()

    async def sleep(seconds: float) -> None:  # records the backoff instead of waiting it out
        slept.append(seconds)
        await asyncio.sleep(0)

    sup = Supervisor(
        metrics=metrics, board=board, sleep=sleep, backoff=Backoff(initial=1.0, factor=2.0, cap=5.0, jitter=0.0)
    )
    attempts = 0
    sibling_beats = 0

    async def flaky() -> None:
        nonlocal attempts
        attempts += 1
        if attempts <= 4:
            raise ValueError(f"bad state, attempt {attempts}")
        await resume.wait()

    async def sibling() -> None:
        nonlocal sibling_beats
        while True:
            sibling_beats += 1
            await asyncio.sleep(0)

    sup.keep("scrutiny", flaky)
    other = sup.keep("bookies", sibling)
    for _ in range(200):
        await asyncio.sleep(0)
        if attempts == 5:
            break
    assert attempts == 5
    assert slept == [1.0, 2.0, 4.0, 5.0]  # exponential, capped
    beats = sibling_beats
    for _ in range(5):
        await asyncio.sleep(0)
    assert sibling_beats > beats >= 4 and not other.done()  # the sibling ran throughout, and still runs
    assert sample(metrics, "bk_auditor_task_failures_total", task="scrutiny") == 4
    assert sample(metrics, "bk_auditor_task_restarts_total", task="scrutiny") == 4
    assert sample(metrics, "bk_auditor_task_up", task="scrutiny") == 1
    assert sample(metrics, "bk_auditor_task_up", task="bookies") == 1
    info = board.get("scrutiny")
    assert info.restarts == 4 and info.failures == 4 and info.state is not TaskState.FAILED
    assert info.last_error == "ValueError: bad state, attempt 4" and info.restart_at is None
    assert sup.failures == {"scrutiny": 4} and sup.last_error["scrutiny"] == "ValueError: bad state, attempt 4"
    board.start("scrutiny")
    await sup.close()
    assert sample(metrics, "bk_auditor_task_up", task="scrutiny") is None  # not meant to run: no series
    assert board.get("scrutiny").state is TaskState.IDLE  # a standby shows nothing running
    assert len(sup) == 0


async def test_while_waiting_to_restart_the_task_shows_failed_with_its_error() -> None:
    metrics = AuditorMetrics(CollectorRegistry(), cluster="zk:2181/ledgers")
    board = TaskBoard()
    board.register("open")
    sup = Supervisor(metrics=metrics, board=board, backoff=Backoff(initial=30.0, jitter=0.0))

    async def broken() -> None:
        raise RuntimeError("/ledgers/bk-auditor/checks/open: cannot read (NoAuthError)")

    sup.keep("open", broken)
    for _ in range(20):
        await asyncio.sleep(0)
    info = board.get("open")
    assert info.state is TaskState.FAILED and "NoAuthError" in (info.last_error or "")
    assert info.restart_at is not None and info.failures == 1 and info.restarts == 0
    assert sample(metrics, "bk_auditor_task_up", task="open") == 0
    await sup.close()
    info = board.get("open")  # stepping down: no restart pending any more; the error stays visible
    assert info.state is TaskState.IDLE and info.restart_at is None and "NoAuthError" in (info.last_error or "")


async def test_a_task_that_ran_long_enough_starts_its_backoff_over() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await asyncio.sleep(0)

    sup = Supervisor(sleep=sleep, backoff=Backoff(initial=1.0, cap=60.0, jitter=0.0, stable_seconds=0.0))
    runs = 0

    async def fails() -> None:
        nonlocal runs
        runs += 1
        raise ValueError("x")

    sup.keep("t", fails)
    for _ in range(30):
        await asyncio.sleep(0)
    await sup.close()
    assert runs >= 3 and set(slept) == {1.0}


async def test_fired_tasks_are_kept_and_their_failures_logged_and_counted() -> None:
    metrics = AuditorMetrics(CollectorRegistry(), cluster="zk:2181/ledgers")
    sup = Supervisor(metrics=metrics)
    gate = asyncio.Event()
    done: list[str] = []

    async def save() -> None:
        await gate.wait()
        done.append("saved")

    async def broken_save() -> None:
        await gate.wait()
        raise KeyError("cursor")

    buf = io.StringIO()
    configure_logging("info", "json", stream=buf)
    try:
        t1 = sup.fire("checkstate-save", save())
        t2 = sup.fire("checkstate-save", broken_save())
        assert len(sup) == 2  # referenced until they end
        gate.set()
        await asyncio.gather(t1, t2, return_exceptions=True)
        await asyncio.sleep(0)
    finally:
        configure_logging("info", "json")
    assert done == ["saved"] and len(sup) == 0
    assert sample(metrics, "bk_auditor_task_failures_total", task="checkstate-save") == 1
    assert sup.last_error["checkstate-save"] == "KeyError: 'cursor'"
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    failed = [line for line in lines if line["event"] == "background task failed"]
    assert len(failed) == 1 and failed[0]["task"] == "checkstate-save" and failed[0]["level"] == "error"
    assert "KeyError" in failed[0]["exception"]  # with its traceback


async def test_close_cancels_everything() -> None:
    sup = Supervisor()
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    t = sup.keep("forever", forever)
    f = sup.fire("once", asyncio.Event().wait())
    await started.wait()
    await sup.close()
    assert t.cancelled() and f.cancelled() and len(sup) == 0
