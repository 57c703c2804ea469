"""Re-packaging a verified copy for a recovery add (spec repair-and-recovery.md §1.3, §6.4 vectors)."""

from __future__ import annotations

import hashlib

import pytest

from auditor.durability.entry import build_entry, mac_key, parse_header, verify_entry
from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment
from auditor.durability.repackage import ledger_credentials, recovery_lac, repackage_for_recovery

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
