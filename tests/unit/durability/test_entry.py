"""Stored entry parsing and digest verification: spec vectors (bookie-protocol.md §8.4) and negatives."""

from __future__ import annotations

import struct
import zlib

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.durability.entry import (
    DIGEST_LENGTH,
    EntryFormatError,
    EntryProblem,
    Verdict,
    build_entry,
    mac_key,
    master_key,
    parse_header,
    verify_entry,
    verify_lac_body,
)
from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType

HEADER = bytes.fromhex("00000000000000010000000000000000ffffffffffffffff0000000000000005")
PAYLOAD = b"hello"
PASSWORD = b"testPasswd"
SPEC_DIGESTS = {
    DigestType.CRC32: "0000000030a56872",
    DigestType.CRC32C: "e3a5f74d",
    DigestType.HMAC: "1fc10b7ef25ddc35686904654653862deb5d2933",
    DigestType.DUMMY: "",
}


def spec_entry(dt: DigestType) -> bytes:
    return HEADER + bytes.fromhex(SPEC_DIGESTS[dt]) + PAYLOAD


def test_sanity_checks() -> None:
    assert zlib.crc32(b"123456789") == 0xCBF43926
    assert google_crc32c.value(b"123456789") == 0xE3069283
    assert mac_key(PASSWORD).hex() == "1bc765c5e5e8cb34bb1bc45884394f3a2b8f8311"
    assert master_key(PASSWORD).hex() == "2e2a69d870796fe05c0e77c52a29ce5e4222b758"
    assert master_key(b"").hex() == "850bf1071c5e3d8c24235676f8816ae0cbe2f14f"
    assert mac_key("testPasswd") == mac_key(PASSWORD)


@pytest.mark.parametrize("dt", list(DigestType))
def test_spec_vectors_verify(dt: DigestType) -> None:
    body = spec_entry(dt)
    assert build_entry(1, 0, -1, 5, PAYLOAD, dt, PASSWORD) == body
    v = verify_entry(body, ledger_id=1, entry_id=0, digest_type=dt, password=PASSWORD)
    assert v.verdict is Verdict.OK, v.detail
    assert v.payload == PAYLOAD
    assert v.header is not None
    assert (v.header.ledger_id, v.header.entry_id, v.header.last_add_confirmed, v.header.length) == (
        LedgerId(0, 1),
        0,
        -1,
        5,
    )
    assert v.stored_digest == bytes.fromhex(SPEC_DIGESTS[dt])
    assert len(v.stored_digest) == DIGEST_LENGTH[dt]


def test_crc32_high_bytes_must_be_zero() -> None:
    body = bytearray(spec_entry(DigestType.CRC32))
    body[32] = 1
    v = verify_entry(bytes(body), ledger_id=1, entry_id=0, digest_type=DigestType.CRC32)
    assert v.problems == (EntryProblem.DIGEST_MISMATCH,)


@pytest.mark.parametrize("dt", [DigestType.CRC32, DigestType.CRC32C, DigestType.HMAC])
@pytest.mark.parametrize("index", range(5))
def test_flipped_payload_byte_is_a_mismatch(dt: DigestType, index: int) -> None:
    body = bytearray(spec_entry(dt))
    body[len(body) - 5 + index] ^= 0x01
    v = verify_entry(bytes(body), ledger_id=1, entry_id=0, digest_type=dt, password=PASSWORD)
    assert v.verdict is Verdict.CORRUPT
    assert v.problems == (EntryProblem.DIGEST_MISMATCH,)
    if dt is DigestType.CRC32C:
        assert "4.16" in v.detail


@pytest.mark.parametrize("dt", [DigestType.CRC32, DigestType.CRC32C, DigestType.HMAC])
def test_flipped_header_byte_is_a_mismatch(dt: DigestType) -> None:
    body = bytearray(spec_entry(dt))
    body[20] ^= 0x10  # inside lastAddConfirmed: covered by the digest, not an id check
    v = verify_entry(bytes(body), ledger_id=1, entry_id=0, digest_type=dt, password=PASSWORD)
    assert v.problems == (EntryProblem.DIGEST_MISMATCH,)


