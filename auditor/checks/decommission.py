"""`can-decommission BOOKIE`: can this bookie go now, and if not, what holds it back?

Every ledger whose metadata still names the bookie is listed with the verdict of
`auditor.durability.decommission` (the other bookies asked as `explain` asks them; the bookie itself is
never asked, it may already be down), its under-replication marker and worker lock, and one reason in
words. Safe means: taking the bookie away loses no entry and leaves no open ledger hanging; ledgers
that still name it are then re-replicated by the workers once it is gone. Reads only.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace

from auditor.durability.decommission import Blocker, LedgerDecommission, judge_ledger
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata
from auditor.metadata.interfaces import CorruptLedger, LedgerRecord

from .context import AuditContext, RunStats
from .explain import LedgerExplainer


@dataclass(frozen=True)
class LedgerOnBookie:
    ledger: LedgerId
    closed: bool
    segments: tuple[int, ...]  # indexes of the segments that name the bookie
    verdict: LedgerDecommission | None  # None: the open ledger's end is not known yet
    marked_seconds: float | None  # None: not marked under-replicated
    lock_holder: str | None
    locked_seconds: float | None
    reason: str

    @property
    def blockers(self) -> tuple[Blocker, ...]:
        if self.verdict is None:
            return (Blocker.OPEN_LEDGER,)
        return self.verdict.blockers

    def to_dict(self) -> dict[str, object]:
        v = self.verdict
        return {
            "ledger": self.ledger.qualified_name,
            "ledgerId": self.ledger.ledger,
            "closed": self.closed,
            "segments": list(self.segments),
            "blockers": [b.value for b in self.blockers],
            "onlyHere": v.lost.to_text() if v else None,
            "unconfirmed": v.unsure.to_text() if v else None,
            "fewerCopies": v.thin.to_text() if v else None,
            "unanswered": list(v.unanswered) if v else [],
            "markedSeconds": self.marked_seconds,
            "lockHolder": self.lock_holder,
            "lockedSeconds": self.locked_seconds,
            "reason": self.reason,
        }


@dataclass
class DecommissionReport:
    bookie: str
    registered: bool  # still in available/ or readonly/
    replication_disabled: bool
    ledgers: list[LedgerOnBookie] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # metadata znodes that could not be parsed

    @property
    def safe(self) -> bool:
        return not self.unreadable and not any(x.blockers for x in self.ledgers)

    def to_dict(self) -> dict[str, object]:
        return {
            "bookie": self.bookie,
            "safe": self.safe,
            "registered": self.registered,
            "replicationDisabled": self.replication_disabled,
            "ledgers": [x.to_dict() for x in self.ledgers],
            "unreadableMetadata": self.unreadable,
        }


def names(md: LedgerMetadata, bookie: str) -> tuple[int, ...]:
    return tuple(i for i, s in enumerate(md.segments) if bookie in s.ensemble)


async def decommission_report(ctx: AuditContext, bookie: str, *, concurrency: int = 16) -> DecommissionReport:
    regs = await ctx.store.registrations()
    report = DecommissionReport(bookie, bookie in regs.available, await ctx.store.is_replication_disabled())
    sem = asyncio.Semaphore(concurrency)

    async def one(record: LedgerRecord) -> LedgerOnBookie:
        async with sem:
            return await _judge(ctx, record.metadata, bookie, report.replication_disabled)

    tasks = []
    async for batch in ctx.store.scan_ledgers():
        for r in batch:
            if isinstance(r, CorruptLedger):
                report.unreadable.append(r.path)  # it may name the bookie: we cannot tell, so not safe
            elif names(r.metadata, bookie):
                tasks.append(asyncio.ensure_future(one(r)))
    try:
        report.ledgers = [await t for t in tasks]
    finally:
        for t in tasks:
            t.cancel()
    return report


async def _judge(ctx: AuditContext, md: LedgerMetadata, bookie: str, replication_disabled: bool) -> LedgerOnBookie:
    now_ms = time.time() * 1000
    lid = md.ledger_id
    marker = await ctx.store.read_marker(lid)
    lock = await ctx.store.read_lock(lid) if marker is not None else None
    born = (marker.ctime if marker.ctime >= 0 else marker.stat.ctime_ms) if marker else None
    check = LedgerExplainer(ctx)
    stats = RunStats(check.name)
    end = (await check.end_of(md, stats)).end
    verdict = None
    if end is not None:
        others = {b for s in md.segments for b in s.ensemble if b != bookie}
        answers = await check.ask(md, end, stats, others)
        verdict = judge_ledger(md, bookie, answers.answers, end)
    row = LedgerOnBookie(
        ledger=lid,
        closed=md.is_closed,
        segments=names(md, bookie),
        verdict=verdict,
        marked_seconds=round((now_ms - born) / 1000, 1) if born else None,
        lock_holder=lock.holder if lock else None,
        locked_seconds=round((now_ms - lock.ctime_ms) / 1000, 1) if lock else None,
        reason="",
    )
    return _with_reason(row, bookie, replication_disabled)


def _with_reason(row: LedgerOnBookie, bookie: str, replication_disabled: bool) -> LedgerOnBookie:
    v = row.verdict
    if v is None:
        why = f"open ledger with {bookie} in it and no bookie proves its end yet: waiting for its writer or recovery"
    elif v.lost:
        why = f"entries {v.lost.to_text(limit=10)} exist only on {bookie}: another copy must be made before it goes"
    elif v.open_last_segment:
        why = f"open ledger with {bookie} in its last segment: waiting for its writer to close it (or for recovery)"
    elif v.unsure:
        why = f"other copies of entries {v.unsure.to_text(limit=10)} unconfirmed: {', '.join(v.unanswered)} did not answer"
    else:
        copies = (
            "other copies complete"
            if not v.thin
            else f"another copy of every entry (entries {v.thin.to_text(limit=10)} on fewer than WQ-1 other bookies)"
        )
        why = _progress(row, bookie, replication_disabled, copies)
    return replace(row, reason=why)


def _progress(row: LedgerOnBookie, bookie: str, replication_disabled: bool, copies: str) -> str:
    if row.marked_seconds is None:
        return f"{copies}; not marked yet: the auditor marks it once {bookie} is gone (after lostBookieRecoveryDelay)"
    if row.lock_holder:
        return f"{copies}; being re-replicated by {row.lock_holder} for {row.locked_seconds or 0:.0f}s"
    if replication_disabled:
        return f"{copies}; marked, but replication is disabled: no worker takes it"
    return f"{copies}; marked, waiting for a replication worker"
