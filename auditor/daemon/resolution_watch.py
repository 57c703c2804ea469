"""The leader's prompt re-check: a finding clears when its cause is gone, not at the check's next pass.

For every ledger with an active actionable finding (up to MAX_WATCHED of them) the leader keeps one-shot
ZooKeeper watches on the ledger's metadata znode and on its under-replication marker. When one fires (a
repair replaced a bookie in the ensemble, a repair worker, ours or Java's, consumed the marker, an operator
fixed or deleted the ledger), the ledger is re-checked, after DEBOUNCE_SECONDS to gather a repair's several
writes, by the checks that reported it; what they no longer see on it is resolved, and its gauges follow. A
lost bookie that registers again has the ledgers of the findings naming it re-checked the same way. Reads
only: watches and the checks' own read-only requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from auditor.board.findings import FindingStore
from auditor.durability.ids import LedgerId
from auditor.logging import get_logger
from auditor.metadata.store import ZooKeeperMetadataStore

log = get_logger("auditor.daemon")

RESOLUTION = "resolution"
MAX_WATCHED = 20_000  # flagged ledgers watched; beyond that, the checks' passes resolve them
ARM_SECONDS = 2.0  # how often newly flagged ledgers are armed (at once when a finding is new)
# A ledger whose metadata changed later than this before its finding's last sighting is re-checked as it is
# armed: the change (a repair's ensemble update) may have come before the watch (ZooKeeper's clock, mtime,
# against ours: the margin takes some skew).
CHANGED_MARGIN_SECONDS = 1.0
DEBOUNCE_SECONDS = 1.0
BATCH = 1000  # ledgers per re-check
ARM_CONCURRENCY = 64

Recheck = Callable[[set[LedgerId], str], Awaitable[Any]]


class ResolutionWatch:
    """The leader's `resolution` task (one per leadership term)."""

    def __init__(
        self,
        zk: ZooKeeperMetadataStore,
        findings: FindingStore,
        recheck: Recheck,
        *,
        after_recheck: Callable[[], None] = lambda: None,
        max_watched: int = MAX_WATCHED,
        checks: set[str] | None = None,
    ) -> None:
        self.zk = zk
        self.checks = checks  # only ledgers with findings of these checks are watched (None: any)
        self.findings = findings
        self._recheck = recheck
        self._after = after_recheck
        self.max_watched = max_watched
        self.armed: set[LedgerId] = set()
        self._fired: dict[LedgerId, str] = {}
        self._event = asyncio.Event()
        self._new = asyncio.Event()

    def finding_new(self) -> None:
        """The reporter's hook: a new actionable finding; arm its ledger now, not at the next look."""
        self._new.set()

    def fire(self, ledger: LedgerId, why: str) -> None:
        """Re-check `ledger` soon (its watch fired, or a bookie it names came back)."""
        self.armed.discard(ledger)  # a fired watch is spent: armed again if the ledger stays flagged
        self._fired.setdefault(ledger, why)
        self._event.set()

    def bookies_returned(self, bookies: set[str]) -> None:
        """The bookie watch's hook: the ledgers of findings naming a bookie that is back."""
        for rec in list(self.findings.actionable_records()):
            f = rec.finding
            if f.ledger is not None and (f.bookie in bookies or not bookies.isdisjoint(f.ensemble)):
                self.fire(f.ledger, "bookie returned")

    def _firing(self, ledger: LedgerId) -> Callable[[], None]:
        def fired() -> None:
            self.fire(ledger, "metadata or marker changed")

        return fired

    async def _arm(self, ledgers: list[LedgerId]) -> None:
        gate = asyncio.Semaphore(ARM_CONCURRENCY)
        sighted: dict[LedgerId, float] = {}  # the earliest last sighting of each ledger's findings
        for rec in self.findings.actionable_records():
            lid = rec.finding.ledger
            if lid is not None:
                sighted[lid] = min(sighted.get(lid, rec.last_seen), rec.last_seen)

        async def one(lid: LedgerId) -> None:
            async with gate:
                self.armed.add(lid)
                try:
                    mtime = await self.zk.watch_ledger_once(lid, self._firing(lid))
                except Exception as exc:  # ZooKeeper trouble: tried again at the next look
                    self.armed.discard(lid)
                    log.debug("cannot watch ledger", ledger=lid.qualified_name, error=str(exc))
                    return
                seen = sighted.get(lid)
                if mtime is None or (seen is not None and mtime / 1000 > seen - CHANGED_MARGIN_SECONDS):
                    self.fire(lid, "changed before it was watched")

        await asyncio.gather(*(one(lid) for lid in ledgers))

    def _flagged(self) -> dict[LedgerId, set[str]]:
        flagged = self.findings.flagged_ledgers()
        if self.checks is None:
            return flagged
        return {lid: got for lid, got in flagged.items() if not got.isdisjoint(self.checks)}

    async def run(self) -> None:
        while True:
            flagged = self._flagged()
            self.armed &= set(flagged)  # a resolved ledger's watch may still fire: it is ignored below
            room = self.max_watched - len(self.armed)
            if room > 0:
                await self._arm([lid for lid in flagged if lid not in self.armed][:room])
            self._new.clear()
            waits = [asyncio.ensure_future(self._event.wait()), asyncio.ensure_future(self._new.wait())]
            try:
                await asyncio.wait(waits, timeout=ARM_SECONDS, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            if not self._event.is_set():
                continue  # a new finding to arm, or time to look again
            await asyncio.sleep(DEBOUNCE_SECONDS)
            self._event.clear()
            fired, self._fired = self._fired, {}
            flagged = self._flagged()
            due = sorted(lid for lid in fired if lid in flagged)
            for start in range(0, len(due), BATCH):
                batch = set(due[start : start + BATCH])
                reasons = sorted({fired[lid] for lid in batch})
                await self._recheck(batch, ", ".join(reasons))
            if fired:
                self._after()