@pytest.mark.parametrize("dt", list(DigestType))
def test_too_short(dt: DigestType) -> None:
    body = spec_entry(dt)[: 32 + DIGEST_LENGTH[dt] - 1]
    v = verify_entry(body, ledger_id=1, entry_id=0, digest_type=dt, password=PASSWORD)
    assert v.verdict is Verdict.CORRUPT
    assert EntryProblem.TOO_SHORT in v.problems
    v = verify_entry(b"\x00" * 10, ledger_id=1, entry_id=0, digest_type=dt, password=PASSWORD)
    assert v.problems == (EntryProblem.TOO_SHORT,)
    with pytest.raises(EntryFormatError):
        parse_header(b"\x00" * 31)


@pytest.mark.parametrize("dt", list(DigestType))
def test_ids_must_match(dt: DigestType) -> None:
    body = spec_entry(dt)
    v = verify_entry(body, ledger_id=2, entry_id=0, digest_type=dt, password=PASSWORD)
    assert v.problems == (EntryProblem.LEDGER_ID_MISMATCH,)
    v = verify_entry(body, ledger_id=1, entry_id=7, digest_type=dt, password=PASSWORD)
    assert v.problems == (EntryProblem.ENTRY_ID_MISMATCH,)
    # Reads of "the last entry" (-1 / None) do not compare the entry id.
    assert verify_entry(body, ledger_id=1, entry_id=-1, digest_type=dt, password=PASSWORD).ok
    assert verify_entry(body, ledger_id=1, entry_id=None, digest_type=dt, password=PASSWORD).ok
    # A ledger with a scope id cannot match a v1 entry.
    v = verify_entry(body, ledger_id=LedgerId(3, 1), entry_id=0, digest_type=dt, password=PASSWORD)
    assert v.problems == (EntryProblem.LEDGER_ID_MISMATCH,)


def test_wrong_password_is_a_mismatch_and_missing_password_is_unverifiable() -> None:
    body = spec_entry(DigestType.HMAC)
    v = verify_entry(body, ledger_id=1, entry_id=0, digest_type=DigestType.HMAC, password=b"other")
    assert v.problems == (EntryProblem.DIGEST_MISMATCH,)
    v = verify_entry(body, ledger_id=1, entry_id=0, digest_type=DigestType.HMAC, password=None)
    assert v.verdict is Verdict.UNVERIFIABLE
    v = verify_entry(body, ledger_id=1, entry_id=0, digest_type=DigestType.HMAC, key=mac_key(PASSWORD))
    assert v.ok
    v = verify_entry(body, ledger_id=1, entry_id=0, digest_type=None)
    assert v.verdict is Verdict.UNVERIFIABLE
    # ...but an id mismatch is corrupt even when the digest cannot be checked.
    v = verify_entry(body, ledger_id=9, entry_id=0, digest_type=None)
    assert v.verdict is Verdict.CORRUPT


def test_wrong_digest_type_is_a_mismatch() -> None:
    v = verify_entry(spec_entry(DigestType.CRC32C), ledger_id=1, entry_id=0, digest_type=DigestType.CRC32)
    assert v.verdict is Verdict.CORRUPT


def test_spec_lac_bodies() -> None:
    vectors = {
        DigestType.CRC32: "00000000000000010000000000000005000000008baaab99",
        DigestType.CRC32C: "0000000000000001000000000000000583bf58be",
        DigestType.HMAC: "00000000000000010000000000000005603ed94765812f87b17a42ce2ce2b208afe3e7c4",
    }
    for dt, hexbody in vectors.items():
        body = bytes.fromhex(hexbody)
        v = verify_lac_body(body, ledger_id=1, digest_type=dt, password=PASSWORD)
        assert v.verdict is Verdict.OK and v.lac == 5, (dt, v)
        bad = bytearray(body)
        bad[15] ^= 1
        assert verify_lac_body(bytes(bad), ledger_id=1, digest_type=dt, password=PASSWORD).verdict is Verdict.CORRUPT
        assert verify_lac_body(body, ledger_id=2, digest_type=dt, password=PASSWORD).verdict is Verdict.CORRUPT
        assert verify_lac_body(body[:17], ledger_id=1, digest_type=dt, password=PASSWORD).verdict is Verdict.CORRUPT


