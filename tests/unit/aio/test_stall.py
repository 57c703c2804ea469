"""The stall fence: a frozen loop holds session-bound writes until a round trip begun after it confirms."""

from __future__ import annotations

import asyncio
import time

from auditor.aio.stall import StallFence


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_freeze_is_seen_before_the_beat_and_held_until_confirmed() -> None:
    clock = Clock()
    fence = StallFence(2.0, monotonic=clock)
    assert fence.problem() is None
    clock.now += 1.9
    assert fence.problem() is None and abs(fence.beat() - 1.9) < 1e-9
    clock.now += 5.0  # frozen: the first request after the resume runs before the beat
    assert fence.stalled and "did not run for 5.0s" in (fence.problem() or "")
    epoch = fence.epoch
    fence.beat()
    assert fence.epoch == epoch + 1 and not fence.stalled
    assert "frozen" in (fence.problem() or "")
    # A round trip begun before this stall confirms nothing.
    assert not fence.confirm(epoch)
    assert fence.problem() is not None
    assert fence.confirm(fence.epoch)
    assert fence.problem() is None


def test_a_second_stall_during_the_check_needs_a_new_one() -> None:
    clock = Clock()
    fence = StallFence(1.0, monotonic=clock)
    clock.now += 3
    fence.beat()
    first = fence.epoch
    clock.now += 3
    fence.beat()
    assert not fence.confirm(first)
    assert fence.problem() is not None
    assert fence.confirm(fence.epoch)


def test_run_reports_each_stall_with_its_epoch() -> None:
    seen: list[int] = []

    async def go() -> None:
        fence = StallFence(0.2)
        task = asyncio.ensure_future(fence.run(seen.append))
        await asyncio.sleep(0.1)
        time.sleep(0.5)  # noqa: ASYNC251 - the loop blocked on purpose, as a SIGSTOP leaves it
        await asyncio.sleep(0.2)
        assert fence.problem() is not None
        assert fence.confirm(seen[-1])
        task.cancel()

    asyncio.run(go())
    assert seen == [1]


def test_a_repair_lock_refuses_bookie_writes_while_its_fence_is_unconfirmed() -> None:
    """The repair gate's lease (LockGuard.write_refusal) reads the fence: a frozen worker sends nothing."""
    from types import SimpleNamespace
    from typing import Any, cast

    from kazoo.protocol.states import KazooState

    from auditor.metadata.repair.lock import LockGuard

    clock = Clock()
    fence = StallFence(1.0, monotonic=clock)
    store = SimpleNamespace(client=SimpleNamespace(client_id=(7, b""), state=KazooState.CONNECTED), session_id=7)
    guard = LockGuard("/ledgers/underreplication/locks/urL0000000001", 7, "/proof", cast(Any, store), fence=fence)
    assert guard.write_refusal() is None
    clock.now += 5  # frozen
    assert "did not run" in (guard.write_refusal() or "")
    fence.beat()
    assert "frozen" in (guard.write_refusal() or "")
    fence.confirm(fence.epoch)
    assert guard.write_refusal() is None
