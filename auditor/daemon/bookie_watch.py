"""The bookie watch: lost bookies, their ledgers marked under-replicated in Java's format, reincarnations.

Java's semantics (java-auditor.md §1.5): a bookie that disappears from the registrations is lost; its
ledgers are marked after `lostBookieRecoveryDelay` (read from its znode, as Java does), the wait is
cancelled if the bookie returns, and there is no wait when more than one bookie is lost. Unlike Java,
a bookie that lost only its registration (its ZooKeeper session expired: a ZooKeeper restart, a long
pause) but still answers a read-only request is not counted as a second failure: it gets the normal
delay and is usually back within seconds, where Java marks all its ledgers at once. A rewrite of
the delay znode (Java's `triggeraudit`) audits at once. Marking honours the cluster's disable flag;
detection and reporting go on while it is set.

Which ledgers a bookie holds comes from `LedgerIndex`, built once per leadership. A lost bookie is
marked in two passes. The first goes from the index (plus ledger ids above the highest indexed one), so
the markers come at once: each is written on the condition that the ledger is still at its indexed
metadata version. The second re-reads all ledger metadata, as Java does on every audit, and marks what
the index could not know: a ledger whose ensemble came to name the bookie after it was indexed (an
ensemble change, a repair), or one created under an id below the highest indexed (an explicit id).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Coroutine
from posixpath import join
from typing import Any

from auditor.aio.tasks import gather_all
from auditor.durability.findings import Category, Finding, Method
from auditor.durability.ids import LedgerId
from auditor.logging import get_logger
from auditor.metadata.errors import (
    ConcurrentUpdateError,
    CorruptZnodeError,
    MetadataVersionChangedError,
    NoSuchLedgerError,
)
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.own.recipe import DocumentSchema, OwnDocument, parse_own_json
from auditor.metadata.store import ZooKeeperMetadataStore

from .ledger_index import LedgerIndex
from .supervisor import Spawn, Supervisor

log = get_logger("auditor.bookies")


# Ledgers marked concurrently: their ZooKeeper requests are pipelined (the store bounds requests in
# flight and writes per second), instead of one round trip after another.
MARK_BATCH = 256


Incarnations = dict[str, tuple[int, int]]  # bookie id -> its cookie's (czxid, mzxid)


def parse_incarnations(data: bytes, path: str) -> Incarnations:
    """`{bookieId: [cookie czxid, cookie mzxid]}` as saved by the bookie watch; CorruptZnodeError otherwise."""
    doc = parse_own_json(data, path, "bk-auditor bookie state")
    if not isinstance(doc, dict):
        raise CorruptZnodeError(path, f"bk-auditor bookie state is not a JSON object but {type(doc).__name__}")
    out = {}
    for bookie, value in doc.items():
        if not (
            isinstance(value, list)
            and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
        ):
            raise CorruptZnodeError(path, f"bk-auditor bookie state: {bookie!r:.80} is not [czxid, mzxid]")
        out[bookie] = (value[0], value[1])
    return out


def serialise_incarnations(incarnations: Incarnations) -> bytes:
    return json.dumps({b: list(v) for b, v in sorted(incarnations.items())}).encode()


INCARNATIONS: DocumentSchema[Incarnations] = DocumentSchema(
    "bk-auditor bookie state", parse_incarnations, serialise_incarnations, empty_is_absent=True
)


Guard = Callable[[], WriteGuard]
Report = Callable[[Finding], Awaitable[None] | None]
Priority = Callable[[set[LedgerId], str], Awaitable[bool | None]]
Probe = Callable[[str], Coroutine[Any, Any, bool]]  # bookie id -> it answers a read-only request now


class BookieWatch:
    def __init__(
        self,
        store: ZooKeeperMetadataStore,
        index: LedgerIndex,
        guard: Guard,
        report: Report,
        priority: Priority,
        *,
        metrics: object | None = None,
        default_delay: float = 0.0,
        periodic_seconds: float = 0.0,
        state_path: str | None = None,
        spawn: Spawn | None = None,
        on_corrupt_state: Callable[[CorruptZnodeError], None] | None = None,
        probe: Probe | None = None,
        on_returned: Callable[[set[str]], None] | None = None,
        settle: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self._on_returned = on_returned  # lost bookies registered again: their findings are re-checked
        # After a reincarnated bookie's ledgers were scrutinised: its finding resolves once none of them
        # misses a copy (replica.py); `scrutinised` says whose ledgers were, and when.
        self._settle = settle or (lambda: None)
        self.scrutinised: dict[str, float] = {}
        self.index = index
        self._guard = guard
        self._report = report
        self._priority = priority
        self._metrics = metrics
        self.default_delay = default_delay
        self.periodic_seconds = periodic_seconds
        self.state_path = state_path or join(store.own_subtree, "bookies")
        self._state = OwnDocument(store, self.state_path, INCARNATIONS)
        self.lost: set[str] = set()
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.marked: dict[str, int] = {}  # bookie -> ledgers marked for it (this leadership)
        self._changed = asyncio.Event()
        self._audit_now = asyncio.Event()
        self._last_delay: int | None = None
        self._incarnations: Incarnations = {}
        # Delayed audits are started through the daemon's supervisor (a reference kept, failures logged
        # and counted); on our own, through a private one.
        self._spawn: Spawn = spawn or Supervisor().fire
        self._on_corrupt_state = on_corrupt_state or (lambda exc: None)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._probe = probe

    # ----------------------------------------------------------------------------- lifecycle
    async def run(self) -> None:
        await self.index.rebuild()
        log.info("ledger index built", ledgers=len(self.index), bookies=len(self.index.bookies))
        self._incarnations = await self._load_incarnations()
        cancel_regs = self.store.watch_registrations(self._changed.set)
        self._last_delay = await self.store.lost_bookie_recovery_delay()
        cancel_delay = self.store.watch_lost_bookie_recovery_delay(self._on_delay_written)
        try:
            await self._check_reincarnations(initial=True)
            await self._evaluate(reason="start")
            self._observe("start")
            periodic = self.periodic_seconds if self.periodic_seconds > 0 else None
            while True:
                await self._wake(periodic)
                if self._audit_now.is_set():
                    self._audit_now.clear()
                    await self._evaluate(reason="trigger")
                    delayed = set(self.pending)
                    for h in self.pending.values():
                        h.cancel()  # audited now: the delayed audits would only repeat it
                    self.pending.clear()
                    await self._audit(set(self.lost) | delayed, reason="trigger")
                    log.info("bookies audited on request", lost=sorted(self.lost))
                    continue
                reason = "registration change" if self._changed.is_set() else "periodic"
                self._changed.clear()
                if reason == "periodic":
                    await self.index.rebuild()
                await self._check_reincarnations()
                await self._evaluate(reason=reason)
                self._observe(reason)
                self._settle()
        finally:
            cancel_regs()
            cancel_delay()
            for h in self.pending.values():
                h.cancel()
            self.pending.clear()
            for t in self._tasks:
                t.cancel()

    async def _wake(self, timeout: float | None) -> None:
        """Until a registration change, an audit request or `timeout`. The two waits are cancelled on
        every way out (a lost leadership cancels us here: no waiter is left pending)."""
        waits = [asyncio.ensure_future(self._changed.wait()), asyncio.ensure_future(self._audit_now.wait())]
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    # ----------------------------------------------------------------------------- lost bookies
    async def _delay(self) -> float:
        got = await self.store.lost_bookie_recovery_delay()
        return float(got) if got is not None else self.default_delay

    async def _evaluate(self, reason: str) -> None:
        regs = await self.store.registrations()
        available = regs.available
        known = self.index.bookies | set(await self.store.cookies())
        lost = known - available
        returned = (self.lost | set(self.pending)) - lost
        for b in returned:
            h = self.pending.pop(b, None)
            if h is not None:
                h.cancel()
                self._count("delayed_bookie_audits_cancelled")
                log.info("lost bookie came back: delayed audit cancelled", bookieId=b)
        if returned and self._on_returned is not None:
            self._on_returned(returned)
        new = lost - self.lost - set(self.pending)
        self.lost = {b for b in self.lost if b in lost}
        if self._metrics is not None:
            self._metrics.set_lost_bookies(len(lost))  # type: ignore[attr-defined]
        if not new:
            return
        delay = await self._delay()
        log.warning("bookies lost", bookieIds=sorted(new), reason=reason, delaySeconds=delay)
        # Java counts as a multiple failure only the bookies lost since the last audit (an audited bookie
        # leaves its known set): one lost after an earlier loss was audited is a single failure and waits.
        fresh = new | set(self.pending)
        if delay <= 0:
            down = lost
        else:
            down = fresh if len(fresh) < 2 else await self._not_answering(fresh)
        if delay <= 0 or len(down) > 1:
            # Java: no waiting when more than one bookie is lost; audit everything lost now. A bookie that
            # is unregistered but answers is not lost data: it keeps (or gets) the normal delay.
            for b in down:
                h = self.pending.pop(b, None)
                if h is not None:
                    h.cancel()
            await self._audit(down, reason=reason)
            new -= down
        for b in new:
            self._count("bookie_audits_delayed")
            self.pending[b] = asyncio.get_running_loop().call_later(delay, self._spawn_audit, b)

    async def _not_answering(self, bookies: set[str]) -> set[str]:
        """The `bookies` that do not answer a read-only request now (all of them without a probe)."""
        if self._probe is None:
            return set(bookies)
        ordered = sorted(bookies)
        answers = await gather_all(self._probe(b) for b in ordered)
        answering = [b for b, ok in zip(ordered, answers, strict=True) if ok]
        for b in answering:
            self._count("lost_bookies_answering")
            log.warning(
                "bookie unregistered but still answering: not counted as a second failure, its audit waits "
                "for the delay (a ZooKeeper session expiry, usually re-registered in seconds)",
                bookieId=b,
            )
        return set(ordered) - set(answering)

    def _spawn_audit(self, bookie: str) -> None:
        self.pending.pop(bookie, None)
        t = self._spawn("bookie-audit", self._audit({bookie}, reason="delay elapsed"))
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    def audit_now(self) -> None:
        """Audit every lost bookie now, delayed ones included (the admin API's trigger)."""
        self._audit_now.set()

    def _on_delay_written(self, value: int | None) -> None:
        """Java semantics: 0 or the same value again = audit now; a new value reschedules pending audits."""
        previous, self._last_delay = self._last_delay, value
        if value is None:
            return
        if value == 0 or value == previous:
            self._audit_now.set()
            return
        loop = asyncio.get_running_loop()
        for b, h in list(self.pending.items()):
            h.cancel()
            self.pending[b] = loop.call_later(value, self._spawn_audit, b)

    async def _audit(self, bookies: set[str], reason: str) -> None:
        """Mark every ledger with a segment on a lost bookie (re-reading each one first)."""
        if not bookies:
            return
        still_lost = bookies - (await self.store.registrations()).available
        self.lost |= still_lost
        if not still_lost:
            return
        await self.index.refresh_new()
        if await self.store.is_replication_disabled():
            for bookie in sorted(still_lost):
                log.warning(
                    "lost bookie not marked: auto-recovery is disabled (U/disable exists)",
                    bookieId=bookie,
                    ledgers=len(self.index.ledgers_on(bookie)),
                    reason=reason,
                )
            return
        seen = {bookie: self.index.ledgers_on(bookie) for bookie in sorted(still_lost)}
        for bookie, ledgers in seen.items():
            marked = await self._mark_all(ledgers, bookie)
            log.warning("lost bookie's ledgers marked under-replicated", bookieId=bookie, ledgers=marked, reason=reason)
        # The second pass: what the index did not know (see the module's docstring).
        await self.index.rebuild()
        for bookie, ledgers in seen.items():
            unseen = self.index.ledgers_on(bookie) - ledgers
            marked = await self._mark_all(unseen, bookie)
            log.info(
                "lost bookie's ledgers re-read",
                bookieId=bookie,
                ledgers=len(self.index),
                newlyMarked=marked,
                reason=reason,
            )

    async def _mark_all(self, ledgers: set[LedgerId], bookie: str) -> int:
        """Mark each of `ledgers` for the lost `bookie` (those whose metadata still names it): how many."""
        marked = 0
        ordered = sorted(ledgers)
        if ordered:
            await self.store.create_marker_parents(ordered, self._guard())
        for start in range(0, len(ordered), MARK_BATCH):
            done = await gather_all(self._mark(lid, bookie) for lid in ordered[start : start + MARK_BATCH])
            marked += sum(done)
        self.marked[bookie] = self.marked.get(bookie, 0) + marked
        self._count("ledgers_marked", marked)
        return marked

    async def _mark(self, lid: LedgerId, bookie: str) -> bool:
        """Mark `lid` for the lost `bookie` if its metadata still names it. The write is conditioned on
        the indexed metadata version (atomically, in the marker's transaction), so an unchanged ledger
        costs one ZooKeeper round trip; a changed or unindexed one is re-read first."""
        version = self.index.version_of(lid)
        for _ in range(10):
            if version is None or version < 0:
                try:
                    rec = await self.store.read_ledger(lid)
                except NoSuchLedgerError:
                    self.index.update(lid, None)
                    return False
                version = rec.stat.version
                self.index.update(lid, rec.metadata.bookies, version)
            if not self.index.holds(bookie, lid):
                return False
            try:
                await self.store.mark_underreplicated(lid, [bookie], self._guard(), if_metadata_version=version)
                return True
            except MetadataVersionChangedError:
                version = None  # the ledger changed since it was indexed: re-read and decide again
        raise ConcurrentUpdateError(str(lid), "ledger metadata kept changing while marking it under-replicated")

    # ----------------------------------------------------------------------------- reincarnation
    async def _load_incarnations(self) -> Incarnations:
        # A corrupt state is started afresh: the first save (right after start) replaces it.
        return await self._state.get_or_replace({}, log=log, count=self._on_corrupt_state)

    async def _save_incarnations(self) -> None:
        await self._state.put(self._incarnations, self._guard())

    async def _check_reincarnations(self, initial: bool = False) -> None:
        cookies = await self.store.cookies()
        changed = False
        for bookie, rec in cookies.items():
            inc = rec.incarnation
            before = self._incarnations.get(bookie)
            if before is not None and before != inc and before[0] != inc[0]:
                ledgers = self.index.ledgers_on(bookie)
                if ledgers:
                    f = Finding.of(
                        Category.BOOKIE_REINCARNATED,
                        f"bookie {bookie} was reformatted (new cookie, czxid {before[0]} -> {inc[0]}) while "
                        f"{len(ledgers)} ledger(s) still name it: their copies on it may be gone",
                        bookie=bookie,
                        method=Method.REGISTRATION,
                        confirmed=True,
                        detail={
                            "oldCookieCzxid": before[0],
                            "newCookieCzxid": inc[0],
                            "ledgers": len(ledgers),
                            "sampleLedgers": [lid.qualified_name for lid in sorted(ledgers)[:20]],
                        },
                    )
                    got = self._report(f)
                    if asyncio.iscoroutine(got):
                        await got
                    if await self._priority(ledgers, f"bookie {bookie} reincarnated") is not False:
                        self.scrutinised[bookie] = time.time()
                    self._settle()
            if before != inc:
                self._incarnations[bookie] = inc
                changed = True
        if changed or initial:
            await self._save_incarnations()

    def _observe(self, reason: str) -> None:
        """A completed bookie check (start, periodic or on a registration change), for the metrics."""
        if self._metrics is None:
            return
        from .metrics import RunSummary

        now = time.time()
        self._metrics.observe_run(RunSummary("bookies", now, now, True, len(self.index), {}, True))  # type: ignore[attr-defined]

    def _count(self, name: str, n: int = 1) -> None:
        metric = getattr(self._metrics, name, None) if self._metrics is not None else None
        if metric is not None and n:
            metric.inc(n)
