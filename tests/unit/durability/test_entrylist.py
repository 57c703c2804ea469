"""The GET_LIST_OF_ENTRIES_OF_LEDGER availability codec: spec vectors (bookie-protocol.md §4.5, §8.3),
strict validation, and properties against plain Python sets."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.aio.cooperative import finish
from auditor.bookie.protocol import DEFAULT_MAX_FRAME_SIZE
from auditor.durability.entrylist import (
    STEP,
    EntryList,
    EntryListError,
    SequenceGroup,
    answer_steps,
    decode,
    encode_entry_ids,
    encode_ranges,
)
from auditor.durability.ranges import RangeSet
from auditor.durability.steps import run_steps
from tests.heartbeat import Heartbeat


def rec(first: int, last: int, size: int, period: int) -> bytes:
    return struct.pack(">qqii", first, last, size, period)


def header(groups: int, version: int = 0) -> bytes:
    return struct.pack(">ii", version, groups) + bytes(56)


# ----- §4.5 worked examples: input ids -> groups, encoded length, total ---------------------------
SPEC_4_5 = [
    ([0, 1, 2], [(0, 0, 3, 0)], 88, 3),
    ([1, 2], [(1, 1, 2, 0)], 88, 2),
    ([1, 2, 3, 5, 6, 7, 8], [(1, 1, 3, 0), (5, 5, 4, 0)], 112, 7),
    ([0, 1, 5], [(0, 0, 2, 0), (5, 5, 1, 0)], 112, 3),
    ([3], [(3, 3, 1, 0)], 88, 1),
    ([1, 2, 4, 5, 7, 8], [(1, 1, 2, 0), (4, 4, 2, 0), (7, 7, 2, 0)], 136, 6),
    ([], [], 64, 0),
    ([0], [(0, 0, 1, 0)], 88, 1),
    (
        [1, 2, 3, 5, 6, 11, 12, 13, 14, 15, 16, 17, 100, 1000, 1001, 10000, 20000, 20001],
        [
            (1, 1, 3, 0),
            (5, 5, 2, 0),
            (11, 11, 7, 0),
            (100, 100, 1, 0),
            (1000, 1000, 2, 0),
            (10000, 10000, 1, 0),
            (20000, 20000, 2, 0),
        ],
        232,
        18,
    ),
    ([1, 1, 5, 5], [(1, 1, 1, 0), (5, 5, 1, 0)], 112, 2),
    ([1, 1, 2, 4, 5, 8, 9, 9, 9, 9, 9], [(1, 1, 2, 0), (4, 4, 2, 0), (8, 8, 2, 0)], 136, 6),
]


@pytest.mark.parametrize("ids,groups,length,total", SPEC_4_5)
def test_spec_worked_examples(ids: list[int], groups: list[tuple[int, int, int, int]], length: int, total: int) -> None:
    data = encode_entry_ids(ids)
    assert len(data) == length
    assert data == header(len(groups)) + b"".join(rec(*g) for g in groups)
    decoded = decode(data)
    assert decoded.records == tuple(groups)
    assert decoded.total == len(decoded) == total
    assert set(decoded) == set(ids)
    assert list(decoded) == sorted(set(ids))


NON_MEMBERS = [
    ([0, 1, 2], [3]),
    ([1, 2, 3, 5, 6, 7, 8], [0, 4, 9, 100, 101]),
    ([1, 5], [0, 2, 3, 6, 9]),
    ([3], [0, 1, 2, 4, 5, 6]),
    ([1, 2, 4, 5, 7, 8], [0, 3, 9, 10, 11, 100, 1000]),
    ([], [0, 1, 2, 3, 4, 5]),
    (SPEC_4_5[8][0], [4, 18, 1002, 19999, 20003]),
]


@pytest.mark.parametrize("ids,absent", NON_MEMBERS)
def test_spec_non_members(ids: list[int], absent: list[int]) -> None:
    el = decode(encode_entry_ids(ids))
    for e in absent:
        assert e not in el
    for e in ids:
        assert e in el


# available, expected, [start, last], unavailable (spec §4.5 getUnavailableEntries table)
UNAVAILABLE = [
    ([1, 2], [1, 2], [0, 3], []),
    ([0, 1, 2], [0, 1, 2, 3, 5], [0, 5], [3, 5]),
    ([1, 2, 3, 5, 6, 7, 8], [1, 2, 5, 7, 8], [0, 9], []),
    ([1, 5], [2, 7], [1, 8], [2, 7]),
    ([3], [3], [2, 4], []),
    ([1, 2, 4, 5, 7, 8], [1, 5, 7, 8, 9, 10], [0, 11], [9, 10]),
    ([], [0, 1, 2, 3, 4, 5], [0, 5], [0, 1, 2, 3, 4, 5]),
    (SPEC_4_5[8][0], [4, 18, 1002, 19999, 20003], [3, 20004], [4, 18, 1002, 19999, 20003]),
    # §8.3 regressions where BookKeeper's loop is wrong: gaps of two or more ids.
    ([0, 4, 5, 9, 10], [0, 4, 5, 9, 10], [0, 10], []),
    ([1, 2, 6], [1, 2, 6], [0, 7], []),
    ([0, 3, 6, 9], [0, 3, 6, 9], [0, 9], []),
    ([0, 2, 4], [0, 2, 4], [0, 4], []),
]


@pytest.mark.parametrize("available,expected,span,unavailable", UNAVAILABLE)
def test_spec_unavailable_entries(
    available: list[int], expected: list[int], span: list[int], unavailable: list[int]
) -> None:
    el = decode(encode_entry_ids(available))
    want = RangeSet.from_ids(expected).clip(*span)
    assert list(el.missing(want)) == unavailable


def test_spec_8_3_four_groups_bytes() -> None:
    expected = bytes.fromhex(
        "00000000"
        "00000004" + "00" * 56 + "0000000000000001"
        "0000000000000001"
        "00000002"
        "00000000" + "0000000000000004"
        "0000000000000004"
        "00000002"
        "00000000" + "0000000000000007"
        "0000000000000007"
        "00000002"
        "00000000" + "000000000000000a"
        "000000000000000a"
        "00000002"
        "00000000"
    )
    assert len(expected) == 160
    assert encode_entry_ids([1, 2, 4, 5, 7, 8, 10, 11]) == expected
    assert encode_entry_ids([]) == bytes(64)


def test_spec_periodic_group_is_accepted() -> None:
    el = decode(header(1) + rec(1, 10, 2, 3))
    assert set(el) == {1, 2, 4, 5, 7, 8, 10, 11}
    assert el.total == 8
    for e in (3, 6, 9, 12, 0, 13):
        assert e not in el
    assert el.to_rangeset() == RangeSet.from_ids([1, 2, 4, 5, 7, 8, 10, 11])
    # §4.5: over 0..13 its unavailable list is [0,3,6,9,12,13].
    assert list(el.missing(RangeSet.span(0, 13))) == [0, 3, 6, 9, 12, 13]
    # Periodic groups re-encode as they are; the bookie-style encoding of the same set differs.
    assert decode(el.encode()) == el
    assert encode_ranges(el.to_rangeset()) == encode_entry_ids([1, 2, 4, 5, 7, 8, 10, 11])


def test_bp34_example_two_groups() -> None:
    data = header(4) + rec(1, 6, 3, 5) + rec(11, 13, 1, 2) + rec(16, 16, 3, 0) + rec(21, 21, 2, 0)
    el = decode(data)
    assert list(el) == [1, 2, 3, 6, 7, 8, 11, 13, 16, 17, 18, 21, 22]
    assert el.total == 13
    assert el.groups[0] == SequenceGroup(1, 6, 3, 5)
    assert 13 in el.groups[1] and 12 not in el.groups[1]


def test_size_equal_to_period_is_one_contiguous_run() -> None:
    el = decode(header(1) + rec(10, 40, 10, 10))
    assert el.to_rangeset() == RangeSet.span(10, 49)
    assert el.total == 40


def test_large_ledger_is_per_group() -> None:
    # A bookie of E=5, WQ=2 holding every 5-stripe of 1M entries: 200k runs of 2.
    rs = RangeSet(tuple((e, e + 1) for e in range(0, 1_000_000, 5)))
    data = encode_ranges(rs)
    el = decode(data)
    assert el.total == 400_000
    assert el.to_rangeset() == rs
    assert 999_996 in el and 999_997 not in el
    expected = RangeSet.span(0, 999_999)
    missing = el.missing(expected)
    assert len(missing) == 600_000
    # Contiguous: one record however many entries (up to an int32 sequence size)...
    one = encode_ranges(RangeSet.span(0, 10**9))
    assert len(one) == 88
    assert decode(one).total == 10**9 + 1
    # ...and longer runs are split into adjacent records that decode to the same set.
    huge = decode(encode_ranges(RangeSet.span(0, 10**12)))
    assert huge.total == 10**12 + 1
    assert huge.to_rangeset() == RangeSet.span(0, 10**12)


# ----- strict validation ---------------------------------------------------------------------------
BAD = [
    (b"", "shorter"),
    (bytes(63), "shorter"),
    (header(0, version=1), "version"),
    (header(0, version=-1), "version"),
    (header(-1), "negative group count"),
    (header(1), "need exactly"),
    (header(0) + b"\x00", "need exactly"),
    (header(1) + rec(1, 1, 1, 0) + b"\x00" * 3, "need exactly"),
    (header(1) + rec(-1, -1, 1, 0), "negative firstSequenceStart"),
    (header(1) + rec(1, 1, 0, 0), "sequenceSize"),
    (header(1) + rec(1, 1, -5, 0), "sequenceSize"),
    (header(1) + rec(1, 1, 1, -2), "negative sequencePeriod"),
    (header(1) + rec(1, 2, 1, 0), "period 0"),
    (header(1) + rec(5, 1, 1, 2), "lastSequenceStart"),
    (header(1) + rec(1, 8, 1, 3), "k*3"),
    (header(1) + rec(1, 10, 4, 3), "overlap"),
    (header(1) + rec(2**63 - 1, 2**63 - 1, 2, 0), "exceeds"),
    (header(2) + rec(5, 5, 1, 0) + rec(1, 1, 1, 0), "ascending"),
    (header(2) + rec(1, 1, 5, 0) + rec(3, 3, 1, 0), "ascending"),
]


@pytest.mark.parametrize("data,reason", BAD)
def test_rejects_invalid(data: bytes, reason: str) -> None:
    with pytest.raises(EntryListError, match=reason):
        decode(data)


def test_reserved_bytes_are_ignored_and_adjacent_groups_accepted() -> None:
    data = struct.pack(">ii", 0, 2) + b"\xff" * 56 + rec(1, 1, 2, 0) + rec(3, 3, 2, 0)
    el = decode(data)
    assert el.to_rangeset() == RangeSet.span(1, 4)


def test_hostile_periodic_group_does_not_explode() -> None:
    el = decode(header(1) + rec(0, 2**62, 1, 2))
    assert el.total == 2**61 + 1
    assert 2**62 in el and 2**62 - 1 not in el
    with pytest.raises(EntryListError, match="expand"):
        el.to_rangeset()
    with pytest.raises(EntryListError, match="expand"):
        el.to_rangeset(0, 99, max_periodic_runs=10)
    assert el.to_rangeset(0, 99) == RangeSet.from_ids(range(0, 100, 2))
    assert el.to_rangeset(2**62 - 3, 2**62 + 5) == RangeSet.from_ids([2**62 - 2, 2**62])


def test_encode_rejects_negative() -> None:
    with pytest.raises(EntryListError):
        encode_entry_ids([-1, 0])


# ----- properties -----------------------------------------------------------------------------------
ids_strategy = st.lists(st.integers(min_value=0, max_value=300), max_size=120)


@settings(max_examples=300, deadline=None)
@given(ids_strategy, st.lists(st.integers(min_value=0, max_value=320), max_size=60))
def test_roundtrip_and_membership_equal_a_plain_set(ids: list[int], probes: list[int]) -> None:
    data = encode_entry_ids(ids)
    el = decode(data)
    assert el == EntryList.from_ids(ids)
    assert decode(el.encode()) == el
    assert el.encode() == data
    plain = set(ids)
    assert el.total == len(plain)
    assert set(el) == plain
    for e in probes + ids:
        assert (e in el) == (e in plain)
    assert set(el.to_rangeset()) == plain
    expected = set(probes)
    assert set(el.missing(RangeSet.from_ids(probes))) == expected - plain


@st.composite
def periodic_lists(draw: st.DrawFn) -> list[tuple[int, int, int, int]]:
    records = []
    cursor = draw(st.integers(0, 5))
    for _ in range(draw(st.integers(0, 6))):
        size = draw(st.integers(1, 4))
        if draw(st.booleans()):
            records.append((cursor, cursor, size, 0))
            cursor += size + draw(st.integers(0, 4))
        else:
            period = draw(st.integers(size, size + 4))
            n = draw(st.integers(1, 5))
            last = cursor + (n - 1) * period
            records.append((cursor, last, size, period))
            cursor = last + size + draw(st.integers(0, 4))
    return records


@settings(max_examples=300, deadline=None)
@given(periodic_lists(), st.lists(st.integers(0, 200), max_size=40))
def test_periodic_groups_agree_with_expansion(records: list[tuple[int, int, int, int]], probes: list[int]) -> None:
    plain: set[int] = set()
    for first, last, size, period in records:
        starts = [first] if period == 0 else range(first, last + 1, period)
        for s in starts:
            plain.update(range(s, s + size))
    el = decode(header(len(records)) + b"".join(rec(*r) for r in records))
    assert el.total == len(plain)
    assert set(el) == plain
    assert set(el.to_rangeset()) == plain
    for e in probes:
        assert (e in el) == (e in plain)
    assert set(el.missing(RangeSet.from_ids(probes))) == set(probes) - plain
    assert decode(el.encode()) == el


# ----- issue 10, defect 3: amplification from a tiny answer -------------------------------------------
# Header + one record (first 0, last 2*(10**7 - 1), size 1, period 2): ten million single-id ranges.
HOSTILE_88 = header(1) + rec(0, 2 * (10_000_000 - 1), 1, 2)


def test_the_88_byte_answer_stays_within_the_ledger_and_small() -> None:
    assert len(HOSTILE_88) == 88
    tracemalloc.start()
    try:
        el = decode(HOSTILE_88)
        assert el.total == 10_000_000 and el.has_periodic_groups
        # A ledger of 100 entries: only its own entries are ever expanded.
        assert el.missing(RangeSet.span(0, 99)) == RangeSet.from_ids(range(1, 100, 2))
        assert run_steps(answer_steps(el, 99)) == RangeSet.from_ids(range(0, 100, 2))
        # A ledger that long: more ranges than any real bookie answer -> malformed, nothing expanded.
        with pytest.raises(EntryListError, match="periodic groups expand to 10000000 ranges"):
            run_steps(answer_steps(el, 10**12))
        with pytest.raises(EntryListError, match="malformed"):
            el.to_rangeset()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024, peak


def test_real_bookie_lists_keep_their_runs_past_the_end() -> None:
    el = decode(encode_ranges(RangeSet.of([(0, 9), (20, 25), (40, 40)])))
    assert not el.has_periodic_groups
    assert run_steps(answer_steps(el, 21)) == RangeSet.of([(0, 9), (20, 25), (40, 40)])
    assert el.to_rangeset(5, 21) == RangeSet.of([(5, 9), (20, 21)])
    assert el.to_rangeset(10, 19) == RangeSet()
    assert el.to_rangeset(30, 10) == RangeSet()
    mixed = decode(header(2) + rec(0, 0, 3, 0) + rec(10, 30, 1, 10))
    assert run_steps(answer_steps(mixed, 12)) == RangeSet.of([(0, 2), (10, 10)])


@given(periodic_lists(), st.integers(0, 80), st.integers(-1, 80))
@settings(max_examples=300, deadline=None)
def test_windowed_conversion_is_the_plain_set_within_the_window(
    records: list[tuple[int, int, int, int]], first: int, last: int
) -> None:
    el = EntryList(records)
    plain = {e for e in el if first <= e <= last}
    assert set(el.to_rangeset(first, last)) == plain
    assert set(run_steps(el.rangeset_steps(first, last, step=1))) == plain  # however it is cut
    assert el.to_rangeset(first, last) == RangeSet.from_ids(plain)


async def test_decoding_a_maximum_size_answer_lets_the_event_loop_run() -> None:
    """Responsiveness, not speed: a heartbeat task must get turns while a frame-limit answer (218k
    records) is decoded and converted, at least once per STEP records."""
    n = (DEFAULT_MAX_FRAME_SIZE - 200) // 24
    data = encode_ranges(RangeSet(tuple((3 * i, 3 * i + 1) for i in range(n))))
    assert len(data) <= DEFAULT_MAX_FRAME_SIZE
    async with Heartbeat() as beat:
        start = beat.ticks
        el = await finish(EntryList.decode_steps(data))
        during_decode, start = beat.ticks - start, beat.ticks
        rs = await finish(answer_steps(el, 3 * n))
        during_convert = beat.ticks - start
    assert el.total == 2 * n and len(rs.ranges) == n
    steps = -(-n // STEP)
    assert during_decode >= steps - 1, during_decode
    assert during_convert >= steps - 1, during_convert
