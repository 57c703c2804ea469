"""What the repair role sends for one entry: a verified copy, re-packaged as Java's replicator does.

Java's fragment replicator (LedgerFragmentReplicator in BookKeeper 4.17.3; spec repair-and-recovery.md
§1.3 and §2.3) does not re-send the bytes it read. It reads the entry through the normal client (which
verifies the digest), then packages it afresh: the same ledger id, entry id, length field and payload,
the LAC of its own ledger handle (for a closed ledger, the metadata's last entry id) and a digest
recomputed with the ledger's digest type and key. We do the same, so our copies are the copies a Java
worker would have made, and so the LAC field of a re-added entry never says less than the ledger
known to be committed when that is known.

A copy that fails verification is never re-packaged: re-computing its digest would launder corrupt
bytes into a copy every reader accepts. Verification is `entry.verify_entry`, the same code every audit
read uses.

Which password and digest type: Java's administrative open (LedgerOpenOp without a password, used by
its ReplicationWorker) takes both from the metadata when the metadata stores a password (field 8), and
otherwise the configured recovery password (`bookieRecoveryPasswd`, default "") and digest type
(`bookieRecoveryDigestType`, default CRC32). `ledger_credentials` does the same.

Recovery settings are a guess, not the ledger's truth (Pulsar writes CRC32C, the default is CRC32), so a
copy that fails verification under them is not proof of corruption. `credentials_from_entry` asks a copy
itself: a CRC32C or CRC32 digest that matches needs no password and proves the ledger's digest type (a
random match is a 1 in 2^32 chance), and the size of entry 0 (header, digest, then `length` payload
bytes) tells the digest's size, so which types can fit. Credentials so proven (`verified_on_entry`) judge
copies like the metadata's; unproven ones make a mismatch `unverified` (`credentials_mismatch`), never
corrupt and never loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .entry import (
    DIGEST_LENGTH,
    EntryFormatError,
    EntryProblem,
    EntryVerification,
    Verdict,
    build_entry,
    mac_key,
    master_key,
    parse_header,
    verify_entry,
)
from .model import DigestType, LedgerMetadata

RECOVERY_DIGEST_DEFAULT = DigestType.CRC32  # Java's bookieRecoveryDigestType default


@dataclass(frozen=True, slots=True)
class LedgerCredentials:
    """The keys the repair role needs for one ledger. `repr` hides the password and keys."""

    digest_type: DigestType
    password: bytes = field(repr=False)
    from_metadata: bool  # False: the configured recovery password and digest type were used
    # Not from metadata, but a stored copy verified under this digest type (and password): proven.
    verified_on_entry: bool = False

    @property
    def trusted(self) -> bool:
        """A copy failing verification under these credentials is corrupt (False: it is unverified)."""
        return self.from_metadata or self.verified_on_entry

    @property
    def master_key(self) -> bytes:
        """SHA-1("ledger" + password): what every add must present (spec §1.1)."""
        return master_key(self.password)

    @property
    def mac_key(self) -> bytes | None:
        """SHA-1("mac" + password) for HMAC ledgers; None for the other digest types."""
        return mac_key(self.password) if self.digest_type is DigestType.HMAC else None

    def __repr__(self) -> str:
        origin = "metadata" if self.from_metadata else "recovery settings"
        proof = ", digest type proven by a stored copy" if self.verified_on_entry else ""
        return f"LedgerCredentials({self.digest_type.name}, password from {origin}{proof})"


def ledger_credentials(
    metadata: LedgerMetadata,
    recovery_password: bytes | str = b"",
    recovery_digest_type: DigestType = RECOVERY_DIGEST_DEFAULT,
) -> LedgerCredentials:
    """Password and digest type as Java's administrative open chooses them (spec §1.1)."""
    if metadata.password is not None:
        # The metadata parser sets digest type and password together (Java applies digestType only
        # when a password is stored); an absent digest type with a password is proto2's CRC32.
        return LedgerCredentials(metadata.digest_type or DigestType.CRC32, bytes(metadata.password), True)
    password = recovery_password.encode("utf-8") if isinstance(recovery_password, str) else bytes(recovery_password)
    return LedgerCredentials(recovery_digest_type, password, False)


# Proven by a matching digest without any password, strongest first.
_PASSWORD_FREE = (DigestType.CRC32C, DigestType.CRC32)
# The verification problems that depend on the digest type and password used (the rest, such as another
# ledger's or entry's id in the header, are corruption whatever the credentials).
_CREDENTIAL_PROBLEMS = frozenset(
    {EntryProblem.DIGEST_MISMATCH, EntryProblem.TOO_SHORT, EntryProblem.DIGEST_TYPE_MISMATCH}
)


