"""The repair worker: the loop over the marked ledgers, and the operator's run-time limits.

`RepairWorker` is a `LedgerRepairer` (ledger.py: one ledger end to end under Java's lock) run over every
marked ledger. The loop (`run_once`, `run`): list markers, skip ledgers locked by another worker or in
backoff, order them worst first by what their metadata shows (`repairplan.metadata_work_class`,
`work_order`; the bookies are asked only by the repair of each), repair `ledgers_in_parallel` at a time
(each lane takes the next of the one ordered list, made again every `relist_s`), wait while replication
is disabled. Before each
ledger it applies the operator's run-time limits (`refresh_limits`). Cancellation stops it cleanly: a
held lock is released on the way out.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from dataclasses import replace

from kazoo.exceptions import KazooException

from auditor.aio.ratelimit import TokenBucket
from auditor.aio.tasks import gather_all
from auditor.bookie.config import BookieClientConfig
from auditor.checks.context import AuditContext
from auditor.durability.ids import LedgerId
from auditor.durability.repairplan import WorkClass, WorkItem, metadata_work_class, work_order
from auditor.logging import get_logger
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.interfaces import LedgerRecord
from auditor.metadata.own.repairlimits import RepairLimits, RepairLimitsNode
from auditor.metadata.repair.lock import RepairLocks

from .attempt import LedgerRepair, RepairOptions
from .ledger import LedgerRepairer
from .metrics import RepairMetrics

log = get_logger("auditor.repair")


class RepairWorker(LedgerRepairer):
    """Repairs every marked ledger, worst first, with `ctx` (store + read-only bookie pool) and `locks`
    (Java's protocol), under the operator's run-time limits."""

    def __init__(
        self,
        ctx: AuditContext,
        locks: RepairLocks,
        options: RepairOptions,
        *,
        locations: object | None = None,
        bookie_config: BookieClientConfig | None = None,
        recovery_delay_s: int = 0,
        metrics: RepairMetrics | None = None,
    ) -> None:
        super().__init__(
            ctx,
            locks,
            options,
            locations=locations,
            bookie_config=bookie_config,
            recovery_delay_s=recovery_delay_s,
            metrics=metrics,
        )
        self._own_options = options  # the settings; run-time limits (RepairLimitsNode) override them
        self.limits_node = RepairLimitsNode(locks.store)
        self.limits = RepairLimits()  # the run-time limits applied now
        self._bad_limits = False

    # ------------------------------------------------------------------ run-time limits
    async def refresh_limits(self) -> None:
        """Apply the operator's run-time limits (`bk-auditor repair-limits`), read before each ledger:
        a limit set replaces this worker's setting, an unset one restores it. Copies under way keep the
        per-bookie bound they started with; the byte rate changes at once."""
        try:
            limits = await self.limits_node.get()
        except CorruptZnodeError as exc:
            if not self._bad_limits:  # logged once; our own settings meanwhile
                self._bad_limits = True
                log.warning(
                    "repair limits unreadable: the worker's own settings apply", path=exc.path, problem=exc.problem
                )
            limits = RepairLimits()
        else:
            self._bad_limits = False
        if _limit_values(limits) == _limit_values(self.limits):
            return
        own = self._own_options
        rate = limits.bytes_per_second if limits.bytes_per_second is not None else own.bytes_per_second
        if rate <= 0:
            self.byte_rate = None
        elif self.byte_rate is None:
            self.byte_rate = TokenBucket(rate)
        else:
            self.byte_rate.retune(rate)  # copies under way share this bucket: at once for them too
        in_flight = limits.entries_in_flight or own.copy_limits.max_in_flight
        per_bookie = limits.entries_in_flight_per_bookie or own.entries_in_flight_per_bookie
        if per_bookie != self.options.entries_in_flight_per_bookie:
            self._target_slots = {}  # new copies take new bounds
        self.options = replace(
            self.options,
            bytes_per_second=rate,
            copy_limits=replace(self.options.copy_limits, max_in_flight=in_flight),
            entries_in_flight_per_bookie=per_bookie,
        )
        self.limits = limits
        log.warning(
            "repair limits applied",
            bytesPerSecond=rate,
            entriesInFlight=in_flight,
            entriesInFlightPerBookie=per_bookie,
            setBy=limits.set_by or None,
        )

    # ------------------------------------------------------------------ the loop
    async def pending(self) -> list[WorkItem]:
        """Marked ledgers not locked elsewhere and not in backoff, ordered worst first by what their
        metadata shows (`repairplan.metadata_work_class`): no bookie is asked here, so the first copy
        starts after one read of the marked ledgers' metadata, not after a read of all their copies."""
        locked = await self.locks.locked()
        await self._refresh_shared()
        ids = [m.ledger_id async for m in self.locks.markers()]
        if self.metrics is not None:  # records of ledgers no longer marked do not count
            marked = set(ids)
            reasons = Counter(b.reason for lid, b in self._shared.items() if lid in marked)
            self.metrics.set_blocked(reasons)
        await self._refresh_states()
        todo = [
            lid
            for lid in ids
            if not self.in_backoff(lid) and self.locks.store.markers.lock(lid).rsplit("/", 1)[-1] not in locked
        ]
        items: list[WorkItem] = []
        for lid, record in zip(todo, await self.ctx.store.read_ledgers(todo), strict=True):
            if not isinstance(record, LedgerRecord):  # deleted or unparsable: repair() finds it and says so
                items.append(WorkItem(lid, _worst(), 0))
                continue
            states = {b: self.states.state(b) for b in record.metadata.bookies}
            items.append(WorkItem(lid, metadata_work_class(record.metadata, states), record.effective_ctime))
        ordered = work_order(items, newest_first=self.options.newest_first)
        if self.metrics is not None:
            self.metrics.set_queue(ordered)
        return ordered

    async def _refresh_shared(self) -> None:
        """Every worker's blocked records (a corrupt one logged once and ignored)."""
        self._shared = await self.blocks.readable()

    async def run_once(self) -> list[LedgerRepair]:
        """Repair what is marked, worst first, `ledgers_in_parallel` at a time: each lane takes the next
        ledger of the one ordered list, so the worst are started first. The list is made again when it is
        older than `options.relist_s`, so ledgers marked meanwhile (a second loss, the auditor still
        marking) take their place by class instead of waiting for the next pass; a ledger is taken once
        per call."""
        results: list[LedgerRepair] = []
        queue = deque(await self.pending())
        listed = time.monotonic()
        taken: set[LedgerId] = set()
        turn = asyncio.Lock()  # one lane at a time takes the next ledger (and lists again)

        async def next_item() -> WorkItem | None:
            nonlocal queue, listed
            async with turn:
                if queue and time.monotonic() - listed >= self.options.relist_s:
                    queue = deque(w for w in await self.pending() if w.ledger_id not in taken)
                    listed = time.monotonic()
                while queue:
                    item = queue.popleft()
                    if item.ledger_id not in taken:
                        taken.add(item.ledger_id)
                        return item
                return None

        async def lane() -> None:
            while (item := await next_item()) is not None:
                if await self.locks.is_disabled():
                    return
                await self.refresh_limits()
                results.append(await self.repair(item.ledger_id))

        await gather_all(lane() for _ in range(max(1, self.options.ledgers_in_parallel)))
        return results

    async def run(self, poll_s: float = 10.0) -> None:
        """Until cancelled: wait while disabled, repair what is marked, look again after `poll_s`. A pass
        that meets ZooKeeper trouble (a connection loss, an expired session) is logged and the next one
        tries again: the worker outlives an outage (its locks end with the session, and its writes are
        guarded by them), and its readiness probe says it is not ready meanwhile."""
        while True:
            try:
                await self.locks.wait_enabled()
                await self.run_once()
            except (TimeoutError, KazooException) as exc:
                log.warning("repair pass stopped by ZooKeeper trouble; trying again", error=repr(exc))
            await asyncio.sleep(poll_s)


def _limit_values(limits: RepairLimits) -> tuple[float | None, int | None, int | None]:
    return limits.bytes_per_second, limits.entries_in_flight, limits.entries_in_flight_per_bookie


def _worst() -> WorkClass:
    """The class of a ledger that could not be assessed: first, so that repair() says why."""
    return WorkClass.NO_LIVE_COPY
