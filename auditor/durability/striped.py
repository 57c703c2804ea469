"""Striped entry sets: the entries one ensemble index holds, without enumerating them.

Under the round-robin schedule (`auditor.durability.schedule`) the entries one index holds within
`[first, last]` are periodic with period E: `{e : (i - e) mod E < WQ}`. A ledger can have millions of
entries, so nothing here enumerates entries. A `Stripe` is one range plus a period and the residues
(e mod period) it keeps; a `StripedSet` is an ordered union of disjoint stripes (one per segment, or one
per gap of a bookie's answer). Counts, membership and differences with a bookie's answer (a `RangeSet`)
are computed arithmetically from the tables of each periodic pattern (built once per pattern), so the
cost grows with segments and with the runs in the answers, never with the number of entries.

All arithmetic is on exact Python ints: unlike Java's `hasEntry`, nothing breaks for ids >= 2**31.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from .ranges import Range, RangeSet

__all__ = ["Stripe", "StripedSet", "clip_rangeset"]


# --------------------------------------------------------------------------------------------------
# Periodic patterns (cached: there are few distinct (period, residues) pairs in practice)


class _Pattern:
    """Precomputed tables for one (period, residues) pair."""

    __slots__ = (
        "period",
        "residues",
        "k",
        "member",
        "prefix",
        "next_dist",
        "prev_dist",
        "runs",
        "run_start_residues",
        "complement",
    )

    def __init__(self, period: int, residues: tuple[int, ...]) -> None:
        p = period
        member = [False] * p
        for r in residues:
            member[r] = True
        self.period = p
        self.residues = residues
        self.k = len(residues)
        self.member = tuple(member)
        prefix = [0] * (p + 1)
        for i in range(p):
            prefix[i + 1] = prefix[i] + member[i]
        self.prefix = tuple(prefix)
        # next_dist[x]: distance from residue x to the next member residue (0 if x is a member).
        nd = [0] * p
        pd = [0] * p
        if self.k:
            for x in range(p):
                d = 0
                while not member[(x + d) % p]:
                    d += 1
                nd[x] = d
                d = 0
                while not member[(x - d) % p]:
                    d += 1
                pd[x] = d
        self.next_dist = tuple(nd)
        self.prev_dist = tuple(pd)
        # Cyclic runs of member residues as (start residue, length); a run may wrap past p-1.
        runs: list[tuple[int, int]] = []
        if 0 < self.k < p:
            for s in range(p):
                if member[s] and not member[(s - 1) % p]:
                    length = 0
                    while member[(s + length) % p]:
                        length += 1
                    runs.append((s, length))
        elif self.k == p:
            runs.append((0, p))
        self.runs = tuple(runs)
        self.run_start_residues = tuple(s for s, _ in runs)
        self.complement = tuple(r for r in range(p) if not member[r])

    def count(self, a: int, b: int) -> int:
        """Members in [a, b]."""
        if b < a:
            return 0
        n = b - a + 1
        q, rem = divmod(n, self.period)
        s = a % self.period
        pre = self.prefix
        if s + rem <= self.period:
            part = pre[s + rem] - pre[s]
        else:
            part = (pre[self.period] - pre[s]) + pre[s + rem - self.period]
        return q * self.k + part

    def any_in(self, a: int, b: int) -> bool:
        return self.k > 0 and a + self.next_dist[a % self.period] <= b


@lru_cache(maxsize=4096)
def _pattern(period: int, residues: tuple[int, ...]) -> _Pattern:
    return _Pattern(period, residues)


def _canonical(period: int, residues: Iterable[int]) -> tuple[int, tuple[int, ...]]:
    return _canonical_of(period, residues if type(residues) is tuple else tuple(residues))


@lru_cache(maxsize=4096)
def _canonical_of(period: int, residues: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    if period < 1:
        raise ValueError(f"period must be >= 1, got {period}")
    res = tuple(sorted({r % period for r in residues}))
    if len(res) == period:
        return 1, (0,)
    return period, res


# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stripe:
    """The ids e in [first, last] with e mod period in residues.

    Build with `Stripe.make`, which returns None for an empty stripe and otherwise a canonical stripe:
    first and last are members, and a stripe holding every residue has period 1 (a plain range).
    """

    first: int
    last: int
    period: int = 1
    residues: tuple[int, ...] = (0,)

    @classmethod
    def make(cls, first: int, last: int, period: int = 1, residues: Iterable[int] = (0,)) -> Stripe | None:
        period, res = _canonical(period, residues)
        if first > last or not res:
            return None
        pat = _pattern(period, res)
        a = first + pat.next_dist[first % period]
        b = last - pat.prev_dist[last % period]
        if a > b:
            return None
        return cls(a, b, period, res)

    @classmethod
    def span(cls, first: int, last: int) -> Stripe | None:
        return cls(first, last) if first <= last else None

    @property
    def pattern(self) -> _Pattern:
        return _pattern(self.period, self.residues)

    @property
    def is_range(self) -> bool:
        return self.period == 1

    def count(self) -> int:
        if self.period == 1:
            return self.last - self.first + 1
        return self.pattern.count(self.first, self.last)

    def count_in(self, a: int, b: int) -> int:
        """Members within [a, b]."""
        lo, hi = max(a, self.first), min(b, self.last)
        if lo > hi:
            return 0
        return hi - lo + 1 if self.period == 1 else self.pattern.count(lo, hi)

    def __contains__(self, e: object) -> bool:
        if not isinstance(e, int) or not self.first <= e <= self.last:
            return False
        return self.period == 1 or self.pattern.member[e % self.period]

    def clip(self, a: int, b: int) -> Stripe | None:
        if a <= self.first and self.last <= b:
            return self
        return Stripe.make(max(a, self.first), min(b, self.last), self.period, self.residues)

    def iter_runs(self) -> Iterator[Range]:
        """Maximal runs of consecutive members, ascending (lazily: a stripe may hold millions)."""
        first, last, p = self.first, self.last, self.period
        if p == 1:
            yield (first, last)
            return
        runs = self.pattern.runs
        base = (first // p) * p - p  # the previous period's wrapping run may reach into `first`
        while base <= last:
            for s, length in runs:
                a = base + s
                if a > last:
                    return
                b = a + length - 1
                if b >= first:
                    yield (max(a, first), min(b, last))
            base += p

    def run_count(self) -> int:
        """Number of maximal runs, computed arithmetically."""
        if self.period == 1:
            return 1
        pat = self.pattern
        starts = _pattern(self.period, pat.run_start_residues)
        n = starts.count(self.first, self.last)
        if not starts.member[self.first % self.period]:
            n += 1  # `first` is a member in the middle of a run
        return n

    def to_text(self, limit: int = 20) -> str:
        return StripedSet((self,)).to_text(limit)

    def __repr__(self) -> str:
        if self.period == 1:
            return f"Stripe({self.first}-{self.last})"
        return f"Stripe({self.first}-{self.last} mod {self.period} in {list(self.residues)})"


def _mergeable(p: Stripe, q: Stripe) -> bool:
    """True when p ∪ q is the single stripe (p.first, q.last) with the same pattern."""
    if p.period != q.period or p.residues != q.residues or q.first <= p.last:
        return False
    if p.period == 1:
        return q.first == p.last + 1
    pat = p.pattern
    nxt = p.last + 1
    return nxt + pat.next_dist[nxt % p.period] == q.first


@dataclass(frozen=True, slots=True)
class StripedSet:
    """An ordered union of disjoint stripes (ranges never overlap; pieces ascend)."""

    pieces: tuple[Stripe, ...] = ()

    @classmethod
    def of(cls, pieces: Iterable[Stripe | None]) -> StripedSet:
        """Build from stripes whose ranges do not overlap (any order); adjacent compatible pieces merge."""
        items = [p for p in pieces if p is not None]
        if len(items) <= 1:
            return cls(tuple(items))
        items.sort(key=lambda s: s.first)
        out: list[Stripe] = []
        for s in items:
            if out and s.first <= out[-1].last:
                raise ValueError(f"overlapping stripes {out[-1]!r} and {s!r}")
            if out and _mergeable(out[-1], s):
                out[-1] = Stripe(out[-1].first, s.last, s.period, s.residues)
            else:
                out.append(s)
        return cls(tuple(out))

    @classmethod
    def from_rangeset(cls, rs: RangeSet) -> StripedSet:
        return cls(tuple(Stripe(a, b) for a, b in rs.ranges))

    @classmethod
    def striped(cls, first: int, last: int, period: int, residues: Iterable[int]) -> StripedSet:
        s = Stripe.make(first, last, period, residues)
        return cls((s,) if s else ())

    def __bool__(self) -> bool:
        return bool(self.pieces)

    def count(self) -> int:
        return sum(p.count() for p in self.pieces)

    def __len__(self) -> int:
        return self.count()

    def __contains__(self, e: object) -> bool:
        if not isinstance(e, int):
            return False
        i = bisect.bisect_right(self.pieces, e, key=lambda s: s.first) - 1
        return i >= 0 and e in self.pieces[i]

    @property
    def first(self) -> int | None:
        return self.pieces[0].first if self.pieces else None

    @property
    def last(self) -> int | None:
        return self.pieces[-1].last if self.pieces else None

    def iter_runs(self) -> Iterator[Range]:
        """Maximal runs across pieces (runs of adjacent pieces that touch are merged)."""
        cur: list[int] | None = None
        for piece in self.pieces:
            for a, b in piece.iter_runs():
                if cur is not None and a == cur[1] + 1:
                    cur[1] = b
                    continue
                if cur is not None:
                    yield (cur[0], cur[1])
                cur = [a, b]
        if cur is not None:
            yield (cur[0], cur[1])

    def run_count(self) -> int:
        n = sum(p.run_count() for p in self.pieces)
        for p, q in zip(self.pieces, self.pieces[1:]):
            if q.first == p.last + 1:
                n -= 1
        return n

    def to_rangeset(self, max_runs: int = 1_000_000) -> RangeSet:
        """Materialise as a RangeSet; refuses (ValueError) when it would exceed `max_runs` runs."""
        n = self.run_count()
        if n > max_runs:
            raise ValueError(f"striped set has {n} runs, more than max_runs={max_runs}")
        return RangeSet(tuple(self.iter_runs()))

    def to_text(self, limit: int = 20) -> str:
        """`0-9,12,15-20` for the first `limit` runs, then `,...(+N runs)` (same style as RangeSet)."""
        parts = []
        for a, b in itertools.islice(self.iter_runs(), limit if limit else None):
            parts.append(f"{a}" if a == b else f"{a}-{b}")
        if limit and len(parts) == limit:
            more = self.run_count() - limit
            if more > 0:
                parts.append(f"...(+{more} runs)")
        return ",".join(parts)

    def clip(self, a: int, b: int) -> StripedSet:
        out = []
        for p in self.pieces:
            if p.last < a or p.first > b:
                continue
            out.append(p.clip(a, b))
        return StripedSet(tuple(s for s in out if s is not None))

    def concat(self, other: StripedSet) -> StripedSet:
        """Union with a set whose pieces do not overlap this one's ranges."""
        return StripedSet.of(self.pieces + other.pieces)

    def difference(self, available: RangeSet) -> StripedSet:
        """Members that `available` lacks: walks the gaps of `available` inside each piece."""
        runs = available.ranges
        out: list[Stripe] = []
        for piece in self.pieces:
            _difference_piece(piece, runs, out)
        return StripedSet.of(out)

    def intersection(self, available: RangeSet) -> StripedSet:
        """Members that `available` holds (one stripe per overlapping run; for modest outputs)."""
        runs = available.ranges
        out: list[Stripe] = []
        for piece in self.pieces:
            i = bisect.bisect_left(runs, piece.first, key=lambda r: r[1])
            while i < len(runs) and runs[i][0] <= piece.last:
                s = Stripe.make(max(runs[i][0], piece.first), min(runs[i][1], piece.last), piece.period, piece.residues)
                if s is not None:
                    out.append(s)
                i += 1
        return StripedSet.of(out)

    def equals_rangeset(self, available: RangeSet) -> bool:
        """Exact equality with `available`, cheap for the healthy case (a bookie holding exactly what
        it should), also when pieces touch and the RangeSet merged their runs. May answer False for some
        equal sets with unusual patterns; callers use it only to skip work, never to decide."""
        runs = available.ranges
        n = len(runs)
        i = 0
        spill = False  # the last run checked reaches past the previous piece
        prev_last = _NEG
        for piece in self.pieces:
            if spill and piece.first != prev_last + 1:
                return False  # that run covers ids between two pieces
            if i >= n or runs[i][1] < piece.first:
                return False  # a run lies between pieces, or nothing covers this piece
            if runs[-1][0] <= piece.last:
                j = n  # the last piece, usually the only one: no search
            else:
                j = bisect.bisect_right(runs, piece.last, lo=i, key=lambda r: r[0])
            if not _runs_equal(piece, runs, i, j):
                return False
            if runs[i][0] < piece.first and not spill:
                return False
            spill = runs[j - 1][1] > piece.last
            i = j - 1 if spill else j
            prev_last = piece.last
        return not spill and i == n

    def count_present(self, available: RangeSet) -> int:
        return self.count() - self.difference(available).count()

    def subtract_from(self, available: RangeSet) -> StripedSet:
        """`available` minus this set: what a bookie holds beyond what it should."""
        runs = available.ranges
        out: list[Stripe] = []
        i = 0
        lo = _NEG
        for piece in self.pieces:
            i = _excess_outside(runs, i, lo, piece.first - 1, out)
            i = _excess_inside(piece, runs, i, out)
            lo = piece.last + 1
        _excess_outside(runs, i, lo, _POS, out)
        return StripedSet.of(out)

    def __repr__(self) -> str:
        return f"StripedSet({self.to_text(8)!r}, count={self.count()})"


