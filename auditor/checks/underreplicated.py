"""`underreplicated`: what is marked under-replicated right now, and is it still broken?

Java's `listunderreplicated` lists the markers. This adds, per marked ledger, how old the marker is,
which worker holds its lock and for how long, and our own verdict from the bookies now (asked as
`explain` asks them, as if the ledger were not marked): still broken and how badly, or a stale marker
(its bookies came back, apache/bookkeeper#2766), or unknown when a bookie did not answer. A bookie the
marker names as lost that is no longer registered counts as holding nothing (it is gone, as the marker
says); a bookie that comes back is asked again. Reads only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

from auditor.durability import verdicts
from auditor.durability.ids import LedgerId
from auditor.durability.ranges import RangeSet
from auditor.metadata.errors import NoSuchLedgerError
from auditor.metadata.interfaces import MarkerRecord

from .context import AuditContext, RunStats
from .explain import LedgerExplainer

DELETED = "deleted"  # the marked ledger's metadata is gone (Java's worker drops such markers)


@dataclass(frozen=True)
class MarkedLedger:
    ledger: LedgerId
    marker: str  # the marker's znode
    replicas: tuple[str, ...]  # the bookies the marker names as lost
    marked_seconds: float | None  # the marker's age (its ctime, else the znode's)
    lock_holder: str | None  # the replication worker working on it
    locked_seconds: float | None
    verdict: str  # MarkedState value, or DELETED
    worst: str | None  # the worst entry category while broken
    entries: int  # entries in that category
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "ledger": self.ledger.qualified_name,
            "ledgerId": self.ledger.ledger,
            "marker": self.marker,
            "replicas": list(self.replicas),
            "markedSeconds": self.marked_seconds,
            "lockHolder": self.lock_holder,
            "lockedSeconds": self.locked_seconds,
            "verdict": self.verdict,
            "worstCategory": self.worst,
            "entries": self.entries,
            "reasons": list(self.reasons),
        }


async def marked_ledgers(ctx: AuditContext, *, concurrency: int = 16) -> AsyncIterator[MarkedLedger]:
    """Every marked ledger with its verdict, in marker order (results are yielded as they come)."""
    sem = asyncio.Semaphore(concurrency)
    registered = (await ctx.store.registrations()).available

    async def one(marker: MarkerRecord) -> MarkedLedger:
        async with sem:
            return await _judge(ctx, marker, registered)

    tasks = [asyncio.ensure_future(one(m)) async for m in ctx.store.list_markers()]
    try:
        for t in tasks:
            yield await t
    finally:
        for t in tasks:
            t.cancel()


async def _judge(ctx: AuditContext, marker: MarkerRecord, registered: frozenset[str]) -> MarkedLedger:
    now_ms = time.time() * 1000
    lid = marker.ledger_id
    lock = await ctx.store.read_lock(lid)
    born = marker.ctime if marker.ctime >= 0 else marker.stat.ctime_ms
    deleted = MarkedLedger(
        ledger=lid,
        marker=marker.path,
        replicas=marker.replicas,
        marked_seconds=round((now_ms - born) / 1000, 1) if born else None,
        lock_holder=lock.holder if lock else None,
        locked_seconds=round((now_ms - lock.ctime_ms) / 1000, 1) if lock else None,
        verdict=DELETED,
        worst=None,
        entries=0,
    )
    try:
        md = (await ctx.store.read_ledger(lid)).metadata
    except NoSuchLedgerError:
        return deleted
    check = LedgerExplainer(ctx)
    stats = RunStats(check.name)
    end = (await check.end_of(md, stats)).end
    if end is None:  # an open ledger whose end no bookie proves: nothing can be judged yet
        return replace(deleted, verdict=verdicts.MarkedState.UNKNOWN.value, reasons=("no LAC answer",))
    # A bookie the marker names as lost and that is not registered is gone, as the marker says (Java's
    # rule for a lost bookie): it counts as holding nothing instead of as an unknown answer. Any other
    # silent bookie stays unknown.
    gone = {b for b in marker.replicas if b not in registered}
    everyone = {b for seg in md.segments for b in seg.ensemble}
    answers = await check.ask(md, end, stats, everyone - gone)
    scrutiny = verdicts.scrutinize_ledger(
        md, {**answers.answers, **dict.fromkeys(gone & everyone, RangeSet())}, end=end, now_ms=int(now_ms)
    )
    v = verdicts.marked_verdict(scrutiny)
    return replace(
        deleted,
        verdict=v.state.value,
        worst=v.worst.value if v.worst else None,
        entries=v.entries,
        reasons=v.reasons,
    )
