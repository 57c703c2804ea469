"""The leader's watch over under-replication: the markers' count and ages as gauges, and the repair role's
blocked records as `repair_blocked` findings.

Every `under_replication.poll_seconds` the leader lists the markers (how many, the oldest one's age, how
many are past `under_replication.grace_seconds`), then reads the repair role's blocked records (any
worker's, ours or another process's) and reports those of ledgers still marked, so operators see, count
and alert on them where they see everything else; a record outlives its marker only until the next repair.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from auditor.durability.findings import Category
from auditor.durability.ids import LedgerId
from auditor.durability.repairblocked import blocked_finding
from auditor.metadata.own.repairstate import RepairBlocks
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.settings import Settings

from .metrics import AuditorMetrics
from .reporter import Reporter, new_seen
from .state import DaemonState

UNDERREPLICATION = "underreplication"


class UnderReplication:
    """The leader's `underreplication` task. `zk`: the leader's ZooKeeper store now (the replica's)."""

    def __init__(
        self,
        settings: Settings,
        state: DaemonState,
        metrics: AuditorMetrics,
        reporter: Reporter,
        zk: Callable[[], ZooKeeperMetadataStore],
    ) -> None:
        self.settings = settings
        self.state = state
        self.metrics = metrics
        self.reporter = reporter
        self._zk = zk
        self.repair_blocks: RepairBlocks | None = None  # the repair role's records, read by the leader
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Look now, not at the next poll (a marker was consumed: its repair_blocked finding goes)."""
        self._wake.set()

    async def loop(self) -> None:
        grace = self.settings.under_replication.grace_seconds
        while True:
            n, oldest, past = 0, None, 0
            now = time.time() * 1000
            marked: set[LedgerId] = set()
            async for m in self._zk().list_markers():
                n += 1
                marked.add(m.ledger_id)
                if m.ctime > 0:
                    age = (now - m.ctime) / 1000
                    oldest = age if oldest is None else max(oldest, age)
                    past += 1 if grace > 0 and age > grace else 0
            self.metrics.set_under_replication(n, oldest, past)
            await self._report_repair_blocked(marked, now)
            try:
                async with asyncio.timeout(self.settings.under_replication.poll_seconds):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()

    async def _report_repair_blocked(self, marked: set[LedgerId], now_ms: float) -> None:
        """The repair role's blocked records as `repair_blocked` findings of the leader, only for ledgers
        still marked."""
        seen = new_seen()
        zk = self._zk()
        if self.repair_blocks is None or self.repair_blocks.store is not zk:
            self.repair_blocks = RepairBlocks(zk)
        records = await self.repair_blocks.readable()
        for lid, block in sorted(records.items()):
            if lid in marked:
                retry = max(0.0, (block.not_before_ms - now_ms) / 1000)
                self.reporter.report(UNDERREPLICATION, blocked_finding(lid, block, round(retry, 1)), seen)
        for rec in self.state.findings.resolve_absent(
            UNDERREPLICATION, seen, categories={Category.REPAIR_BLOCKED.value}
        ):
            self.metrics.finding_resolved(rec.category)
            self.reporter.sync_findings()
