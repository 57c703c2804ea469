"""Stored entry bytes: parse the header a writer put in front of every entry and check its digest.

Entry format v1 (every BookKeeper release; spec bookie-protocol.md §5.1), all big-endian::

    0  int64 ledgerId | 8 int64 entryId | 16 int64 lastAddConfirmed | 24 int64 length
    32 digest (D bytes, by digest type) | 32+D payload

The digest covers the 32 header bytes followed by the payload (never the digest itself):
CRC32 (D=8: zlib CRC-32 as an int64), CRC32C (D=4), HMAC-SHA1 (D=20, key SHA1("mac" + password)),
DUMMY (D=0).

Entry format v2 — our documented extension, from the 128-bit ledger id design (seed 001, BP "128 bits
support"). No BookKeeper release writes it. The design's table is not self-consistent (it lists the
flags as bytes 0-7 yet calls them one byte, and puts the digest at 37); we follow its prose — one flags
byte plus an 8-byte scope id, "additional 9 bytes per entry"::

    0  uint8 flags: bit 7 always 1 (so the first byte is negative as a Java byte, which a v1 entry's
       first byte — the top of a 63-bit ledger id — never is), bits 4-6 format version, bits 0-3
       digest type (the metadata enum: 1 CRC32, 2 HMAC, 3 CRC32C, 4 DUMMY; 0 = not stated)
    1  int64 ledgerScopeId | 9 int64 ledgerId | 17 int64 entryId | 25 int64 lastAddConfirmed
    33 int64 length | 41 digest (D bytes) | 41+D payload

and, as in v1, the digest covers the whole header (41 bytes) followed by the payload.

A digest that does not match is a result (material for a "corrupt replica" finding), never an
exception. Only bytes too short to hold a header raise, from `parse_header`; `verify_entry` turns even
that into a result.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import struct
import zlib
from dataclasses import dataclass

import google_crc32c

from auditor.errors import DataError

from .ids import LedgerId
from .model import DigestType

V1_HEADER_LENGTH = 32
V2_HEADER_LENGTH = 41
LAC_BODY_HEADER_LENGTH = 16

DIGEST_LENGTH: dict[DigestType, int] = {
    DigestType.CRC32: 8,
    DigestType.HMAC: 20,
    DigestType.CRC32C: 4,
    DigestType.DUMMY: 0,
}

_V1 = struct.Struct(">qqqq")
_V2 = struct.Struct(">Bqqqqq")
_LAC = struct.Struct(">qq")
_CRC32 = struct.Struct(">Q")
_CRC32C = struct.Struct(">I")


class EntryFormatError(DataError):
    """Bytes too short (or otherwise unable) to hold an entry header."""

    def __init__(self, message: str, *, too_short: bool = True) -> None:
        super().__init__(message)
        self.too_short = too_short


@dataclass(frozen=True, slots=True)
class EntryHeader:
    format_version: int  # 1: every real bookie; 2: the 128-bit design (our extension)
    ledger_id: LedgerId
    entry_id: int
    last_add_confirmed: int
    length: int  # cumulative ledger length including this entry's payload
    header_length: int  # 32 (v1) or 41 (v2); the digest starts here
    flags: int | None = None  # v2 only: the raw flags byte
    stated_digest_code: int | None = None  # v2 only: bits 0-3 of the flags (0 = not stated)


_MAX_DIGEST_CODE = max(d.value for d in DigestType)


def parse_header(body: bytes | bytearray | memoryview) -> EntryHeader:
    """The header at the start of stored entry bytes (v1, or v2 when the first byte is negative)."""
    view = memoryview(body)
    if len(view) >= 1 and view[0] & 0x80:
        if len(view) < V2_HEADER_LENGTH:
            raise EntryFormatError(f"v2 entry is {len(view)} bytes, shorter than its {V2_HEADER_LENGTH}-byte header")
        flags, scope, ledger, entry, lac, length = _V2.unpack_from(view, 0)
        # The flags must state version 2 and a digest type code (0-4): one flipped top bit of a v1
        # entry's first byte must not turn it into a plausible v2 entry.
        if (flags >> 4) & 0x07 != 2 or flags & 0x0F > _MAX_DIGEST_CODE:
            raise EntryFormatError(
                f"v2 entry flags {flags:#04x} state format version {(flags >> 4) & 0x07} and "
                f"digest code {flags & 0x0F} (version 2 and codes 0-4 exist)",
                too_short=False,
            )
        if scope < 0 or ledger < 0:
            raise EntryFormatError(
                f"v2 entry has a negative ledger scope id or ledger id ({scope}, {ledger})", too_short=False
            )
        return EntryHeader(2, LedgerId(scope, ledger), entry, lac, length, V2_HEADER_LENGTH, flags, flags & 0x0F)
    if len(view) < V1_HEADER_LENGTH:
        raise EntryFormatError(f"entry is {len(view)} bytes, shorter than the {V1_HEADER_LENGTH}-byte header")
    ledger, entry, lac, length = _V1.unpack_from(view, 0)
    return EntryHeader(1, LedgerId(0, ledger), entry, lac, length, V1_HEADER_LENGTH)


def mac_key(password: bytes | str) -> bytes:
    """The HMAC key a BookKeeper client derives from the ledger password: SHA1("mac" + password)."""
    return hashlib.sha1(b"mac" + _pw(password)).digest()


def master_key(password: bytes | str) -> bytes:
    """SHA1("ledger" + password): the key a writer or fencer presents. The auditor never sends it."""
    return hashlib.sha1(b"ledger" + _pw(password)).digest()


def _pw(password: bytes | str) -> bytes:
    return password.encode("utf-8") if isinstance(password, str) else bytes(password)


def compute_digest(digest_type: DigestType, signed: bytes, payload: bytes, key: bytes | None = None) -> bytes:
    """The digest over `signed` (the header) followed by `payload`. `key` is `mac_key(...)` for HMAC."""
    if digest_type is DigestType.CRC32:
        return _CRC32.pack(zlib.crc32(payload, zlib.crc32(signed)))
    if digest_type is DigestType.CRC32C:
        return _CRC32C.pack(google_crc32c.extend(google_crc32c.value(signed), payload))
    if digest_type is DigestType.HMAC:
        if key is None:
            raise ValueError("an HMAC digest needs the key (mac_key(password))")
        mac = hmac.new(key, signed, hashlib.sha1)
        mac.update(payload)
        return mac.digest()
    if digest_type is DigestType.DUMMY:
        return b""
    raise ValueError(f"unknown digest type {digest_type!r}")


class Verdict(enum.Enum):
    OK = "ok"
    CORRUPT = "corrupt"  # the bytes fail a check a BookKeeper reader would apply
    UNVERIFIABLE = "unverifiable"  # we lack what is needed to check (no digest type, no HMAC password)


class EntryProblem(enum.Enum):
    TOO_SHORT = "too short for header and digest"
    BAD_HEADER = "header fields no writer produces"
    DIGEST_MISMATCH = "digest mismatch"
    LEDGER_ID_MISMATCH = "ledger id in header differs from the one read"
    ENTRY_ID_MISMATCH = "entry id in header differs from the one read"
    DIGEST_TYPE_MISMATCH = "v2 header states another digest type"


@dataclass(frozen=True, slots=True)
class EntryVerification:
    verdict: Verdict
    problems: tuple[EntryProblem, ...]
    detail: str
    header: EntryHeader | None = None
    payload: bytes | None = None
    stored_digest: bytes | None = None
    computed_digest: bytes | None = None

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.OK

    @property
    def corrupt(self) -> bool:
        return self.verdict is Verdict.CORRUPT


def _as_ledger_id(ledger_id: int | LedgerId) -> LedgerId:
    return ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)


def verify_entry(
    body: bytes | bytearray | memoryview,
    *,
    ledger_id: int | LedgerId,
    entry_id: int | None,
    digest_type: DigestType | None,
    password: bytes | str | None = None,
    key: bytes | None = None,
) -> EntryVerification:
    """Check stored entry bytes read for (ledger_id, entry_id) the way a BookKeeper reader does.

    `entry_id` None or -1 means "the bookie's last entry" (READ_ENTRY of -1 or READ_LAC's
    lastEntryBody): the entry id field is then not compared. For HMAC pass `password` (or a
    precomputed `key = mac_key(password)`).
    """
    data = bytes(body)
    want = _as_ledger_id(ledger_id)
    try:
        header = parse_header(data)
    except EntryFormatError as exc:
        problem = EntryProblem.TOO_SHORT if exc.too_short else EntryProblem.BAD_HEADER
        return EntryVerification(Verdict.CORRUPT, (problem,), str(exc))

    problems: list[EntryProblem] = []
    notes: list[str] = []
    if header.ledger_id != want:
        problems.append(EntryProblem.LEDGER_ID_MISMATCH)
        notes.append(f"header names ledger {header.ledger_id}, read {want}")
    if entry_id is not None and entry_id != -1 and header.entry_id != entry_id:
        problems.append(EntryProblem.ENTRY_ID_MISMATCH)
        notes.append(f"header names entry {header.entry_id}, read {entry_id}")
    if digest_type is not None and header.stated_digest_code and header.stated_digest_code != digest_type.value:
        problems.append(EntryProblem.DIGEST_TYPE_MISMATCH)
        notes.append(f"v2 flags state digest type {header.stated_digest_code}, metadata says {digest_type.name}")

    if digest_type is None:
        return _finish(problems, notes, header, data, None, None, "no digest type known")
    d = DIGEST_LENGTH[digest_type]
    start = header.header_length
    if len(data) < start + d:
        problems.append(EntryProblem.TOO_SHORT)
        notes.append(f"{len(data)} bytes cannot hold a {start}-byte header and a {d}-byte {digest_type.name} digest")
        return _finish(problems, notes, header, data, None, None, None)
    if digest_type is DigestType.HMAC and key is None:
        if password is None:
            return _finish(
                problems, notes, header, data, data[start : start + d], None, "HMAC digest but no ledger password"
            )
        key = mac_key(password)
    stored = data[start : start + d]
    payload = data[start + d :]
    computed = compute_digest(digest_type, data[:start], payload, key)
    if not hmac.compare_digest(stored, computed):
        problems.append(EntryProblem.DIGEST_MISMATCH)
        note = f"{digest_type.name} digest stored {stored.hex()} computed {computed.hex()}"
        if digest_type is DigestType.CRC32C:
            # BookKeeper 4.16.0-4.16.3 clients could write wrong CRC32C values for intact data (spec §5.2).
            note += " (corrupt, or written by a client with the 4.16.0-4.16.3 CRC32C bug)"
        notes.append(note)
    return _finish(problems, notes, header, data, stored, computed, None, payload)


def _finish(
    problems: list[EntryProblem],
    notes: list[str],
    header: EntryHeader,
    data: bytes,
    stored: bytes | None,
    computed: bytes | None,
    unverifiable: str | None,
    payload: bytes | None = None,
) -> EntryVerification:
    if problems:
        return EntryVerification(Verdict.CORRUPT, tuple(problems), "; ".join(notes), header, payload, stored, computed)
    if unverifiable:
        return EntryVerification(Verdict.UNVERIFIABLE, (), unverifiable, header, None, stored, None)
    return EntryVerification(Verdict.OK, (), "ok", header, payload, stored, computed)


def build_entry(
    ledger_id: int | LedgerId,
    entry_id: int,
    last_add_confirmed: int,
    length: int,
    payload: bytes,
    digest_type: DigestType,
    password: bytes | str = b"",
    format_version: int = 1,
    key: bytes | None = None,
) -> bytes:
    """The stored bytes a writer would produce (the simulated bookie, tests, and the repair role's
    re-packaging of a verified copy). For HMAC pass `password`, or a precomputed `key = mac_key(...)`."""
    lid = _as_ledger_id(ledger_id)
    if format_version == 1:
        if lid.scope:
            raise ValueError("entry format v1 cannot carry a ledger scope id")
        header = _V1.pack(lid.ledger, entry_id, last_add_confirmed, length)
    elif format_version == 2:
        header = _V2.pack(
            0x80 | (2 << 4) | digest_type.value, lid.scope, lid.ledger, entry_id, last_add_confirmed, length
        )
    else:
        raise ValueError(f"unknown entry format version {format_version}")
    if key is None and digest_type is DigestType.HMAC:
        key = mac_key(password)
    return header + compute_digest(digest_type, header, payload, key) + payload


@dataclass(frozen=True, slots=True)
class LacVerification:
    verdict: Verdict
    lac: int | None
    detail: str


def verify_lac_body(
    body: bytes | bytearray | memoryview,
    *,
    ledger_id: int,
    digest_type: DigestType | None,
    password: bytes | str | None = None,
) -> LacVerification:
    """Check an explicit-LAC body (`ReadLacResponse.lacBody`): ledgerId | lac | digest over the first 16 bytes."""
    data = bytes(body)
    if len(data) < LAC_BODY_HEADER_LENGTH:
        return LacVerification(Verdict.CORRUPT, None, f"LAC body is {len(data)} bytes, shorter than 16")
    lid, lac = _LAC.unpack_from(data, 0)
    if lid != ledger_id:
        return LacVerification(Verdict.CORRUPT, lac, f"LAC body names ledger {lid}, read {ledger_id}")
    if digest_type is None:
        return LacVerification(Verdict.UNVERIFIABLE, lac, "no digest type known")
    d = DIGEST_LENGTH[digest_type]
    if len(data) < LAC_BODY_HEADER_LENGTH + d:
        return LacVerification(Verdict.CORRUPT, lac, f"LAC body is {len(data)} bytes, too short for its digest")
    if digest_type is DigestType.HMAC and password is None:
        return LacVerification(Verdict.UNVERIFIABLE, lac, "HMAC digest but no ledger password")
    key = mac_key(password) if digest_type is DigestType.HMAC and password is not None else None
    computed = compute_digest(digest_type, data[:16], b"", key)
    stored = data[16 : 16 + d]
    if not hmac.compare_digest(stored, computed):
        return LacVerification(
            Verdict.CORRUPT, lac, f"{digest_type.name} LAC digest stored {stored.hex()} computed {computed.hex()}"
        )
    return LacVerification(Verdict.OK, lac, "ok")
