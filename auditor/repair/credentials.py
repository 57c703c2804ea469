"""The credentials one ledger is repaired with: the metadata's, or the recovery settings proven on a copy.

A ledger whose metadata stores no password (format v1, still written by a Java client configured with
`ledgerMetadataVersion=1`) is read, as by Java's administrative open, with the configured recovery
password and digest type: a guess. Before any copy or check relies on it, `proven_credentials` reads a
few stored copies (read-only) and asks each what it proves (`durability.repackage.credentials_from_entry`:
a matching CRC32C/CRC32 digest needs no password; entry 0's size tells the digest's size). Proven, copies
are judged as under the metadata's credentials; unproven, a copy that fails is unverified, never corrupt
or lost (`credentials_mismatch`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from auditor.bookie.pool import BookiePool
from auditor.durability.model import LedgerMetadata
from auditor.durability.repackage import LedgerCredentials, credentials_from_entry
from auditor.durability.schedule import write_set
from auditor.logging import get_logger

log = get_logger("auditor.repair")

PROBE_ENTRIES = 3  # entries asked (each from its registered write-set members) before giving up


def _ensemble_at(md: LedgerMetadata, entry: int) -> tuple[str, ...] | None:
    for segment, last in md.segment_ends():
        if segment.first_entry_id <= entry <= last:
            return segment.ensemble
    return None


async def proven_credentials(
    md: LedgerMetadata,
    credentials: LedgerCredentials,
    reads: BookiePool,
    available: Collection[str],
    entries: Iterable[int] = (),
    end: int | None = None,
) -> LedgerCredentials:
    """`credentials` if trusted; else the ones a stored copy of entry 0 or of `entries` proves, read from
    the `available` (registered) members of its write set; else `credentials` unchanged (unproven).
    `end`: the last entry of an open ledger known to exist (its metadata's last entry id otherwise)."""
    if credentials.trusted:
        return credentials
    stop = md.last_entry_id if end is None else end
    probes = [e for e in dict.fromkeys([0, *entries]) if 0 <= e <= stop][:PROBE_ENTRIES]
    lid = md.ledger_id.ledger
    for entry in probes:
        ensemble = _ensemble_at(md, entry)
        if ensemble is None:
            continue
        for i in write_set(entry, md.ensemble_size, md.write_quorum):
            bookie = ensemble[i]
            if bookie not in available:
                continue
            got = await reads.client(bookie).read_entry(lid, entry)
            if not got.present or got.body is None:
                continue
            proven = credentials_from_entry(
                credentials, got.body, ledger_id=lid, entry_id=entry, previous_length=0 if entry == 0 else None
            )
            if proven is not None:
                if proven.digest_type is not credentials.digest_type:
                    log.warning(
                        "the metadata stores no password: digest type proven by a stored copy, not the "
                        "recovery setting",
                        ledgerId=str(md.ledger_id),
                        digestType=proven.digest_type.name,
                        recoveryDigestType=credentials.digest_type.name,
                        bookieId=bookie,
                        entryId=entry,
                    )
                return proven
    return credentials
