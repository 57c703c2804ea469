"""The references check's stored memory (`<root>/bk-auditor/references/seen`): round trip, strict parse."""

from __future__ import annotations

import pytest

from auditor.durability.ranges import RangeSet
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.own.referencestate import MAX_TEXT, SeenLedgers

PATH = "/ledgers/bk-auditor/references/seen"


def test_round_trip_and_last_seen() -> None:
    seen = SeenLedgers(1700000000000, RangeSet.from_ids([3, 4, 5, 9, 2**63 - 1]))
    again = SeenLedgers.parse(seen.to_json(), PATH)
    assert again == seen
    assert again.last_seen(4) == 1700000000000 and again.last_seen(6) is None
    assert SeenLedgers.parse(SeenLedgers(5, RangeSet()).to_json(), PATH).ledgers == RangeSet()


def test_too_many_ranges_keep_only_the_pass_time() -> None:
    seen = SeenLedgers(7, RangeSet.from_ids(range(0, 2 * MAX_TEXT, 2)))
    again = SeenLedgers.parse(seen.to_json(), PATH)
    assert again.pass_ms == 7 and again.ledgers is None and again.last_seen(0) is None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff",
        b"[]",
        b'{"passMs": 1}',
        b'{"passMs": -1, "ledgers": ""}',
        b'{"passMs": true, "ledgers": ""}',
        b'{"passMs": 1, "ledgers": "5-3"}',
        b'{"passMs": 1, "ledgers": "1_0"}',
        b'{"passMs": 1, "ledgers": " 1"}',
        b'{"passMs": 1, "ledgers": "9223372036854775808"}',
        b'{"passMs": 1, "ledgers": 5}',
        b'{"passMs": 1, "ledgers": "", "x": 1}',
        b"[" * 100000,
    ],
)
def test_anything_else_is_corrupt_naming_the_znode(data: bytes) -> None:
    with pytest.raises(CorruptZnodeError) as e:
        SeenLedgers.parse(data, PATH)
    assert e.value.path == PATH
