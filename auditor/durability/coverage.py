"""Quorum coverage of a ledger's entries from the bookies' answers.

Input: ledger metadata, the last entry to consider (`end`: the closed ledger's last entry, or the
LAC `ledgerend.decide_end` proves for an open one) and per bookie id one answer: the `RangeSet` of entries it holds
(NoSuchLedger = the empty set) or `UNKNOWN` (it did not answer). A bookie missing from the mapping is
UNKNOWN.

For every entry e the round-robin schedule names its write set W(e) (distinct bookies of
`(e + w) mod E`, w < WQ). Each member is *present* (holds e), *missing* (answered without e) or
*unknown*. An unknown bookie is never counted as missing nor as present; instead every result has two
sides:

* `at most` (unknown copies counted as present): the best the ledger can be. A violation here is
  certain whatever the unknown bookies answer -> the *confirmed* view. For answers without unknowns it
  is Java's replicas-check classification (`least = WQ - max missing`), without Java's gap bug below
  and counting a bookie listed twice in one write set once.
* `at least` (unknown copies counted as missing): the worst it can be -> the *possible* view.
The verdict "could change once they answer" exactly when the two views disagree.

Nothing enumerates entries. Per segment, each bookie's expected-but-absent entries come from
`StripedSet.difference` (a walk over the gaps of its answer). A sweep over the boundaries of those gap
pieces splits the segment into intervals where the set of bookies missing their entries is constant;
within one interval the copy count of an entry depends only on e mod E, so each category is one
`Stripe` per interval. The cost grows with segments and runs, not with entries.

Truncation risk (seed 003, "closing ledgers safely"): a recovery declares an entry unrecoverable once
`WQ - AQ + 1` members of its write set answered NoSuchEntry/NoSuchLedger (quorum coverage of "does not
have the entry" over the write set, `PendingReadOp` for recovery reads) and then closes the ledger at
the entry before. So an entry <= LAC (acknowledged, must survive) that is confirmed absent on at least
`WQ - AQ + 1` members of its write set would be cut off, together with everything after it, by a
recovery that reads it. Recovery reads start after the LAC it learns while fencing, which can be lower
than the LAC we saw (bookies' stored LAC trails the writer's), so every entry <= LAC is treated as
exposed. With unknown bookies the entry is *possibly* at risk when missing + unknown reaches the
threshold.

Java's `AvailabilityOfEntriesOfLedger.getUnavailableEntries` stops looking for later sequence groups
after a gap of two or more ids and reports everything after it as missing (bookie-protocol.md §4.2);
the gap walk here has no such shortcut.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from .cleancoverage import all_held_entries, exact_shares
from .findings import Category
from .ids import LedgerId
from .model import LedgerMetadata, LedgerState
from .ranges import RangeSet
from .schedule import check_quorum_sizes, expected_by_bookie, segment_bookie_residues
from .striped import Stripe, StripedSet, clip_rangeset

__all__ = [
    "UNKNOWN",
    "Answer",
    "copies_category",
    "recovery_negative_threshold",
    "EntryBucket",
    "BookieGap",
    "TruncationRisk",
    "Coverage",
    "analyze_coverage",
    "ENTRY_CATEGORIES",
]


class _Unknown:
    """The answer of a bookie that did not answer (timeout, connection error, any error but
    NoSuchLedger)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = _Unknown()
Answer = RangeSet | _Unknown

ENTRY_CATEGORIES = (Category.ENTRY_NO_REPLICA, Category.ENTRY_BELOW_ACK_QUORUM, Category.ENTRY_BELOW_WRITE_QUORUM)
_RANK = {c: i for i, c in enumerate(ENTRY_CATEGORIES)}  # 0 is worst


def copies_category(copies: int, write_quorum: int, ack_quorum: int) -> Category | None:
    """Java's replicas-check buckets: 0 -> no replica; < AQ -> below ack quorum; < WQ -> below write
    quorum; otherwise None (healthy)."""
    if copies <= 0:
        return Category.ENTRY_NO_REPLICA
    if copies < ack_quorum:
        return Category.ENTRY_BELOW_ACK_QUORUM
    if copies < write_quorum:
        return Category.ENTRY_BELOW_WRITE_QUORUM
    return None


def recovery_negative_threshold(write_quorum: int, ack_quorum: int) -> int:
    """NoSuchEntry answers from an entry's write set after which recovery treats it as absent."""
    return write_quorum - ack_quorum + 1


def worse(a: Category | None, b: Category | None) -> Category | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if _RANK[a] <= _RANK[b] else b


@dataclass(frozen=True, slots=True)
class EntryBucket:
    """Entries of one category. `confirmed`: in this bucket even if every unknown copy is present
    (copies at most). `possible`: in this bucket if every unknown copy is missing (copies at least)."""

    category: Category
    confirmed: StripedSet
    possible: StripedSet


