"""What to repair in one ledger, decided from its metadata and the bookies' answers. Pure.

The repair worker decides from the ledger, not from the marker (Java's worker ignores the marker's replica
list too): the same entry lists the checks gather, judged per segment and per ensemble index.

Evidence per bookie of the ledger:
* its state (`BookieState`): registered writable, registered read-only, gone (unregistered for at least
  `lostBookieRecoveryDelay`, see `bookie_state`), or absent only recently (it may come back: wait);
* its answer (`coverage.Answer`): the entries it holds, or UNKNOWN (it did not answer);
* its corrupt copies: entries whose stored copy failed digest verification (our `digest_mismatch`).

A copy that is corrupt is no copy, a gone bookie holds nothing reachable, and an unknown answer is never
missing: the coverage of those *effective* answers (`coverage.analyze_coverage`) says which entries have
no live copy for certain (data loss) and which might only lack one because a bookie did not answer (wait).

Per segment and index the decision is one of:
* nothing: the bookie holds its whole stripe, verified;
* `READD` in place: the bookie is writable and holds its stripe except some entries (e.g. entries acked
  without it before an ensemble change): just those entries, no ensemble change;
* `MOVE`: the bookie serves a copy that failed digest verification: its stripe goes to a new bookie,
  read from the other replicas and from it (every copy verified, so the corrupt one is never sent), and
  the ensemble changes. Re-adding a good copy in place is no repair: SortedLedgerStorage serves its
  flushed copy before its memtable until the memtable fills, DbLedgerStorage serves the stale copy from
  its read-ahead cache once its write cache is flushed. Java's ReplicationWorker replaces such a bookie too;
* `REPLACE`: the bookie is gone, read-only (cannot take an add), or holds none of its stripe (its copy is
  lost): only the entries striped to that index (fewer than the segment when E > WQ) go to a new bookie,
  whose choice is `replacement.choose_replacement`'s; a segment without entries is a metadata-only change.
  Never when one of those entries has no other live copy: the old bookie stays named, so its copy is
  found again if it comes back;
* blocked: entries with no live copy anywhere (`DATA_LOSS`, with their ranges); an unknown answer or a
  recently absent bookie (`WAIT_UNKNOWN`); the last segment of an open ledger, or a segment an open
  ledger may still be writing (`OPEN_SEGMENT`: the writer or a recovery replaces its bookies, never us,
  repair-and-recovery.md §2.4).

Entries that cannot be copied (lost or waiting) are left out of the actions; the rest is still planned,
so a ledger with one lost entry does not keep its other entries under-replicated.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from .coverage import UNKNOWN, Answer, Coverage, analyze_coverage, copies_category
from .findings import Category
from .ids import LedgerId
from .model import LedgerMetadata, Segment, SegmentSpan
from .placement import Adherence, PlacementVerdict
from .ranges import RangeSet
from .schedule import expected_for_index, write_set
from .striped import StripedSet

__all__ = [
    "BookieState",
    "bookie_state",
    "Evidence",
    "ActionKind",
    "Action",
    "BlockReason",
    "Block",
    "WorkClass",
    "RepairPlan",
    "plan_repair",
    "metadata_work_class",
    "WorkItem",
    "work_order",
    "Backoff",
    "segment_change",
    "with_member",
]


class BookieState(str, enum.Enum):
    WRITABLE = "writable"
    READ_ONLY = "read_only"  # serves reads, refuses RECOVERY_ADD without priority: replace, don't re-add
    GONE = "gone"  # unregistered for at least lostBookieRecoveryDelay: its copies are not reachable
    ABSENT = "absent"  # unregistered for less than that: it may come back, so its copies are unknown


def bookie_state(
    writable: bool, read_only: bool, absent_since_ms: int | None, now_ms: int, recovery_delay_s: int
) -> BookieState:
    """A bookie's state for repair. `absent_since_ms`: when the worker first saw it unregistered (None:
    never seen registered; treated as gone since at least that long). The delay is Java's auditor grace
    (`lostBookieRecoveryDelay`) applied once more by the worker, so a bookie restarting is not replaced."""
    if writable:
        return BookieState.WRITABLE
    if read_only:
        return BookieState.READ_ONLY
    if absent_since_ms is not None and now_ms - absent_since_ms < recovery_delay_s * 1000:
        return BookieState.ABSENT
    return BookieState.GONE


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the checks know of a ledger's bookies. A bookie without a state counts as ABSENT (wait)."""

    states: Mapping[str, BookieState]
    answers: Mapping[str, Answer]
    corrupt: Mapping[str, RangeSet]  # bookie -> entries whose copy there failed digest verification

    def effective(self, bookies: Iterable[str]) -> dict[str, Answer]:
        """The answers a repair can count on: gone = holds nothing reachable; absent or silent = unknown;
        corrupt copies removed."""
        out: dict[str, Answer] = {}
        for b in bookies:
            state = self.states.get(b, BookieState.ABSENT)
            answer = self.answers.get(b, UNKNOWN)
            if state is BookieState.GONE:
                out[b] = RangeSet()
            elif state is BookieState.ABSENT or not isinstance(answer, RangeSet):
                out[b] = UNKNOWN
            else:
                out[b] = answer.difference(self.corrupt.get(b, RangeSet()))
        return out


