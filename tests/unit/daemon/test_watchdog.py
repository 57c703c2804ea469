"""The loop watchdog: a stall longer than the limit makes leadership unconfirmed; only a round trip
begun after the (last) stall confirms it again; a failed or negative round trip leaves it unconfirmed."""

from __future__ import annotations

import asyncio

from auditor.daemon.leadership import Leadership
from auditor.daemon.supervisor import Supervisor
from auditor.daemon.watchdog import STALL_FRACTION, LoopWatchdog


class Mono:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


async def settle(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_stall_unconfirms_until_zookeeper_confirms() -> None:
    mono = Mono()
    lead = Leadership("pod-0", monotonic=mono)
    lead.set(True, vote_path="/r/bk-auditor/election/V_0000000003")
    answers: list[asyncio.Future[bool]] = []

    async def confirm() -> bool:
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        answers.append(fut)
        return await fut

    sup = Supervisor()
    dog = LoopWatchdog(lead, confirm, sup.fire, session_timeout=3.0, monotonic=mono)
    assert lead.stall_limit == 3.0 * STALL_FRACTION and 0.05 <= dog.interval <= 1.0
    dog.interval = 0  # beat on every loop iteration
    sup.keep("watchdog", dog.run)
    await settle()
    assert lead.confirmed and answers == []  # no stall, no round trip

    mono.t += 5  # frozen 5 s
    assert not lead.confirmed  # seen before the watchdog runs
    await settle()
    assert lead.status == "unconfirmed" and len(answers) == 1
    mono.t += 5  # frozen again while the round trip is in flight: its answer predates this stall
    await settle()
    answers[0].set_result(True)
    await settle()
    assert lead.status == "unconfirmed"
    assert len(answers) == 2  # a new round trip, begun after the last stall
    answers[1].set_result(True)
    await settle()
    assert lead.confirmed and lead.status == "leader"
    await sup.close()


async def test_a_vote_that_is_gone_keeps_leadership_unconfirmed() -> None:
    mono = Mono()
    lead = Leadership("pod-0", monotonic=mono)
    lead.set(True, vote_path="/r/bk-auditor/election/V_0000000003")
    calls = 0

    async def confirm() -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TimeoutError()
        return False

    sup = Supervisor()
    dog = LoopWatchdog(lead, confirm, sup.fire, session_timeout=3.0, monotonic=mono)
    dog.interval = 0
    sup.keep("watchdog", dog.run)
    await settle()
    mono.t += 10
    await settle(50)
    assert calls == 1 and lead.status == "unconfirmed"  # retried only after RETRY_SECONDS
    for _ in range(2):  # each step shorter than the stall limit: no new stall, but time for a retry
        mono.t += 0.6
        await settle(50)
    assert calls == 2 and lead.status == "unconfirmed"
    lead.set(False, leader=None)  # the election steps down by itself (session expired)
    assert lead.status == "standby" and not lead.confirmed
    await sup.close()


async def test_standby_stalls_change_nothing() -> None:
    mono = Mono()
    lead = Leadership("pod-0", monotonic=mono)
    calls = 0

    async def confirm() -> bool:
        nonlocal calls
        calls += 1
        return True

    sup = Supervisor()
    dog = LoopWatchdog(lead, confirm, sup.fire, session_timeout=3.0)
    dog.interval = 0
    sup.keep("watchdog", dog.run)
    mono.t += 10
    await settle()
    assert calls == 0 and lead.status == "standby"
    await sup.close()


def test_writes_are_refused_while_leadership_is_unconfirmed() -> None:
    import pytest

    from auditor.daemon.watchdog import ConfirmedGuard
    from auditor.metadata.errors import NotLeaderError

    class VoteStillThere:
        guard_path = "/r/bk-auditor/election/V_0000000003"

        def check(self) -> None:
            pass

    mono = Mono()
    lead = Leadership("pod-0", monotonic=mono)
    lead.set(True, vote_path=VoteStillThere.guard_path)
    guard = ConfirmedGuard(VoteStillThere(), lead)
    guard.check()
    assert guard.guard_path == VoteStillThere.guard_path
    lead.suspect()
    with pytest.raises(NotLeaderError, match="unconfirmed"):
        guard.check()
    lead.confirm()
    guard.check()
    lead.stall_limit = 1.0
    mono.t += 2  # frozen, the watchdog has not run yet
    with pytest.raises(NotLeaderError):
        guard.check()
