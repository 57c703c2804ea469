"""`decode_share`: a bookie's entry list recognised as exactly its share, or left to the general decode.

It is an optimisation only: whenever it returns a list, that list must be what `EntryList.decode` makes of
the same bytes and must hold exactly the share; for every other answer it must return None."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.durability.coverage import analyze_coverage
from auditor.durability.entrylist import EntryList, EntryListError, answer_now, encode_ranges
from auditor.durability.ranges import RangeSet
from auditor.durability.schedule import expected_by_bookie
from auditor.durability.sharelist import decode_share
from auditor.durability.striped import StripedSet
from tests.unit.durability.test_coverage import ledgers_with_answers

_RECORD = struct.Struct(">qqii")


def runs_of(share: StripedSet) -> RangeSet:
    return RangeSet.of(r for piece in share.pieces for r in piece.iter_runs())


@st.composite
def shares(draw: st.DrawFn) -> StripedSet:
    """What one bookie of a one-segment ledger should hold: E == WQ (one range) or a run of WQ
    residues (maybe wrapping) every E, from any first entry to any last one, small ids or near 2^63."""
    e = draw(st.integers(1, 9))
    wq = draw(st.integers(1, e))
    index = draw(st.integers(0, e - 1))
    base = draw(st.sampled_from([0, 0, 7, 2**31 - 5, 2**62]))
    first = base + draw(st.integers(0, 12))
    last = first + draw(st.integers(-1, 300))
    residues = [(index - j) % e for j in range(wq)]
    return StripedSet.striped(first, last, e, residues)


def check(data: bytes, share: StripedSet) -> EntryList | None:
    """`decode_share`, held to its contract against `EntryList.decode`."""
    got = decode_share(data, share)
    if got is None:
        return None
    decoded = EntryList.decode(data)
    assert got == decoded and got.records == decoded.records and got.total == decoded.total
    assert answer_now(got, 2**63 - 1) == answer_now(decoded, 2**63 - 1) == runs_of(share)
    assert got.share is share and decoded.share is None
    return got


@settings(max_examples=500, deadline=None)
@given(shares())
def test_a_bookies_exact_share_as_real_bookies_encode_it_is_recognised(share: StripedSet) -> None:
    data = encode_ranges(runs_of(share))
    if not share:
        assert decode_share(data, share) is None  # no stripe: nothing to recognise
        return
    assert check(data, share) is not None


@settings(max_examples=800, deadline=None)
@given(shares(), st.data())
def test_any_other_answer_is_left_to_the_general_decode(share: StripedSet, data: st.DataObject) -> None:
    """A changed byte, a record more or fewer, another set: None, unless the bytes still list exactly the
    share as the decode reads them (only the header's ignored reserved bytes can do that)."""
    good = bytearray(encode_ranges(runs_of(share)))
    kind = data.draw(st.sampled_from(["byte", "drop", "extra", "set"]))
    if kind == "byte":
        at = data.draw(st.integers(0, len(good) - 1))
        good[at] ^= 1 << data.draw(st.integers(0, 7))
        bad = bytes(good)
    elif kind == "drop" and len(good) > 64:
        n = (len(good) - 64) // 24
        i = data.draw(st.integers(0, n - 1))
        bad = struct.pack(">ii56x", 0, n - 1) + bytes(good[64 : 64 + 24 * i] + good[64 + 24 * (i + 1) :])
    elif kind == "extra":
        n = (len(good) - 64) // 24
        extra = _RECORD.pack(
            *data.draw(st.tuples(st.integers(0, 400), st.integers(0, 400), st.integers(1, 3), st.integers(0, 2)))
        )
        bad = struct.pack(">ii56x", 0, n + 1) + bytes(good[64:]) + extra
    else:
        ids = data.draw(st.lists(st.integers(0, 320), max_size=40))
        bad = encode_ranges(RangeSet.from_ids(ids))
    got = check(bad, share)
    try:
        same = EntryList.decode(bad).to_rangeset() == runs_of(share)
    except EntryListError:
        same = False
    if got is not None:
        assert same
    if not same:
        assert got is None


def test_several_stripes_are_left_to_the_general_decode() -> None:
    share = StripedSet.of([*StripedSet.striped(0, 9, 3, (0, 1)).pieces, *StripedSet.striped(10, 19, 5, (0,)).pieces])
    assert len(share.pieces) == 2
    assert decode_share(encode_ranges(runs_of(share)), share) is None


def test_a_run_longer_than_a_record_can_carry_is_left_to_the_general_decode() -> None:
    """Real bookies split such a run into adjacent records, which only the general decode takes."""
    share = StripedSet.striped(0, 2**31 + 5, 1, (0,))
    data = encode_ranges(runs_of(share))
    assert (len(data) - 64) // 24 == 2
    assert decode_share(data, share) is None
    assert EntryList.decode(data).to_rangeset() == runs_of(share)


@settings(max_examples=300, deadline=None)
@given(ledgers_with_answers())
def test_every_one_segment_share_of_a_ledger_is_recognised(case: tuple) -> None:
    md, _, end = case
    try:
        expected = expected_by_bookie(md, end)
    except ValueError:
        return
    for share in expected.values():
        got = check(encode_ranges(runs_of(share)), share)
        one_run_a_period = len(share.pieces) == 1 and (
            share.pieces[0].period == 1 or len(share.pieces[0].pattern.runs) == 1
        )
        if len(share.pieces) != 1:
            assert got is None
        elif one_run_a_period and share.pieces[0].count() < 2**31:
            assert got is not None


@settings(max_examples=600, deadline=None)
@given(ledgers_with_answers(), st.data())
def test_a_verdict_from_lists_recognised_as_shares_is_the_verdict_from_lists_decoded(
    case: tuple, data: st.DataObject
) -> None:
    """The whole way a scan takes a bookie's list: its bytes recognised as the share where they are one
    (`decode_share`, the bookie then `exact`), decoded the general way where not. The coverage is what
    the general decode and the full comparison give, whatever the lists hold (a hole, an entry too many,
    one past the end, nothing)."""
    md, _, end = case
    try:
        expected = expected_by_bookie(md, end)
    except ValueError:
        return
    stop = md.last_entry_id if end is None else end
    answers: dict[str, RangeSet] = {}
    for b, share in expected.items():
        held = runs_of(share)
        kind = data.draw(st.sampled_from(["exact", "exact", "exact", "hole", "extra", "beyond", "empty"]))
        if kind == "hole" and held:
            held = held - RangeSet.from_ids([data.draw(st.sampled_from(list(held)))])
        elif kind == "extra":
            held = held | RangeSet.from_ids([data.draw(st.integers(0, max(stop, 0)))])
        elif kind == "beyond":
            held = held | RangeSet.from_ids([stop + data.draw(st.integers(1, 3))])
        elif kind == "empty":
            held = RangeSet()
        answers[b] = held
    general: dict[str, RangeSet] = {}
    recognised: dict[str, RangeSet] = {}
    exact: set[str] = set()
    for b, held in answers.items():
        raw = encode_ranges(held)
        decoded = EntryList.decode(raw)
        general[b] = decoded.to_rangeset()
        fast = decode_share(raw, expected[b])
        if fast is not None:
            assert fast.share is expected[b]
            exact.add(b)
        got = answer_now(fast if fast is not None else decoded, 2**63 - 1)
        assert got == general[b]
        recognised[b] = got
    assert analyze_coverage(md, recognised, end, expected, known_exact=exact) == analyze_coverage(md, general, end)


def test_stripes_of_one_pattern_and_any_length_share_the_kept_records_correctly() -> None:
    """Stripes starting in the first period are compared with a prefix of records kept per pattern
    (longer ones replacing shorter ones as lists grow): every length, growing then shrinking, and a
    stripe of the same pattern that starts later (not kept), are still told exactly from their
    neighbours; so are stripes of more runs than are kept (built for the answer alone)."""
    lasts = [*range(-1, 300), *range(299, -2, -1), *range(1520, 1550), *range(2545, 2575), 9000]
    for first, e, residues in [(0, 3, (0, 1)), (1, 5, (1, 2)), (2, 5, (4, 0)), (12, 5, (1, 2))]:
        for last in lasts:
            share = StripedSet.striped(first, last, e, residues)
            data = encode_ranges(runs_of(share))
            got = check(data, share)
            assert (got is not None) == bool(share)
            shorter = StripedSet.striped(first, last - 1, e, residues)
            if shorter and shorter != share:
                assert decode_share(data, shorter) is None
                assert decode_share(encode_ranges(runs_of(shorter)), share) is None