# ----- entry format v2 (the 128-bit design, our extension) ---------------------------------------------
@pytest.mark.parametrize("dt", list(DigestType))
def test_v2_entry_round_trip(dt: DigestType) -> None:
    lid = LedgerId(7, 42)
    body = build_entry(lid, 3, 2, 100, b"payload", dt, PASSWORD, format_version=2)
    assert body[0] & 0x80
    h = parse_header(body)
    assert (h.format_version, h.ledger_id, h.entry_id, h.last_add_confirmed, h.length) == (2, lid, 3, 2, 100)
    assert h.header_length == 41 and h.stated_digest_code == dt.value
    assert struct.unpack_from(">qq", body, 1) == (7, 42)
    v = verify_entry(body, ledger_id=lid, entry_id=3, digest_type=dt, password=PASSWORD)
    assert v.ok and v.payload == b"payload"
    assert verify_entry(body, ledger_id=42, entry_id=3, digest_type=dt, password=PASSWORD).problems == (
        EntryProblem.LEDGER_ID_MISMATCH,
    )
    if dt is not DigestType.DUMMY:
        bad = bytearray(body)
        bad[-1] ^= 0xFF
        assert verify_entry(bytes(bad), ledger_id=lid, entry_id=3, digest_type=dt, password=PASSWORD).problems == (
            EntryProblem.DIGEST_MISMATCH,
        )


def test_v2_stated_digest_type_must_agree() -> None:
    body = build_entry(LedgerId(1, 1), 0, -1, 1, b"x", DigestType.CRC32C, format_version=2)
    v = verify_entry(body, ledger_id=LedgerId(1, 1), entry_id=0, digest_type=DigestType.CRC32)
    assert EntryProblem.DIGEST_TYPE_MISMATCH in v.problems
    with pytest.raises(EntryFormatError):
        parse_header(body[:40])


def test_a_flipped_top_bit_does_not_make_a_v1_entry_a_valid_v2_one() -> None:
    """Found by `make fuzz`: entry 0 of ledger 0 (DUMMY, LAC 0, length 0, 9 payload bytes) with its
    first bit flipped read as a v2 entry with the same ids, so the flip passed as OK."""
    body = build_entry(0, 0, 0, 0, bytes(9), DigestType.DUMMY)
    assert len(body) == 41
    flipped = bytes([body[0] ^ 0x80]) + body[1:]
    v = verify_entry(flipped, ledger_id=0, entry_id=0, digest_type=DigestType.DUMMY)
    assert v.verdict is Verdict.CORRUPT and v.problems == (EntryProblem.BAD_HEADER,), v
    with pytest.raises(EntryFormatError, match="version 0"):
        parse_header(flipped)
    with pytest.raises(EntryFormatError, match="digest code 15"):
        parse_header(bytes([0x80 | 0x20 | 0x0F]) + bytes(40))
    for dt in DigestType:  # the real v2 layout still parses
        assert parse_header(build_entry(LedgerId(3, 4), 0, -1, 1, b"x", dt, format_version=2)).format_version == 2


def test_v1_never_has_the_top_bit() -> None:
    # The top byte of a 63-bit ledger id is at most 0x7f, so v1 entries are never taken for v2.
    body = build_entry(2**63 - 1, 0, -1, 1, b"x", DigestType.CRC32)
    assert parse_header(body).format_version == 1
    with pytest.raises(ValueError):
        build_entry(LedgerId(1, 1), 0, -1, 1, b"x", DigestType.CRC32, format_version=1)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(list(DigestType)),
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**63 - 1),
    st.binary(max_size=300),
    st.binary(max_size=20),
    st.integers(0, 1000),
)
def test_any_single_bit_flip_is_detected(
    dt: DigestType, ledger: int, entry: int, payload: bytes, password: bytes, where: int
) -> None:
    body = build_entry(ledger, entry, entry - 1, len(payload), payload, dt, password)
    assert verify_entry(body, ledger_id=ledger, entry_id=entry, digest_type=dt, password=password).ok
    i = where % len(body)
    bad = bytearray(body)
    bad[i] ^= 1 << (where % 8)
    v = verify_entry(bytes(bad), ledger_id=ledger, entry_id=entry, digest_type=dt, password=password)
    if dt is DigestType.DUMMY and i >= 16:
        return  # DUMMY only checks the ids
    assert v.verdict is Verdict.CORRUPT
