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
