"""The repair worker: one marked ledger repaired end to end, and the loop over the marked ledgers.

One ledger (`RepairWorker.repair`): take Java's lock (the marker version captured), read the ledger,
gather the evidence with the checks' own read-only code and plan (`evidence.assess`); for each action copy
exactly its entries through the repair gate (`copy.copy_entries`), and for a REPLACE choose the new bookie
by the placement policy and commit it with the version-checked `zkensemble.replace_member`; then re-check
the ledger the same way, and only when it is clean delete the marker at the captured version. Anything
in the way (data loss, an unknown answer, an open segment, no eligible bookie, a failed copy, a changed
segment) ends the attempt as BLOCKED: the lock is released, the marker kept, and the ledger is not taken
again before its backoff (`repairplan.Backoff`), so an unrepairable ledger is never retried in a loop.

The loop (`run_once`, `run`): list markers, skip ledgers locked by another worker or in backoff, assess
and order them worst first (`repairplan.work_order`), repair `ledgers_in_parallel` at a time (each lane
takes the next of the one ordered list), wait while replication is
disabled. Cancellation stops it cleanly: a held lock is released on the way out.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from auditor.aio.ratelimit import TokenBucket
from auditor.aio.tasks import gather_all
from auditor.bookie.client import BookieClientConfig
from auditor.checks.context import AuditContext
from auditor.durability import verdicts
from auditor.durability.entry import EntryVerification, Verdict, verify_entry
from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType, LedgerMetadata
from auditor.durability.placement import PlacementPolicy, PolicyKind
from auditor.durability.ranges import RangeSet
from auditor.durability.repackage import LedgerCredentials, depends_on_credentials, ledger_credentials
from auditor.durability.repairblocked import blocked_finding
from auditor.durability.repairplan import Action, ActionKind, Backoff, BlockReason, WorkClass, WorkItem, work_order
from auditor.durability.replacement import Choice, choose_replacement
from auditor.durability.schedule import StripedSet, write_set
from auditor.errors import AuditorError
from auditor.logging import get_logger, log_new_finding
from auditor.metadata.errors import CorruptZnodeError, NoSuchLedgerError, RepairLockLostError
from auditor.metadata.interfaces import ReleaseOutcome
from auditor.metadata.repairlimits import RepairLimits, RepairLimitsNode
from auditor.metadata.repairstate import RepairBlock, RepairBlocks
from auditor.metadata.zkensemble import UpdateOutcome, replace_member
from auditor.metadata.zkrepairlock import LockGuard, RepairLocks, ZkHeldLock

from .copy import CopyLimits, CopyResult, CopyTask, CorruptReplica, FailureKind, copy_entries
from .credentials import proven_credentials
from .evidence import Assessment, BookieStates, assess
from .gate import LeaseEndedError, RecoveryAddPermit
from .metrics import RepairMetrics
from .recover import LedgerRecoverer, RecoveryOutcome
from .writer import RecoveryAddClient

log = get_logger("auditor.repair")


class Status(str, enum.Enum):
    REPAIRED = "repaired"  # re-checked clean, marker deleted at the captured version (or already gone)
    KEPT = "kept"  # repaired, but re-marked meanwhile: the marker stays for another pass
    BLOCKED = "blocked"  # could not be repaired now: lock released, marker kept, backoff applied
    SKIPPED = "skipped"  # not taken: locked by another worker, disabled, or the marker went away


@dataclass(frozen=True, slots=True)
class RepairOptions:
    # Java's bookieRecoveryPasswd, for ledgers whose metadata has none; a secret: never printed.
    recovery_password: bytes = field(default=b"", repr=False)
    recovery_digest: DigestType = DigestType.CRC32  # Java's bookieRecoveryDigestType
    best_effort_placement: bool = False
    bytes_per_second: float = 0.0  # 0 = unlimited
    copy_limits: CopyLimits = field(default_factory=CopyLimits)
    backoff: Backoff = field(default_factory=Backoff)
    newest_first: bool = False
    ledgers_in_parallel: int = 1  # ledgers repaired at once, each under its own lock
    heal_verify_s: float = 5.0  # how long to read a healed copy back until it verifies
    entries_in_flight_per_bookie: int = 32  # adds outstanding to one bookie, over every lane's copies
    recover_open_ledgers: bool = False  # opt-in ledger recovery of open ledgers whose writer is gone
    open_ledger_grace_s: float = 30.0  # Java's openLedgerRereplicationGracePeriod


@dataclass(frozen=True, slots=True)
class LedgerRepair:
    """The outcome of one attempt at one ledger (one log line)."""

    ledger_id: LedgerId
    status: Status
    reason: str = ""  # BLOCKED / SKIPPED: a BlockReason value or another short name
    detail: str = ""
    segments: int = 0  # segments changed or re-filled
    entries_copied: int = 0  # including the healed ones
    bytes_copied: int = 0
    duration_s: float = 0.0
    retry_in_s: float | None = None


LOCK_LOST = "lock_lost"  # blocked: the session that took the lock ended (or the lock went) mid-repair


class _Blocked(AuditorError):
    """Internal: the attempt ends here (lock released, marker kept, backoff); never leaves `repair`.
    `retry_s`: when to try again instead of the backoff (the end of a grace period)."""

    def __init__(self, reason: str, detail: str, retry_s: float | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.retry_s = retry_s


@dataclass
class _Tally:
    segments: set[int] = field(default_factory=set)
    entries: int = 0
    bytes: int = 0
    corrupt: list[tuple[int, CorruptReplica]] = field(default_factory=list)  # (segment, replica) seen by copies
    healed: int = 0  # corrupt copies replaced by verified ones and read back verified


class RepairWorker:
    """Repairs marked ledgers with `ctx` (store + read-only bookie pool) and `locks` (Java's protocol)."""

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
        self.ctx = ctx
        self.locks = locks
        self.options = options
        self._locations = locations  # auditor.checks.build.Locations (racks), None: placement not judged
        self._bookie_config = bookie_config or ctx.bookies.config
        self.states = BookieStates(recovery_delay_s)
        self._own_delay_s = recovery_delay_s  # when the cluster sets no lostBookieRecoveryDelay
        self.byte_rate = TokenBucket(options.bytes_per_second) if options.bytes_per_second > 0 else None
        self._own_options = options  # the settings; run-time limits (RepairLimitsNode) override them
        self.limits_node = RepairLimitsNode(locks.store)
        self.limits = RepairLimits()  # the run-time limits applied now
        self._bad_limits = False
        self._target_slots: dict[str, asyncio.Semaphore] = {}  # per target bookie, shared by the lanes
        self._failures: dict[LedgerId, int] = {}
        self._not_before_ms: dict[LedgerId, int] = {}
        self.metrics = metrics
        # Every worker's blocked records (shared backoff), as last listed by `pending`.
        self.blocks = RepairBlocks(locks.store)
        self._shared: dict[LedgerId, RepairBlock] = {}
        # Open ledgers with unregistered bookies in their last ensemble: when this worker first saw each
        # so (monotonic), for the recovery grace period.
        self._open_seen: dict[LedgerId, float] = {}
        # Credentials a stored copy proved for ledgers whose metadata has no password (kept: a ledger's
        # digest type never changes; bounded, as any cache of ledgers).
        self._proven: dict[LedgerId, LedgerCredentials] = {}

    # ------------------------------------------------------------------ backoff
    def in_backoff(self, ledger_id: LedgerId, now_ms: int | None = None) -> bool:
        """Not to be taken yet: our own backoff, or any worker's shared record says so."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        shared = self._shared.get(ledger_id)
        return max(self._not_before_ms.get(ledger_id, 0), shared.not_before_ms if shared else 0) > now

    async def _blocked(self, held: ZkHeldLock, b: _Blocked) -> float:
        """Count the failure (ours and every worker's before us), back off, write the shared record while
        the lock is still held, and report `repair_blocked`. Returns the backoff in seconds."""
        lid = held.ledger_id
        try:
            before = await self.blocks.get(lid)
        except CorruptZnodeError:
            before = None  # replaced below
        except Exception as exc:  # ZooKeeper trouble (e.g. the session that held the lock just expired)
            log.warning("repair record not read", ledgerId=str(lid), path=self.blocks.path(lid), error=repr(exc))
            before = None
        n = max(self._failures.get(lid, 0), before.failures if before else 0) + 1
        now = int(time.time() * 1000)
        delay = self.options.backoff.delay_s(n) if b.retry_s is None else b.retry_s
        block = RepairBlock(b.reason, b.detail, n, now, now + int(delay * 1000), self.locks.holder)
        self._failures[lid] = n
        self._not_before_ms[lid] = block.not_before_ms
        self._shared[lid] = block
        try:
            await self.blocks.put(lid, block, held.guard)
        except Exception as exc:  # the lock lost meanwhile, ZooKeeper gone: our own backoff still holds
            log.warning("repair record not written", ledgerId=str(lid), path=self.blocks.path(lid), error=str(exc))
        log_new_finding(blocked_finding(lid, block, delay), logger=log, check="repair")
        return delay

    async def _succeeded(self, held: ZkHeldLock) -> None:
        """Forget the ledger's failures; delete its shared record (under the lock) if it has one."""
        lid = held.ledger_id
        self._failures.pop(lid, None)
        self._not_before_ms.pop(lid, None)
        self._shared.pop(lid, None)
        await self.blocks.clear(lid, held.guard)  # another worker may have written one since we listed

    # ------------------------------------------------------------------ one ledger
    async def repair(self, ledger_id: LedgerId) -> LedgerRepair:
        """Take the lock and repair; the lock is always released (with the marker deleted only when
        the ledger re-checked clean)."""
        started = time.monotonic()
        held = await self.locks.try_lock(ledger_id)
        if held is None:
            return LedgerRepair(ledger_id, Status.SKIPPED, "not_taken", "disabled, locked elsewhere or marker gone")
        tally = _Tally()
        try:
            await self._repair_held(held, tally)
        except _Blocked as b:
            try:
                retry = await self._blocked(held, b)
            finally:
                await self.locks.release(held)
            return self._done(ledger_id, Status.BLOCKED, started, tally, b.reason, b.detail, retry)
        except BaseException:
            await asyncio.shield(self.locks.release(held))  # cancelled or a bug: never keep the lock
            raise
        try:
            await self._succeeded(held)
            outcome = await self.locks.mark_replicated(held)
        except RepairLockLostError as exc:  # the session ended at the last moment: the marker stays
            await self.locks.release(held)
            return self._done(ledger_id, Status.BLOCKED, started, tally, LOCK_LOST, str(exc), None)
        except BaseException:
            await asyncio.shield(self.locks.release(held))
            raise
        status = Status.KEPT if outcome is ReleaseOutcome.MARKER_KEPT else Status.REPAIRED
        detail = "re-marked meanwhile: the marker stays" if status is Status.KEPT else outcome.value
        return self._done(ledger_id, status, started, tally, "", detail, None)

    def _done(
        self,
        ledger_id: LedgerId,
        status: Status,
        started: float,
        tally: _Tally,
        reason: str,
        detail: str,
        retry: float | None,
    ) -> LedgerRepair:
        result = LedgerRepair(
            ledger_id,
            status,
            reason,
            detail,
            len(tally.segments),
            tally.entries,
            tally.bytes,
            round(time.monotonic() - started, 3),
            retry,
        )
        fields = {
            "ledgerId": str(ledger_id),
            "segments": result.segments,
            "entriesCopied": result.entries_copied,
            "bytesCopied": result.bytes_copied,
            "durationSeconds": result.duration_s,
        }
        if status is Status.BLOCKED:
            log.warning("ledger repair blocked", reason=reason, detail=detail, retryInSeconds=retry, **fields)
        else:
            log.info(f"ledger {status.value}", detail=detail, **fields)
        if self.metrics is not None:
            self.metrics.observe(status.value, reason, result.entries_copied, result.bytes_copied, result.duration_s)
        return result

    async def _read(self, ledger_id: LedgerId) -> LedgerMetadata:
        try:
            return (await self.ctx.store.read_ledger(ledger_id)).metadata
        except NoSuchLedgerError as exc:
            raise _Blocked(BlockReason.LEDGER_DELETED.value, str(exc)) from None

    async def _refresh_states(self) -> None:
        """The bookies registered now, judged with the cluster's `lostBookieRecoveryDelay` as the auditor
        reads it (the znode Java's shell sets; this worker's `schedule.lost_bookie_delay_seconds` when
        there is none), so an operator's change applies to the next ledger."""
        delay = await self.ctx.store.lost_bookie_recovery_delay()
        self.states.recovery_delay_s = self._own_delay_s if delay is None else delay
        self.states.update(await self.ctx.store.registrations())

    async def _assess(self, md: LedgerMetadata) -> Assessment:
        await self._refresh_states()
        return await assess(self.ctx, md, self.states)

    async def _repair_held(self, held: ZkHeldLock, tally: _Tally) -> None:
        """`_repair_locked`, with the lock's loss (or the ledger's deletion) mid-way as a block: the
        bookie writes stopped at once (the lease), ZooKeeper refused the rest (the proof)."""
        try:
            await self._repair_locked(held, tally)
        except (LeaseEndedError, RepairLockLostError) as exc:
            if held.guard.ledger_deleted:
                raise _Blocked(BlockReason.LEDGER_DELETED.value, f"deleted while being repaired: {exc}") from None
            raise _Blocked(LOCK_LOST, str(exc)) from None

    async def _repair_locked(self, held: ZkHeldLock, tally: _Tally) -> None:
        md = await self._read(held.ledger_id)
        a = await self._assess(md)
        if not md.is_closed and self.options.recover_open_ledgers and self._writer_gone(md):
            md, a = await self._recover_open(held, md, a)
        if a.plan is None:
            raise _Blocked(BlockReason.WAIT_UNKNOWN.value, "the end of the open ledger is not proven yet")
        chosen: dict[int, set[str]] = {}  # segment -> targets already chosen in it
        for action in a.plan.actions:
            md = await self._act(md, action, chosen, tally, held.guard)
        if a.plan.is_clean:
            # Marked, yet every copy is where it belongs: entry lists carry no digest, so look for the
            # one damage they cannot show (a `digest_mismatch` the auditor's reads found), by reading.
            tally.corrupt.extend(await self._corrupt_copies(md))
        await self._heal(md, tally, held.guard)
        if a.plan.blocks:
            # The actions that could run did; what remains is named (data loss with its entry ranges).
            raise _Blocked(a.plan.blocks[0].reason.value, "; ".join(b.describe() for b in a.plan.blocks))
        again = await self._assess(await self._read(held.ledger_id))
        problem = recheck_problem(again)
        if problem is not None:
            raise _Blocked("recheck_not_clean", problem)

    def _writer_gone(self, md: LedgerMetadata) -> list[str]:
        """Unregistered bookies of the last ensemble (Java's isLastSegmentOpenAndMissingBookies): a live
        writer would have replaced them at its next add."""
        regs = self.states.registrations
        available = regs.available if regs is not None else frozenset()
        return [b for b in dict.fromkeys(md.segments[-1].ensemble) if b not in available]

    async def _recover_open(
        self, held: ZkHeldLock, md: LedgerMetadata, a: Assessment
    ) -> tuple[LedgerMetadata, Assessment]:
        """Opt-in ledger recovery (recover.py) once the grace period is over; the closed ledger's metadata
        and assessment, for the repair that follows under the same lock."""
        lid = md.ledger_id
        gone = self._writer_gone(md)
        now = time.monotonic()
        wait = self.options.open_ledger_grace_s - (now - self._open_seen.setdefault(lid, now))
        if wait > 0:
            raise _Blocked(
                BlockReason.OPEN_LEDGER_GRACE.value,
                f"open, with unregistered bookies {', '.join(gone)} in its last ensemble: recovered after the grace period",
                retry_s=round(wait, 3),
            )
        if a.end is None:
            raise _Blocked(
                BlockReason.WAIT_UNKNOWN.value, "no bookie of the last ensemble answered: nothing to recover from"
            )
        regs = self.states.registrations
        recoverer = LedgerRecoverer(
            self.ctx,
            self.locks.store,
            self.locks.store.address_resolver(),
            self._bookie_config,
            await self._credentials(md, end=a.end),
            regs.available if regs is not None else frozenset(),
            self._choose_in_last,
            lease=held.guard,
        )
        result = await recoverer.recover(md, a.end, held.guard)
        if self.metrics is not None:
            self.metrics.recovered(result.outcome.value)
        if result.outcome is RecoveryOutcome.REFUSED:
            raise _Blocked(BlockReason.RECOVERY_REFUSED.value, result.detail)
        if result.outcome not in (RecoveryOutcome.CLOSED, RecoveryOutcome.ADOPTED):
            raise _Blocked(BlockReason.RECOVERY_STOPPED.value, result.detail)
        self._open_seen.pop(lid, None)
        closed = await self._read(lid)
        return closed, await self._assess(closed)

    async def _choose_in_last(self, md: LedgerMetadata, index: int, exclude: set[str]) -> str:
        return await self._choose(md, len(md.segments) - 1, index, exclude)

    async def _act(
        self, md: LedgerMetadata, action: Action, chosen: dict[int, set[str]], tally: _Tally, guard: LockGuard
    ) -> LedgerMetadata:
        """One action on the current metadata; returns the metadata after it (changed by a REPLACE)."""
        target = action.bookie
        if action.kind is ActionKind.REPLACE:
            target = await self._choose(
                md, action.segment_index, action.index, chosen.setdefault(action.segment_index, set())
            )
            chosen[action.segment_index].add(target)
        entries = tuple(e for a, b in action.entries.iter_runs() for e in range(a, b + 1))
        if entries:
            result = await self._copy(md, action, target, entries, guard)
            tally.entries += result.entries_sent
            tally.bytes += result.bytes_sent
            tally.segments.add(action.segment_index)
            tally.corrupt.extend((action.segment_index, c) for c in result.corrupt)
            result.raise_if_lease_ended()  # the lock or the ledger went: no further write, whatever kind
            if not result.complete:
                raise _Blocked(*_copy_failure(result))
        if action.kind is not ActionKind.REPLACE:
            return md
        update = await replace_member(
            self.locks.store,
            md,
            action.segment_index,
            action.index,
            target,
            guard,
        )
        if update.outcome is not UpdateOutcome.UPDATED or update.metadata is None:
            raise _Blocked(update.outcome.value, update.reason)
        tally.segments.add(action.segment_index)
        return update.metadata

    async def _corrupt_copies(self, md: LedgerMetadata) -> list[tuple[int, CorruptReplica]]:
        """Every copy of every entry the copy path may rewrite (a closed ledger's segments; an open
        ledger's all but its last, which is the writer's), read from each writable member of its write
        set and verified; the ones that fail, by segment. Read-only, `copy_limits.max_in_flight` at once."""
        creds = await self._credentials(md)
        writable = set(self.states.writable)
        found: list[tuple[int, CorruptReplica]] = []

        def copies() -> Iterator[tuple[int, str, int]]:
            last = len(md.segments) if md.is_closed else len(md.segments) - 1
            for i in range(last):
                first = md.segments[i].first_entry_id
                end = md.segments[i + 1].first_entry_id - 1 if i + 1 < len(md.segments) else md.last_entry_id
                ensemble = md.segments[i].ensemble
                for e in range(first, end + 1):
                    for k in write_set(e, md.ensemble_size, md.write_quorum):
                        if ensemble[k] in writable:
                            yield i, ensemble[k], e

        todo = copies()

        async def reader() -> None:
            for segment, bookie, entry in todo:  # one shared iterator: each copy read once
                check = await self._read_verified(md, creds, bookie, entry)
                # None: absent or no answer (the entry lists judged presence; this looks for rot only)
                # A failure only the recovery settings' guess explains is unverified, not rot to heal.
                if check is not None and check.verdict is not Verdict.OK and not depends_on_credentials(check, creds):
                    found.append((segment, CorruptReplica(entry, bookie, f"{check.verdict.value}: {check.detail}")))

        await gather_all(reader() for _ in range(self.options.copy_limits.max_in_flight))
        return sorted(found, key=lambda f: (f[0], f[1].entry_id, f[1].bookie_id))

    async def _heal(self, md: LedgerMetadata, tally: _Tally, guard: LockGuard) -> None:
        """Heal the bit rot the copies met (BP-31: no repair in the read path): each corrupt copy on a
        writable bookie of the segment is overwritten by RECOVERY_ADD of a verified copy from another
        replica, then read back until it verifies (for `heal_verify_s`). A bookie that is not writable
        keeps its corrupt copy (logged; its replacement, when it goes, copies from the good ones)."""
        places: dict[tuple[int, int, str], set[int]] = {}
        for segment, c in tally.corrupt:
            ensemble = md.segments[segment].ensemble
            if c.bookie_id not in ensemble or c.bookie_id not in self.states.writable:
                log.warning(
                    "corrupt copy not healed: the bookie is not a writable member of the segment",
                    ledgerId=str(md.ledger_id),
                    bookieId=c.bookie_id,
                    entryId=c.entry_id,
                    problem=c.detail,
                )
                self._count_corrupt("not_healed", 1)
                continue
            places.setdefault((segment, ensemble.index(c.bookie_id), c.bookie_id), set()).add(c.entry_id)
        tally.corrupt.clear()
        for (segment, index, bookie), entries in sorted(places.items()):
            stripe = StripedSet.from_rangeset(RangeSet.from_ids(entries))
            first = md.segments[segment].first_entry_id
            await self._act(md, Action(ActionKind.HEAL, segment, first, index, bookie, stripe), {}, tally, guard)
            still = await self._verified_in_time(md, bookie, sorted(entries))
            fields = {"ledgerId": str(md.ledger_id), "bookieId": bookie, "segment": segment}
            if still:
                # Acknowledged (journaled) but not served yet: not a failure of the ledger's repair.
                log.warning(
                    "corrupt copies re-added, not served yet: a bookie with SortedLedgerStorage serves its "
                    "flushed copy until its next memtable flush (at skipListSizeLimit or shutdown)",
                    entries=RangeSet.from_ids(still).to_text(),
                    waitedSeconds=self.options.heal_verify_s,
                    **fields,
                )
                self._count_corrupt("readded_not_served", len(still))
            healed = sorted(set(entries) - set(still))
            if healed:
                tally.healed += len(healed)
                log.warning("corrupt copies healed", entries=RangeSet.from_ids(healed).to_text(), **fields)
                self._count_corrupt("healed", len(healed))

    def _count_corrupt(self, outcome: str, copies: int) -> None:
        if self.metrics is not None:
            self.metrics.corrupt(outcome, copies)

    async def _verified_in_time(self, md: LedgerMetadata, bookie: str, entries: list[int]) -> list[int]:
        """Read the healed entries back until they verify, for at most `heal_verify_s`; the ones that do not.
        DbLedgerStorage and InterleavedLedgerStorage serve the last write at once; SortedLedgerStorage
        (4.17's default) serves its flushed copy before its memtable, and flushes the memtable only when
        it is full (skipListSizeLimit) or the bookie shuts down, so there the new copy may show much later."""
        deadline = time.monotonic() + self.options.heal_verify_s
        delay = 0.25
        while True:
            entries = await self._unverified(md, bookie, entries)
            if not entries or time.monotonic() + delay > deadline:
                return entries
            await asyncio.sleep(delay)
            delay = min(delay * 2, 4.0)

    async def _unverified(self, md: LedgerMetadata, bookie: str, entries: list[int]) -> list[int]:
        """The entries `bookie` does not return with a verified digest (read back after a heal)."""
        creds = await self._credentials(md, entries)
        bad = []
        for e in entries:
            check = await self._read_verified(md, creds, bookie, e)
            if check is None or check.verdict is not Verdict.OK:
                bad.append(e)
        return bad

    async def _credentials(
        self, md: LedgerMetadata, entries: Iterable[int] = (), end: int | None = None
    ) -> LedgerCredentials:
        """The metadata's credentials; without a stored password the recovery settings, proven on a stored
        copy where one proves them (`credentials.proven_credentials`), else unproven (copies that fail
        under them are unverified: `credentials_mismatch`, never corrupt or lost)."""
        creds = ledger_credentials(md, self.options.recovery_password, self.options.recovery_digest)
        if creds.trusted:
            return creds
        known = self._proven.get(md.ledger_id)
        if known is not None:
            return known
        regs = self.states.registrations
        available = regs.available if regs is not None else frozenset()
        creds = await proven_credentials(md, creds, self.ctx.bookies, available, entries, end)
        if creds.trusted:
            if len(self._proven) >= 4096:
                self._proven.clear()
            self._proven[md.ledger_id] = creds
        return creds

    async def _read_verified(
        self, md: LedgerMetadata, creds: LedgerCredentials, bookie: str, entry: int
    ) -> EntryVerification | None:
        """`bookie`'s copy of `entry` read (read-only) and verified; None when it has none or no answer."""
        got = await self.ctx.bookies.client(bookie).read_entry(md.ledger_id.ledger, entry)
        if not got.present or got.body is None:
            return None
        return verify_entry(
            got.body, ledger_id=md.ledger_id.ledger, entry_id=entry, digest_type=creds.digest_type, key=creds.mac_key
        )

    async def _choose(self, md: LedgerMetadata, segment_index: int, index: int, exclude: Iterable[str]) -> str:
        segment = md.segments[segment_index]
        policy, racks = await self._placement(md, self.states.writable)
        choice = choose_replacement(
            segment.ensemble,
            index,
            md.write_quorum,
            md.ack_quorum,
            policy,
            racks,
            self.states.writable,
            exclude=exclude,
            best_effort=self.options.best_effort_placement,
        )
        if not isinstance(choice, Choice):
            raise _Blocked(BlockReason.NO_ELIGIBLE_BOOKIE.value, choice.reason)
        if choice.best_effort:
            log.warning(
                "replacement chosen without meeting the placement policy (best effort allowed)",
                ledgerId=str(md.ledger_id),
                bookieId=choice.bookie,
                reasons=list(choice.reasons),
            )
        return choice.bookie

    async def _placement(
        self, md: LedgerMetadata, candidates: list[str]
    ) -> tuple[PlacementPolicy, dict[str, str | None]]:
        """The scrutiny's policy and racks; no policy to judge (the default one, or no rack data, as the
        scrutiny then judges none) is the default policy, which every candidate meets."""
        policy = self.ctx.options.placement
        where = self._locations
        if policy is None or where is None or not getattr(where, "available", True):
            return PlacementPolicy(kind=PolicyKind.DEFAULT), {}
        racks = dict(await where([*md.bookies, *candidates]))  # type: ignore[operator]
        if not getattr(where, "available", True):
            return PlacementPolicy(kind=PolicyKind.DEFAULT), {}
        return policy, racks

    async def _copy(
        self, md: LedgerMetadata, action: Action, target: str, entries: tuple[int, ...], lease: LockGuard
    ) -> CopyResult:
        creds = await self._credentials(md, entries)
        permit = RecoveryAddPermit.for_ledger(md.ledger_id.ledger, target, creds)
        task = CopyTask(md, action.segment_index, action.index, target, entries)
        resolver = self.locks.store.address_resolver()
        async with RecoveryAddClient(permit, resolver, self._bookie_config, lease=lease) as writer:
            return await copy_entries(
                task,
                self.ctx.bookies,
                writer,
                creds,
                self.options.copy_limits,
                byte_rate=self.byte_rate,
                target_slots=self._slots(target),
            )

    def _slots(self, bookie: str) -> asyncio.Semaphore:
        """The adds one bookie may have outstanding from this worker, whichever lane sends them."""
        slots = self._target_slots.get(bookie)
        if slots is None:
            slots = self._target_slots[bookie] = asyncio.Semaphore(self.options.entries_in_flight_per_bookie)
        return slots

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
        """Marked ledgers not locked elsewhere and not in backoff, assessed and ordered worst first."""
        locked = await self.locks.locked()
        await self._refresh_shared()
        items: list[WorkItem] = []
        ids = [m.ledger_id async for m in self.locks.markers()]
        if self.metrics is not None:  # records of ledgers no longer marked do not count
            marked = set(ids)
            reasons = Counter(b.reason for lid, b in self._shared.items() if lid in marked)
            self.metrics.set_blocked(reasons)
        await self._refresh_states()
        for lid in ids:
            if self.in_backoff(lid) or self.locks.store.markers.lock(lid).rsplit("/", 1)[-1] in locked:
                continue
            try:
                record = await self.ctx.store.read_ledger(lid)
            except NoSuchLedgerError:
                items.append(WorkItem(lid, _worst(), 0))  # let repair() find it deleted and say so
                continue
            a = await assess(self.ctx, record.metadata, self.states)
            work_class = a.plan.work_class if a.plan is not None else _worst()
            items.append(WorkItem(lid, work_class, record.effective_ctime))
        ordered = work_order(items, newest_first=self.options.newest_first)
        if self.metrics is not None:
            self.metrics.set_queue(ordered)
        return ordered

    async def _refresh_shared(self) -> None:
        """Every worker's blocked records (a corrupt one logged once and ignored)."""
        self._shared = await self.blocks.readable()

    async def run_once(self) -> list[LedgerRepair]:
        """Repair what is marked now, worst first, `ledgers_in_parallel` at a time: each lane takes the
        next ledger of the one ordered list, so the worst are started first."""
        results: list[LedgerRepair] = []
        queue = iter(await self.pending())

        async def lane() -> None:
            for item in queue:
                if await self.locks.is_disabled():
                    return
                await self.refresh_limits()
                results.append(await self.repair(item.ledger_id))

        await gather_all(lane() for _ in range(max(1, self.options.ledgers_in_parallel)))
        return results

    async def run(self, poll_s: float = 10.0) -> None:
        """Until cancelled: wait while disabled, repair what is marked, look again after `poll_s`."""
        while True:
            await self.locks.wait_enabled()
            await self.run_once()
            await asyncio.sleep(poll_s)


def _limit_values(limits: RepairLimits) -> tuple[float | None, int | None, int | None]:
    return limits.bytes_per_second, limits.entries_in_flight, limits.entries_in_flight_per_bookie


def _worst() -> WorkClass:
    """The class of a ledger that could not be assessed: first, so that repair() says why."""
    return WorkClass.NO_LIVE_COPY


def recheck_problem(a: Assessment) -> str | None:
    """Why the ledger is not clean after a repair, or None: nothing left to plan, and the scrutiny's own
    verdict on the same answers (every entry on its write quorum) has no finding, confirmed or pending."""
    if a.plan is None or a.end is None:
        return "the end of the open ledger is not proven yet"
    parts = [f"{x.kind.value} segment {x.segment_index} index {x.index} ({x.bookie})" for x in a.plan.actions]
    parts += [b.describe() for b in a.plan.blocks]
    verdict = verdicts.scrutinize_ledger(a.metadata, a.evidence.answers, end=a.end)
    parts += [f.message for f in (*verdict.findings, *verdict.pending) if f.actionable]  # not the informational ones
    return "; ".join(parts) or None


def _copy_failure(result: CopyResult) -> tuple[str, str]:
    lost = result.lost
    if lost:
        return BlockReason.DATA_LOSS.value, f"entries {lost} have no verified copy anywhere"
    unverified = result.entries_with(FailureKind.UNVERIFIED)
    if unverified:
        return (
            BlockReason.CREDENTIALS_MISMATCH.value,
            f"entries {unverified}: the metadata stores no password and no copy verifies under the recovery "
            "password and digest type (repair.recovery_password, repair.recovery_digest_type): cannot verify, "
            "not loss",
        )
    unknown = result.entries_with(FailureKind.UNKNOWN)
    if unknown:
        return BlockReason.WAIT_UNKNOWN.value, f"entries {unknown}: a replica did not answer"
    first = result.failures[0].detail if result.failures else ""
    return "copy_failed", f"to {result.target}: {result.stopped or first}"