def _runs_equal(piece: Stripe, runs: tuple[Range, ...], i: int, j: int) -> bool:
    """True when the runs[i:j], clipped to the piece's range, are exactly the runs of `piece` (the usual
    answer of a healthy bookie). `i` is the first run ending at or after piece.first, `j` the first run
    starting after piece.last; the outer runs may reach beyond the piece (a neighbouring segment's runs
    merged into them).

    Checked column-wise against arithmetic progressions so that a healthy bookie with millions of runs
    costs C-speed work, not a Python loop. Only for plain ranges and one-run-per-period patterns (what a
    bookie at one index holds); anything else answers False and takes the general walk.
    """
    if j <= i:
        return False
    first, last = piece.first, piece.last
    if runs[i][0] > first or runs[j - 1][1] < last:
        return False
    p = piece.period
    if p == 1:
        return j == i + 1
    pat = piece.pattern
    if len(pat.runs) != 1:
        return False
    s, length = pat.runs[0]
    e_res = (s + length - 1) % p
    x0 = first + ((s - first - 1) % p) + 1  # first run start after `first`
    y0 = first + ((e_res - first) % p)  # first run end at or after `first`
    starts = range(x0, last + 1, p)
    ends = range(y0, last, p)
    if j - i != len(starts) + 1 or len(ends) != len(starts):
        return False
    window = runs[i:j]
    # map/all run at C speed: no per-run Python bytecode and no intermediate lists
    if not all(map(operator.eq, map(_first_of, itertools.islice(window, 1, None)), starts)):
        return False
    return all(map(operator.eq, map(_last_of, itertools.islice(window, 0, len(window) - 1)), ends))


