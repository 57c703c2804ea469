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
"""
from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .ranges import RangeSet

HEADER_LENGTH = 64
RECORD_LENGTH = 24
CURRENT_VERSION = 0
MAX_ENTRY_ID = 2**63 - 1
_MAX_INT32 = 2**31 - 1
# A periodic group is expanded into one range per sequence when converted to a RangeSet; a hostile
# record (first 0, last 2**62, period 2, size 1) would otherwise ask for 2**61 ranges.
DEFAULT_MAX_EXPANDED_RUNS = 10_000_000

_HEADER = struct.Struct(">ii56x")
_RECORD = struct.Struct(">qqii")
_EMPTY = _HEADER.pack(CURRENT_VERSION, 0)

Record = tuple[int, int, int, int]  # (first_start, last_start, size, period)


class EntryListError(ValueError):
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


class EntryList:
    """A decoded availability list: the set of entry ids one bookie reports for one ledger.

    Membership is O(log G), `len()` is O(1), `to_rangeset()` is O(G) for the period-0 groups real
    bookies send. Equality is structural (same records); compare `to_rangeset()` for set equality.
    """

    __slots__ = ("_records", "_firsts", "_total", "_simple", "_rangeset")

    def __init__(self, records: Iterable[Record] = ()) -> None:
        recs = tuple(records)
        total = 0
        prev_end = -1
        simple = True  # every group is period 0 and none touches the next: ranges map 1:1 to records
        for i, rec in enumerate(recs):
            first, last, size, period = rec
            # Fast path: the only shape real bookies send (and first > prev_end >= -1 implies first >= 0).
            if period == 0 and last == first and size >= 1 and first > prev_end and first + size - 1 <= MAX_ENTRY_ID:
                if first == prev_end + 1 and i:
                    simple = False
                prev_end = first + size - 1
                total += size
                continue
            problem = _check_record(i, first, last, size, period)
            if problem:
                raise EntryListError(problem)
            if first <= prev_end:
                raise EntryListError(
                    f"group {i}: starts at {first}, not after the previous group's last entry {prev_end}"
                    " (groups must be ascending and disjoint)")
            simple = False
            prev_end = last + size - 1
            total += _count(first, last, size, period)
        if recs and not isinstance(recs[0], tuple):
            recs = tuple(tuple(r) for r in recs)
        self._records: tuple[Record, ...] = recs  # type: ignore[assignment]
        self._firsts = [r[0] for r in recs]
        self._total = total
        self._simple = simple
        self._rangeset: RangeSet | None = None

    # ----- construction -------------------------------------------------------------------------
    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> "EntryList":
        """Parse and strictly validate the bytes; raise EntryListError with the reason."""
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
            raise EntryListError(
                f"entry list is {len(view)} bytes but {groups} groups need exactly {expected}")
        return cls(_RECORD.iter_unpack(view[HEADER_LENGTH:]))

    @classmethod
    def from_ranges(cls, ranges: RangeSet) -> "EntryList":
        """The records a real bookie would send for this set: one per maximal run, period 0."""
        return cls(_records_for_ranges(ranges))

    @classmethod
    def from_ids(cls, ids: Iterable[int]) -> "EntryList":
        return cls.from_ranges(RangeSet.from_ids(ids))

    # ----- encoding -----------------------------------------------------------------------------
    def encode(self) -> bytes:
        """These records serialised as they are (periodic groups stay periodic)."""
        return _HEADER.pack(CURRENT_VERSION, len(self._records)) + b"".join(
            _RECORD.pack(*r) for r in self._records)

    # ----- queries ------------------------------------------------------------------------------
    @property
    def groups(self) -> tuple[SequenceGroup, ...]:
        return tuple(SequenceGroup(*r) for r in self._records)

    @property
    def records(self) -> tuple[Record, ...]:
        return self._records

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
        i = bisect_right(self._firsts, e) - 1
        return i >= 0 and _group_has(*self._records[i], e)

    def __iter__(self) -> Iterator[int]:
        for first, last, size, period in self._records:
            starts = (first,) if period == 0 else range(first, last + 1, period)
            for s in starts:
                yield from range(s, s + size)

    def to_rangeset(self, max_runs: int = DEFAULT_MAX_EXPANDED_RUNS) -> RangeSet:
        """The same ids as a RangeSet (computed once). O(groups) unless periodic groups must be expanded."""
        if self._rangeset is not None:
            return self._rangeset
        if self._simple:
            rs = RangeSet(tuple([(f, f + s - 1) for f, _, s, _ in self._records]))
        else:
            rs = self._merged_rangeset(max_runs)
        self._rangeset = rs
        return rs

    def _merged_rangeset(self, max_runs: int) -> RangeSet:
        out: list[tuple[int, int]] = []
        runs = 0
        for first, last, size, period in self._records:
            if period == 0 or last == first or size == period:
                pieces: Iterable[tuple[int, int]] = ((first, last + size - 1),)
                runs += 1
            else:
                n = (last - first) // period + 1
                runs += n
                if runs > max_runs:
                    raise EntryListError(f"periodic groups expand to more than {max_runs} ranges")
                pieces = ((s, s + size - 1) for s in range(first, last + 1, period))
            for a, b in pieces:
                if out and a == out[-1][1] + 1:
                    out[-1] = (out[-1][0], b)
                else:
                    out.append((a, b))
        return RangeSet(tuple(out))

    def missing(self, expected: RangeSet) -> RangeSet:
        """The expected ids this list does not contain (`expected - available`), as ranges.

        This is the auditor's core query; unlike BookKeeper's `getUnavailableEntries` it is right for
        gaps of any width.
        """
        if not expected:
            return expected
        available = self.to_rangeset()
        if expected.ranges == available.ranges:  # the common healthy case, at C speed
            return RangeSet()
        return expected.difference(available)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EntryList) and self._records == other._records

    def __hash__(self) -> int:
        return hash(self._records)

    def __repr__(self) -> str:
        return f"EntryList(groups={len(self._records)}, total={self._total})"


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
