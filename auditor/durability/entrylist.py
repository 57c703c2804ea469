"""The "availability of entries of ledger" encoding a bookie returns for GET_LIST_OF_ENTRIES_OF_LEDGER.

Layout (spec bookie-protocol.md §4.1, all big-endian)::

    offset 0   int32 header version (0)
    offset 4   int32 number of sequence groups G
    offset 8   56 reserved bytes (zero when written, ignored when read)
    offset 64  G records of 24 bytes: int64 firstSequenceStart, int64 lastSequenceStart,
               int32 sequenceSize, int32 sequencePeriod

A group is the sequences `s .. s+size-1` for `s = first, first+period, ..., last`; period 0 means a
single sequence (then last == first). Real bookies only ever write period-0 groups, one per maximal
run of consecutive ids (§4.3), and `encode_*` reproduces that byte for byte. The decoder also accepts
periodic groups (§4.2).

Everything here works per group, never per entry: a bookie holding millions of entries in a few runs
costs a few records. The "which expected entries are missing" question is range arithmetic on
`auditor.durability.ranges.RangeSet`, which is correct where BookKeeper's own loop is not (§4.2: it
reports everything after a gap of two or more ids as missing).

Bounded work on hostile answers (issue 10): an answer's records are validated in O(G), and G is fixed
by its size (at most the frame limit). Periodic groups — which no real bookie writes — are expanded
only inside the window the caller asks for (the ledger's own entries: ids past its end are clipped,
never expanded), and at most PERIODIC_RUN_LIMIT ranges per answer; more is a malformed answer
(EntryListError, which the check turns into an UNKNOWN answer naming the bookie). Decoding and
conversion are stepwise (`decode_steps`, `rangeset_steps`, `auditor.durability.steps`), so the
daemon's event loop runs between every STEP records of a large answer.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from auditor.errors import DataError

from .ranges import Range, RangeSet
from .steps import Steps, run_steps

if TYPE_CHECKING:
    from .striped import StripedSet

HEADER_LENGTH = 64
RECORD_LENGTH = 24
CURRENT_VERSION = 0
MAX_ENTRY_ID = 2**63 - 1
_MAX_INT32 = 2**31 - 1
# Periodic groups are expanded into one range per sequence, only inside the window asked for (the
# ledger's own entries) and at most this many ranges per answer: no real bookie writes periodic groups
# (§4.3), and a hostile 88-byte record (first 0, last 2*10**7, size 1, period 2) would otherwise cost
# ten million ranges (seconds of CPU and gigabytes). More is a malformed answer (EntryListError).
PERIODIC_RUN_LIMIT = 65_536
# Records validated, or ranges produced, between two yields of a stepwise decode/convert (a few ms).
STEP = 16_384

_HEADER = struct.Struct(">ii56x")
_RECORD = struct.Struct(">qqii")
_EMPTY = _HEADER.pack(CURRENT_VERSION, 0)

Record = tuple[int, int, int, int]  # (first_start, last_start, size, period)


class EntryListError(DataError):
    """Bytes that are not a valid availability encoding, or a set that cannot be encoded."""


@dataclass(frozen=True, slots=True)
class SequenceGroup:
    """One 24-byte record: sequences of `size` ids starting at first_start, first_start+period, ..."""

    first_start: int
    last_start: int
    size: int
    period: int

    @property
    def count(self) -> int:
        return _count(self.first_start, self.last_start, self.size, self.period)

    @property
    def last_entry(self) -> int:
        return self.last_start + self.size - 1

    def __contains__(self, e: object) -> bool:
        return isinstance(e, int) and _group_has(self.first_start, self.last_start, self.size, self.period, e)


def _count(first: int, last: int, size: int, period: int) -> int:
    if period == 0 or last == first:
        return size
    return ((last - first) // period + 1) * size


def _group_has(first: int, last: int, size: int, period: int, e: int) -> bool:
    if e < first or e > last + size - 1:
        return False
    if period == 0:
        return e - first < size
    return (e - first) % period < size


def _check_record(index: int, first: int, last: int, size: int, period: int) -> str | None:
    """Why this record is invalid, or None."""
    if first < 0:
        return f"group {index}: negative firstSequenceStart {first}"
    if size < 1:
        return f"group {index}: sequenceSize {size} < 1"
    if period < 0:
        return f"group {index}: negative sequencePeriod {period}"
    if period == 0:
        if last != first:
            return f"group {index}: period 0 but lastSequenceStart {last} != firstSequenceStart {first}"
    else:
        if last < first:
            return f"group {index}: lastSequenceStart {last} < firstSequenceStart {first}"
        if (last - first) % period:
            return f"group {index}: lastSequenceStart {last} is not firstSequenceStart {first} + k*{period}"
        if size > period and last != first:
            return f"group {index}: sequenceSize {size} > sequencePeriod {period} (sequences overlap)"
    if last + size - 1 > MAX_ENTRY_ID:
        return f"group {index}: last entry {last + size - 1} exceeds 2^63-1"
    return None


def _is_run(rec: Record) -> bool:
    """A record that is one contiguous run (period 0, a single sequence, or sequences that touch)."""
    first, last, size, period = rec
    return period == 0 or last == first or size == period


def _run_of(rec: Record) -> tuple[int, int]:
    first, last, size, _ = rec
    return first, last + size - 1


class _Validation:
    """Strict validation of records in order, chunk by chunk (same result however they are cut)."""

    __slots__ = ("index", "total", "prev_end", "simple", "periodic")

    def __init__(self) -> None:
        self.index = 0
        self.total = 0
        self.prev_end = -1
        self.simple = True  # every group is period 0 and none touches the next: ranges map 1:1 to records
        self.periodic = False  # some group has several separate sequences

    def check(self, recs: Iterable[Record]) -> None:
        i, total, prev_end, simple = self.index, self.total, self.prev_end, self.simple
        for rec in recs:
            first, last, size, period = rec
            # Fast path: the only shape real bookies send (and first > prev_end >= -1 implies first >= 0).
            if period == 0 and last == first and size >= 1 and first > prev_end and first + size - 1 <= MAX_ENTRY_ID:
                if first == prev_end + 1 and i:
                    simple = False
                prev_end = first + size - 1
                total += size
                i += 1
                continue
            problem = _check_record(i, first, last, size, period)
            if problem:
                raise EntryListError(problem)
            if first <= prev_end:
                raise EntryListError(
                    f"group {i}: starts at {first}, not after the previous group's last entry {prev_end}"
                    " (groups must be ascending and disjoint)"
                )
            simple = False
            if not _is_run(rec):
                self.periodic = True
            prev_end = last + size - 1
            total += _count(first, last, size, period)
            i += 1
        self.index, self.total, self.prev_end, self.simple = i, total, prev_end, simple


class EntryList:
    """A decoded availability list: the set of entry ids one bookie reports for one ledger.

    Membership is O(log G), `len()` is O(1), `to_rangeset()` is O(G) for the period-0 groups real
    bookies send. Equality is structural (same records); compare `to_rangeset()` for set equality.
    Work on hostile input is bounded: decoding is O(G) (G is fixed by the answer's size), and periodic
    groups are expanded only within the entries asked for and up to PERIODIC_RUN_LIMIT ranges.
    """

    __slots__ = ("_records", "_raw", "_firsts", "_total", "_simple", "_periodic", "_cache", "_share")

    def __init__(self, records: Iterable[Record] = ()) -> None:
        recs = tuple(records)
        if recs and not isinstance(recs[0], tuple):
            recs = tuple(tuple(r) for r in recs)
        v = _Validation()
        v.check(recs)
        self._adopt(recs, v)

    def _adopt(self, recs: tuple[Record, ...], v: _Validation) -> None:
        self._records: tuple[Record, ...] | None = recs
        self._raw: bytes | None = None  # where records not read yet are read from (`verified`)
        self._firsts: list[int] | None = None  # built on the first search (`_first_ids`)
        self._total = v.total
        self._simple = v.simple
        self._periodic = v.periodic
        self._cache: tuple[tuple[int, int], RangeSet] | None = None
        self._share: StripedSet | None = None

    # ----- construction -------------------------------------------------------------------------
    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> EntryList:
        """Parse and strictly validate the bytes; raise EntryListError with the reason."""
        simple = cls._decode_simple(data)
        return simple if simple is not None else run_steps(cls.decode_steps(data))

    @classmethod
    def _decode_simple(cls, data: bytes | bytearray | memoryview) -> EntryList | None:
        """`decode` of a list as real bookies send it (period-0 single runs, ascending, none touching the
        next), in one pass, its ranges kept for `answer_steps`; None for anything else (`decode_steps`
        then decodes it, or says what is wrong with it)."""
        n = len(data)
        if n < HEADER_LENGTH or (n - HEADER_LENGTH) % RECORD_LENGTH:
            return None
        version, groups = _HEADER.unpack_from(data, 0)
        if version != CURRENT_VERSION or groups != (n - HEADER_LENGTH) // RECORD_LENGTH:
            return None
        records = tuple(_RECORD.iter_unpack(memoryview(data)[HEADER_LENGTH:]))
        ranges: list[tuple[int, int]] = []
        add = ranges.append
        after = -1  # the first id a next run may start at, minus one (-1: any id >= 0)
        total = 0
        for first, last, size, period in records:
            end = first + size - 1
            if period != 0 or last != first or size < 1 or first <= after or end > MAX_ENTRY_ID:
                return None
            add((first, end))
            after = end + 1  # a run starting right after this one would touch it: not simple
            total += size
        out = cls.__new__(cls)
        out._records = records
        out._raw = None
        out._firsts = None  # a scan takes the ranges and never searches
        out._total = total
        out._simple = True
        out._periodic = False
        out._cache = ((0, MAX_ENTRY_ID), RangeSet(tuple(ranges)))
        out._share = None
        return out

    @classmethod
    def decode_steps(cls, data: bytes | bytearray | memoryview, step: int = STEP) -> Steps[EntryList]:
        """`decode`, yielding after every `step` records (see `auditor.durability.steps`)."""
        view = memoryview(data)
        if len(view) < HEADER_LENGTH:
            raise EntryListError(f"entry list is {len(view)} bytes, shorter than the {HEADER_LENGTH}-byte header")
        version, groups = _HEADER.unpack_from(view, 0)
        if version != CURRENT_VERSION:
            raise EntryListError(f"unsupported entry list header version {version} (only 0 exists)")
        if groups < 0:
            raise EntryListError(f"negative group count {groups}")
        expected = HEADER_LENGTH + RECORD_LENGTH * groups
        if len(view) != expected:
            raise EntryListError(f"entry list is {len(view)} bytes but {groups} groups need exactly {expected}")
        records: list[Record] = []
        v = _Validation()
        for start in range(0, groups, step):
            stop = min(groups, start + step)
            chunk = list(
                _RECORD.iter_unpack(view[HEADER_LENGTH + start * RECORD_LENGTH : HEADER_LENGTH + stop * RECORD_LENGTH])
            )
            v.check(chunk)
            records.extend(chunk)
            if stop < groups:
                yield
        out = cls.__new__(cls)
        out._adopt(tuple(records), v)
        return out

    @classmethod
    def verified(cls, data: bytes, runs: tuple[Range, ...], total: int, share: StripedSet) -> EntryList:
        """The list `data` encodes, which the caller has checked is exactly one period-0 record per run of
        `runs` (ascending, none touching the next; `total` ids in all) and exactly the expected set
        `share` (`auditor.durability.sharelist.decode_share`): what `decode` returns for it, with its
        records read from `data` only if they are asked for."""
        out = cls.__new__(cls)
        out._records = None
        out._raw = data
        out._firsts = None
        out._total = total
        out._simple = True
        out._periodic = False
        out._cache = ((0, MAX_ENTRY_ID), RangeSet(runs))
        out._share = share
        return out

    @classmethod
    def from_ranges(cls, ranges: RangeSet) -> EntryList:
        """The records a real bookie would send for this set: one per maximal run, period 0."""
        return cls(_records_for_ranges(ranges))

    @classmethod
    def from_ids(cls, ids: Iterable[int]) -> EntryList:
        return cls.from_ranges(RangeSet.from_ids(ids))

    # ----- encoding -----------------------------------------------------------------------------
    def encode(self) -> bytes:
        """These records serialised as they are (periodic groups stay periodic)."""
        return _HEADER.pack(CURRENT_VERSION, len(self.records)) + b"".join(_RECORD.pack(*r) for r in self.records)

    # ----- queries ------------------------------------------------------------------------------
    @property
    def groups(self) -> tuple[SequenceGroup, ...]:
        return tuple(SequenceGroup(*r) for r in self.records)

    @property
    def records(self) -> tuple[Record, ...]:
        recs = self._records
        if recs is None:
            assert self._raw is not None
            recs = self._records = tuple(_RECORD.iter_unpack(memoryview(self._raw)[HEADER_LENGTH:]))
        return recs

    @property
    def share(self) -> StripedSet | None:
        """The expected set this list was found to hold exactly when it was decoded
        (`auditor.durability.sharelist.decode_share`); None when it was decoded without one."""
        return self._share

    @property
    def has_periodic_groups(self) -> bool:
        """Some group is several separate sequences (no real bookie writes such a group)."""
        return self._periodic

    @property
    def total(self) -> int:
        """Number of entry ids in the list (the Java `getTotalNumOfAvailableEntries`)."""
        return self._total

    def __len__(self) -> int:
        return self._total

    def __bool__(self) -> bool:
        return self._total > 0

    def __contains__(self, e: object) -> bool:
        if not isinstance(e, int) or isinstance(e, bool):
            return False
        i = bisect_right(self._first_ids(), e) - 1
        return i >= 0 and _group_has(*self.records[i], e)

    def _first_ids(self) -> list[int]:
        """Each group's first id, for searches (built on the first one)."""
        if self._firsts is None:
            self._firsts = [r[0] for r in self.records]
        return self._firsts

    def __iter__(self) -> Iterator[int]:
        """Every id, one by one (tests and small lists only: a list can name 2^63 ids)."""
        for first, last, size, period in self.records:
            starts = (first,) if period == 0 else range(first, last + 1, period)
            for s in starts:
                yield from range(s, s + size)

    def to_rangeset(
        self, first: int = 0, last: int = MAX_ENTRY_ID, *, max_periodic_runs: int = PERIODIC_RUN_LIMIT
    ) -> RangeSet:
        """The ids in [first, last] as a RangeSet (see `rangeset_steps`)."""
        return run_steps(self.rangeset_steps(first, last, max_periodic_runs=max_periodic_runs))

    def rangeset_steps(
        self, first: int = 0, last: int = MAX_ENTRY_ID, *, max_periodic_runs: int = PERIODIC_RUN_LIMIT, step: int = STEP
    ) -> Steps[RangeSet]:
        """The ids in [first, last] as a RangeSet, yielding after every `step` records or ranges.

        Pass the ledger's own entries as the window: ids past it are dropped, never expanded. Costs
        O(G) plus the ranges periodic groups produce inside the window, which may not exceed
        `max_periodic_runs` (EntryListError: a malformed answer).
        """
        key = (first, last)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        recs = self.records
        if first > last or not recs:
            return RangeSet()
        firsts = self._first_ids()
        lo = max(0, bisect_right(firsts, first) - 1)
        hi = bisect_right(firsts, last)
        if self._periodic:
            runs = sum(_periodic_runs_within(r, first, last) for r in recs[lo:hi] if not _is_run(r))
            if runs > max_periodic_runs:
                raise EntryListError(
                    f"periodic groups expand to {runs} ranges within entries {first}-{last}, more than "
                    f"{max_periodic_runs} (no bookie sends periodic groups; malformed answer)"
                )
        out: list[tuple[int, int]] = []
        if self._simple:  # disjoint, non-touching single runs: one range per record, at C speed
            window = recs[lo:hi]
            for i in range(0, len(window), step):
                out.extend([(f, f + size - 1) for f, _, size, _ in window[i : i + step]])
                if i + step < len(window):
                    yield
            if out and out[0][1] < first:
                del out[0]
            if out:
                out[0] = (max(out[0][0], first), out[0][1])
                out[-1] = (out[-1][0], min(out[-1][1], last))
            rs = RangeSet(tuple(out))
            self._cache = (key, rs)
            return rs
        since_yield = 0
        for rec in recs[lo:hi]:
            if _is_run(rec):
                a, b = _run_of(rec)
                pieces: Iterable[tuple[int, int]] = ((max(a, first), min(b, last)),) if a <= last and b >= first else ()
                since_yield += 1
            else:
                pieces = _periodic_pieces(rec, first, last)
            for a, b in pieces:
                if out and a == out[-1][1] + 1:
                    out[-1] = (out[-1][0], b)
                else:
                    out.append((a, b))
                since_yield += 1
                if since_yield >= step:
                    since_yield = 0
                    yield
        rs = RangeSet(tuple(out))
        self._cache = (key, rs)
        return rs

    def missing(self, expected: RangeSet) -> RangeSet:
        """The expected ids this list does not contain (`expected - available`), as ranges.

        This is the auditor's core query; unlike BookKeeper's `getUnavailableEntries` it is right for
        gaps of any width. Only the expected span is ever materialised.
        """
        if not expected:
            return expected
        first, last = expected.first, expected.last
        assert first is not None and last is not None
        available = self.to_rangeset(first, last)
        if expected.ranges == available.ranges:  # the common healthy case, at C speed
            return RangeSet()
        return expected.difference(available)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EntryList) and self.records == other.records

    def __hash__(self) -> int:
        return hash(self.records)

    def __repr__(self) -> str:
        return f"EntryList(groups={len(self.records)}, total={self._total})"