_first_of = operator.itemgetter(0)
_last_of = operator.itemgetter(1)


def _difference_piece(piece: Stripe, runs: tuple[Range, ...], out: list[Stripe]) -> None:
    first, last, p = piece.first, piece.last, piece.period
    n = len(runs)
    i = bisect.bisect_left(runs, first, key=lambda r: r[1])
    # Fast path for the healthy case: the answer's runs inside the piece are exactly the expected runs.
    if i < n:
        j = bisect.bisect_right(runs, last, lo=i, key=lambda r: r[0])
        if _runs_equal(piece, runs, i, j):
            return
    make = Stripe.make
    if p == 1:
        cur = first
        while i < n:
            s, t = runs[i]
            if s > last:
                break
            if s > cur:
                out.append(Stripe(cur, s - 1))
            if t + 1 > cur:
                cur = t + 1
            if cur > last:
                return
            i += 1
        if cur <= last:
            out.append(Stripe(cur, last))
        return
    pat = piece.pattern
    nd = pat.next_dist
    res = piece.residues
    cur = first
    while i < n:
        s, t = runs[i]
        if s > last:
            break
        if s > cur and cur + nd[cur % p] < s:
            out.append(make(cur, s - 1, p, res))  # type: ignore[arg-type]
        if t + 1 > cur:
            cur = t + 1
        if cur > last:
            return
        i += 1
    if cur <= last and cur + nd[cur % p] <= last:
        out.append(make(cur, last, p, res))  # type: ignore[arg-type]


