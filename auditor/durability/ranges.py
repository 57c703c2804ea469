"""Sets of entry ids as sorted, disjoint, inclusive ranges.

Every durability computation (expected entries per bookie, entries a bookie holds, missing entries) is
range arithmetic on these, so its cost grows with the number of runs, never with the number of entries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

Range = tuple[int, int]  # inclusive [first, last]


def _normalise(ranges: Iterable[Range]) -> tuple[Range, ...]:
    out: list[list[int]] = []
    for a, b in sorted(r for r in ranges if r[0] <= r[1]):
        if out and a <= out[-1][1] + 1:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


@dataclass(frozen=True, slots=True)
class RangeSet:
    """An immutable set of integers stored as disjoint, non-adjacent, ascending inclusive ranges."""

    ranges: tuple[Range, ...] = ()

    @classmethod
    def of(cls, ranges: Iterable[Range]) -> RangeSet:
        return cls(_normalise(ranges))

    @classmethod
    def span(cls, first: int, last: int) -> RangeSet:
        return cls(((first, last),)) if first <= last else cls()

    @classmethod
    def from_ids(cls, ids: Iterable[int]) -> RangeSet:
        out: list[list[int]] = []
        for e in sorted(set(ids)):
            if out and e == out[-1][1] + 1:
                out[-1][1] = e
            else:
                out.append([e, e])
        return cls(tuple((a, b) for a, b in out))

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __len__(self) -> int:
        return sum(b - a + 1 for a, b in self.ranges)

    def __iter__(self) -> Iterator[int]:
        for a, b in self.ranges:
            yield from range(a, b + 1)

    def __contains__(self, e: object) -> bool:
        if not isinstance(e, int):
            return False
        lo, hi = 0, len(self.ranges)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.ranges[mid][1] < e:
                lo = mid + 1
            else:
                hi = mid
        return lo < len(self.ranges) and self.ranges[lo][0] <= e

    @property
    def first(self) -> int | None:
        return self.ranges[0][0] if self.ranges else None

    @property
    def last(self) -> int | None:
        return self.ranges[-1][1] if self.ranges else None

    def union(self, other: RangeSet) -> RangeSet:
        return RangeSet.of(self.ranges + other.ranges)

    def intersection(self, other: RangeSet) -> RangeSet:
        out: list[Range] = []
        i = j = 0
        a, b = self.ranges, other.ranges
        while i < len(a) and j < len(b):
            lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
            if lo <= hi:
                out.append((lo, hi))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return RangeSet(tuple(out))

    def difference(self, other: RangeSet) -> RangeSet:
        out: list[Range] = []
        j = 0
        b = other.ranges
        for lo, hi in self.ranges:
            cur = lo
            while j < len(b) and b[j][1] < cur:
                j += 1
            k = j
            while k < len(b) and b[k][0] <= hi:
                if b[k][0] > cur:
                    out.append((cur, b[k][0] - 1))
                cur = max(cur, b[k][1] + 1)
                if cur > hi:
                    break
                k += 1
            if cur <= hi:
                out.append((cur, hi))
        return RangeSet(tuple(out))

    __or__ = union
    __and__ = intersection
    __sub__ = difference

    def clip(self, first: int, last: int) -> RangeSet:
        return self.intersection(RangeSet.span(first, last))

    def to_text(self, limit: int = 0) -> str:
        """Compressed form `0-9,12,15-20`; with a limit, at most that many runs then `,...(+N runs)`."""
        parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in self.ranges]
        if limit and len(parts) > limit:
            parts = parts[:limit] + [f"...(+{len(self.ranges) - limit} runs)"]
        return ",".join(parts)

    @classmethod
    def parse(cls, text: str) -> RangeSet:
        ranges: list[Range] = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            a, _, b = part.partition("-")
            ranges.append((int(a), int(b or a)))
        return cls.of(ranges)

    def __repr__(self) -> str:
        return f"RangeSet({self.to_text(8)!r})"


EMPTY = RangeSet()
