"""The one wire form of a finding (`to_wire` / `from_wire`), the one "log unless informational" rule,
and the varint codec the Pulsar context and the metadata length prefix share."""

from __future__ import annotations

import io
import json

import pytest
from google.protobuf.internal.encoder import _VarintBytes
from hypothesis import given
from hypothesis import strategies as st

from auditor.durability import varint
from auditor.durability.findings import Category, Finding, FindingSummary, Method, Severity
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.ranges import RangeSet
from auditor.logging import configure_logging, log_new_finding

PULSAR = {
    "application": b"pulsar",
    "component": b"compacted-ledger",
    "pulsar/compactedTopic": b"persistent://t/ns/events",
    "pulsar/compactedTo": bytes([0x08, 12, 0x10, 34]),
}


def md(lid: LedgerId, custom: dict[str, bytes] | None = None) -> LedgerMetadata:
    return LedgerMetadata(
        lid, 3, 2, 2, LedgerState.OPEN, None, 0, (Segment(0, ("a", "b", "c")),), custom_metadata=custom or {}
    )


def samples() -> list[Finding]:
    return [
        Finding.of(
            Category.DIGEST_MISMATCH,
            "bad digest",
            metadata=md(LedgerId(7, 2**40), PULSAR),
            bookie="b:3181",
            entry_id=17,
            segment_index=1,
            first_entry_id=10,
            last_entry_id=20,
            ensemble=("a", "b", "c"),
            method=Method.READ,
            detail={"expected_digest": b"\xab", "per_bookie": {"some_key": [1, 2]}, "ids": {3, 1}},
            unknown_bookies=("z", "y"),
            confirmed=True,
        ),
        Finding.of(Category.ENTRY_NO_REPLICA, "gone", ledger=LedgerId.of(5), affected=RangeSet.of([(0, 9), (12, 12)])),
        Finding.of(Category.BOOKIE_UNREACHABLE, "down", bookie="x:3181", method=Method.REGISTRATION),
        Finding.of(Category.RISKY_QUORUM, "wq == aq", ledger=LedgerId.of(0), severity=Severity.INFO),
    ]


@pytest.mark.parametrize("finding", samples(), ids=lambda f: f.category.value)
def test_wire_form_round_trips_through_json(finding: Finding) -> None:
    wire = finding.to_wire()
    assert wire == finding.to_log_dict()  # the log line and the rows are the same dict
    assert finding.to_json() == json.dumps(wire, sort_keys=True)  # the one shared C encoder
    flipped = finding.copy_with(confirmed=not finding.confirmed)
    for name in ("category", "severity", "message", "ledger", "ensemble", "bookie", "detail", "pulsar"):
        assert getattr(flipped, name) is getattr(finding, name)
    assert flipped.confirmed is not finding.confirmed and flipped.copy_with(confirmed=finding.confirmed) == finding
    assert {k: v for k, v in flipped.to_wire().items() if k != "confirmed"} == {
        k: v for k, v in wire.items() if k != "confirmed"
    }
    back = Finding.from_wire(json.loads(json.dumps(wire)))
    assert back.to_wire() == wire
    assert back.dedup_key() == finding.dedup_key()
    assert (back.category, back.severity, back.ledger, back.actionable) == (
        finding.category,
        finding.severity,
        finding.ledger,
        finding.actionable,
    )


@given(
    category=st.sampled_from(list(Category)),
    scope=st.integers(0, 2**63 - 1),
    ledger=st.one_of(st.none(), st.integers(0, 2**63 - 1)),
    segment=st.one_of(st.none(), st.integers(0, 1000)),
    bookie=st.one_of(st.none(), st.text(min_size=1, max_size=20)),
    entry=st.one_of(st.none(), st.integers(-1, 2**63 - 1)),
    confirmed=st.booleans(),
    unknown=st.lists(st.text(max_size=5), max_size=3),
)
def test_wire_form_round_trips_for_any_finding(
    category: Category,
    scope: int,
    ledger: int | None,
    segment: int | None,
    bookie: str | None,
    entry: int | None,
    confirmed: bool,
    unknown: list[str],
) -> None:
    f = Finding.of(
        category,
        "m",
        ledger=None if ledger is None else LedgerId(scope, ledger),
        segment_index=segment,
        bookie=bookie,
        entry_id=entry,
        confirmed=confirmed,
        unknown_bookies=unknown,
    )
    assert f.to_json() == json.dumps(f.to_wire(), sort_keys=True)
    back = Finding.from_wire(json.loads(f.to_json()))
    assert back.to_wire() == f.to_wire() and back.dedup_key() == f.dedup_key()


