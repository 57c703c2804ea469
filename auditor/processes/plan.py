"""Plan a sweep on the driver: find the leaf directories (never listing one unless it must be cut), weigh
them by their child counts, and cut the id space into partitions (`partitions.plan_partitions`)."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any

from auditor.checks.build import connect_store
from auditor.durability.ids import LedgerId, next_id
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.settings import Settings

from .partitions import (
    IdPartition,
    Span,
    check_cover,
    clip_spans,
    heavy_spans,
    plan_partitions,
)


@dataclass
class SweepPlan:
    partitions: list[IdPartition]
    manager: str
    leaf_directories: int
    ledgers_estimate: int  # sum of the leaf directories' child counts
    directories_listed: int = 0  # leaf directories listed to cut them at real quantiles
    seconds: float = 0.0
    start: LedgerId | None = None
    end: LedgerId | None = None
    spans: list[Span] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "partitions": len(self.partitions),
            "ledgerManager": self.manager,
            "leafDirectories": self.leaf_directories,
            "ledgersEstimate": self.ledgers_estimate,
            "leafDirectoriesListed": self.directories_listed,
            "planSeconds": round(self.seconds, 3),
            "start": str(self.start) if self.start else None,
            "end": str(self.end) if self.end else None,
        }


async def _ids_of(store: ZooKeeperMetadataStore, span: Span) -> tuple[LedgerId, ...]:
    ids: list[LedgerId] = []
    async for batch in store.list_ledgers(span.first, next_id(span.last)):
        ids.extend(batch.ledger_ids)
    return tuple(ids)


async def plan_with_store(
    store: ZooKeeperMetadataStore,
    partitions: int,
    *,
    start: LedgerId | None = None,
    end: LedgerId | None = None,
    refine: bool = True,
    max_ledgers: int | None = None,
) -> SweepPlan:
    """`refine`: list the (at most `partitions`) leaf directories heavier than one partition's share, so a
    small cluster's few directories are cut at their real id quantiles rather than evenly by id.
    `max_ledgers`: more partitions than `partitions` where needed so none carries more than about this
    many ledgers (a partition's findings travel back in one piece: this bounds what one holds)."""
    t0 = time.monotonic()
    dirs = await store.list_leaf_directories()
    spans = clip_spans([Span(d.first, d.last, d.children or 0, d.path) for d in dirs], start, end)
    if max_ledgers is not None:
        partitions = max(partitions, math.ceil(sum(s.ledgers for s in spans) / max_ledgers))
    listed = 0
    if refine and partitions > 1:
        heavy = {s.directory: s for s in heavy_spans(spans, partitions)[:partitions]}
        refined = []
        for s in spans:
            if s.directory in heavy:
                ids = await _ids_of(store, s)
                listed += 1
                s = Span(s.first, s.last, len(ids), s.directory, ids)
            refined.append(s)
        spans = refined
    parts = plan_partitions(spans, partitions, lo=start, hi=end)
    return SweepPlan(
        parts,
        store.manager.value,
        len(dirs),
        sum(d.children or 0 for d in dirs),
        listed,
        time.monotonic() - t0,
        start,
        end,
        spans,
    )


async def plan_sweep(
    settings: Settings,
    partitions: int,
    *,
    start: LedgerId | None = None,
    end: LedgerId | None = None,
    refine: bool = True,
    max_ledgers: int | None = None,
) -> SweepPlan:
    store = await connect_store(settings)
    try:
        return await plan_with_store(store, partitions, start=start, end=end, refine=refine, max_ledgers=max_ledgers)
    finally:
        await store.close()


def checked_plan(
    settings: Settings,
    partitions: int,
    *,
    start: LedgerId | None = None,
    end: LedgerId | None = None,
    refine: bool = True,
    max_ledgers: int | None = None,
) -> SweepPlan:
    """`plan_sweep` for a synchronous driver (on an event loop of its own), its partitions checked to cover
    [start, end) once each: never a gap, never a ledger twice."""
    plan = asyncio.run(plan_sweep(settings, partitions, start=start, end=end, refine=refine, max_ledgers=max_ledgers))
    check_cover(plan.partitions, start, end)
    return plan
