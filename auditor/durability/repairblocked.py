"""`repair_blocked`, the one finding about a marked ledger the repair role could not repair: built from
its blocked record (why, how often, by whom, when next), by the worker when it blocks the ledger and by
the auditor daemon from the records it reads, so both say the same. Pure."""

from __future__ import annotations

from typing import Protocol

from .findings import Category, Finding, Method, Severity
from .ids import LedgerId
from .repairplan import BlockReason


class BlockRecord(Protocol):
    """What a blocked record holds (auditor.metadata.own.repairstate.RepairBlock)."""

    @property
    def reason(self) -> str: ...
    @property
    def detail(self) -> str: ...
    @property
    def failures(self) -> int: ...
    @property
    def holder(self) -> str: ...


def blocked_finding(ledger_id: LedgerId, block: BlockRecord, retry_s: float) -> Finding:
    """`repair_blocked`: why, how often, and when the next attempt may come; critical for data loss."""
    loss = block.reason == BlockReason.DATA_LOSS.value
    critical = loss or block.reason == BlockReason.RECOVERY_REFUSED.value
    return Finding.of(
        Category.REPAIR_BLOCKED,
        f"ledger {ledger_id}: repair blocked ({'DATA LOSS' if loss else block.reason}): {block.detail}; "
        f"{block.failures} failed attempt(s), next in {retry_s:g} s",
        ledger=ledger_id,
        severity=Severity.CRITICAL if critical else None,
        method=Method.REPAIR,
        confirmed=True,
        detail={
            "reason": block.reason,
            "detail": block.detail,
            "failures": block.failures,
            "retryInSeconds": retry_s,
            "holder": block.holder,
        },
    )
