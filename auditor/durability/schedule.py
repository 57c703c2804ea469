"""The round-robin distribution schedule: which ensemble indexes hold which entries.

BookKeeper stores entry `e` of a segment on the ensemble indexes `(e + w) mod E` for `w = 0 .. WQ-1`
(bookie-protocol.md §6). The entries one index holds within `[first, last]` are therefore periodic with
period E: `{e : (i - e) mod E < WQ}`, a stripe (`auditor.durability.striped`); what each bookie should
hold is given as striped sets, never as enumerated entries.

All arithmetic is on exact Python ints: unlike Java's `hasEntry`, nothing breaks for ids >= 2**31.
"""

from __future__ import annotations

from functools import lru_cache

from .model import LedgerMetadata
from .striped import Stripe, StripedSet

__all__ = [
    "write_set",
    "holds",
    "index_residues",
    "write_set_bookies",
    "expected_for_index",
    "expected_by_bookie",
    "segment_bookie_residues",
    "check_quorum_sizes",
]


def check_quorum_sizes(ensemble_size: int, write_quorum: int, ack_quorum: int | None = None) -> None:
    """Raise ValueError unless 1 <= AQ <= WQ <= E (the sizes BookKeeper accepts)."""
    if not 1 <= write_quorum <= ensemble_size:
        raise ValueError(f"write quorum {write_quorum} must be within 1..ensemble size {ensemble_size}")
    if ack_quorum is not None and not 1 <= ack_quorum <= write_quorum:
        raise ValueError(f"ack quorum {ack_quorum} must be within 1..write quorum {write_quorum}")


def write_set(entry: int, ensemble_size: int, write_quorum: int) -> tuple[int, ...]:
    """Ensemble indexes holding `entry`, in write order: (e + w) mod E for w < WQ."""
    check_quorum_sizes(ensemble_size, write_quorum)
    return tuple((entry + w) % ensemble_size for w in range(write_quorum))


def holds(index: int, entry: int, ensemble_size: int, write_quorum: int) -> bool:
    """True when ensemble index `index` stores `entry`: (i - e) mod E < WQ (non-negative modulo)."""
    return (index - entry) % ensemble_size < write_quorum


def index_residues(index: int, ensemble_size: int, write_quorum: int) -> tuple[int, ...]:
    """The residues e mod E of the entries index `index` stores, ascending."""
    check_quorum_sizes(ensemble_size, write_quorum)
    if not 0 <= index < ensemble_size:
        raise ValueError(f"index {index} outside 0..{ensemble_size - 1}")
    return tuple(sorted({(index - j) % ensemble_size for j in range(write_quorum)}))


def write_set_bookies(ensemble: tuple[str, ...], entry: int, write_quorum: int) -> tuple[str, ...]:
    """Bookie ids of `entry`'s write set within one segment's ensemble."""
    return tuple(ensemble[i] for i in write_set(entry, len(ensemble), write_quorum))


# --------------------------------------------------------------------------------------------------
# Expected entries per bookie


def expected_for_index(first: int, last: int, index: int, ensemble_size: int, write_quorum: int) -> Stripe | None:
    """Entries in [first, last] that ensemble index `index` stores (None when it stores none)."""
    return Stripe.make(first, last, ensemble_size, index_residues(index, ensemble_size, write_quorum))


@lru_cache(maxsize=1024)
def _residues_by_index(ensemble_size: int, write_quorum: int) -> tuple[tuple[int, ...], ...]:
    return tuple(index_residues(i, ensemble_size, write_quorum) for i in range(ensemble_size))


def segment_bookie_residues(ensemble: tuple[str, ...], write_quorum: int) -> dict[str, tuple[int, ...]]:
    """Per bookie of one ensemble, the residues mod E it stores (a bookie listed twice gets both)."""
    e = len(ensemble)
    table = _residues_by_index(e, write_quorum)
    if len(set(ensemble)) == e:  # the usual case: every bookie once
        return dict(zip(ensemble, table))
    out: dict[str, set[int]] = {}
    for i, b in enumerate(ensemble):
        out.setdefault(b, set()).update(index_residues(i, e, write_quorum))
    return {b: tuple(sorted(r)) for b, r in out.items()}


def expected_by_bookie(metadata: LedgerMetadata, end: int | None = None) -> dict[str, StripedSet]:
    """Per bookie id, the entries it should hold across all segments (non-empty sets only).

    A bookie that appears in several segments, even at different indexes, gets one set, so each bookie
    is asked once per ledger. `end` is the last entry for an open ledger (see LedgerMetadata.spans).
    """
    check_quorum_sizes(metadata.ensemble_size, metadata.write_quorum)
    if len(metadata.segments) == 1:  # the usual ledger: one stripe per bookie, nothing to merge
        return _one_segment_shares(metadata, end)
    acc: dict[str, list[Stripe]] = {}
    for span in metadata.spans(end):
        if not span.entries:
            continue
        if len(span.ensemble) != metadata.ensemble_size:
            raise ValueError(
                f"segment {span.index} has {len(span.ensemble)} bookies, ensemble size is {metadata.ensemble_size}"
            )
        first, last = span.entries.first, span.entries.last
        assert first is not None and last is not None
        for bookie, res in segment_bookie_residues(span.ensemble, metadata.write_quorum).items():
            s = Stripe.make(first, last, metadata.ensemble_size, res)
            if s is not None:
                acc.setdefault(bookie, []).append(s)
    return {b: StripedSet.of(pieces) for b, pieces in acc.items()}


def _one_segment_shares(metadata: LedgerMetadata, end: int | None) -> dict[str, StripedSet]:
    """`expected_by_bookie` of a one-segment ledger."""
    ((segment, stop),) = metadata.segment_ends(end)
    first, e = segment.first_entry_id, metadata.ensemble_size
    if first > stop:
        return {}
    if len(segment.ensemble) != e:
        raise ValueError(f"segment 0 has {len(segment.ensemble)} bookies, ensemble size is {e}")
    out: dict[str, StripedSet] = {}
    for bookie, res in segment_bookie_residues(segment.ensemble, metadata.write_quorum).items():
        s = Stripe.make(first, stop, e, res)
        if s is not None:
            out[bookie] = StripedSet((s,))
    return out
