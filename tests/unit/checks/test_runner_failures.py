"""A scan whose per-ledger checks fail leaves no task behind and no failure unretrieved."""

from __future__ import annotations

import asyncio
import gc
from types import SimpleNamespace
from typing import Any

import pytest

from auditor.checks.runner import CheckRun, LedgerOutcome
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.metadata.interfaces import LedgerRecord, NodeStat


class Lost(Exception):
    pass


class FailingCheck:
    """Every ledger's check fails, one after the other, while the scan is still dispatching."""

    name = "failing"

    def __init__(self) -> None:
        self.started = 0

    async def check(self, record: LedgerRecord, stats: Any, attempt: int, last_attempt: bool) -> LedgerOutcome:
        self.started += 1
        await asyncio.sleep(0.01 * record.metadata.ledger_id.ledger)
        raise Lost(record.metadata.ledger_id.ledger)


def record(lid: int) -> LedgerRecord:
    md = LedgerMetadata(LedgerId(0, lid), 3, 2, 2, LedgerState.CLOSED, 9, 100, (Segment(0, ("a:1", "b:1", "c:1")),))
    return LedgerRecord(md, f"/ledgers/L{lid:010d}", NodeStat(1))


async def test_failed_checks_are_all_retrieved_and_none_left_running() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))

    async def batches():
        yield [record(i) for i in range(1, 9)]

    ctx = SimpleNamespace(options=SimpleNamespace(max_concurrent_ledgers=2, recheck_delays=(1.0,)))
    check = FailingCheck()
    run = CheckRun(ctx, check, sink=lambda f: None)  # type: ignore[arg-type]
    with pytest.raises(Lost):
        await run.scan(records=batches())
    assert check.started == 8
    await asyncio.sleep(0.2)  # past every check's own sleep
    gc.collect()
    await asyncio.sleep(0)
    assert [c.get("message") for c in reported] == []
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


class GroupedCheck:
    """A check that asks in groups (BatchingCheck): even ledgers' first answers settle them, odd ones go
    through `check`; the group of ledger `fail_in` fails while asking."""

    name = "grouped"

    def __init__(self, fail_in: int | None = None) -> None:
        self.fail_in = fail_in
        self.groups: list[list[int]] = []
        self.checked: list[int] = []

    def batchable(self, r: Any) -> bool:
        return True

    async def first_answers(self, records: list[LedgerRecord], stats: Any) -> list[Any]:
        ids = [r.metadata.ledger_id.ledger for r in records]
        self.groups.append(ids)
        await asyncio.sleep(0.01)
        if self.fail_in in ids:
            raise Lost(self.fail_in)
        return ids

    def settle(self, r: LedgerRecord, asked: Any) -> LedgerOutcome | None:
        return LedgerOutcome() if asked % 2 == 0 else None

    async def confirm_settled(self, mds: list[Any], outcomes: list[LedgerOutcome]) -> list[LedgerOutcome | None]:
        return list(outcomes)

    async def check(
        self, record: LedgerRecord, stats: Any, attempt: int, last_attempt: bool, asked: Any = None
    ) -> LedgerOutcome:
        assert asked == record.metadata.ledger_id.ledger
        self.checked.append(asked)
        await asyncio.sleep(0)
        return LedgerOutcome()


async def test_a_grouped_scan_checks_every_ledger_once_and_its_cursor_passes_them_in_order() -> None:
    async def batches():
        yield [record(i) for i in range(1, 12)]
        yield [record(i) for i in range(12, 15)]

    ctx = SimpleNamespace(options=SimpleNamespace(max_concurrent_ledgers=8, recheck_delays=(1.0,)))
    check = GroupedCheck()
    cursors: list[Any] = []
    run = CheckRun(ctx, check, sink=lambda f: None, progress=lambda p: cursors.append(p.cursor))  # type: ignore[arg-type]
    stats = await run.scan(records=batches())
    # groups of max_concurrent_ledgers // 2, a directory's last ledgers not waiting for the next one's
    assert check.groups == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11], [12, 13, 14]]
    assert sorted(check.checked) == [1, 3, 5, 7, 9, 11, 13]  # the others were settled by their answers
    assert stats.ledgers_checked == 14 and run.progress.ledgers_done == 14
    assert run.completed_cursor == LedgerId(0, 14)
    seen = [c.ledger for c in cursors if c is not None]
    assert seen == sorted(seen)


async def test_a_failed_group_fails_the_scan_and_gives_every_place_back() -> None:
    async def batches():
        yield [record(i) for i in range(1, 30)]

    ctx = SimpleNamespace(options=SimpleNamespace(max_concurrent_ledgers=4, recheck_delays=(1.0,)))
    check = GroupedCheck(fail_in=7)
    run = CheckRun(ctx, check, sink=lambda f: None)  # type: ignore[arg-type]
    with pytest.raises(Lost):
        await run.scan(records=batches())
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    assert run.progress.ledgers_done == sum(len(g) for g in check.groups)  # every dispatched ledger ended