def test_summary_keeps_the_first_sighting_with_its_check_and_the_actionable_ones() -> None:
    a, b, c, info = samples()
    s = FindingSummary()
    assert s.add(a, "ledger") and s.add(info, "scrutiny") and not s.add(a, "scrutiny") and s.add(b)
    assert list(s.sightings()) == [(a, "ledger"), (info, "scrutiny"), (b, None)]
    assert s.actionable == [a, b] and s.duplicates == 1


def test_only_findings_above_info_are_logged_one_by_one() -> None:
    buf = io.StringIO()
    configure_logging("info", "json", stream=buf)
    try:
        for f in samples():
            log_new_finding(f, check="scrutiny")
    finally:
        configure_logging("info", "json")
    logged = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [line["category"] for line in logged] == ["digest_mismatch", "entry_no_replica", "bookie_unreachable"]
    assert all(line["event"] == "finding" and line["check"] == "scrutiny" for line in logged)


@given(st.integers(0, 2**64 - 1))
def test_varint_round_trip(n: int) -> None:
    data = varint.encode(n)
    assert varint.decode(b"x" + data + b"y", 1) == (n, 1 + len(data))
    assert varint.decode(b"x" + data, 1) == (n, 1 + len(data))  # ending the data


@given(
    st.one_of(st.integers(-(2**63), 2**64 - 1), st.sampled_from([2**k + d for k in range(0, 64, 7) for d in (-1, 0)]))
)
def test_varint_is_protobufs_encoding(n: int) -> None:
    """The same bytes as protobuf's own encoder, a negative int64 as its 64-bit two's complement, at
    every length boundary (the encoder spells out the short lengths)."""
    assert varint.encode(n) == _VarintBytes(n % 2**64)


def test_varint_errors() -> None:
    with pytest.raises(varint.VarintTruncated):
        varint.decode(b"\x80\x80")
    for cut in (b"\x80", b"x\x80", b"\x81\x81"):
        with pytest.raises(varint.VarintTruncated):
            varint.decode(cut, len(cut) - 1 if cut.startswith(b"x") else 0)
    with pytest.raises(varint.VarintError, match="more than 10 bytes"):
        varint.decode(b"\xff" * 11)
    assert varint.fields(bytes([0x08, 12, 0x10, 34, 0x1A, 2, 0xFF, 0xFF])) == {1: 12, 2: 34}
    with pytest.raises(varint.VarintTruncated):
        varint.fields(bytes([0x08, 12, 0x1A, 5, 1]))
    with pytest.raises(varint.VarintError, match="wire type"):
        varint.fields(bytes([0x0B]))
    assert isinstance(varint.VarintError("x"), ValueError)


def test_every_kind_of_detail_value_renders_as_json() -> None:
    """Mappings of any kind (keys camelCased), sequences, sets (sorted), enums, ids, entry sets, bytes."""
    from collections import OrderedDict, namedtuple
    from types import MappingProxyType

    pair = namedtuple("pair", "a b")
    detail = {
        "plain_dict": {"in_er": [1, (2, 3)]},
        "proxy": MappingProxyType({"a_b": 1, 5: "x"}),
        "ordered": OrderedDict(x_y=frozenset({"b", "a"})),
        "a_set": {3, 1, 2},
        "named": pair(1, 2),
        "enum": Severity.INFO,
        "ledger": LedgerId(0, 7),
        "ranges": RangeSet.span(1, 9),
        "raw": b"\x01\xff",
    }
    f = Finding.of(Category.RISKY_QUORUM, "m", ledger=LedgerId(0, 7), detail=detail, method=Method.METADATA)
    assert json.loads(f.to_json())["detail"] == {
        "plainDict": {"inEr": [1, [2, 3]]},
        "proxy": {"aB": 1, "5": "x"},
        "ordered": {"xY": ["a", "b"]},
        "aSet": [1, 2, 3],
        "named": [1, 2],
        "enum": "info",
        "ledger": LedgerId(0, 7).qualified_name,
        "ranges": RangeSet.span(1, 9).to_text(),
        "raw": "01ff",
    }