_NEG = -(1 << 65)
_POS = 1 << 65


def _excess_outside(runs: tuple[Range, ...], i: int, lo: int, hi: int, out: list[Stripe]) -> int:
    """Append the parts of runs within [lo, hi] (a stretch no piece covers); return the index of the
    first run that reaches past `hi`."""
    n = len(runs)
    while i < n and runs[i][0] <= hi:
        a, b = max(runs[i][0], lo), min(runs[i][1], hi)
        if a <= b:
            out.append(Stripe(a, b))
        if runs[i][1] > hi:
            break
        i += 1
    return i


def _excess_inside(piece: Stripe, runs: tuple[Range, ...], i: int, out: list[Stripe]) -> int:
    """Append the non-member parts of runs overlapping `piece`; return the index of the first run that
    reaches past the piece."""
    first, last, p = piece.first, piece.last, piece.period
    n = len(runs)
    if p == 1:  # a plain range: nothing inside is excess
        while i < n and runs[i][1] <= last:
            i += 1
        return i
    j = bisect.bisect_right(runs, last, lo=i, key=lambda r: r[0])
    # Fast path for the healthy case: the runs inside the piece are exactly its own runs.
    if _runs_equal(piece, runs, i, j):
        return j - 1 if runs[j - 1][1] > last else j
    comp = piece.pattern.complement
    nd = _pattern(p, comp).next_dist
    make = Stripe.make
    while i < n and runs[i][0] <= last:
        a, b = max(runs[i][0], first), min(runs[i][1], last)
        if a + nd[a % p] <= b:
            out.append(make(a, b, p, comp))  # type: ignore[arg-type]
        if runs[i][1] > last:
            break
        i += 1
    return i


def clip_rangeset(rs: RangeSet, first: int, last: int) -> RangeSet:
    """`rs` ∩ [first, last] in O(log n) plus a slice (RangeSet.clip walks every run)."""
    runs = rs.ranges
    if first > last or not runs:
        return RangeSet()
    if runs[0][0] >= first and runs[-1][1] <= last:
        return rs  # the usual answer: a bookie holds nothing outside the ledger's entries
    i = bisect.bisect_left(runs, first, key=lambda r: r[1])
    j = bisect.bisect_right(runs, last, lo=i, key=lambda r: r[0])
    if i >= j:
        return RangeSet()
    window = list(runs[i:j])
    if window[0][0] < first:
        window[0] = (first, window[0][1])
    if window[-1][1] > last:
        window[-1] = (window[-1][0], last)
    return RangeSet(tuple(window))
