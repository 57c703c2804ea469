"""`ExplainLedger` reads bookies through the daemon's shared pool, so a real daemon bounds it like the other
bookie-reading questions: one at a time (a second call waits its turn) and `admin.question_timeout_seconds`
(waiting included); and the admin server takes at most `admin.max_concurrent_calls` calls at once.

A ledger with a copy on a paused (SIGSTOP) bookie makes a slow explain: the daemon's bookie timeout is
30 s, so only the question's own bound ends it sooner."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from auditor.admin.client import AdminClient, AdminClientError
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon

pytestmark = pytest.mark.realcluster

BOUND = 3.0  # admin.question_timeout_seconds
PAUSED = 3  # the bookie paused for a slow explain
MAX_CALLS = 2  # admin.max_concurrent_calls


@pytest.fixture(scope="module")
def daemon(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(
        cluster,
        "explain-bound",
        tmp_path_factory.mktemp("explain-bound"),
        schedule={"scrutiny_seconds": 0, "bookie_check_seconds": 0},
        bookie_client={"timeout_seconds": 30, "connect_timeout_seconds": 30},
        admin={"question_timeout_seconds": BOUND, "max_concurrent_calls": MAX_CALLS},
    )
    d.start()
    try:
        d.wait(d.is_leader, 60, "leadership")
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="module")
def ledgers(cluster: Cluster) -> tuple[int, int]:
    """(a ledger with a copy on the bookie to pause, one on other bookies only)."""
    b = [cluster.bookie(n).bookie_id for n in (1, 2, PAUSED, 4)]
    slow = cluster.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, entries=5, bookies=b[:3])["ledgerId"]
    fast = cluster.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, entries=5, bookies=[b[0], b[1], b[3]])
    return slow, fast["ledgerId"]


@pytest.fixture
def paused(cluster: Cluster) -> Iterator[None]:
    cluster.pause_bookie(PAUSED)
    try:
        yield
    finally:
        cluster.resume_bookie(PAUSED)
        cluster.wait_registered(PAUSED, timeout=60)


async def explain(d: Daemon, ledger: int) -> tuple[Any, float]:
    """(the answer or the AdminClientError, when it came); the client waits far longer than the bound."""
    async with AdminClient(f"127.0.0.1:{d.admin_port}", timeout=120) as c:
        try:
            got: Any = await c.explain(str(ledger))
        except AdminClientError as exc:
            got = exc
    return got, time.monotonic()


def timed_out(got: Any) -> bool:
    return (
        isinstance(got, AdminClientError)
        and got.code is grpc.StatusCode.DEADLINE_EXCEEDED
        and f"not answered within {BOUND:g}s (admin.question_timeout_seconds" in str(got)
    )


async def test_a_slow_explain_ends_at_the_question_timeout(
    daemon: Daemon, ledgers: tuple[int, int], paused: None
) -> None:
    start = time.monotonic()
    got, done = await explain(daemon, ledgers[0])
    assert timed_out(got), got
    assert BOUND - 0.5 <= done - start <= BOUND + 5, done - start


async def test_a_second_explain_waits_for_the_first(daemon: Daemon, ledgers: tuple[int, int], paused: None) -> None:
    slow = asyncio.ensure_future(explain(daemon, ledgers[0]))
    await asyncio.sleep(1.0)  # the slow one holds the daemon's one question
    fast_started = time.monotonic()
    (slow_got, slow_done), (fast_got, fast_done) = await asyncio.gather(slow, explain(daemon, ledgers[1]))
    assert timed_out(slow_got), slow_got
    # Without the bound, the second answers at once (its bookies are up) while the first still reads.
    assert fast_done >= slow_done - 0.2, (fast_done - fast_started, slow_done - fast_started)
    assert timed_out(fast_got) or [len(s.bookies) for s in fast_got.segments] == [3], fast_got


async def test_calls_past_max_concurrent_calls_are_refused(
    daemon: Daemon, ledgers: tuple[int, int], paused: None
) -> None:
    busy = [asyncio.ensure_future(explain(daemon, ledgers[0])) for _ in range(MAX_CALLS)]
    await asyncio.sleep(1.0)
    async with AdminClient(f"127.0.0.1:{daemon.admin_port}", timeout=10) as c:
        with pytest.raises(AdminClientError) as refused:
            await c.status()
        assert refused.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value
        await asyncio.gather(*busy)
        assert (await c.status()).identity == "explain-bound"  # served again once they ended
