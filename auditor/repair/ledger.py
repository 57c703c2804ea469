"""One marked ledger repaired end to end under Java's lock, and the backoff of the ones that block.

`LedgerRepairer.repair`: take Java's lock (the marker version captured), read the ledger, gather the
evidence with the checks' own read-only code and plan (`evidence.assess`); for each action copy exactly
its entries through the repair gate (`copy.copy_entries`), and for a REPLACE choose the new bookie by the
placement policy (`targets`) and commit it with the version-checked `metadata.repair.ensemble.replace_member`
(a MOVE the same, reading from the bookie it replaces too); move the bookies that served the corrupt copies
found or met on the way (`healing`); then re-check the ledger the same way, and only when it is clean
delete the marker at the captured version. Anything in the way (data loss, an unknown answer, an open
segment, no eligible bookie, a failed copy, a changed segment) ends the attempt as BLOCKED: the lock is
released, the marker kept, and the ledger is not taken again before its backoff
(`repairplan.Backoff`, shared with every worker through `RepairBlocks`), so an unrepairable ledger is
never retried in a loop. Cancellation releases a held lock on the way out.

Every bookie write of an attempt goes through `_copy` (the repair gate's `RecoveryAddClient`, under the
lock's lease) or, for opt-in recovery of an open ledger, through `recover.LedgerRecoverer`; every
ZooKeeper write is guarded by the lock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from auditor.aio.ratelimit import TokenBucket
from auditor.bookie.config import BookieClientConfig
from auditor.checks.context import AuditContext
from auditor.durability import verdicts
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata
from auditor.durability.ranges import RangeSet
from auditor.durability.repackage import LedgerCredentials, ledger_credentials
from auditor.durability.repairblocked import blocked_finding
from auditor.durability.repairplan import Action, ActionKind, BlockReason, BookieState, move_action
from auditor.logging import get_logger, log_new_finding
from auditor.metadata.errors import CorruptZnodeError, NoSuchLedgerError, RepairLockLostError
from auditor.metadata.interfaces import ReleaseOutcome
from auditor.metadata.own.repairstate import RepairBlock, RepairBlocks
from auditor.metadata.repair.ensemble import UpdateOutcome, replace_member
from auditor.metadata.repair.lock import LockGuard, RepairLocks, ZkHeldLock

from .attempt import LOCK_LOST, Blocked, LedgerRepair, RepairOptions, Status, Tally, copy_failure
from .copy import CopyResult, CopyTask, copy_entries
from .credentials import proven_credentials
from .evidence import Assessment, BookieStates, assess
from .gate import LeaseEndedError, RecoveryAddPermit
from .healing import Healer
from .metrics import RepairMetrics
from .recover import LedgerRecoverer, RecoveryOutcome
from .targets import TargetChooser
from .writer import RecoveryAddClient

log = get_logger("auditor.repair")


class LedgerRepairer:
    """Repairs one marked ledger at a time with `ctx` (store + read-only bookie pool) and `locks` (Java's
    protocol); `RepairWorker` (worker.py) runs it over every marked ledger."""

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
        self._bookie_config = bookie_config or ctx.bookies.config
        self.states = BookieStates(recovery_delay_s)
        self._own_delay_s = recovery_delay_s  # when the cluster sets no lostBookieRecoveryDelay
        self.byte_rate = TokenBucket(options.bytes_per_second) if options.bytes_per_second > 0 else None
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
        # locations: auditor.checks.build.Locations (racks), None: placement not judged
        self.targets = TargetChooser(ctx, self.states, locations)
        self.healer = Healer(ctx.bookies, self.states, self._credentials, self._move_member, metrics)

    # ------------------------------------------------------------------ backoff
    def in_backoff(self, ledger_id: LedgerId, now_ms: int | None = None) -> bool:
        """Not to be taken yet: our own backoff, or any worker's shared record says so."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        shared = self._shared.get(ledger_id)
        return max(self._not_before_ms.get(ledger_id, 0), shared.not_before_ms if shared else 0) > now

    async def _blocked(self, held: ZkHeldLock, b: Blocked) -> float:
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
        await self.blocks.delete(lid, held.guard)  # another worker may have written one since we listed

    # ------------------------------------------------------------------ one ledger
    async def repair(self, ledger_id: LedgerId) -> LedgerRepair:
        """Take the lock and repair; the lock is always released (with the marker deleted only when
        the ledger re-checked clean)."""
        started = time.monotonic()
        held = await self.locks.try_lock(ledger_id)
        if held is None:
            return LedgerRepair(ledger_id, Status.SKIPPED, "not_taken", "disabled, locked elsewhere or marker gone")
        tally = Tally()
        try:
            await self._repair_held(held, tally)
        except Blocked as b:
            if b.reason == BlockReason.LEDGER_DELETED.value and await self._deleted(ledger_id):
                return await self._finish_deleted(held, started, tally)
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

    async def _deleted(self, ledger_id: LedgerId) -> bool:
        """The ledger's metadata is gone now (a fresh read), not merely unreadable."""
        try:
            await self.ctx.store.read_ledger(ledger_id)
        except NoSuchLedgerError:
            return True
        except Exception:  # ZooKeeper trouble: not proven gone; the block stands
            return False
        return False

    async def _finish_deleted(self, held: ZkHeldLock, started: float, tally: Tally) -> LedgerRepair:
        """A deleted ledger (its application trimmed it, an operator deleted it) has nothing to repair:
        its marker is finished work, deleted under the lock at the captured version, as Java's worker
        does on NoSuchLedgerExists. Left, it would hold `underreplication` non-empty for ever."""
        lid = held.ledger_id
        try:
            await self._succeeded(held)
            outcome = await self.locks.mark_replicated(held)
        except RepairLockLostError as exc:
            await self.locks.release(held)
            return self._done(lid, Status.BLOCKED, started, tally, LOCK_LOST, str(exc), None)
        except BaseException:
            await asyncio.shield(self.locks.release(held))
            raise
        if outcome is ReleaseOutcome.MARKER_KEPT:
            return self._done(lid, Status.KEPT, started, tally, "", "re-marked meanwhile: the marker stays", None)
        return self._done(lid, Status.GONE, started, tally, "", f"the ledger was deleted: {outcome.value}", None)

    def _done(
        self,
        ledger_id: LedgerId,
        status: Status,
        started: float,
        tally: Tally,
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
            raise Blocked(BlockReason.LEDGER_DELETED.value, str(exc)) from None

    async def _refresh_states(self) -> None:
        """The bookies registered now, judged with the cluster's `lostBookieRecoveryDelay` as the auditor
        reads it (the znode Java's shell sets; this worker's `schedule.lost_bookie_delay_seconds` when
        there is none), so an operator's change applies to the next ledger."""
        delay = await self.ctx.store.lost_bookie_recovery_delay()
        self.states.recovery_delay_s = self._own_delay_s if delay is None else delay
        self.states.update(await self.ctx.store.registrations())

    async def _assess(
        self, md: LedgerMetadata, earlier: Assessment | None = None, tally: Tally | None = None
    ) -> Assessment:
        """The ledger's evidence and plan; a re-check (`earlier`, the attempt's `tally`) gathers it the way
        the earlier one was gathered and asks again only what the attempt touched."""
        await self._refresh_states()
        if earlier is None:
            return await assess(self.ctx, md, self.states, read_unlistable=not self._lean(md))
        return await assess(self.ctx, md, self.states, earlier, tally.touched if tally else (), earlier.read_unlistable)

    def _lean(self, md: LedgerMetadata) -> bool:
        """Lean evidence for this ledger (`evidence.assess`): unless the operator asks for every copy to
        be read, a ledger whose metadata names a gone bookie is repaired on the copies' own verified reads
        where a survivor cannot list entries (DbLedgerStorage) — reading every surviving copy first, and
        again to re-check, costs several times the copy itself. A ledger whose members are all
        registered was marked for what only reads show: it is always read."""
        if self.options.read_unlistable_copies:
            return False
        return any(self.states.state(b) is BookieState.GONE for b in md.bookies)

    async def _repair_held(self, held: ZkHeldLock, tally: Tally) -> None:
        """`_repair_locked`, with the lock's loss (or the ledger's deletion) mid-way as a block: the
        bookie writes stopped at once (the lease), ZooKeeper refused the rest (the proof)."""
        try:
            await self._repair_locked(held, tally)
        except (LeaseEndedError, RepairLockLostError) as exc:
            if held.guard.ledger_deleted:
                raise Blocked(BlockReason.LEDGER_DELETED.value, f"deleted while being repaired: {exc}") from None
            raise Blocked(LOCK_LOST, str(exc)) from None

    async def _repair_locked(self, held: ZkHeldLock, tally: Tally) -> None:
        md = await self._read(held.ledger_id)
        a = await self._assess(md)
        if not md.is_closed and self.options.recover_open_ledgers and self._writer_gone(md):
            md, a = await self._recover_open(held, md, a)
        if a.plan is None:
            raise Blocked(BlockReason.WAIT_UNKNOWN.value, "the end of the open ledger is not proven yet")
        chosen: dict[int, set[str]] = {}  # segment -> targets already chosen in it
        tally.rotten.update(action.bookie for action in a.plan.actions if action.kind is ActionKind.MOVE)
        for action in a.plan.actions:
            md = await self._act(md, action, chosen, tally, held.guard)
        if a.plan.is_clean:
            # Marked, yet every copy is where it belongs: entry lists carry no digest, so look for the
            # one damage they cannot show (a `digest_mismatch` the auditor's reads found), by reading.
            tally.corrupt.extend(await self.healer.corrupt_copies(md, self.options.copy_limits.max_in_flight))
        tally.touched.update(c.bookie_id for _, c in tally.corrupt)
        md = await self.healer.heal(md, tally, held.guard)
        if a.plan.blocks:
            # The actions that could run did; what remains is named (data loss with its entry ranges).
            raise Blocked(a.plan.blocks[0].reason.value, "; ".join(b.describe() for b in a.plan.blocks))
        # The re-check asks again only the bookies this attempt wrote or found corrupt copies on.
        again = await self._assess(await self._read(held.ledger_id), a, tally)
        problem = recheck_problem(again)
        if problem is not None:
            raise Blocked("recheck_not_clean", problem)

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
            raise Blocked(
                BlockReason.OPEN_LEDGER_GRACE.value,
                f"open, with unregistered bookies {', '.join(gone)} in its last ensemble: recovered after the grace period",
                retry_s=round(wait, 3),
            )
        if a.end is None:
            raise Blocked(
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
            raise Blocked(BlockReason.RECOVERY_REFUSED.value, result.detail)
        if result.outcome not in (RecoveryOutcome.CLOSED, RecoveryOutcome.ADOPTED):
            raise Blocked(BlockReason.RECOVERY_STOPPED.value, result.detail)
        self._open_seen.pop(lid, None)
        closed = await self._read(lid)
        return closed, await self._assess(closed)

    async def _choose_in_last(self, md: LedgerMetadata, index: int, exclude: set[str]) -> str:
        return await self._choose(md, len(md.segments) - 1, index, exclude)

    async def _act(
        self, md: LedgerMetadata, action: Action, chosen: dict[int, set[str]], tally: Tally, guard: LockGuard
    ) -> LedgerMetadata:
        """One action on the current metadata; returns the metadata after it (changed by a REPLACE or a
        MOVE, which also reads from the bookie it replaces: it still serves its copies)."""
        target = action.bookie
        replaces = action.kind in (ActionKind.REPLACE, ActionKind.MOVE)
        if replaces:
            target = await self._choose(
                md, action.segment_index, action.index, chosen.setdefault(action.segment_index, set()) | tally.rotten
            )
            chosen[action.segment_index].add(target)
        entries = tuple(e for a, b in action.entries.iter_runs() for e in range(a, b + 1))
        if entries:
            tally.touched.add(target)  # (before the copy: a failed one may still have written some)
            result = await self._copy(md, action, target, entries, guard)
            tally.touched.update(c.bookie_id for c in result.corrupt)
            tally.rotten.update(c.bookie_id for c in result.corrupt)
            tally.entries += result.entries_sent
            tally.bytes += result.bytes_sent
            tally.segments.add(action.segment_index)
            tally.corrupt.extend((action.segment_index, c) for c in result.corrupt)
            result.raise_if_lease_ended()  # the lock or the ledger went: no further write, whatever kind
            if not result.complete:
                raise Blocked(*copy_failure(result))
        if not replaces:
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
            raise Blocked(update.outcome.value, update.reason)
        tally.segments.add(action.segment_index)
        if action.kind is ActionKind.MOVE:
            tally.healed += len(action.corrupt)
            log.warning(
                "corrupt copies healed: the bookie serving them replaced in the segment",
                ledgerId=str(md.ledger_id),
                bookieId=action.bookie,
                replacement=target,
                segment=action.segment_index,
                entries=action.corrupt.to_text(),
            )
            if self.metrics is not None:
                self.metrics.corrupt("replaced", len(action.corrupt))
        return update.metadata

    async def _move_member(
        self, md: LedgerMetadata, segment: int, index: int, corrupt: RangeSet, tally: Tally, guard: LockGuard
    ) -> LedgerMetadata:
        """The healer's MOVE of a member that served the corrupt copies `corrupt` (`_act`, as the plan's)."""
        return await self._act(md, move_action(md, segment, index, corrupt), {}, tally, guard)

    async def _choose(self, md: LedgerMetadata, segment_index: int, index: int, exclude: Iterable[str]) -> str:
        return await self.targets.choose(
            md, segment_index, index, exclude, best_effort=self.options.best_effort_placement
        )

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

    async def _copy(
        self, md: LedgerMetadata, action: Action, target: str, entries: tuple[int, ...], lease: LockGuard
    ) -> CopyResult:
        creds = await self._credentials(md, entries)
        permit = RecoveryAddPermit.for_ledger(md.ledger_id.ledger, target, creds)
        task = CopyTask(md, action.segment_index, action.index, target, entries, action.kind is ActionKind.MOVE)
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