class ActionKind(str, enum.Enum):
    READD = "readd"  # re-add missing entries to the same (writable) bookie; no metadata change
    MOVE = "move"  # a bookie serving corrupt copies: its stripe to a new bookie (read from it too), then the ensemble
    REPLACE = "replace"  # copy the index's stripe to a new bookie, then change that segment's ensemble


@dataclass(frozen=True, slots=True)
class Action:
    kind: ActionKind
    segment_index: int
    segment_key: int  # the segment's first entry id (its key in the metadata)
    index: int  # position in the ensemble
    bookie: str  # the bookie re-added to, or the one replaced
    entries: StripedSet  # what to copy (lost and waiting entries left out)
    corrupt: RangeSet = RangeSet()  # MOVE: the bookie's copies that failed verification


class BlockReason(str, enum.Enum):
    """Why (part of) a ledger cannot be repaired now. Stable names: they appear in `repair_blocked`."""

    DATA_LOSS = "data_loss"  # entries with no live copy anywhere
    WAIT_UNKNOWN = "wait_unknown"  # a bookie did not answer or is absent only recently: not loss
    OPEN_SEGMENT = "open_segment"  # a segment an open ledger may still write (its last one)
    NO_ELIGIBLE_BOOKIE = "no_eligible_bookie"  # replacement.choose_replacement found none
    LEDGER_DELETED = "ledger_deleted"
    SEGMENT_CHANGED = "segment_changed"  # the ensemble update found the segment changed meanwhile
    OPEN_LEDGER_GRACE = "open_ledger_grace"  # open, last ensemble has unregistered bookies: recovery after the grace
    RECOVERY_STOPPED = "recovery_stopped"  # open-ledger recovery met an unknown answer: not closed, retried
    RECOVERY_REFUSED = "recovery_refused"  # open-ledger recovery would cut off acknowledged entries: not closed
    # No password in the metadata and no copy verifies under the recovery password and digest type (nor a
    # password-free digest type): cannot verify, never loss; set the ledger's `repair.recovery_*` settings.
    CREDENTIALS_MISMATCH = "credentials_mismatch"

    @property
    def is_loss(self) -> bool:
        return self is BlockReason.DATA_LOSS


@dataclass(frozen=True, slots=True)
class Block:
    reason: BlockReason
    entries: StripedSet
    segment_index: int | None = None
    bookie: str | None = None

    def describe(self, limit: int = 20) -> str:
        where = "" if self.segment_index is None else f" in segment {self.segment_index}"
        who = "" if self.bookie is None else f" ({self.bookie})"
        what = f"entries {self.entries.to_text(limit)}" if self.entries else "no entries"
        return f"{self.reason.value}{where}{who}: {what}"


class WorkClass(enum.IntEnum):
    """Severity order of repair work, worst (lowest) first."""

    NO_LIVE_COPY = 0
    BELOW_ACK_QUORUM = 1
    BELOW_WRITE_QUORUM = 2
    PLACEMENT = 3
    NOTHING = 4


