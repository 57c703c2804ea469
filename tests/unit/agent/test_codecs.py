"""DbLedgerStorage's key, location and framing codecs (auditor/agent/codecs.py), as 4.17.3 writes them."""

from __future__ import annotations

import pytest

from auditor.agent.codecs import (
    entry_log_name,
    ledger_key,
    location_key,
    parse_frame_size,
    parse_location,
    parse_location_key,
)


def test_location_keys_are_big_endian_ledger_then_entry() -> None:
    assert location_key(1, 2) == bytes.fromhex("00000000000000010000000000000002")
    assert parse_location_key(location_key(0x1234_5678_9ABC, 49_999)) == (0x1234_5678_9ABC, 49_999)
    # RocksDB's bytewise order is (ledger, entry) order for non-negative ids: one seek, one scan per ledger
    keys = [location_key(7, 255), location_key(7, 256), location_key(8, 0), location_key(7, 0)]
    assert sorted(keys) == [location_key(7, 0), location_key(7, 255), location_key(7, 256), location_key(8, 0)]
    assert ledger_key(7) == location_key(7, 0)[:8]


def test_a_location_is_log_id_high_and_offset_low() -> None:
    value = ((0x2A << 32) | 0x0010_0400).to_bytes(8, "big")
    assert parse_location(value) == (0x2A, 0x0010_0400)
    assert parse_location((0xFFFF_FFFF_FFFF_FFFF).to_bytes(8, "big")) == (0xFFFF_FFFF, 0xFFFF_FFFF)


@pytest.mark.parametrize("bad", [b"", b"\x00" * 7, b"\x00" * 9])
def test_wrong_lengths_are_refused(bad: bytes) -> None:
    with pytest.raises(ValueError):
        parse_location(bad)
    with pytest.raises(ValueError):
        parse_location_key(bad + b"\x00" * 8)


def test_entry_log_names_are_java_hex() -> None:
    assert entry_log_name(0) == "0.log"
    assert entry_log_name(0x1F) == "1f.log"  # Long.toHexString: lower case, no padding
    assert parse_frame_size((70).to_bytes(4, "big")) == 70
