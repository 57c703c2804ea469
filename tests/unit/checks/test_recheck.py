from __future__ import annotations

import asyncio

import pytest

from auditor.checks.recheck import RecheckQueue


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_items_come_due_in_order_of_their_delay() -> None:
    clock = Clock()
    q: RecheckQueue[str] = RecheckQueue([5, 30], clock=clock)
    assert q.submit("a", "ledger-a")
    clock.now += 1
    assert q.submit("b", "ledger-b")
    assert q.pop_due() is None
    clock.now += 4.5
    due = q.pop_due()
    assert due is not None and due.item == "ledger-a" and due.attempt == 1 and not due.is_last
    assert q.pop_due() is None
    clock.now += 1
    due = q.pop_due()
    assert due is not None and due.item == "ledger-b"
    assert len(q) == 0


def test_attempts_are_bounded_and_last_attempt_is_flagged() -> None:
    clock = Clock()
    q: RecheckQueue[int] = RecheckQueue([1, 2], clock=clock)
    assert q.submit(7, 7, attempt=2)
    clock.now += 2
    due = q.pop_due()
    assert due is not None and due.is_last
    assert not q.submit(7, 7, attempt=3)


def test_resubmitting_a_queued_key_keeps_the_earlier_due_time() -> None:
    clock = Clock()
    q: RecheckQueue[int] = RecheckQueue([10], clock=clock)
    q.submit(1, 1)
    clock.now += 9
    q.submit(1, 1)
    clock.now += 1
    assert q.pop_due() is not None
    assert len(q) == 0


def test_discarded_keys_never_come_due() -> None:
    clock = Clock()
    q: RecheckQueue[int] = RecheckQueue([0], clock=clock)
    q.submit(1, 1)
    q.discard(1)
    assert q.pop_due() is None and len(q) == 0


def test_bad_delays_are_rejected_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="re-check delays"):
        RecheckQueue([])
    with pytest.raises(ValueError, match="re-check delays"):
        RecheckQueue([-1])


async def test_get_waits_for_the_delay_and_wakes_on_submit() -> None:
    q: RecheckQueue[str] = RecheckQueue([0.05])
    loop = asyncio.get_running_loop()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    assert not getter.done()
    start = loop.time()
    q.submit("x", "x")
    due = await asyncio.wait_for(getter, 2)
    assert due.item == "x"
    assert loop.time() - start >= 0.04


async def test_token_bucket_spaces_requests_at_the_rate() -> None:
    from auditor.aio.ratelimit import TokenBucket

    bucket = TokenBucket(rate=50, burst=1)
    loop = asyncio.get_running_loop()
    start = loop.time()
    for _ in range(11):
        await bucket.acquire()
    # 1 token up front, then 10 more at 50/s: at least 0.2 s.
    assert loop.time() - start >= 0.18


def test_waiting_lists_what_is_queued_earliest_first() -> None:
    clock = Clock()
    q: RecheckQueue[str] = RecheckQueue([30, 5], clock=clock)
    q.submit("a", "ledger-a")  # due at 130
    q.submit("b", "ledger-b", attempt=2)  # due at 105
    q.submit("c", "ledger-c")
    q.discard("c")
    assert [(d.item, d.attempt) for d in q.waiting()] == [("ledger-b", 2), ("ledger-a", 1)]
    assert len(q) == 2  # listing takes nothing out
