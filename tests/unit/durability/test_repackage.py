"""Re-packaging a verified copy for a recovery add (spec repair-and-recovery.md §1.3, §6.4 vectors)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from auditor.durability.entry import build_entry, mac_key, parse_header, verify_entry
from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment
from auditor.durability.repackage import (
    credentials_from_entry,
    digest_size_of,
    ledger_credentials,
    recovery_lac,
    repackage_for_recovery,
)

# Spec repair-and-recovery.md §6.4: ledger 1, entry 0, payload "hello", CRC32C, password testPasswd.
ORIGINAL = bytes.fromhex("00000000000000010000000000000000ffffffffffffffff0000000000000005e3a5f74d68656c6c6f")
REPACKAGED_LAC0 = bytes.fromhex("0000000000000001000000000000000000000000000000000000000000000005f712343568656c6c6f")


def metadata(password: bytes | None = b"testPasswd", digest: DigestType | None = DigestType.CRC32C, **kw: object):
    base = dict(
        ledger_id=LedgerId(0, 1),
        ensemble_size=3,
        write_quorum=2,
        ack_quorum=2,
        state=LedgerState.CLOSED,
        last_entry_id=0,
        length=5,
        segments=(Segment(0, ("a:1", "b:1", "c:1")),),
        digest_type=digest,
        password=password,
    )
    base.update(kw)
    return LedgerMetadata(**base)  # type: ignore[arg-type]


def test_repackaged_like_javas_replicator_spec_vector() -> None:
    creds = ledger_credentials(metadata())
    out = repackage_for_recovery(ORIGINAL, ledger_id=1, entry_id=0, credentials=creds, lac=0)
    assert out.body == REPACKAGED_LAC0
    assert creds.master_key.hex() == "2e2a69d870796fe05c0e77c52a29ce5e4222b758"


def test_lac_none_keeps_the_stored_lac_and_bytes() -> None:
    creds = ledger_credentials(metadata())
    out = repackage_for_recovery(ORIGINAL, ledger_id=1, entry_id=0, credentials=creds, lac=None)
    assert out.body == ORIGINAL


@pytest.mark.parametrize("digest", list(DigestType))
def test_every_digest_type_round_trips(digest: DigestType) -> None:
    pw = b"s3cret"
    creds = ledger_credentials(metadata(password=pw, digest=digest))
    stored = build_entry(7, 4, 2, 300, b"payload" * 9, digest, pw)
    out = repackage_for_recovery(stored, ledger_id=7, entry_id=4, credentials=creds, lac=9)
    assert out.body is not None
    header = parse_header(out.body)
    assert (header.ledger_id.ledger, header.entry_id, header.last_add_confirmed, header.length) == (7, 4, 9, 300)
    assert out.body.endswith(b"payload" * 9)
    assert verify_entry(out.body, ledger_id=7, entry_id=4, digest_type=digest, password=pw).ok


@pytest.mark.parametrize("flip", [0, 9, 20, 40, -1])
def test_a_corrupt_copy_is_never_repackaged(flip: int) -> None:
    creds = ledger_credentials(metadata())
    bad = bytearray(ORIGINAL)
    bad[flip] ^= 0x01
    out = repackage_for_recovery(bytes(bad), ledger_id=1, entry_id=0, credentials=creds, lac=0)
    assert out.body is None and out.corrupt and out.reason


def test_an_entry_of_another_ledger_or_entry_is_refused() -> None:
    creds = ledger_credentials(metadata())
    assert repackage_for_recovery(ORIGINAL, ledger_id=2, entry_id=0, credentials=creds, lac=0).body is None
    assert repackage_for_recovery(ORIGINAL, ledger_id=1, entry_id=1, credentials=creds, lac=0).body is None


def test_hmac_with_the_wrong_password_is_corrupt() -> None:
    stored = build_entry(7, 0, -1, 3, b"abc", DigestType.HMAC, b"right")
    wrong = ledger_credentials(metadata(password=b"wrong", digest=DigestType.HMAC))
    assert repackage_for_recovery(stored, ledger_id=7, entry_id=0, credentials=wrong, lac=0).corrupt
    right = ledger_credentials(metadata(password=b"right", digest=DigestType.HMAC))
    assert right.mac_key == mac_key(b"right")
    assert repackage_for_recovery(stored, ledger_id=7, entry_id=0, credentials=right, lac=0).body is not None


def test_credentials_follow_javas_admin_open() -> None:
    # Stored password: metadata password and digest type, whatever is configured.
    got = ledger_credentials(metadata(password=b"", digest=DigestType.DUMMY), "conf", DigestType.HMAC)
    assert (got.digest_type, got.password, got.from_metadata) == (DigestType.DUMMY, b"", True)
    assert got.master_key == hashlib.sha1(b"ledger").digest()
    # No password in metadata (old writers): the configured recovery password and digest type.
    got = ledger_credentials(metadata(password=None, digest=None), "conf", DigestType.HMAC)
    assert (got.digest_type, got.password, got.from_metadata) == (DigestType.HMAC, b"conf", False)
    assert ledger_credentials(metadata(password=None, digest=None)).digest_type is DigestType.CRC32
    assert "conf" not in repr(got) and "s3cret" not in repr(ledger_credentials(metadata(password=b"s3cret")))


def test_recovery_lac_is_the_closed_ledgers_last_entry() -> None:
    assert recovery_lac(metadata(last_entry_id=41)) == 41
    assert recovery_lac(metadata(state=LedgerState.OPEN, last_entry_id=-1)) is None


# No password in the metadata: the recovery settings are a guess, a stored copy may prove the truth.
RECOVERY_DEFAULT = ledger_credentials(metadata(password=None, digest=None))  # "" and CRC32, unproven


@pytest.mark.parametrize("digest", [DigestType.CRC32C, DigestType.CRC32])
def test_a_crc_copy_proves_its_digest_type_without_a_password(digest: DigestType) -> None:
    later = build_entry(7, 5, 4, 600, b"p" * 100, digest, b"writer-pw")  # size alone cannot tell (entry 5)
    proven = credentials_from_entry(RECOVERY_DEFAULT, later, ledger_id=7, entry_id=5)
    assert proven is not None and proven.digest_type is digest and proven.trusted and not proven.from_metadata
    out = repackage_for_recovery(later, ledger_id=7, entry_id=5, credentials=proven, lac=9)
    assert out.body is not None and verify_entry(out.body, ledger_id=7, entry_id=5, digest_type=digest).ok


def test_under_unproven_credentials_a_mismatch_is_unverified_not_corrupt() -> None:
    stored = build_entry(7, 0, -1, 3, b"abc", DigestType.CRC32C)  # Pulsar's digest, recovery says CRC32
    out = repackage_for_recovery(stored, ledger_id=7, entry_id=0, credentials=RECOVERY_DEFAULT, lac=0)
    assert out.body is None and out.unverified and not out.corrupt
    assert out.reason is not None and out.reason.startswith("credentials_mismatch")
    # Proven (or metadata) credentials: the same failure is corruption.
    trusted = ledger_credentials(metadata(password=b"", digest=DigestType.CRC32))
    out = repackage_for_recovery(stored, ledger_id=7, entry_id=0, credentials=trusted, lac=0)
    assert out.corrupt and not out.unverified
    # A header naming another entry is corrupt whatever the credentials.
    assert repackage_for_recovery(stored, ledger_id=7, entry_id=1, credentials=RECOVERY_DEFAULT, lac=0).corrupt


def test_mac_under_another_password_proves_nothing_and_the_size_rules_out_crc() -> None:
    stored = build_entry(7, 0, -1, 30, b"x" * 30, DigestType.HMAC, b"writer-pw")
    assert digest_size_of(stored, 0) == 20 and digest_size_of(stored, None) is None
    assert credentials_from_entry(RECOVERY_DEFAULT, stored, ledger_id=7, entry_id=0, previous_length=0) is None
    right = ledger_credentials(metadata(password=None, digest=None), "writer-pw", DigestType.HMAC)
    proven = credentials_from_entry(right, stored, ledger_id=7, entry_id=0, previous_length=0)
    assert proven is not None and proven.digest_type is DigestType.HMAC and proven.verified_on_entry


def test_dummy_is_proven_only_by_the_entry_size() -> None:
    dummy = build_entry(7, 0, -1, 16, b"y" * 16, DigestType.DUMMY)
    crc = build_entry(7, 0, -1, 16, b"y" * 16, DigestType.CRC32C)
    recovery_dummy = ledger_credentials(metadata(password=None, digest=None), b"", DigestType.DUMMY)
    got = credentials_from_entry(recovery_dummy, dummy, ledger_id=7, entry_id=0, previous_length=0)
    assert got is not None and got.digest_type is DigestType.DUMMY
    # Unknown size: DUMMY (which checks nothing) is never assumed; a CRC32C copy is not taken for DUMMY.
    assert credentials_from_entry(recovery_dummy, dummy, ledger_id=7, entry_id=0) is None
    got = credentials_from_entry(recovery_dummy, crc, ledger_id=7, entry_id=0, previous_length=0)
    assert got is not None and got.digest_type is DigestType.CRC32C


def test_credentials_from_metadata_are_kept_as_they_are() -> None:
    creds = ledger_credentials(metadata())
    assert credentials_from_entry(creds, b"junk", ledger_id=1, entry_id=0) is creds
    assert repr(creds).count("testPasswd") == 0 and "testPasswd" not in repr(replace(creds, verified_on_entry=True))