@dataclass(frozen=True, slots=True)
class BookieGap:
    """Entries one bookie should hold in one segment but answered without."""

    segment_index: int
    first_entry_id: int
    last_entry_id: int
    ensemble: tuple[str, ...]
    bookie: str
    expected: int
    missing: StripedSet


@dataclass(frozen=True, slots=True)
class TruncationRisk:
    """Entries <= end that a recovery would decide are not there (see the module docstring)."""

    threshold: int  # WQ - AQ + 1
    confirmed: StripedSet
    possible: StripedSet

    @property
    def point(self) -> int | None:
        """Lowest confirmed-at-risk entry: a recovery reading it closes the ledger at point - 1."""
        return self.confirmed.first

    @property
    def possible_point(self) -> int | None:
        return self.possible.first


@dataclass(frozen=True)
class Coverage:
    ledger_id: LedgerId
    state: LedgerState
    end: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    entries: int  # entries in [0, end] that some non-empty segment covers
    least_copies_at_most: int | None  # min over entries of present + unknown copies (None: no entries)
    least_copies_at_least: int | None  # min over entries of present copies
    buckets: Mapping[Category, EntryBucket]
    truncation: TruncationRisk
    expected: Mapping[str, StripedSet]  # per bookie, entries <= end it should hold
    unknown_bookies: tuple[str, ...]  # did not answer and should hold something
    entries_with_unknown_copies: StripedSet
    gaps: tuple[BookieGap, ...]
    # What bookies hold beyond their shares; empty when the caller asked for it not to be computed
    # (`analyze_coverage(beyond_share=False)`: answers from reads, which cannot show it).
    overreplicated: Mapping[str, StripedSet]  # entries <= end a bookie holds but should not
    beyond_end: Mapping[str, RangeSet]  # entries > end a bookie holds
    duplicate_bookies: tuple[tuple[int, str], ...]  # (segment index, bookie) listed twice in an ensemble
    answered: tuple[str, ...] = field(default=())

    @property
    def worst(self) -> Category | None:
        """Confirmed worst-entry category (Java's bucket when nobody is unknown)."""
        return (
            None
            if self.least_copies_at_most is None
            else copies_category(self.least_copies_at_most, self.write_quorum, self.ack_quorum)
        )

    @property
    def worst_possible(self) -> Category | None:
        return (
            None
            if self.least_copies_at_least is None
            else copies_category(self.least_copies_at_least, self.write_quorum, self.ack_quorum)
        )

    @property
    def verdict_may_change(self) -> bool:
        """True when unknown bookies could change the worst-entry category once they answer."""
        return self.worst != self.worst_possible

    @property
    def truncation_may_change(self) -> bool:
        return self.truncation.point != self.truncation.possible_point

    @property
    def is_clean(self) -> bool:
        return self.worst_possible is None and not self.truncation.possible

    def missing_by_bookie(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.gaps:
            out[g.bookie] = out.get(g.bookie, 0) + g.missing.count()
        return out

    def summary(self, text_limit: int = 20) -> dict[str, Any]:
        """Compact, JSON-ready facts for a finding's detail."""
        return {
            "end": self.end,
            "entries": self.entries,
            "least_copies_at_most": self.least_copies_at_most,
            "least_copies_at_least": self.least_copies_at_least,
            "worst": self.worst.value if self.worst else None,
            "worst_possible": self.worst_possible.value if self.worst_possible else None,
            "buckets": {
                c.value: {
                    "confirmed": b.confirmed.count(),
                    "possible": b.possible.count(),
                    "confirmed_ranges": b.confirmed.to_text(text_limit),
                }
                for c, b in self.buckets.items()
                if b.confirmed or b.possible
            },
            "unknown_bookies": list(self.unknown_bookies),
            "entries_with_unknown_copies": self.entries_with_unknown_copies.count(),
            "missing": [
                {
                    "segment_index": g.segment_index,
                    "bookie": g.bookie,
                    "expected": g.expected,
                    "missing": g.missing.count(),
                    "ranges": g.missing.to_text(text_limit),
                }
                for g in self.gaps[:50]
            ],
        }


def _answer_of(answers: Mapping[str, Answer], bookie: str) -> RangeSet | None:
    a = answers.get(bookie, UNKNOWN)
    return a if isinstance(a, RangeSet) else None


class _Sweep:
    """Per-segment classification of residues, cached per set of bookies missing their entries."""

    def __init__(self, e: int, wq: int, aq: int, write_sets: list[tuple[str, ...]], unknown: set[str]) -> None:
        self.e, self.wq, self.aq = e, wq, aq
        self.write_sets = write_sets
        self.k = [len(w) for w in write_sets]
        self.u = [sum(b in unknown for b in w) for w in write_sets]
        self.t = recovery_negative_threshold(wq, aq)
        self._cache: dict[frozenset[str], list[tuple[tuple[Any, ...], int, int]]] = {}

    def classify(self, active: frozenset[str]) -> list[tuple[tuple[Any, ...], int, int]]:
        """Per residue r: (output keys, copies at most, copies at least)."""
        got = self._cache.get(active)
        if got is not None:
            return got
        out = []
        for r in range(self.e):
            m = sum(b in active for b in self.write_sets[r]) if active else 0
            u = self.u[r]
            cmax = self.k[r] - m
            cmin = cmax - u
            keys: list[Any] = []
            c = copies_category(cmax, self.wq, self.aq)
            if c is not None:
                keys.append(("conf", c))
            c = copies_category(cmin, self.wq, self.aq)
            if c is not None:
                keys.append(("poss", c))
            if m >= self.t:
                keys.append(("tconf",))
            if m + u >= self.t:
                keys.append(("tposs",))
            if u:
                keys.append(("unk",))
            out.append((tuple(keys), cmax, cmin))
        self._cache[active] = out
        return out


# What every clean coverage shares (all immutable), built once rather than for every healthy ledger.
_NONE: Final = StripedSet()
_NO_BUCKETS: Final[Mapping[Category, EntryBucket]] = MappingProxyType(
    {c: EntryBucket(c, _NONE, _NONE) for c in ENTRY_CATEGORIES}
)


@functools.lru_cache(maxsize=256)
def _no_truncation(write_quorum: int, ack_quorum: int) -> TruncationRisk:
    """A clean coverage's truncation risk (none), shared like `_NO_BUCKETS`."""
    return TruncationRisk(recovery_negative_threshold(write_quorum, ack_quorum), _NONE, _NONE)


def _clean_coverage(
    metadata: LedgerMetadata,
    stop: int,
    entries: int,
    expected: Mapping[str, StripedSet],
    within: Mapping[str, RangeSet],
    over: dict[str, StripedSet],
    beyond: dict[str, RangeSet],
) -> Coverage:
    """The coverage when every bookie holds its whole share (`cleancoverage.all_held_entries` gave
    `entries`): every write set has WQ distinct bookies, each holding its entries. What bookies hold
    beyond their shares (`over`, `beyond`) is the caller's, the same the sweep reports."""
    e, wq, aq = metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum
    least = wq if entries else None
    return Coverage(
        ledger_id=metadata.ledger_id,
        state=metadata.state,
        end=stop,
        ensemble_size=e,
        write_quorum=wq,
        ack_quorum=aq,
        entries=entries,
        least_copies_at_most=least,
        least_copies_at_least=least,
        buckets=_NO_BUCKETS,
        truncation=_no_truncation(wq, aq),
        expected=expected,
        unknown_bookies=(),
        entries_with_unknown_copies=_NONE,
        gaps=(),
        overreplicated=over,
        beyond_end=beyond,
        duplicate_bookies=(),
        answered=tuple(sorted(within)),
    )


def _beyond_share(
    answers: Mapping[str, Answer],
    stop: int,
    expected: Mapping[str, StripedSet],
    within: Mapping[str, RangeSet],
    exact: set[str],
) -> tuple[dict[str, StripedSet], dict[str, RangeSet]]:
    """What each answering bookie holds beyond its share: entries in [0, stop] it should not hold, and
    entries after `stop`."""
    over: dict[str, StripedSet] = {}
    beyond: dict[str, RangeSet] = {}
    for b, held in within.items():
        if b not in exact:
            extra = expected.get(b, _NONE).subtract_from(held)
            if extra:
                over[b] = extra
        a = answers[b]
        assert isinstance(a, RangeSet)
        if a.last is not None and a.last > stop:
            beyond[b] = clip_rangeset(a, stop + 1, a.last)
    return over, beyond


def analyze_coverage(
    metadata: LedgerMetadata,
    answers: Mapping[str, Answer],
    end: int | None = None,
    expected: Mapping[str, StripedSet] | None = None,
    *,
    shortcut: bool = True,
    beyond_share: bool = True,
    known_exact: Collection[str] = (),
) -> Coverage:
    """Classify every entry in [0, end] (end defaults to the metadata's last entry id). `expected`: the
    caller's `expected_by_bookie(metadata, end)`, when it already has it (computed here otherwise).
    `shortcut`: the common case (every bookie holds exactly what it should) is recognised without the
    sweep; tests turn it off to check it gives what the sweep gives. `beyond_share` False: the answers
    are reads (of scheduled entries, or whole spans a read sample found present), which cannot show
    what a bookie holds beyond its share; `overreplicated` and `beyond_end` are left empty instead of
    computed from them. `known_exact`: bookies whose whole answer the caller already found to be exactly
    their share of `expected` (the same `expected` passed here), so not compared again."""
    e, wq, aq = metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum
    check_quorum_sizes(e, wq, aq)
    stop = metadata.last_entry_id if end is None else end
    acc: dict[Any, list[Stripe]] = {}
    least_max: int | None = None
    least_min: int | None = None
    entries = 0
    gaps: list[BookieGap] = []
    duplicates: list[tuple[int, str]] = []
    unknown_relevant: set[str] = set()

    # A bookie holding exactly what it should (the common case) is recognised once, at C speed, and
    # skipped by the gap walks below.
    if expected is None:
        expected = expected_by_bookie(metadata, stop)
    within, exact = exact_shares(answers, expected, stop, known_exact)
    # What bookies hold beyond their shares does not depend on how the rest is classified: once.
    over, beyond = _beyond_share(answers, stop, expected, within, exact) if beyond_share else ({}, {})
    if shortcut:
        held = all_held_entries(metadata, answers, stop, expected, within, exact)
        if held is not None:
            return _clean_coverage(metadata, stop, held, expected, within, over, beyond)

    for span in metadata.spans(stop):
        if not span.entries:
            continue
        ens = span.ensemble
        if len(ens) != e:
            raise ValueError(f"segment {span.index} lists {len(ens)} bookies; ensemble size is {e}")
        f, l = span.entries.first, span.entries.last
        assert f is not None and l is not None
        entries += l - f + 1
        seen: set[str] = set()
        for b in ens:
            if b in seen:
                duplicates.append((span.index, b))
            seen.add(b)
        residues = segment_bookie_residues(ens, wq)
        write_sets = [tuple(dict.fromkeys(ens[(r + w) % e] for w in range(wq))) for r in range(e)]
        unknown = {b for b in residues if _answer_of(answers, b) is None}
        events: dict[int, list[tuple[int, str]]] = {}
        for b, res in residues.items():
            exp = Stripe.make(f, l, e, res)
            if exp is None:
                continue
            if b in unknown:
                unknown_relevant.add(b)
                continue
            if b in exact:
                continue
            answer = _answer_of(answers, b)
            assert answer is not None
            missing = StripedSet((exp,)).difference(answer)
            if not missing:
                continue
            gaps.append(BookieGap(span.index, f, l, ens, b, exp.count(), missing))
            for piece in missing.pieces:
                events.setdefault(piece.first, []).append((1, b))
                events.setdefault(piece.last + 1, []).append((-1, b))
        sweep = _Sweep(e, wq, aq, write_sets, unknown)
        bounds = sorted(set(events) | {f, l + 1})
        active: dict[str, int] = {}
        for x, nxt in zip(bounds, bounds[1:]):
            for delta, b in events.get(x, ()):
                n = active.get(b, 0) + delta
                if n:
                    active[b] = n
                else:
                    active.pop(b, None)
            y = nxt - 1
            if x > l or y < f:
                continue
            classes = sweep.classify(frozenset(active))
            present = range(e) if y - x + 1 >= e else sorted({(x + d) % e for d in range(y - x + 1)})
            grouped: dict[Any, list[int]] = {}
            for r in present:
                keys, cmax, cmin = classes[r]
                if least_max is None or cmax < least_max:
                    least_max = cmax
                if least_min is None or cmin < least_min:
                    least_min = cmin
                for key in keys:
                    grouped.setdefault(key, []).append(r)
            for key, members in grouped.items():
                s = Stripe.make(x, y, e, members)
                if s is not None:
                    acc.setdefault(key, []).append(s)

    def collected(key: Any) -> StripedSet:
        return StripedSet.of(acc.get(key, ()))

    buckets = {c: EntryBucket(c, collected(("conf", c)), collected(("poss", c))) for c in ENTRY_CATEGORIES}
    truncation = TruncationRisk(recovery_negative_threshold(wq, aq), collected(("tconf",)), collected(("tposs",)))

    return Coverage(
        ledger_id=metadata.ledger_id,
        state=metadata.state,
        end=stop,
        ensemble_size=e,
        write_quorum=wq,
        ack_quorum=aq,
        entries=entries,
        least_copies_at_most=least_max,
        least_copies_at_least=least_min,
        buckets=buckets,
        truncation=truncation,
        expected=expected,
        unknown_bookies=tuple(sorted(unknown_relevant)),
        entries_with_unknown_copies=collected(("unk",)),
        gaps=tuple(gaps),
        overreplicated=over,
        beyond_end=beyond,
        duplicate_bookies=tuple(duplicates),
        answered=tuple(sorted(within)),
    )