_ENTRY_CLASS = {
    Category.ENTRY_NO_REPLICA: WorkClass.NO_LIVE_COPY,
    Category.ENTRY_BELOW_ACK_QUORUM: WorkClass.BELOW_ACK_QUORUM,
    Category.ENTRY_BELOW_WRITE_QUORUM: WorkClass.BELOW_WRITE_QUORUM,
}


@dataclass(frozen=True, slots=True)
class RepairPlan:
    ledger_id: LedgerId
    work_class: WorkClass
    actions: tuple[Action, ...]
    blocks: tuple[Block, ...]
    coverage: Coverage

    @property
    def is_clean(self) -> bool:
        """Nothing to copy and nothing in the way: the marker may go once a re-check agrees."""
        return not self.actions and not self.blocks

    @property
    def lost(self) -> StripedSet:
        """Entries with no live copy anywhere (data loss)."""
        out = [b.entries for b in self.blocks if b.reason is BlockReason.DATA_LOSS and b.segment_index is None]
        return out[0] if out else StripedSet()

    def replacements(self) -> tuple[Action, ...]:
        return tuple(a for a in self.actions if a.kind in (ActionKind.REPLACE, ActionKind.MOVE))


def _repairable(md: LedgerMetadata, span: SegmentSpan, end: int) -> bool:
    """Closed ledger: every segment. Open: only a segment that is not the last one and whose entries the
    LAC covers up to the next key (Java's `LedgerFragment.isClosed`, repair-and-recovery.md §2.1)."""
    if md.is_closed:
        return True
    if span.index + 1 >= len(md.segments):
        return False
    return end >= md.segments[span.index + 1].first_entry_id - 1


def plan_repair(
    md: LedgerMetadata, evidence: Evidence, end: int | None = None, placement: PlacementVerdict | None = None
) -> RepairPlan:
    """The plan for one ledger. `end`: the closed ledger's last entry (default), or the LAC proven for an
    open one; `placement`: the scrutiny's verdict, which only sets the work class (a ledger otherwise
    whole but failing its policy is placement work)."""
    stop = md.last_entry_id if end is None else end
    effective = evidence.effective(md.bookies)
    cov = analyze_coverage(md, effective, stop)
    no_copy = cov.buckets[Category.ENTRY_NO_REPLICA]
    lost = no_copy.confirmed.to_rangeset()
    waiting = no_copy.possible.to_rangeset().difference(lost)
    actions: list[Action] = []
    blocks: list[Block] = []
    for span in md.spans(stop):
        repairable = _repairable(md, span, stop)
        for i, bookie in enumerate(span.ensemble):
            where = _Index(span, i, bookie, _index_stripe(md, span, i), repairable)
            _decide(where, evidence, effective[bookie], lost, waiting, actions, blocks)
    if lost:
        blocks.insert(0, Block(BlockReason.DATA_LOSS, StripedSet.from_rangeset(lost)))
    if waiting:
        blocks.append(Block(BlockReason.WAIT_UNKNOWN, StripedSet.from_rangeset(waiting)))
    return RepairPlan(md.ledger_id, _work_class(cov, placement), tuple(actions), tuple(blocks), cov)


def move_action(md: LedgerMetadata, segment_index: int, index: int, corrupt: RangeSet) -> Action:
    """The MOVE of the member at `index` of a (closed) segment that served the corrupt copies `corrupt`:
    its whole stripe there, as `plan_repair` plans one (the healer's, for the rot its copies met)."""
    span = md.spans()[segment_index]
    stripe = _index_stripe(md, span, index)
    return Action(ActionKind.MOVE, span.index, span.first_entry_id, index, span.ensemble[index], stripe, corrupt)


def _index_stripe(md: LedgerMetadata, span: SegmentSpan, index: int) -> StripedSet:
    """The entries of `span` striped to ensemble index `index`."""
    first, last = span.entries.first, span.entries.last
    if first is None or last is None:
        return StripedSet.of([None])
    return StripedSet.of([expected_for_index(first, last, index, md.ensemble_size, md.write_quorum)])


@dataclass(frozen=True, slots=True)
class _Index:
    span: SegmentSpan
    index: int
    bookie: str
    expected: StripedSet  # the index's stripe within the segment and the ledger's end
    repairable: bool


