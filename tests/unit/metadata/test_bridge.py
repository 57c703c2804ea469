"""KazooBridge request semantics that a real ZooKeeper can't time precisely: cancellation races."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooClient

from auditor.metadata.zk.bridge import KazooBridge


class _Answer:
    """The part of kazoo's IAsyncResult the bridge uses; completed by the test, on the loop thread."""

    def __init__(self, sink: list[tuple[_Answer, Callable[[Any], None]]]) -> None:
        self._sink = sink
        self.value = "answer"

    def rawlink(self, callback: Callable[[Any], None]) -> None:
        self._sink.append((self, callback))

    def successful(self) -> bool:
        return True


async def test_cancel_is_not_swallowed_when_the_answer_arrives_in_the_same_instant() -> None:
    # The CI hang of test_votes_order_and_failover: LeaderElection.close() cancelled its task while the
    # answer to a ZooKeeper request was already on its way to the loop. asyncio.wait_for (Python 3.11)
    # then returns the answer and drops the cancellation, so the election's task ran on and close()
    # waited for it forever.
    arrived: list[tuple[_Answer, Callable[[Any], None]]] = []
    bridge = KazooBridge(KazooClient(hosts="127.0.0.1:1"))
    task = asyncio.create_task(bridge.call(lambda: _Answer(arrived)))
    await asyncio.sleep(0)  # the call is now waiting for its answer
    answer, on_done = arrived[0]
    on_done(answer)  # the kazoo thread hands the answer to the loop (settle is now queued)
    await asyncio.sleep(0)  # settle runs in this loop pass; the caller has not resumed yet
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_an_answer_that_never_comes_times_out() -> None:
    arrived: list[tuple[_Answer, Callable[[Any], None]]] = []
    bridge = KazooBridge(KazooClient(hosts="127.0.0.1:1"), op_timeout=0.05)
    with pytest.raises(TimeoutError):
        await bridge.call(lambda: _Answer(arrived))
