"""Cut the ledger-id space into sweep partitions. Pure: no I/O, no Spark.

The id space is every `LedgerId` in order: scope 0 (today's BookKeeper, legacy and long paths alike)
first, then the scoped ids. We number it densely, `value = scope * 2**63 + ledger`, so that any value
below `ID_SPACE_END` is a valid id and splitting a range never lands between ids.

Partitions are consecutive, non-overlapping ranges `[start, end)` that together cover the whole space
(or the `[lo, hi)` the caller asked for): a ledger created after planning, even in a leaf directory
that did not exist yet, still falls in exactly one partition. Where the cuts go is decided by the leaf
directories found by the planner (`Span`s, weighted by how many ledgers they hold), so partitions
carry about equal numbers of ledgers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from auditor.durability.ids import MAX_ID, LedgerId

SCOPE_STRIDE = MAX_ID + 1
ID_SPACE_END = SCOPE_STRIDE * SCOPE_STRIDE  # exclusive: one past LedgerId(MAX_ID, MAX_ID)
LISTING_COST = 1.0  # a leaf directory costs one listing even when it is empty


def id_value(lid: LedgerId) -> int:
    return lid.scope * SCOPE_STRIDE + lid.ledger


def id_at(value: int) -> LedgerId:
    if not 0 <= value < ID_SPACE_END:
        raise ValueError(f"{value} is outside the ledger-id space")
    scope, ledger = divmod(value, SCOPE_STRIDE)
    return LedgerId(scope, ledger)


def _id_text(lid: LedgerId | None) -> str | None:
    return None if lid is None else f"{lid.scope}:{lid.ledger}"


@dataclass(frozen=True, slots=True)
class Span:
    """Ids [first, last] (inclusive) of one leaf directory, with how many ledgers it holds.

    `ids`, when given, are the ledger ids actually in it (sorted): a span heavier than one partition is
    then cut at its real quantiles instead of evenly by id.
    """

    first: LedgerId
    last: LedgerId
    ledgers: int = 0
    directory: str = ""
    ids: tuple[LedgerId, ...] | None = None

    @property
    def cost(self) -> float:
        return self.ledgers + LISTING_COST


@dataclass(frozen=True, slots=True)
class IdPartition:
    """Ledger ids [start, end) in the dense numbering; `weight` is the planner's ledger estimate."""

    index: int
    start: int
    end: int
    weight: float = 0.0
    directories: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end <= ID_SPACE_END:
            raise ValueError(f"bad partition range [{self.start}, {self.end})")

    @property
    def start_id(self) -> LedgerId:
        return id_at(self.start)

    @property
    def end_id(self) -> LedgerId | None:
        """The first id NOT in the partition; None when it runs to the end of the id space."""
        return None if self.end == ID_SPACE_END else id_at(self.end)

    def contains(self, lid: LedgerId) -> bool:
        return self.start <= id_value(lid) < self.end

    def describe(self) -> str:
        end = self.end_id
        return f"[{self.start_id.scope}:{self.start_id.ledger}, {_id_text(end) if end else 'end'})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; ids as `scope:ledger`, end None for "to the end"."""
        return {
            "index": self.index,
            "start": _id_text(self.start_id),
            "end": _id_text(self.end_id),
            "weight": round(self.weight, 3),
            "leafDirectories": len(self.directories),
        }

    def to_wire(self) -> tuple[int, int, int, float]:
        """A compact picklable form for shipping to executors."""
        return (self.index, self.start, self.end, self.weight)

    @classmethod
    def from_wire(cls, wire: Sequence[Any]) -> IdPartition:
        return cls(int(wire[0]), int(wire[1]), int(wire[2]), float(wire[3]))


@dataclass(frozen=True, slots=True)
class _Piece:
    lo: int  # inclusive
    hi: int  # inclusive
    cost: float
    directory: str