def _decide(
    at: _Index,
    evidence: Evidence,
    answer: Answer,
    lost: RangeSet,
    waiting: RangeSet,
    actions: list[Action],
    blocks: list[Block],
) -> None:
    """One segment index: nothing, re-add in place, replace or move, or a block."""
    span, bookie, expected = at.span, at.bookie, at.expected
    state = evidence.states.get(bookie, BookieState.ABSENT)
    kind, corrupt = ActionKind.REPLACE, RangeSet()
    if state is not BookieState.GONE:
        if not isinstance(answer, RangeSet):
            if expected:
                blocks.append(Block(BlockReason.WAIT_UNKNOWN, expected, span.index, bookie))
            return
        missing = expected.difference(answer)
        if not missing:
            return
        corrupt = expected.intersection(evidence.corrupt.get(bookie, RangeSet())).to_rangeset()
        if corrupt:
            kind = ActionKind.MOVE  # it keeps serving its copies, the corrupt one too: read from it as well
        elif state is BookieState.WRITABLE and missing.count() < expected.count():
            if not at.repairable:
                blocks.append(Block(BlockReason.OPEN_SEGMENT, missing, span.index, bookie))
                return
            copyable = missing.difference(lost).difference(waiting)
            if copyable:
                actions.append(Action(ActionKind.READD, span.index, span.first_entry_id, at.index, bookie, copyable))
            return
    # Gone, read-only (refuses adds), holding none of its stripe (its copy is lost), or serving a corrupt
    # copy: replace (a MOVE reads from the old bookie too).
    if not at.repairable:
        blocks.append(Block(BlockReason.OPEN_SEGMENT, expected, span.index, bookie))
        return
    if expected.difference(lost).difference(waiting).count() < expected.count():
        # Replacing would drop the metadata's only pointer to entries that have no other copy (lost, or
        # waiting on a silent bookie): if the old bookie comes back they are found again. So the whole
        # stripe waits, under the reason of its worst entry.
        why = BlockReason.DATA_LOSS if expected.intersection(lost) else BlockReason.WAIT_UNKNOWN
        blocks.append(Block(why, expected, span.index, bookie))
        return
    # A segment without entries is replaced too (metadata only): a gone bookie left in metadata gets the
    # ledger marked again by every audit (apache/bookkeeper#3239).
    actions.append(Action(kind, span.index, span.first_entry_id, at.index, bookie, expected, corrupt))


def _work_class(cov: Coverage, placement: PlacementVerdict | None) -> WorkClass:
    worst = cov.worst or cov.worst_possible
    if worst is not None:
        return _ENTRY_CLASS[worst]
    if placement is not None and placement.adherence is Adherence.FAIL:
        return WorkClass.PLACEMENT
    return WorkClass.NOTHING


def metadata_work_class(md: LedgerMetadata, states: Mapping[str, BookieState]) -> WorkClass:
    """The class a ledger's metadata alone shows, for ordering the work before any bookie is asked: per
    write set that holds an entry, its members that are registered (writable or read-only) are the copies
    that can be there; the fewest of them, against the quorums, is the class (a gone or recently absent
    bookie counts as no copy). Reading every copy of every marked ledger to order them would cost what
    copying them costs, on bookies that cannot list entries; the repair itself still asks the bookies
    and plans from their answers. A ledger whose members are all registered shows `NOTHING` here: its
    trouble (a copy lost on a live bookie, a corrupt one) shows only to reads, so it goes after the
    ledgers whose loss is certain."""
    registered = (BookieState.WRITABLE, BookieState.READ_ONLY)
    wq, e_size = md.write_quorum, md.ensemble_size
    # An open ledger's last segment may hold any entry: every stripe of it counts.
    end = None if md.is_closed else md.segments[-1].first_entry_id + e_size - 1
    fewest = wq
    for span in md.spans(end):
        first, last = span.entries.first, span.entries.last  # a segment's entries are one run
        if first is None or last is None:
            continue
        for e in range(first, min(last, first + e_size - 1) + 1):  # E entries show every stripe
            members = {span.ensemble[k] for k in write_set(e, e_size, wq)}
            fewest = min(fewest, sum(1 for b in members if states.get(b) in registered))
    category = copies_category(fewest, wq, md.ack_quorum)
    return _ENTRY_CLASS[category] if category is not None else WorkClass.NOTHING


