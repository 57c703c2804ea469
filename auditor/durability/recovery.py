"""Ledger recovery's decisions (seed 003, repair-and-recovery.md §4): pure, no I/O.

Closing an open ledger whose writer is gone is safe only if nothing the writer may have had
acknowledged is cut off. The rules, each a function here:

1. **Fencing coverage** (`fencing_covered`, Java's RRQuorumCoverageSet): the fenced LAC reads have
   fenced enough of the last ensemble when every write-set window `{i, ..., i+WQ-1} mod E` has fewer
   than AQ members without a definitive answer (OK with a verified body, NoSuchEntry, NoSuchLedger).
   Then no write set still holds AQ unfenced bookies, so the writer can never again reach its ack quorum.
2. **Where reading starts** (`lac_from_fencing`): the highest piggybacked LAC among the verified answers,
   but at least the entry before the last segment's first (earlier segments are immutable).
3. **Each entry after it** (`entry_fate`): its write set is asked one bookie at a time, in write-set
   order with unregistered bookies last (`read_order`). One verified copy: PRESENT. `WQ - AQ + 1`
   NoSuchEntry/NoSuchLedger answers: ABSENT (no ack quorum can hold it). Every member asked and neither:
   UNKNOWN, and recovery stops without closing. A timeout, an error or a body that fails its digest is
   unknown, never absence.
4. **The close point** is the entry before the first ABSENT one; entries after it are not read.
5. **Never truncate** (`truncation_refusal`): if the close point lies below the end the bookies proved
   before fencing (the checks' verified LAC, `ledgerend.decide_end`, which also sees explicit LACs
   that fencing does not), closing would cut off an acknowledged entry: recovery refuses.
6. **Length** (`close_length`): the cumulative length stored in the header of the entry at the close
   point. Java instead keeps the length field of the LAC answer it chose when nothing is recovered, which
   can lie past the close point (docs/spec-differences.md); ours is the ledger's true length.
7. **Write-back ensemble** (`write_back_segment`): recovered entries are written again to their write
   sets with RECOVERY_ADD; unregistered members of the last ensemble are replaced first, in a new segment
   starting at the first recovered entry (Java makes the same change in memory when its add to such a
   bookie fails, and writes it with the close).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from .coverage import recovery_negative_threshold
from .model import LedgerMetadata, Segment
from .schedule import write_set

__all__ = [
    "Reply",
    "FenceAnswer",
    "EntryFate",
    "LacStart",
    "fencing_covered",
    "lac_from_fencing",
    "read_order",
    "entry_fate",
    "truncation_refusal",
    "close_length",
    "write_back_segment",
    "closed_metadata_segments",
]


class Reply(str, enum.Enum):
    """One bookie's answer to a fencing or recovery read."""

    POSITIVE = "positive"  # EOK with a body that verifies for this ledger and entry
    NEGATIVE = "negative"  # NoSuchEntry / NoSuchLedger: definitive absence on this bookie
    UNKNOWN = "unknown"  # anything else: timeout, error, digest mismatch, no connection


@dataclass(frozen=True, slots=True)
class FenceAnswer:
    """A fenced LAC read's answer from ensemble index `index`. For POSITIVE: the header fields of the
    bookie's highest stored entry (its id, the LAC it piggybacks, the ledger length through it)."""

    index: int
    bookie: str
    reply: Reply
    entry_id: int | None = None
    lac: int | None = None
    length: int | None = None
    detail: str = ""


class EntryFate(str, enum.Enum):
    PRESENT = "present"
    ABSENT = "absent"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class LacStart:
    """Where recovery reads start (entry `lac + 1`) and the answer it came from (None: none verified)."""

    lac: int
    source: FenceAnswer | None


def fencing_covered(ensemble_size: int, write_quorum: int, ack_quorum: int, replies: Mapping[int, Reply]) -> bool:
    """Java's RRQuorumCoverageSet: every write-set window has fewer than AQ indexes without a definitive
    answer (an index missing from `replies` has none)."""
    for first in range(ensemble_size):
        unknown = 0
        for w in range(write_quorum):
            if replies.get((first + w) % ensemble_size, Reply.UNKNOWN) is Reply.UNKNOWN:
                unknown += 1
        if unknown >= ack_quorum:
            return False
    return True


