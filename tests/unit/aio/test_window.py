"""Window: at most `size` holders, waiters served in arrival order, no slot lost or doubled by a
cancellation (the bookie client's per-connection request window and the ZooKeeper bridge's reads)."""

from __future__ import annotations

import asyncio

import pytest

from auditor.aio.window import Window


async def test_holders_are_bounded_and_waiters_served_in_arrival_order() -> None:
    w = Window(2)
    order: list[int] = []
    peak = 0
    inside = 0

    async def hold(i: int) -> None:
        nonlocal peak, inside
        async with w:
            inside += 1
            peak = max(peak, inside)
            order.append(i)
            await asyncio.sleep(0.001 * (5 - i % 5))
            inside -= 1

    await asyncio.gather(*(hold(i) for i in range(10)))
    assert peak == 2
    assert order == list(range(10))  # first come, first served, whatever each holder's duration
    assert (w.held, w.waiting) == (0, 0)


async def test_a_free_slot_is_not_taken_past_someone_waiting() -> None:
    w = Window(1)
    await w.acquire()
    waiter = asyncio.ensure_future(w.acquire())
    await asyncio.sleep(0)
    w.release()  # handed to the waiter, not back to the pool
    assert not w.try_acquire()
    await waiter
    assert w.held == 1
    w.release()
    assert w.try_acquire()


async def test_a_cancelled_waiter_gives_up_its_place_and_no_slot() -> None:
    w = Window(1)
    await w.acquire()
    gone = asyncio.ensure_future(w.acquire())
    stays = asyncio.ensure_future(w.acquire())
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    w.release()
    await stays  # the slot skipped the cancelled waiter
    assert gone.cancelled() and w.held == 1
    w.release()
    assert w.held == 0 and w.waiting == 0


async def test_a_slot_handed_over_as_its_waiter_is_cancelled_is_passed_on() -> None:
    w = Window(1)
    await w.acquire()
    first = asyncio.ensure_future(w.acquire())
    second = asyncio.ensure_future(w.acquire())
    await asyncio.sleep(0)
    w.release()  # the slot goes to `first`...
    first.cancel()  # ...which is cancelled before it runs again: it must pass the slot on
    await asyncio.sleep(0)
    await second
    assert first.cancelled() and w.held == 1
    w.release()
    assert w.held == 0


def test_releasing_more_than_acquired_is_an_error() -> None:
    w = Window(3)
    with pytest.raises(RuntimeError, match="released more often"):
        w.release()
    with pytest.raises(ValueError):
        Window(0)
