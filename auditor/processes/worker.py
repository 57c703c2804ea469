"""What an executor runs for one partition: the same checks as `bk-auditor check`, over one id range.

Each partition builds its own `audit_context` (its own ZooKeeper session and bookie connections, so
per-bookie rate limits apply per partition in flight), runs every selected check with `CheckRun`
(scan, then the re-check queue) and returns plain rows, no Spark types:

* `("finding", partition, check, seq, json)`: json = {"finding": Finding.to_wire()}
* `("stats", partition, check, seq, json)`: the check's RunStats and scan counters for this partition
* `("suspect", partition, check, seq, json)`: json = {"ledger": qualified name, "attempt": n}, only when
  the caller works the re-checks itself (`leader_rechecks`: the daemon's leader, on its own delays)

`seq` orders a partition's rows as they were produced, so the driver can keep the first sighting of a
fault exactly as the one-shot command does. Nothing here imports pyspark: the module is importable and
testable without a JVM.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict
from typing import Any

from auditor.bookie.capabilities import CapabilityBook, LocalCapabilityBook
from auditor.checks.build import audit_context
from auditor.checks.per_ledger import CHECKS
from auditor.checks.runner import BatchingCheck, CheckRun, LedgerCheck, LedgerOutcome
from auditor.durability.findings import Finding
from auditor.durability.ids import LedgerId
from auditor.logging import get_logger
from auditor.metadata.interfaces import CorruptLedger, LedgerRecord
from auditor.processes.gctune import tune_gc
from auditor.settings import Settings

from .partitions import IdPartition

log = get_logger("auditor.spark")

FINDING = "finding"
STATS = "stats"
SUSPECT = "suspect"
Row = tuple[str, int, str, int, str]

_configured_level: str | None = None
# Each bookie's adaptive request rate as this worker process's last partition left it: where the next one
# starts. A partition's clients are new, and from the cautious start rate (bookie_client.
# start_requests_per_second) a ramp to the cap takes seconds, a good part of a partition: the daemon's
# default budgets on 2 processes scanned 389 ledgers/s against one process's 530 before this
# (bench/daemon_scan.py, 10,000 ledgers).
_adapted_rates: dict[str, float] = {}
_adapted_windows: dict[str, int] = {}  # and each bookie's window, likewise
# What this process tree's clients learnt of each bookie's GET_LIST support, per bookie incarnation
# (bookie/capabilities.py): the pool owner's shared book on its worker processes (`use_capability_book`),
# else (a Spark executor) this process's own.
_capabilities: CapabilityBook = LocalCapabilityBook()


def use_capability_book(book: CapabilityBook) -> None:
    """This worker process's partitions share `book` (the pool owner's) with the other workers."""
    global _capabilities
    _capabilities = book


class _Tracked:
    """Wraps a check to count (and optionally list) the ledgers the scan hands it: proof of coverage."""

    def __init__(self, inner: LedgerCheck, keep_ids: bool) -> None:
        self.inner = inner
        self._batching = inner if isinstance(inner, BatchingCheck) else None
        self.name = inner.name
        self.count = 0
        self.first: LedgerId | None = None
        self.last: LedgerId | None = None
        self.ids: list[str] | None = [] if keep_ids else None

    def __getattr__(self, name: str) -> Any:
        # Everything else is the inner check's, looked up as CheckRun looks it up: its `prepare` (the
        # scrutiny's one listing of the markers, without which every ledger's marker is read and no
        # ledger is asked for in a batch) and a whole-run check's `finish`; absent there, absent here.
        if name == "inner":  # not set yet (e.g. while unpickling): never recurse
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _count(self, record: LedgerRecord) -> None:
        lid = record.metadata.ledger_id
        self.count += 1
        self.first = lid if self.first is None else min(self.first, lid)
        self.last = lid if self.last is None else max(self.last, lid)
        if self.ids is not None:
            self.ids.append(lid.qualified_name)

    def batchable(self, record: LedgerRecord | CorruptLedger) -> bool:
        return self._batching is not None and self._batching.batchable(record)

    async def first_answers(self, records: list[LedgerRecord], stats: Any) -> list[Any]:
        assert self._batching is not None
        return await self._batching.first_answers(records, stats)

    async def confirm_settled(self, mds: list[Any], outcomes: list[LedgerOutcome]) -> list[LedgerOutcome | None]:
        assert self._batching is not None
        return await self._batching.confirm_settled(mds, outcomes)

    def settle(self, record: LedgerRecord, asked: Any) -> LedgerOutcome | None:
        assert self._batching is not None
        settled = self._batching.settle(record, asked)
        if settled is not None:
            self._count(record)
        return settled

    async def check(
        self, record: LedgerRecord, stats: Any, attempt: int, last: bool, asked: Any = None
    ) -> LedgerOutcome:
        if attempt == 0:  # the scan's visit; re-checks come back with attempt >= 1
            self._count(record)
        if asked is not None:
            assert self._batching is not None
            return await self._batching.check(record, stats, attempt, last, asked=asked)
        return await self.inner.check(record, stats, attempt, last)


def settings_to_wire(settings: Settings) -> dict[str, Any]:
    """Settings as a plain JSON-able dict for shipping to executors."""
    return settings.model_dump(mode="json")


def settings_from_wire(wire: Mapping[str, Any]) -> Settings:
    # Every field is given, so nothing on the executor (environment, files) can change a value.
    return Settings(**dict(wire))


def _lid_text(lid: LedgerId | None) -> str | None:
    return None if lid is None else lid.qualified_name


async def sweep_partition(
    settings: Settings,
    part: IdPartition,
    checks: Iterable[str],
    *,
    trace_ledgers: bool = False,
    leader_rechecks: bool = False,
) -> list[Row]:
    rows: list[Row] = []
    seq = 0

    def emit(kind: str, check: str, payload: Mapping[str, Any]) -> None:
        nonlocal seq
        rows.append((kind, part.index, check, seq, json.dumps(payload, sort_keys=True)))
        seq += 1

    async with audit_context(
        settings,
        one_shot=True,
        start_rates=_adapted_rates,
        start_windows=_adapted_windows,
        capabilities=_capabilities,
    ) as (ctx, locations):
        for name in checks:
            tracked = _Tracked(CHECKS[name](ctx, locations), trace_ledgers)

            def sink(f: Finding, _name: str = name) -> None:
                emit(FINDING, _name, {"finding": f.to_wire()})

            run = CheckRun(ctx, tracked, sink)
            if leader_rechecks:  # the scan only: the suspects go back to the caller, not waited out here
                if await run.begin():
                    await run.scan(part.start_id, part.end_id)
                    await run.end()
                for due in run.queue.waiting():
                    emit(SUSPECT, name, {"ledger": due.item.qualified_name, "attempt": due.attempt})
                stats = run.stats
                stats.finished = time.time()
            else:
                stats = await run.run(part.start_id, part.end_id)
            scan = asdict(run.scan_stats)
            scan["last_ledger"] = _lid_text(run.scan_stats.last_ledger)
            payload: dict[str, Any] = {
                "partition": part.to_dict(),
                "stats": stats.as_dict(),
                "scan": scan,
                "ledgersVisited": tracked.count,
                "firstLedger": _lid_text(tracked.first),
                "lastLedger": _lid_text(tracked.last),
            }
            if tracked.ids is not None:
                payload["ledgers"] = tracked.ids
            emit(STATS, name, payload)
        _adapted_rates.update(ctx.bookies.adapted_rates())
        _adapted_windows.update(ctx.bookies.adapted_windows())
    return rows


def _configure_logging(level: str, fmt: str) -> None:
    global _configured_level
    if _configured_level == level:
        return  # Python workers are reused across tasks: configure once per process
    from auditor.logging import configure_logging

    configure_logging(level, fmt)
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, logging.getLogger().level))
    _configured_level = level


def run_partitions(
    settings_wire: Mapping[str, Any],
    checks: list[str],
    trace_ledgers: bool,
    log_level: str,
    partitions: Iterable[Any],
    leader_rechecks: bool = False,
) -> Iterator[Row]:
    """The `mapPartitions` function: one Spark partition holds one `IdPartition.to_wire()`."""
    settings = settings_from_wire(settings_wire)
    _configure_logging(log_level, settings.log.format)
    tune_gc()
    for wire in partitions:
        part = IdPartition.from_wire(wire)
        started = time.monotonic()
        coro = sweep_partition(settings, part, checks, trace_ledgers=trace_ledgers, leader_rechecks=leader_rechecks)
        if settings.event_loop == "uvloop":
            import uvloop

            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                rows = runner.run(coro)
        else:
            rows = asyncio.run(coro)
        log.info("partition %s %s done in %.1fs", part.index, part.describe(), time.monotonic() - started)
        yield from rows