def lac_from_fencing(md: LedgerMetadata, answers: Sequence[FenceAnswer]) -> LacStart:
    """The highest piggybacked LAC of the verified answers (the first in ensemble order on a tie), raised
    to the entry before the last segment's first: earlier segments are immutable."""
    best: FenceAnswer | None = None
    for a in sorted(answers, key=lambda a: a.index):
        if a.reply is Reply.POSITIVE and a.lac is not None and (best is None or a.lac > (best.lac or -1)):
            best = a
    floor = md.segments[-1].first_entry_id - 1 if md.segments else -1
    lac = max(best.lac if best is not None and best.lac is not None else -1, floor)
    return LacStart(lac, best)


def read_order(md: LedgerMetadata, entry_id: int, registered: Collection[str]) -> list[tuple[int, str]]:
    """(ensemble index, bookie) of `entry_id`'s write set in the last ensemble, in write-set order with
    unregistered bookies moved last (Java's read reordering puts unavailable bookies last too)."""
    ensemble = md.segments[-1].ensemble
    members = [(i, ensemble[i]) for i in write_set(entry_id, md.ensemble_size, md.write_quorum)]
    return [m for m in members if m[1] in registered] + [m for m in members if m[1] not in registered]


def entry_fate(write_quorum: int, ack_quorum: int, replies: Sequence[Reply]) -> EntryFate | None:
    """The fate of one entry from the answers so far, in the order they were asked (one bookie at a
    time); None: ask the next member. Called after each answer, it stops exactly where Java's sequential
    recovery read stops."""
    negatives = 0
    for r in replies:
        if r is Reply.POSITIVE:
            return EntryFate.PRESENT
        if r is Reply.NEGATIVE:
            negatives += 1
            if negatives >= recovery_negative_threshold(write_quorum, ack_quorum):
                return EntryFate.ABSENT
    return EntryFate.UNKNOWN if len(replies) >= write_quorum else None


def truncation_refusal(close_at: int, proven_end: int | None) -> str | None:
    """Why closing at `close_at` would cut off an entry the bookies proved acknowledged, or None."""
    if proven_end is not None and close_at < proven_end:
        return (
            f"recovery would close at entry {close_at}, below the last entry the bookies proved "
            f"acknowledged ({proven_end}): entries {close_at + 1}..{proven_end} would be cut off"
        )
    return None


def close_length(close_at: int, recovered_length: int | None, known: Mapping[int, int]) -> int | None:
    """The ledger length to close with: that of the last recovered entry, else the header length of the
    entry at the close point if some answer carried it (`known`: entry id -> header length), 0 for an
    empty ledger, None if it must still be read."""
    if recovered_length is not None:
        return recovered_length
    if close_at < 0:
        return 0
    return known.get(close_at)


def write_back_segment(md: LedgerMetadata, first_recovered: int, replacements: Mapping[int, str]) -> Segment | None:
    """The segment the recovered entries are written to, when some members of the last ensemble are
    replaced (`replacements`: index -> new bookie); None when the last ensemble is kept."""
    if not replacements:
        return None
    ensemble = list(md.segments[-1].ensemble)
    for index, bookie in replacements.items():
        ensemble[index] = bookie
    return Segment(first_recovered, tuple(ensemble))


def closed_metadata_segments(segments: Sequence[Segment], extra: Segment | None) -> tuple[Segment, ...]:
    """The segments to close with: `extra` replaces the last segment when it starts at the same entry
    (nothing of the old one was ever stored there by the close), else is appended."""
    if extra is None:
        return tuple(segments)
    if segments and segments[-1].first_entry_id == extra.first_entry_id:
        return (*segments[:-1], extra)
    if segments and extra.first_entry_id < segments[-1].first_entry_id:
        raise ValueError(f"a recovery segment at {extra.first_entry_id} precedes the last one")
    return (*segments, extra)
