"""Run a per-ledger check over every ledger: streaming, bounded concurrency, progress, re-checks.

The scan streams ledger metadata (a leaf directory's ledgers in chunks, as their reads come in) and
keeps at most `max_concurrent_ledgers` ledgers in flight. A ledger whose check could not finish (a
bookie did not answer) goes to the delayed re-check queue; the scan never waits for it.
`drain_rechecks` then works the queue until every suspect ledger was either settled or ran out of
attempts.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from auditor.durability.findings import Category, Finding, Method
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata
from auditor.logging import get_logger
from auditor.metadata.errors import CorruptZnodeError, NoSuchLedgerError
from auditor.metadata.interfaces import CorruptLedger, LedgerRecord, ScanStats

from .context import AuditContext, RunStats
from .recheck import RecheckQueue

log = get_logger("auditor.checks")

# Ledgers whose bookies a check that can (`first_answers`) asks together, in one batch per bookie: a scan
# of thousands of ledgers wakes once per bookie per group instead of once per request. At most half of
# `max_concurrent_ledgers`, so two groups are in flight: one being judged while the next one's answers
# arrive.
GROUP_LEDGERS = 64

# A ledger in dispatch, during a scan: [its id, finished] (mutable: `finished` is set when it is done).
_Slot = list[Any]


@dataclass
class LedgerOutcome:
    """What checking one ledger produced. `findings` are confirmed and ready to report."""

    findings: list[Finding] = field(default_factory=list)
    suspect: bool = False  # the check could not finish: re-check later
    skipped: str | None = None  # why the ledger was not checked (e.g. "open", "underreplicated")
    unknown_bookies: dict[str, str] = field(default_factory=dict)  # bookie -> error, when suspect


class LedgerCheck(Protocol):
    name: str

    async def check(self, record: LedgerRecord, stats: RunStats, attempt: int, last_attempt: bool) -> LedgerOutcome: ...


@runtime_checkable
class BatchingCheck(Protocol):
    """A check that can ask the bookies of many ledgers together: the answers `first_answers` returns for
    the `batchable` ledgers go back to `check` one by one as `asked`."""

    name: str

    def batchable(self, record: LedgerRecord | CorruptLedger) -> bool: ...

    async def first_answers(self, records: list[LedgerRecord], stats: RunStats) -> list[Any]: ...

    def settle(self, record: LedgerRecord, asked: Any) -> LedgerOutcome | None: ...

    async def confirm_settled(
        self, mds: list[LedgerMetadata], outcomes: list[LedgerOutcome]
    ) -> list[LedgerOutcome | None]: ...

    async def check(
        self, record: LedgerRecord, stats: RunStats, attempt: int, last_attempt: bool, asked: Any = None
    ) -> LedgerOutcome: ...


FindingSink = Callable[[Finding], Awaitable[None] | None]


@dataclass
class Progress:
    """Where a scan is: for progress bars, ETA and a resume cursor."""

    check: str
    ledgers_done: int = 0
    ledgers_total: int | None = None  # unknown while streaming
    cursor: LedgerId | None = None
    started: float = field(default_factory=time.monotonic)

    @property
    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.ledgers_done / elapsed if elapsed > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        if self.ledgers_total is None or self.rate <= 0:
            return None
        return max(0.0, (self.ledgers_total - self.ledgers_done) / self.rate)


ProgressSink = Callable[[Progress], None]


def unreadable_finding(corrupt: CorruptLedger) -> Finding:
    return Finding.of(
        Category.METADATA_UNREADABLE,
        f"ledger metadata at {corrupt.path} cannot be parsed: {corrupt.problem}",
        ledger=corrupt.ledger_id,
        method=Method.METADATA,
        confirmed=True,
        detail={"path": corrupt.path, "problem": corrupt.problem},
    )


async def _emit(sink: FindingSink, finding: Finding) -> None:
    got = sink(finding)
    if asyncio.iscoroutine(got):
        await got


class CheckRun:
    """One pass of one check over a set of ledgers."""

    def __init__(
        self,
        ctx: AuditContext,
        check: LedgerCheck,
        sink: FindingSink,
        queue: RecheckQueue[LedgerId] | None = None,
        progress: ProgressSink | None = None,
        gate: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.ctx = ctx
        self._gate = gate  # awaited before each ledger: pause, time-of-day windows
        # Highest ledger id such that it and every ledger before it in this scan are finished: a new
        # leader resumes after it without skipping anything still in flight.
        self.completed_cursor: LedgerId | None = None
        self.check = check
        self.sink = sink
        self.queue = queue if queue is not None else RecheckQueue(ctx.options.recheck_delays)
        self.stats = RunStats(check.name)
        self.progress = Progress(check.name)
        self._progress_sink = progress
        self.scan_stats = ScanStats()

    async def _one(
        self, record: LedgerRecord | CorruptLedger, attempt: int = 0, last: bool = False, first: Any = None
    ) -> None:
        lid = record.ledger_id if isinstance(record, CorruptLedger) else record.metadata.ledger_id
        try:
            if isinstance(record, CorruptLedger):
                # Confirm: read it again (a writer may have been mid-update) before reporting.
                try:
                    record = await self.ctx.store.read_ledger(lid)
                except CorruptZnodeError as exc:
                    self.stats.metadata_unreadable += 1
                    await _emit(self.sink, unreadable_finding(CorruptLedger(lid, exc.path, exc.problem)))
                    return
            if first is None:
                outcome = await self.check.check(record, self.stats, attempt, last)
            else:  # only a BatchingCheck's scan hands answers over (an isinstance check per ledger costs)
                outcome = await cast(BatchingCheck, self.check).check(record, self.stats, attempt, last, asked=first)
        except NoSuchLedgerError:
            self.stats.ledgers_skipped["deleted"] += 1
            return
        for waiting in self._record(lid, outcome, attempt):
            await waiting

    def _record(self, lid: LedgerId, outcome: LedgerOutcome, attempt: int) -> list[Awaitable[None]]:
        """Count one ledger's outcome, hand its findings to the sink and queue a re-check if it is suspect.
        Returns what an async sink still has to do, in order (nothing for a plain one)."""
        if outcome.skipped:
            self.stats.ledgers_skipped[outcome.skipped] += 1
        else:
            self.stats.ledgers_checked += 1
        waiting: list[Awaitable[None]] = []
        for f in outcome.findings:
            got = self.sink(f)
            if asyncio.iscoroutine(got):
                waiting.append(got)
        if outcome.suspect:
            if not self.queue.submit(lid, lid, attempt + 1):
                log.warning("re-check attempts exhausted", ledgerId=lid.ledger, check=self.check.name)
            else:
                log.info(
                    "ledger suspect, re-check queued",
                    ledgerId=lid.ledger,
                    check=self.check.name,
                    attempt=attempt + 1,
                    unknownBookies=outcome.unknown_bookies,
                )
        return waiting

    async def scan(
        self,
        start: LedgerId | None = None,
        end: LedgerId | None = None,
        records: AsyncIterator[list[LedgerRecord | CorruptLedger]] | None = None,
    ) -> RunStats:
        """Check every ledger in [start, end) once (re-checks are queued, not awaited)."""
        limit = asyncio.Semaphore(self.ctx.options.max_concurrent_ledgers)
        tasks: set[asyncio.Task[None]] = set()
        source = records if records is not None else self.ctx.store.scan_ledgers(start, end, stats=self.scan_stats)
        # Ledgers in dispatch (ascending id) order: [id, finished]. The cursor passes a ledger only once
        # it and every ledger before it are finished.
        order: collections.deque[_Slot] = collections.deque()

        def advance() -> None:
            while order and order[0][1]:
                self.completed_cursor = order.popleft()[0]

        failures: list[BaseException] = []

        def finished(t: asyncio.Task[None]) -> None:
            tasks.discard(t)
            if not t.cancelled() and (exc := t.exception()) is not None:
                failures.append(exc)  # retrieved here, raised by the scan at its end

        def done_with(slot: _Slot, release: bool = True) -> None:
            if release:
                limit.release()
            slot[1] = True
            advance()
            self.progress.ledgers_done += 1
            self.progress.cursor = self.completed_cursor
            if self._progress_sink:
                self._progress_sink(self.progress)

        async def guarded(r: LedgerRecord | CorruptLedger, slot: _Slot) -> None:
            try:
                await self._one(r)
            finally:
                done_with(slot)

        async def guarded_group(group: list[tuple[LedgerRecord | CorruptLedger, _Slot]]) -> None:
            """A group of `batchable` ledgers: their first answers asked together in one batch per bookie
            (`first_answers`); those the answers settle (`settle`) recorded at once, their informational
            findings confirmed together (`confirm_settled`); each of the others checked in turn."""
            assert batching is not None
            left = {id(r): (r, slot) for r, slot in group}
            try:
                together = [r for r, _ in group if isinstance(r, LedgerRecord)]
                firsts = dict(zip(map(id, together), await batching.first_answers(together, self.stats)))
                informational: list[tuple[LedgerRecord, LedgerOutcome]] = []
                for r, slot in group:
                    asked = firsts.get(id(r))
                    settled = batching.settle(r, asked) if isinstance(r, LedgerRecord) and asked is not None else None
                    if settled is None:
                        await self._one(r, first=asked)
                    elif settled.findings:  # informational only: confirmed below, all at once
                        assert isinstance(r, LedgerRecord)
                        informational.append((r, settled))
                        continue
                    else:  # clean: decided without a coroutine
                        self._record(slot[0], settled, 0)
                    del left[id(r)]
                    done_with(slot, release=False)
                if informational:
                    mds = [r.metadata for r, _ in informational]
                    confirmed = await batching.confirm_settled(mds, [o for _, o in informational])
                    for (r, _), outcome in zip(informational, confirmed):
                        if outcome is None:  # its metadata changed meanwhile: the full check
                            await self._one(r)
                        else:
                            for waiting in self._record(r.metadata.ledger_id, outcome, 0):
                                await waiting
                        done_with(left.pop(id(r))[1], release=False)
            finally:
                for _, slot in left.values():  # cancelled or failed before these were checked
                    done_with(slot, release=False)
                # The group's places go back together: the dispatcher wakes once to fill the next group,
                # not once per ledger.
                for _ in group:
                    limit.release()

        def spawn(coro: Coroutine[Any, Any, None]) -> None:
            t = asyncio.create_task(coro)
            tasks.add(t)
            t.add_done_callback(finished)

        batching = self.check if isinstance(self.check, BatchingCheck) else None
        group_size = min(GROUP_LEDGERS, max(1, self.ctx.options.max_concurrent_ledgers // 2))
        group: list[tuple[LedgerRecord | CorruptLedger, _Slot]] = []
        refresh = getattr(self.check, "refresh", None)  # optional: before each batch of the source
        try:
            async for batch in source:
                if refresh is not None:
                    await refresh()
                for r in batch:
                    self.stats.ledgers_seen += 1
                    if self._gate is not None:
                        await self._gate()
                    await limit.acquire()
                    slot = [r.ledger_id if isinstance(r, CorruptLedger) else r.metadata.ledger_id, False]
                    order.append(slot)
                    if batching is None or group_size == 1 or not batching.batchable(r):
                        spawn(guarded(r, slot))
                        continue
                    group.append((r, slot))
                    if len(group) >= group_size:
                        spawn(guarded_group(group))
                        group = []
                if group:  # a batch's last ledgers do not wait for the next batch's reads
                    spawn(guarded_group(group))
                    group = []
            if tasks:
                await asyncio.gather(*tasks)
            if failures:
                raise failures[0]
        finally:
            for _, slot in group:  # dispatch ended early: never checked
                limit.release()
                slot[1] = True
            # The scan fails with the first error of any ledger (after dispatching the rest, as before);
            # every task is retrieved, so none is lost ("Task exception was never retrieved") or left running.
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return self.stats

    async def recheck(self, lid: LedgerId, attempt: int, last: bool) -> None:
        self.stats.ledgers_rechecked += 1
        try:
            record = await self.ctx.store.read_ledger(lid)
        except NoSuchLedgerError:
            self.stats.ledgers_skipped["deleted"] += 1
            return
        await self._one(record, attempt, last)

    async def drain_rechecks(self) -> None:
        """Work the re-check queue until it is empty: the ledgers due together are re-checked together, at
        most `max_concurrent_ledgers` at a time. One at a time, a bookie that is registered but silent
        cost every ledger on it its timeouts in turn: 2 s per ledger and re-check at a 1 s timeout, some
        400 s per round for the 200 ledgers of a test cluster (tests/realcluster/processes/test_daemon_processes.py)."""
        limit = max(1, self.ctx.options.max_concurrent_ledgers)
        while len(self.queue):
            due = [await self.queue.get()]
            while len(due) < limit and (more := self.queue.pop_due()) is not None:
                due.append(more)
            outcomes = await asyncio.gather(
                *(self.recheck(d.item, d.attempt, d.is_last) for d in due), return_exceptions=True
            )
            for failed in outcomes:  # the first failure, once every re-check of the batch has ended
                if isinstance(failed, BaseException):
                    raise failed

    async def begin(self) -> bool:
        """A check's preparation for one run (a cross-check reads what it compares against; a per-ledger
        check may list what it would otherwise read per ledger); False: there is nothing to scan (e.g. no
        application metadata)."""
        prepare = getattr(self.check, "prepare", None)
        return True if prepare is None else bool(await prepare(self.stats))

    async def end(self) -> None:
        """A whole-run check's verdicts on what the scan did not meet (e.g. listed ledgers that are gone)."""
        finish = getattr(self.check, "finish", None)
        if finish is not None:
            for f in await finish(self.stats):
                await _emit(self.sink, f)

    async def run(self, start: LedgerId | None = None, end: LedgerId | None = None) -> RunStats:
        if await self.begin():
            await self.scan(start, end)
            await self.drain_rechecks()
            await self.end()
        self.stats.finished = time.time()
        return self.stats