def digest_size_of(stored: bytes, previous_length: int | None) -> int | None:
    """The digest size the entry's own bytes imply, or None when they cannot tell. The payload is
    `length - previous_length` bytes (`length` is cumulative: entry 0's `previous_length` is 0), the
    digest what lies between the header and the payload (CRC32 8, CRC32C 4, MAC 20, DUMMY 0)."""
    if previous_length is None:
        return None
    try:
        header = parse_header(stored)
    except EntryFormatError:
        return None
    size = len(stored) - header.header_length - (header.length - previous_length)
    return size if size in DIGEST_LENGTH.values() else None


def credentials_from_entry(
    credentials: LedgerCredentials,
    stored: bytes,
    *,
    ledger_id: int,
    entry_id: int,
    previous_length: int | None = None,
) -> LedgerCredentials | None:
    """Credentials a stored copy proves, for a ledger whose metadata stores no password: the recovery
    settings if the copy verifies under them, else the password-free digest type (CRC32C, CRC32) whose
    digest matches; DUMMY only when the entry's size proves a digest of 0 bytes (DUMMY checks nothing
    else). None: this copy proves nothing (corrupt, or MAC under another password). `previous_length`:
    the cumulative length before this entry (0 for entry 0), when known. Trusted credentials are kept."""
    if credentials.trusted:
        return credentials
    size = digest_size_of(stored, previous_length)
    candidates: list[DigestType] = []
    if credentials.digest_type is not DigestType.DUMMY:
        candidates.append(credentials.digest_type)
    candidates += [t for t in _PASSWORD_FREE if t not in candidates]
    if size == 0:
        candidates.append(DigestType.DUMMY)
    for digest in candidates:
        if size is not None and DIGEST_LENGTH[digest] != size:
            continue
        key = mac_key(credentials.password) if digest is DigestType.HMAC else None
        if verify_entry(stored, ledger_id=ledger_id, entry_id=entry_id, digest_type=digest, key=key).ok:
            return LedgerCredentials(digest, credentials.password, False, verified_on_entry=True)
    return None


def depends_on_credentials(check: EntryVerification, credentials: LedgerCredentials) -> bool:
    """True when `check` failed only in what the credentials decide (digest, size for the digest) and the
    credentials are unproven: the copy is unverified, not corrupt."""
    if credentials.trusted or check.verdict is Verdict.OK or check.header is None:
        return False
    return check.verdict is Verdict.UNVERIFIABLE or set(check.problems) <= _CREDENTIAL_PROBLEMS


def recovery_lac(metadata: LedgerMetadata) -> int | None:
    """The LAC Java's replicator writes into re-added entries: its handle's LAC, which for a closed
    ledger is the metadata's last entry id. None for a ledger that is not closed: the caller then keeps
    each entry's own stored LAC, the only value known committed without asking the bookies."""
    return metadata.last_entry_id if metadata.is_closed else None


@dataclass(frozen=True, slots=True)
class RecoveryEntry:
    """The outcome for one copy read from one replica: `body` to send, or None and why not."""

    body: bytes | None
    verification: EntryVerification
    reason: str | None = None  # why there is no body (the copy is corrupt, unverified, or not re-addable)
    # The copy failed only under unproven credentials (recovery settings): cannot verify, not corrupt.
    unverified: bool = False

    @property
    def corrupt(self) -> bool:
        return self.verification.corrupt and not self.unverified


def repackage_for_recovery(
    stored: bytes,
    *,
    ledger_id: int,
    entry_id: int,
    credentials: LedgerCredentials,
    lac: int | None,
) -> RecoveryEntry:
    """Verify `stored` (the entry bytes one replica returned for `entry_id`) and re-package it.

    `lac` is the LAC to write (`recovery_lac`); None keeps the copy's own. The length field and payload
    are kept, the digest is recomputed (Java's LedgerFragmentReplicator does exactly this).
    """
    if lac is not None and lac < -1:
        raise ValueError(f"LAC {lac} is below -1")
    key = credentials.mac_key
    check = verify_entry(stored, ledger_id=ledger_id, entry_id=entry_id, digest_type=credentials.digest_type, key=key)
    if check.verdict is not Verdict.OK:
        # UNVERIFIABLE cannot happen (we always have a digest type and a key); never send it anyway.
        if depends_on_credentials(check, credentials):
            why = f"credentials_mismatch: {check.detail} under the recovery settings ({credentials.digest_type.name})"
            return RecoveryEntry(None, check, why, unverified=True)
        return RecoveryEntry(None, check, f"{check.verdict.value}: {check.detail}")
    header = check.header
    payload = check.payload
    if header is None or payload is None:  # verify_entry sets both when it says OK
        return RecoveryEntry(None, check, "verified copy without header or payload")
    if header.format_version != 1:
        # The bookie v3 protocol carries 64-bit ledger ids only; a v2 (128-bit) entry cannot be re-added.
        return RecoveryEntry(None, check, f"entry format v{header.format_version} cannot be re-added to a bookie")
    body = build_entry(
        ledger_id,
        entry_id,
        header.last_add_confirmed if lac is None else lac,
        header.length,
        payload,
        credentials.digest_type,
        key=key,
    )
    return RecoveryEntry(body, check)
