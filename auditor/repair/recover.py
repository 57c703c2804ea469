"""Ledger recovery: close an open ledger whose writer is gone, safely (seed 003; rules in
auditor/durability/recovery.py, Java's sequence in repair-and-recovery.md §4).

Run by the repair worker only when `repair.recover_open_ledgers` is on, only for a ledger it holds the
repair lock of (so one the auditor marked), after the grace period, and only while the ledger is still
open with unregistered bookies in its last ensemble. The steps:

1. OPEN -> IN_RECOVERY (version-checked), before anything is fenced.
2. A fenced LAC read (entry -1) to every bookie of the last ensemble, all answers awaited; without
   fencing coverage recovery stops, nothing closed.
3. Fenced reads from LAC + 1, one member of the write set at a time, a window of entries at once, judged
   in entry order: the first ABSENT entry ends the ledger; an UNKNOWN one stops recovery, nothing closed.
4. The close point checked against the end the bookies proved before fencing: below it, recovery
   refuses (a `repair_blocked` finding, reason `recovery_refused`) rather than truncate.
5. Each recovered entry written again with RECOVERY_ADD to its write set (unregistered members replaced
   in a new segment first); fewer than AQ acknowledgements stops recovery, nothing closed.
6. IN_RECOVERY -> CLOSED (version-checked). Someone else closing first wins; their close is adopted.

Every fencing read and write-back asks the repair lock's lease as it is encoded (`gate.WriteLease`):
once the lock's session ends or the ledger is deleted, nothing more is sent (LeaseEndedError).

Every outcome is one log line with the evidence (each bookie's fencing answer, where reading started,
what was recovered, the answers that ended it).
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from auditor.aio.tasks import gather_all
from auditor.bookie.config import BookieClientConfig, Resolver
from auditor.bookie.protocol import Status
from auditor.bookie.results import Outcome, ReadEntryResult
from auditor.checks.context import AuditContext
from auditor.durability.entry import EntryVerification, parse_header, verify_entry
from auditor.durability.model import LedgerMetadata, Segment
from auditor.durability.ranges import RangeSet
from auditor.durability.recovery import (
    EntryFate,
    FenceAnswer,
    LacStart,
    Reply,
    close_length,
    entry_fate,
    fencing_covered,
    lac_from_fencing,
    read_order,
    truncation_refusal,
    write_back_segment,
)
from auditor.durability.repackage import LedgerCredentials
from auditor.durability.schedule import write_set
from auditor.errors import AuditorError
from auditor.logging import get_logger
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.repair.recovery import CloseOutcome, close_recovered, mark_in_recovery
from auditor.metadata.store import ZooKeeperMetadataStore

from .fencing import FencePermit, FencingClient
from .gate import RecoveryAddPermit, WriteLease
from .writer import RecoveryAddClient

log = get_logger("auditor.repair.recovery")

READ_WINDOW = 8  # entries whose recovery reads are in flight at once (judged in entry order)

# Picks a replacement for ensemble index `index` of the last segment, avoiding `exclude`.
Chooser = Callable[[LedgerMetadata, int, set[str]], Awaitable[str]]


class RecoveryOutcome(str, enum.Enum):
    CLOSED = "closed"  # we closed it
    ADOPTED = "adopted"  # someone else closed it first (or it was closed already): theirs stands
    STOPPED = "stopped"  # an unknown answer, no fencing coverage, a failed write-back, a change: not closed
    REFUSED = "refused"  # closing would cut off an entry proven acknowledged: not closed, never will be by us


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    outcome: RecoveryOutcome
    detail: str
    metadata: LedgerMetadata | None = None  # as stored after recovery (closed, or as last read)
    last_entry_id: int | None = None
    length: int | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class _Evidence:
    fencing: dict[str, str] = field(default_factory=dict)
    start_lac: int | None = None
    recovered: list[int] = field(default_factory=list)
    ended_by: dict[str, str] = field(default_factory=dict)  # the entry that ended reading: bookie -> answer
    ended_at: int | None = None
    new_segment: Segment | None = None

    def as_fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fencing": self.fencing, "startLac": self.start_lac}
        out["recovered"] = RangeSet.from_ids(self.recovered).to_text() if self.recovered else ""
        if self.ended_at is not None:
            out["endedAtEntry"] = self.ended_at
            out["endedBy"] = self.ended_by
        if self.new_segment is not None:
            out["newSegment"] = {
                "firstEntryId": self.new_segment.first_entry_id,
                "ensemble": list(self.new_segment.ensemble),
            }
        return out


class _Stop(AuditorError):
    """Internal: recovery ends here without closing; never leaves `LedgerRecoverer.recover`."""

    def __init__(self, outcome: RecoveryOutcome, detail: str, metadata: LedgerMetadata | None = None) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail
        self.metadata = metadata


class LedgerRecoverer:
    """Recovers one ledger. `store`: the repair role's ZooKeeper store (metadata writes, guarded by the
    repair lock's `guard`); `ctx`: the read-only bookie pool (plain reads of closed-off segments)."""

    def __init__(
        self,
        ctx: AuditContext,
        store: ZooKeeperMetadataStore,
        resolver: Resolver,
        bookie_config: BookieClientConfig,
        credentials: LedgerCredentials,
        registered: frozenset[str],
        choose: Chooser,
        *,
        lease: WriteLease,
    ) -> None:
        self.ctx = ctx
        self.lease = lease  # the repair lock: every fencing read and write-back asks it (LeaseEndedError)
        self.store = store
        self.resolver = resolver
        self.config = bookie_config
        self.creds = credentials
        self.registered = registered
        self.choose = choose
        self.ev = _Evidence()

    async def recover(self, md: LedgerMetadata, proven_end: int | None, guard: WriteGuard) -> RecoveryResult:
        started = time.monotonic()
        try:
            result = await self._recover(md, proven_end, guard)
        except _Stop as s:
            result = RecoveryResult(s.outcome, s.detail, s.metadata)
        fields = {
            "ledgerId": str(md.ledger_id),
            "outcome": result.outcome.value,
            "detail": result.detail,
            "lastEntryId": result.last_entry_id,
            "length": result.length,
            "provenEnd": proven_end,
            "durationSeconds": round(time.monotonic() - started, 3),
            **self.ev.as_fields(),
        }
        if result.outcome in (RecoveryOutcome.CLOSED, RecoveryOutcome.ADOPTED):
            log.warning("open ledger recovered", **fields)
        else:
            log.warning("open ledger not recovered", **fields)
        return RecoveryResult(
            result.outcome, result.detail, result.metadata, result.last_entry_id, result.length, self.ev.as_fields()
        )

    async def _recover(self, md: LedgerMetadata, proven_end: int | None, guard: WriteGuard) -> RecoveryResult:
        step = await mark_in_recovery(self.store, md, guard)
        if step.outcome is CloseOutcome.ADOPTED and step.metadata is not None:
            m = step.metadata
            return RecoveryResult(RecoveryOutcome.ADOPTED, step.reason, m, m.last_entry_id, m.length)
        if step.metadata is None or step.outcome not in (CloseOutcome.WRITTEN, CloseOutcome.UNCHANGED):
            raise _Stop(RecoveryOutcome.STOPPED, f"marking in recovery: {step.outcome.value} {step.reason}".strip())
        md = step.metadata
        fencers = {b: self._fencer(md, b) for b in dict.fromkeys(md.segments[-1].ensemble)}
        try:
            return await self._fenced(md, proven_end, guard, fencers)
        finally:
            await gather_all(f.close() for f in fencers.values())

    def _fencer(self, md: LedgerMetadata, bookie: str) -> FencingClient:
        permit = FencePermit(md.ledger_id.ledger, bookie, self.creds.master_key)
        return FencingClient(permit, self.resolver, self.config, lease=self.lease)

    async def _fenced(
        self, md: LedgerMetadata, proven_end: int | None, guard: WriteGuard, fencers: dict[str, FencingClient]
    ) -> RecoveryResult:
        start = await self._fence(md, fencers)
        self.ev.start_lac = start.lac
        s = start.source  # the answer reading starts from: its own entry's length is known
        known = {s.entry_id: s.length} if s and s.entry_id is not None and s.length is not None else {}
        bodies: list[tuple[int, bytes, int]] = []  # (entry, stored body, header length)
        close_at = await self._read_forward(md, start.lac, fencers, bodies)
        why = truncation_refusal(close_at, proven_end)
        if why is not None:
            raise _Stop(RecoveryOutcome.REFUSED, why, md)
        length = close_length(close_at, bodies[-1][2] if bodies else None, known)
        if length is None:
            length = await self._length_of(md, close_at)
        extra = None
        if bodies:
            extra = await self._write_back(md, bodies)
            self.ev.new_segment = extra
        done = await close_recovered(self.store, md, close_at, length, extra, guard)
        m = done.metadata
        if done.outcome is CloseOutcome.WRITTEN and m is not None:
            return RecoveryResult(RecoveryOutcome.CLOSED, f"closed at entry {close_at}", m, close_at, length)
        if done.outcome is CloseOutcome.ADOPTED and m is not None:
            ours = f"ours would have been {close_at}/{length}"
            return RecoveryResult(
                RecoveryOutcome.ADOPTED,
                f"{done.reason} at {m.last_entry_id}/{m.length}; {ours}",
                m,
                m.last_entry_id,
                m.length,
            )
        raise _Stop(RecoveryOutcome.STOPPED, f"closing: {done.outcome.value} {done.reason}".strip(), m)

    def _verify(self, md: LedgerMetadata, body: bytes, entry_id: int) -> EntryVerification:
        return verify_entry(
            body,
            ledger_id=md.ledger_id.ledger,
            entry_id=entry_id,
            digest_type=self.creds.digest_type,
            key=self.creds.mac_key,
        )

    # ------------------------------------------------------------------ 2. fencing
    async def _fence(self, md: LedgerMetadata, fencers: dict[str, FencingClient]) -> LacStart:
        ensemble = md.segments[-1].ensemble
        results = await asyncio.gather(*(fencers[b].fenced_read(-1) for b in ensemble))
        answers = [self._fence_answer(md, i, b, r) for i, (b, r) in enumerate(zip(ensemble, results))]
        for a in answers:
            self.ev.fencing[f"{a.index}:{a.bookie}"] = (
                f"lac {a.lac} (entry {a.entry_id})"
                if a.reply is Reply.POSITIVE
                else a.reply.value + (f": {a.detail}" if a.detail else "")
            )
        unauthorized = [a for a, r in zip(answers, results) if r.status is Status.EUA]
        if unauthorized:
            raise _Stop(RecoveryOutcome.STOPPED, f"bookie {unauthorized[0].bookie} refused the ledger's key (EUA)")
        replies = {a.index: a.reply for a in answers}
        if not fencing_covered(md.ensemble_size, md.write_quorum, md.ack_quorum, replies):
            unknown = [a.bookie for a in answers if a.reply is Reply.UNKNOWN]
            raise _Stop(
                RecoveryOutcome.STOPPED,
                f"fencing not covered: too many of the last ensemble gave no definitive answer ({', '.join(unknown)})",
            )
        return lac_from_fencing(md, answers)

    def _fence_answer(self, md: LedgerMetadata, index: int, bookie: str, r: ReadEntryResult) -> FenceAnswer:
        if r.outcome is Outcome.ABSENT:
            return FenceAnswer(index, bookie, Reply.NEGATIVE, detail=r.status.name if r.status else "")
        if r.outcome is not Outcome.PRESENT or r.body is None:
            return FenceAnswer(index, bookie, Reply.UNKNOWN, detail=r.error or "")
        try:
            entry_id = parse_header(r.body).entry_id
        except Exception as exc:  # a body that is not an entry: not an answer
            return FenceAnswer(index, bookie, Reply.UNKNOWN, detail=f"unreadable body: {exc}")
        check = self._verify(md, r.body, entry_id)
        if not check.ok or check.header is None:
            return FenceAnswer(index, bookie, Reply.UNKNOWN, detail=f"{check.verdict.value}: {check.detail}")
        h = check.header
        return FenceAnswer(index, bookie, Reply.POSITIVE, h.entry_id, h.last_add_confirmed, h.length)

    # ------------------------------------------------------------------ 3. recovery reads
    async def _read_forward(
        self, md: LedgerMetadata, lac: int, fencers: dict[str, FencingClient], bodies: list[tuple[int, bytes, int]]
    ) -> int:
        """Read from lac + 1 until the first entry that is not PRESENT; returns the close point."""
        entry = lac + 1
        while True:
            batch = list(range(entry, entry + READ_WINDOW))
            fates = await asyncio.gather(*(self._entry(md, e, fencers) for e in batch))
            for e, (fate, body, answers) in zip(batch, fates):
                if fate is EntryFate.PRESENT and body is not None:
                    bodies.append((e, body, parse_header(body).length))
                    self.ev.recovered.append(e)
                    continue
                self.ev.ended_at = e
                self.ev.ended_by = answers
                if fate is EntryFate.ABSENT:
                    return e - 1
                raise _Stop(RecoveryOutcome.STOPPED, f"entry {e}: no definitive answer from its write set ({answers})")
            entry += READ_WINDOW

    async def _entry(
        self, md: LedgerMetadata, entry: int, fencers: dict[str, FencingClient]
    ) -> tuple[EntryFate, bytes | None, dict[str, str]]:
        """Ask the write set one member at a time (Java's sequential recovery read)."""
        replies: list[Reply] = []
        said: dict[str, str] = {}
        for _index, bookie in read_order(md, entry, self.registered):
            r = await fencers[bookie].fenced_read(entry)
            reply, text = self._entry_reply(md, entry, r)
            replies.append(reply)
            said[bookie] = text
            fate = entry_fate(md.write_quorum, md.ack_quorum, replies)
            if fate is EntryFate.PRESENT:
                return fate, r.body, said
            if fate is not None:
                return fate, None, said
        return EntryFate.UNKNOWN, None, said

    def _entry_reply(self, md: LedgerMetadata, entry: int, r: ReadEntryResult) -> tuple[Reply, str]:
        if r.outcome is Outcome.ABSENT:
            return Reply.NEGATIVE, r.status.name if r.status else "absent"
        if r.outcome is not Outcome.PRESENT or r.body is None:
            return Reply.UNKNOWN, r.error or "no answer"
        check = self._verify(md, r.body, entry)
        if not check.ok or check.header is None or check.header.format_version != 1:
            return Reply.UNKNOWN, f"{check.verdict.value}: {check.detail}"
        return Reply.POSITIVE, "present"

    # ------------------------------------------------------------------ 5. write-back
    async def _write_back(self, md: LedgerMetadata, bodies: list[tuple[int, bytes, int]]) -> Segment | None:
        ensemble = md.segments[-1].ensemble
        first = bodies[0][0]
        replacements: dict[int, str] = {}
        used = set(ensemble)
        for i, b in enumerate(ensemble):
            if b not in self.registered:
                new = await self.choose(md, i, used)
                replacements[i] = new
                used.add(new)
        extra = write_back_segment(md, first, replacements)
        target = extra.ensemble if extra is not None else ensemble
        writers = {
            b: RecoveryAddClient(
                RecoveryAddPermit.for_ledger(md.ledger_id.ledger, b, self.creds),
                self.resolver,
                self.config,
                lease=self.lease,
            )
            for b in dict.fromkeys(target)
        }
        try:
            for entry, body, _length in bodies:
                members = [target[k] for k in write_set(entry, md.ensemble_size, md.write_quorum)]
                results = await asyncio.gather(*(writers[b].recovery_add(entry, body) for b in members))
                acked = [r.bookie_id for r in results if r.ok]
                if len(acked) < md.ack_quorum:
                    failed = {r.bookie_id: (r.status.name if r.status else r.error or "?") for r in results if not r.ok}
                    raise _Stop(
                        RecoveryOutcome.STOPPED,
                        f"write-back of entry {entry} reached {len(acked)} of ack quorum {md.ack_quorum}: {failed}",
                    )
                for r in results:
                    if not r.ok:
                        log.warning(
                            "recovery write-back not acknowledged by one member (the repair re-copies it)",
                            ledgerId=str(md.ledger_id),
                            entryId=entry,
                            bookieId=r.bookie_id,
                            error=r.status.name if r.status else r.error,
                        )
        finally:
            await gather_all(w.close() for w in writers.values())
        return extra

    # ------------------------------------------------------------------ 6. the length
    async def _length_of(self, md: LedgerMetadata, entry: int) -> int:
        """The cumulative length in the header of `entry` (the close point), read plainly from its write
        set: it is at or below the LAC, in a segment no writer changes any more."""
        span = next(s for s in reversed(md.spans(entry)) if s.first_entry_id <= entry)
        for k in write_set(entry, md.ensemble_size, md.write_quorum):
            r = await self.ctx.bookies.client(span.ensemble[k]).read_entry(md.ledger_id.ledger, entry)
            if r.outcome is Outcome.PRESENT and r.body is not None:
                check = self._verify(md, r.body, entry)
                if check.ok and check.header is not None:
                    return check.header.length
        raise _Stop(RecoveryOutcome.STOPPED, f"the length at entry {entry} could not be read from its write set")
