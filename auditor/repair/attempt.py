"""One attempt at one marked ledger: the options it runs with, its outcome, and why it stops.

`RepairOptions` are the worker's settings (`bk-auditor repair` builds them from the `repair` section);
`LedgerRepair` is the outcome of one attempt (one log line), `Status` its kind. Inside an attempt,
`Blocked` ends it (lock released, marker kept, backoff) and `Tally` counts what it copied and the corrupt
copies it met; `copy_failure` names why a copy did not complete.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType
from auditor.durability.repairplan import Backoff, BlockReason
from auditor.errors import AuditorError

from .copy import CopyLimits, CopyResult, CorruptReplica, FailureKind


class Status(str, enum.Enum):
    REPAIRED = "repaired"  # re-checked clean, marker deleted at the captured version (or already gone)
    KEPT = "kept"  # repaired, but re-marked meanwhile: the marker stays for another pass
    BLOCKED = "blocked"  # could not be repaired now: lock released, marker kept, backoff applied
    SKIPPED = "skipped"  # not taken: locked by another worker, disabled, or the marker went away
    GONE = "gone"  # the ledger was deleted: nothing left to repair, its marker deleted (as Java's worker)


@dataclass(frozen=True, slots=True)
class RepairOptions:
    # Java's bookieRecoveryPasswd, for ledgers whose metadata has none; a secret: never printed.
    recovery_password: bytes = field(default=b"", repr=False)
    recovery_digest: DigestType = DigestType.CRC32  # Java's bookieRecoveryDigestType
    best_effort_placement: bool = False
    bytes_per_second: float = 0.0  # 0 = unlimited
    copy_limits: CopyLimits = field(default_factory=CopyLimits)
    backoff: Backoff = field(default_factory=Backoff)
    newest_first: bool = False
    ledgers_in_parallel: int = 1  # ledgers repaired at once, each under its own lock
    # Read every surviving copy of a ledger that names a gone bookie, on bookies that cannot list entries,
    # before copying and to re-check (`LedgerRepairer._lean`); off: the copies' verified reads suffice.
    read_unlistable_copies: bool = False
    relist_s: float = 30.0  # the marked ledgers are listed and ordered again when the list is this old
    entries_in_flight_per_bookie: int = 32  # adds outstanding to one bookie, over every lane's copies
    recover_open_ledgers: bool = False  # opt-in ledger recovery of open ledgers whose writer is gone
    open_ledger_grace_s: float = 30.0  # Java's openLedgerRereplicationGracePeriod


@dataclass(frozen=True, slots=True)
class LedgerRepair:
    """The outcome of one attempt at one ledger (one log line)."""

    ledger_id: LedgerId
    status: Status
    reason: str = ""  # BLOCKED / SKIPPED: a BlockReason value or another short name
    detail: str = ""
    segments: int = 0  # segments changed or re-filled
    entries_copied: int = 0  # including the healed ones
    bytes_copied: int = 0
    duration_s: float = 0.0
    retry_in_s: float | None = None


LOCK_LOST = "lock_lost"  # blocked: the session that took the lock ended (or the lock went) mid-repair


class Blocked(AuditorError):
    """Internal to the repair role: the attempt ends here (lock released, marker kept, backoff); never
    leaves `LedgerRepairer.repair`. `retry_s`: when to try again instead of the backoff (the end of a
    grace period)."""

    def __init__(self, reason: str, detail: str, retry_s: float | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.retry_s = retry_s


@dataclass
class Tally:
    """What one attempt copied, and the corrupt copies it met."""

    segments: set[int] = field(default_factory=set)
    entries: int = 0
    bytes: int = 0
    corrupt: list[tuple[int, CorruptReplica]] = field(default_factory=list)  # (segment, replica) seen by copies
    healed: int = 0  # corrupt copies moved off the bookies that served them
    # Bookies that served a corrupt copy of this ledger: never a target (a re-added copy stays unserved).
    rotten: set[str] = field(default_factory=set)
    # Bookies written, or met with a corrupt copy, by this attempt: the re-check asks them again (the
    # others' earlier answers stand, `evidence.assess`).
    touched: set[str] = field(default_factory=set)


def copy_failure(result: CopyResult) -> tuple[str, str]:
    """Why a copy did not complete: the block's reason and detail."""
    lost = result.lost
    if lost:
        return BlockReason.DATA_LOSS.value, f"entries {lost} have no verified copy anywhere"
    unverified = result.entries_with(FailureKind.UNVERIFIED)
    if unverified:
        return (
            BlockReason.CREDENTIALS_MISMATCH.value,
            f"entries {unverified}: the metadata stores no password and no copy verifies under the recovery "
            "password and digest type (repair.recovery_password, repair.recovery_digest_type): cannot verify, "
            "not loss",
        )
    unknown = result.entries_with(FailureKind.UNKNOWN)
    if unknown:
        return BlockReason.WAIT_UNKNOWN.value, f"entries {unknown}: a replica did not answer"
    first = result.failures[0].detail if result.failures else ""
    return "copy_failed", f"to {result.target}: {result.stopped or first}"
