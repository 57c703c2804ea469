"""Copy execution: put verified copies of exactly the given entries of one segment on one bookie.

For each entry id: read it from the other members of its write set in that segment, one replica at a
time in write-set order (the read-only `BookieClient`s of a `BookiePool`), verify its digest and
re-package it (`durability.repackage`), and send it with RECOVERY_ADD through the repair gate
(`writer.RecoveryAddClient`). A corrupt copy is never sent: the next replica is tried and the corrupt
one is named in the result.

What the result says about an entry that was not sent:
* LOST — every other replica of its write set answered, and none holds a verified copy (absent or
  corrupt everywhere): data loss, named with the entry ids;
* UNKNOWN — no verified copy was found but some replica did not answer (timeout, EIO, a broken link):
  never called lost;
* UNVERIFIED — copies were read, but the credentials are the recovery settings' guess (the metadata
  stores no password) and no copy verifies under them (`LedgerCredentials.trusted`): cannot verify,
  never called lost or corrupt (the worker blocks it as `credentials_mismatch`);
* ADD_FAILED — a verified copy was read, the target did not take it (after retries for the statuses
  spec repair-and-recovery.md §1.7 says to retry);
* NOT_ATTEMPTED — the copy stopped before this entry (the target answered EUA, EFENCED, EREADONLY or
  EBADVERSION: retrying or going on cannot succeed, §1.7).

Re-adding an entry the target already holds is an ordinary success (§1.6), so a copy can be repeated.

The lock: every add asks the writer's lease (the ledger's repair lock, `gate.WriteLease`) as it is encoded.
Once it refuses (the session suspended, expired or replaced, the lock or the ledger deleted), no further
add of the copy is sent, the other entries are NOT_ATTEMPTED, and the result's `lease_ended` says why
(`raise_if_lease_ended`: the caller's repair must end, the lock is no longer its own).

Load: at most `CopyLimits.max_in_flight` entries are between read and acknowledged add at once (and a
caller may share one `asyncio.Semaphore` over every copy to the same bookie), and the bytes sent pass
a token bucket (`aio.TokenBucket`, bytes per second) that callers may share and retune at run time.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from auditor.aio.ratelimit import TokenBucket
from auditor.bookie.pool import BookiePool
from auditor.bookie.protocol import Status
from auditor.durability.model import LedgerMetadata
from auditor.durability.ranges import RangeSet
from auditor.durability.repackage import LedgerCredentials, recovery_lac, repackage_for_recovery
from auditor.durability.schedule import holds, write_set

from .gate import LeaseEndedError, check_lease
from .writer import RecoveryAddClient, RecoveryAddResult

# Add statuses after which neither a retry nor the next entry can succeed on this target (spec §1.7):
# wrong key (EUA), the ledger was fenced and deleted there (EFENCED), the bookie turned read-only
# (EREADONLY: choose another target), a protocol bug (EBADVERSION).
_FATAL_ADD = frozenset({Status.EUA, Status.EFENCED, Status.EREADONLY, Status.EBADVERSION})


class FailureKind(enum.Enum):
    LOST = "lost"
    UNKNOWN = "unknown"
    UNVERIFIED = "unverified"  # copies read, none verifies under unproven credentials: not loss
    ADD_FAILED = "add_failed"
    NOT_ATTEMPTED = "not_attempted"


@dataclass(frozen=True, slots=True)
class EntryFailure:
    entry_id: int
    kind: FailureKind
    detail: str


@dataclass(frozen=True, slots=True)
class CorruptReplica:
    """A replica whose copy failed verification (never sent; reported so it can be healed)."""

    entry_id: int
    bookie_id: str
    detail: str


@dataclass(frozen=True, slots=True)
class CopyLimits:
    max_in_flight: int = 8  # entries between read and acknowledged add at once, for this copy
    add_attempts: int = 3  # per entry, for ETOOMANYREQUESTS / EIO / EBADREQ / unknown / no answer
    retry_delay: float = 0.2  # seconds before the second attempt; doubles after each further one
    read_timeout: float | None = None  # per read; None = the read client's configured timeout
    add_timeout: float | None = None  # per add; None = the writer's configured timeout

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        if self.add_attempts < 1:
            raise ValueError("add_attempts must be >= 1")


@dataclass(frozen=True, slots=True)
class CopyTask:
    """Copy `entries` of segment `segment` (its position in `metadata.segments`), the ones striped to
    ensemble index `index`, onto bookie `target` (the replacement, or the same bookie when re-adding in
    place). Each entry is read from the other replicas of its write set; with `read_replaced`, last from
    the bookie at `index` too (a member replaced while it still serves its copies: one of them corrupt)."""

    metadata: LedgerMetadata
    segment: int
    index: int
    target: str
    entries: tuple[int, ...]
    read_replaced: bool = False

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id.ledger

    def segment_bounds(self) -> tuple[int, int]:
        """(first, last) entry id of the segment; refuses what may not be copied."""
        md = self.metadata
        if not 0 <= self.segment < len(md.segments):
            raise ValueError(f"ledger {md.ledger_id} has no segment #{self.segment}")
        first = md.segments[self.segment].first_entry_id
        if self.segment + 1 < len(md.segments):
            return first, md.segments[self.segment + 1].first_entry_id - 1
        if not md.is_closed:
            # The writer may still add to it or change its ensemble (spec repair-and-recovery.md §2.4).
            raise ValueError(f"ledger {md.ledger_id} is not closed: its last segment is never copied")
        return first, md.last_entry_id

    def validate(self) -> None:
        """Raise ValueError unless every entry is in the segment and striped to `index` there."""
        md = self.metadata
        if md.ledger_id.scope:
            raise ValueError(f"ledger {md.ledger_id} has a scope id; bookies carry 64-bit ledger ids only")
        if not 0 <= self.index < md.ensemble_size:
            raise ValueError(f"index {self.index} is outside the ensemble of ledger {md.ledger_id}")
        first, last = self.segment_bounds()
        for e in self.entries:
            if not first <= e <= last:
                raise ValueError(f"entry {e} is outside segment [{first}, {last}] of ledger {md.ledger_id}")
            if not holds(self.index, e, md.ensemble_size, md.write_quorum):
                raise ValueError(f"entry {e} of ledger {md.ledger_id} is not striped to index {self.index}")
        if len(set(self.entries)) != len(self.entries):
            raise ValueError("entry ids repeat")


@dataclass(frozen=True, slots=True)
class CopyResult:
    ledger_id: int
    segment_first_entry: int
    index: int
    target: str
    sent: RangeSet  # entries the target acknowledged
    entries_sent: int
    bytes_sent: int  # RECOVERY_ADD bodies acknowledged (stored entry bytes: header, digest, payload)
    read_requests: int
    add_requests: int
    failures: tuple[EntryFailure, ...]
    corrupt: tuple[CorruptReplica, ...]
    stopped: str | None  # why the copy stopped early (a fatal add status), None if it ran through
    lease_ended: LeaseEndedError | None = None  # the repair lock (or the ledger) went: no add after it

    @property
    def complete(self) -> bool:
        return not self.failures and self.stopped is None

    def raise_if_lease_ended(self) -> None:
        """LeaseEndedError when the copy stopped because the repair lock (or the ledger) went."""
        if self.lease_ended is not None:
            raise self.lease_ended

    def entries_with(self, kind: FailureKind) -> RangeSet:
        return RangeSet.from_ids(f.entry_id for f in self.failures if f.kind is kind)

    @property
    def lost(self) -> RangeSet:
        """Data loss: entries with no verified copy on any replica that answered, and all answered."""
        return self.entries_with(FailureKind.LOST)


@dataclass
class _Progress:
    sent: list[int] = field(default_factory=list)
    bytes_sent: int = 0
    read_requests: int = 0
    add_requests: int = 0
    failures: list[EntryFailure] = field(default_factory=list)
    corrupt: list[CorruptReplica] = field(default_factory=list)
    stopped: str | None = None
    lease_ended: LeaseEndedError | None = None


async def copy_entries(
    task: CopyTask,
    reads: BookiePool,
    writer: RecoveryAddClient,
    credentials: LedgerCredentials,
    limits: CopyLimits | None = None,
    *,
    byte_rate: TokenBucket | None = None,
    target_slots: asyncio.Semaphore | None = None,
) -> CopyResult:
    """Run `task`. `byte_rate` limits bytes sent per second; `target_slots`, shared by every copy to the
    same bookie, bounds the entries in flight to it across copies."""
    limits = limits or CopyLimits()
    task.validate()
    if writer.permit.ledger_id != task.ledger_id or writer.bookie_id != task.target:
        raise ValueError(
            f"the writer may add ledger {writer.permit.ledger_id} to {writer.bookie_id}; the task copies "
            f"ledger {task.ledger_id} to {task.target}"
        )
    if credentials.master_key != writer.permit.master_key:
        raise ValueError(f"the writer's permit is not for ledger {task.ledger_id}'s credentials")
    md = task.metadata
    ensemble = md.segments[task.segment].ensemble
    lac = recovery_lac(md)
    progress = _Progress()
    todo = iter(sorted(task.entries))

    async def one(entry_id: int) -> None:
        sources = [ensemble[i] for i in write_set(entry_id, md.ensemble_size, md.write_quorum) if i != task.index]
        if task.read_replaced:
            sources.append(ensemble[task.index])
        body = await _read_verified(
            entry_id, [b for b in sources if b != task.target], reads, task, credentials, lac, limits, progress
        )
        if body is None:
            return
        if byte_rate is not None:
            await byte_rate.acquire(len(body))
        await _send(entry_id, body, writer, limits, progress)

    async def worker() -> None:
        for entry_id in todo:  # one shared iterator: each entry is taken by exactly one worker
            if progress.stopped is not None:
                progress.failures.append(EntryFailure(entry_id, FailureKind.NOT_ATTEMPTED, progress.stopped))
                continue
            try:
                if target_slots is None:
                    await one(entry_id)
                else:
                    async with target_slots:
                        await one(entry_id)
            except LeaseEndedError as exc:  # no further add of this copy may leave: every worker stops
                progress.lease_ended = progress.lease_ended or exc
                progress.stopped = progress.stopped or str(exc)
                progress.failures.append(EntryFailure(entry_id, FailureKind.NOT_ATTEMPTED, str(exc)))

    check_lease(writer.lease, f"copy of ledger {task.ledger_id} to {task.target}")
    await asyncio.gather(*(worker() for _ in range(min(limits.max_in_flight, max(1, len(task.entries))))))
    return CopyResult(
        ledger_id=task.ledger_id,
        segment_first_entry=md.segments[task.segment].first_entry_id,
        index=task.index,
        target=task.target,
        sent=RangeSet.from_ids(progress.sent),
        entries_sent=len(progress.sent),
        bytes_sent=progress.bytes_sent,
        read_requests=progress.read_requests,
        add_requests=progress.add_requests,
        failures=tuple(sorted(progress.failures, key=lambda f: f.entry_id)),
        corrupt=tuple(sorted(progress.corrupt, key=lambda c: (c.entry_id, c.bookie_id))),
        stopped=progress.stopped,
        lease_ended=progress.lease_ended,
    )


async def _read_verified(
    entry_id: int,
    sources: Iterable[str],
    reads: BookiePool,
    task: CopyTask,
    credentials: LedgerCredentials,
    lac: int | None,
    limits: CopyLimits,
    progress: _Progress,
) -> bytes | None:
    """A verified, re-packaged copy from the first replica that has one; None (failure recorded) if none."""
    unanswered: list[str] = []
    answers: list[str] = []
    unverified: list[str] = []  # copies the (unproven) credentials could not check
    for bookie in sources:
        progress.read_requests += 1
        got = await reads.client(bookie).read_entry(task.ledger_id, entry_id, timeout=limits.read_timeout)
        if got.present and got.body is not None:
            packed = repackage_for_recovery(
                got.body, ledger_id=task.ledger_id, entry_id=entry_id, credentials=credentials, lac=lac
            )
            if packed.body is not None:
                return packed.body
            if packed.unverified:  # the recovery settings' guess failed, not the copy: never "corrupt"
                unverified.append(f"{bookie} {packed.reason}")
                continue
            progress.corrupt.append(CorruptReplica(entry_id, bookie, packed.reason or "not verified"))
            answers.append(f"{bookie} corrupt")
        elif got.absent:
            answers.append(f"{bookie} {got.status.name if got.status else 'absent'}")
        else:
            unanswered.append(f"{bookie}: {got.error}")
    if unanswered:
        detail = "no verified copy read; no answer from " + "; ".join(unanswered)
        if answers or unverified:
            detail += " (" + ", ".join(answers + unverified) + ")"
        progress.failures.append(EntryFailure(entry_id, FailureKind.UNKNOWN, detail))
    elif unverified:
        detail = "copies read that cannot be verified: " + "; ".join(unverified + answers)
        progress.failures.append(EntryFailure(entry_id, FailureKind.UNVERIFIED, detail))
    else:
        detail = ", ".join(answers) if answers else "no other replica in its write set"
        progress.failures.append(EntryFailure(entry_id, FailureKind.LOST, f"no verified copy anywhere: {detail}"))
    return None


async def _send(entry_id: int, body: bytes, writer: RecoveryAddClient, limits: CopyLimits, progress: _Progress) -> None:
    delay = limits.retry_delay
    why = "not sent"
    for attempt in range(limits.add_attempts):
        if attempt:
            await asyncio.sleep(delay)
            delay *= 2
        progress.add_requests += 1
        got: RecoveryAddResult = await writer.recovery_add(entry_id, body, timeout=limits.add_timeout)
        if got.ok:
            progress.sent.append(entry_id)
            progress.bytes_sent += len(body)
            return
        why = got.error or "no reason given"
        if got.status is not None and got.status in _FATAL_ADD:
            if progress.stopped is None:
                progress.stopped = (
                    f"bookie {writer.bookie_id} answered {got.status.name} to the add of entry {entry_id}"
                )
            progress.failures.append(EntryFailure(entry_id, FailureKind.ADD_FAILED, why))
            return
    progress.failures.append(
        EntryFailure(entry_id, FailureKind.ADD_FAILED, f"{limits.add_attempts} attempts, last: {why}")
    )