@dataclass(frozen=True, slots=True)
class WorkItem:
    ledger_id: LedgerId
    work_class: WorkClass
    created_ms: int  # the ledger's creation time (metadata ctime, else its znode's)


def work_order(items: Iterable[WorkItem], newest_first: bool = False) -> list[WorkItem]:
    """Worst class first; within a class newest first when asked (retention deletes old ledgers soon,
    apache/bookkeeper#3773), else oldest first; ties by ledger id, so the order is total."""
    sign = -1 if newest_first else 1
    return sorted(items, key=lambda w: (w.work_class, sign * w.created_ms, w.ledger_id.scope, w.ledger_id.ledger))


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff of a ledger that failed (blocked): `cap / 32 * 2**(n-1)` for the n-th failure,
    at most `cap`. With Java's `lockReleaseOfFailedLedgerGracePeriod` as the cap this is exactly Java's
    schedule (9.375 s, 18.75 s, 37.5 s, 75 s, 150 s, then 300 s), but ours also holds when no lock is kept."""

    cap_s: float = 300.0
    divisor: int = 32

    def delay_s(self, failures: int) -> float:
        if failures <= 0:
            return 0.0
        return float(min(self.cap_s, self.cap_s / self.divisor * 2 ** min(failures - 1, 62)))

    def next_attempt_ms(self, now_ms: int, failures: int) -> int:
        return now_ms + int(self.delay_s(failures) * 1000)


# --------------------------------------------------------------------------------------------------
# The ensemble change a replacement commits (repair-and-recovery.md §2.4, §5)


def segment_change(planned: LedgerMetadata, current: LedgerMetadata, segment_index: int) -> str | None:
    """Why segment `segment_index` of `current` is no longer the one the repair was planned on, or None
    when it is unchanged: same key, same ensemble, same extent (the next key, or for the last segment of
    a closed ledger the same last entry). A live writer only replaces or appends the *last* segment of an
    open ledger (§5), which is never repaired, so a change here means someone else changed the ensemble
    (another worker, a recovery, an operator) and our copies may not be the ones it needs."""
    if segment_index >= len(planned.segments):
        return f"segment {segment_index} was not in the planned metadata"
    if segment_index >= len(current.segments):
        return f"segment {segment_index} no longer exists"
    was, now = planned.segments[segment_index], current.segments[segment_index]
    if was.first_entry_id != now.first_entry_id:
        return f"segment {segment_index} now starts at entry {now.first_entry_id}, not {was.first_entry_id}"
    if was.ensemble != now.ensemble:
        return f"segment {segment_index} ensemble is now {list(now.ensemble)}, was {list(was.ensemble)}"
    if segment_index + 1 < len(planned.segments):
        if segment_index + 1 >= len(current.segments):
            return f"segment {segment_index} is the last one now"
        if planned.segments[segment_index + 1].first_entry_id != current.segments[segment_index + 1].first_entry_id:
            return f"segment {segment_index} now ends at entry {current.segments[segment_index + 1].first_entry_id - 1}"
        return None
    if not planned.is_closed:
        return f"segment {segment_index} is the last segment of an open ledger (the writer's, never repaired)"
    if len(current.segments) != len(planned.segments) or current.last_entry_id != planned.last_entry_id:
        return f"the closed ledger changed its end (last entry {current.last_entry_id})"
    return None


def with_member(md: LedgerMetadata, segment_index: int, index: int, bookie: str) -> LedgerMetadata:
    """`md` with `ensemble[index]` of one segment set to `bookie`; everything else as it was (state, end,
    password, custom metadata, format version), as Java's updateEnsembleInfo transform does."""
    seg = md.segments[segment_index]
    ensemble = seg.ensemble[:index] + (bookie,) + seg.ensemble[index + 1 :]
    segments = md.segments[:segment_index] + (Segment(seg.first_entry_id, ensemble),) + md.segments[segment_index + 1 :]
    return replace(md, segments=segments)