def _periodic_window(rec: Record, first: int, last: int) -> tuple[int, int]:
    """Indices k of the sequences [s, s+size-1], s = first_start + k*period, that meet [first, last]
    (k_lo > k_hi when none does)."""
    start, stop, size, period = rec
    n = (stop - start) // period + 1
    k_lo = max(0, -((start + size - 1 - first) // period))  # ceil((first - size + 1 - start) / period)
    k_hi = min(n - 1, (last - start) // period)  # negative when last < start
    return k_lo, k_hi


def _periodic_runs_within(rec: Record, first: int, last: int) -> int:
    k_lo, k_hi = _periodic_window(rec, first, last)
    return max(0, k_hi - k_lo + 1)


def _periodic_pieces(rec: Record, first: int, last: int) -> Iterator[tuple[int, int]]:
    start, _, size, period = rec
    k_lo, k_hi = _periodic_window(rec, first, last)
    for k in range(k_lo, k_hi + 1):
        s = start + k * period
        yield max(s, first), min(s + size - 1, last)


def answer_now(entries: EntryList, end: int) -> RangeSet | None:
    """What `answer_steps` gives, when it is already known (a list decoded by the one-pass path): no
    generator to run. None: run `answer_steps`."""
    if entries._periodic or entries._cache is None or entries._cache[0] != (0, MAX_ENTRY_ID):
        return None
    return entries._cache[1]


def answer_steps(entries: EntryList, end: int) -> Steps[RangeSet]:
    """What a check takes from one bookie's list of a ledger whose entries end at `end`.

    The ids in [0, end]; past `end`, the single runs real bookies send are kept (one record each, so
    the answer's own size bounds them; they show a bookie holding entries after a closed ledger's last
    entry). A list with periodic groups — which no real bookie writes — is clipped at `end` entirely,
    so its expansion is bounded by the ledger's own entries (and PERIODIC_RUN_LIMIT).
    """
    return entries.rangeset_steps(0, end if entries.has_periodic_groups else MAX_ENTRY_ID)


def _records_for_ranges(ranges: RangeSet) -> Iterator[Record]:
    for a, b in ranges.ranges:
        if a < 0:
            raise EntryListError(f"negative entry id {a} cannot be encoded")
        if b > MAX_ENTRY_ID:
            raise EntryListError(f"entry id {b} exceeds 2^63-1")
        # A run longer than an int32 can carry is split into adjacent records (no bookie can hold one).
        while b - a + 1 > _MAX_INT32:
            yield (a, a, _MAX_INT32, 0)
            a += _MAX_INT32
        yield (a, a, b - a + 1, 0)


def encode_ranges(ranges: RangeSet) -> bytes:
    """Encode a set of entry ids byte-identically to a real bookie (one record per maximal run)."""
    if not ranges:
        return _EMPTY
    records = list(_records_for_ranges(ranges))
    return _HEADER.pack(CURRENT_VERSION, len(records)) + b"".join(_RECORD.pack(*r) for r in records)


def encode_entry_ids(ids: Iterable[int]) -> bytes:
    """Encode entry ids (any order, duplicates allowed) byte-identically to a real bookie."""
    return encode_ranges(RangeSet.from_ids(ids))


def decode(data: bytes | bytearray | memoryview) -> EntryList:
    return EntryList.decode(data)