def _pieces(span: Span, k: int) -> list[_Piece]:
    """Cut a span into k contiguous pieces of about equal ledger count."""
    lo, hi = id_value(span.first), id_value(span.last)
    k = max(1, min(k, hi - lo + 1))
    if k == 1:
        return [_Piece(lo, hi, span.cost, span.directory)]
    if span.ids is not None:
        values = sorted(id_value(i) for i in span.ids if lo <= id_value(i) <= hi)
        k = min(k, len(values))
        if k <= 1:
            return [_Piece(lo, hi, span.cost, span.directory)]
        cuts = sorted({values[(j * len(values)) // k] for j in range(1, k)} - {lo})
        bounds = [lo, *cuts, hi + 1]
        out = []
        for a, b in zip(bounds, bounds[1:]):
            n = sum(1 for v in values if a <= v < b)
            out.append(_Piece(a, b - 1, n + LISTING_COST / (len(bounds) - 1), span.directory))
        return out
    size = hi - lo + 1
    bounds = [lo + (size * j) // k for j in range(k)] + [hi + 1]
    return [_Piece(a, b - 1, span.cost / k, span.directory) for a, b in zip(bounds, bounds[1:])]


def _bounds(lo: LedgerId | None, hi: LedgerId | None) -> tuple[int, int]:
    start = id_value(lo) if lo is not None else 0
    end = id_value(hi) if hi is not None else ID_SPACE_END
    if start >= end:
        raise ValueError(f"empty id range [{lo}, {hi})")
    return start, end


def clip_spans(spans: Iterable[Span], lo: LedgerId | None = None, hi: LedgerId | None = None) -> list[Span]:
    """The spans in id order, cut to [lo, hi); raises ValueError when two spans overlap."""
    start, end = _bounds(lo, hi)
    clipped: list[Span] = []
    prev_last = -1
    for s in sorted(spans, key=lambda s: id_value(s.first)):
        a, b = id_value(s.first), id_value(s.last)
        if a > b:
            raise ValueError(f"span {s.directory or s.first} ends before it starts")
        if a <= prev_last:
            raise ValueError(f"span {s.directory or s.first} overlaps the one before it")
        prev_last = b
        a, b = max(a, start), min(b, end - 1)
        if a > b:
            continue
        if (a, b) != (id_value(s.first), id_value(s.last)):
            # Only part of the directory is in range: keep the ids in it, or scale the estimate.
            if s.ids is not None:
                kept = tuple(i for i in s.ids if a <= id_value(i) <= b)
                s = Span(id_at(a), id_at(b), len(kept), s.directory, kept)
            else:
                share = (b - a + 1) / (id_value(s.last) - id_value(s.first) + 1)
                s = Span(id_at(a), id_at(b), round(s.ledgers * share), s.directory)
        clipped.append(s)
    return clipped


def _worth_cutting(s: Span, target: float) -> bool:
    # Only a directory known to hold several ledgers is worth cutting (a small cluster's one or two
    # leaf directories, when there are more partitions than directories).
    return s.cost > target and s.ledgers > 1


def heavy_spans(spans: Iterable[Span], partitions: int) -> list[Span]:
    """Spans heavier than one partition's share: worth listing so they can be cut at real quantiles."""
    spans = list(spans)
    target = sum(s.cost for s in spans) / max(1, partitions)
    return [s for s in spans if _worth_cutting(s, target)]


def plan_partitions(
    spans: Iterable[Span], partitions: int, *, lo: LedgerId | None = None, hi: LedgerId | None = None
) -> list[IdPartition]:
    """At most `partitions` consecutive ranges covering [lo, hi) (default: the whole id space), cut so
    each carries about the same estimated number of ledgers. Spans must not overlap."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    start, end = _bounds(lo, hi)
    clipped = clip_spans(spans, lo, hi)
    if not clipped:
        return [IdPartition(0, start, end, 0.0)]

    total = sum(s.cost for s in clipped)
    target = total / partitions
    pieces: list[_Piece] = []
    for s in clipped:
        k = math.ceil(s.cost / target - 1e-9) if _worth_cutting(s, target) else 1
        pieces.extend(_pieces(s, min(k, partitions, max(1, s.ledgers))))

    groups: list[list[_Piece]] = [[]]
    acc = 0.0
    for piece in pieces:
        if groups[-1] and len(groups) < partitions and acc >= target * len(groups) - 1e-9:
            groups.append([])
        groups[-1].append(piece)
        acc += piece.cost
    out: list[IdPartition] = []
    for n, group in enumerate(groups):
        g_start = start if n == 0 else group[0].lo
        g_end = end if n == len(groups) - 1 else groups[n + 1][0].lo
        dirs = tuple(dict.fromkeys(p.directory for p in group if p.directory))
        out.append(IdPartition(n, g_start, g_end, sum(p.cost for p in group), dirs))
    return out


def check_cover(parts: Sequence[IdPartition], lo: LedgerId | None = None, hi: LedgerId | None = None) -> None:
    """Raise unless `parts` are consecutive, non-overlapping and cover [lo, hi) exactly."""
    start, end = _bounds(lo, hi)
    if not parts:
        raise ValueError("no partitions")
    if parts[0].start != start or parts[-1].end != end:
        raise ValueError(f"partitions cover [{parts[0].start}, {parts[-1].end}), not [{start}, {end})")
    for a, b in zip(parts, parts[1:]):
        if a.end != b.start:
            raise ValueError(f"partitions {a.index} and {b.index} {'overlap' if a.end > b.start else 'leave a gap'}")
    if [p.index for p in parts] != list(range(len(parts))):
        raise ValueError("partition indexes must be 0..N-1 in order")
