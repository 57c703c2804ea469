"""Typed, three-valued outcomes of bookie requests.

Every request ends in exactly one of:
* PRESENT — the bookie answered and holds what was asked for (bytes are attached);
* ABSENT  — the bookie answered that it does not hold it (ENOENTRY / ENOLEDGER);
* UNKNOWN — anything else: timeout, connection trouble, EIO, ETOOMANYREQUESTS, EUNKNOWNLEDGERSTATE,
  an unknown or missing status, a malformed reply.

Only a bookie's own "I don't have it" answer produces ABSENT; no error path ever does. Outcomes are
values, never exceptions. `error_kind` says why an UNKNOWN came about, in one word (the `error` label of
`bk_auditor_bookie_request_errors_total`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from auditor.durability.entry import EntryHeader, EntryVerification, parse_header, verify_entry
from auditor.durability.entrylist import EntryList
from auditor.durability.model import DigestType

from .pending import _BadReply, _TimedOut
from .protocol import Status


class Outcome(enum.Enum):
    PRESENT = "present"
    ABSENT = "absent"
    UNKNOWN = "unknown"


class Capability(enum.Enum):
    """Whether a bookie answers a request: GET_LIST_OF_ENTRIES_OF_LEDGER for ledgers it holds (BookieClient),
    BATCH_READ_ENTRY on the v2 protocol (batch.BatchReader: UNSUPPORTED before 4.17)."""

    UNKNOWN = "unknown"
    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"  # DbLedgerStorage: no reply at all (spec §3.7); fall back to reads


ABSENT_STATUSES = frozenset({Status.ENOENTRY, Status.ENOLEDGER})


@dataclass(frozen=True, slots=True)
class BookieResult:
    bookie_id: str
    outcome: Outcome
    status: Status | None  # effective status if the bookie answered with a known one
    error: str | None  # why the outcome is UNKNOWN (or a note), None for a clean answer
    elapsed: float  # seconds from sending (or failing to send) to the outcome

    @property
    def present(self) -> bool:
        return self.outcome is Outcome.PRESENT

    @property
    def absent(self) -> bool:
        return self.outcome is Outcome.ABSENT

    @property
    def unknown(self) -> bool:
        return self.outcome is Outcome.UNKNOWN


@dataclass(frozen=True, slots=True)
class ReadEntryResult(BookieResult):
    ledger_id: int
    entry_id: int
    body: bytes | None = None  # stored entry bytes (header, digest, payload) when PRESENT
    max_lac: int | None = None  # the bookie's LAC for the ledger, when it sent one

    @property
    def no_such_ledger(self) -> bool:
        return self.status is Status.ENOLEDGER

    def verify(self, digest_type: DigestType | None, password: bytes | str | None = None) -> EntryVerification:
        """Check the body's header ids and digest. Only meaningful when PRESENT."""
        if self.body is None:
            raise ValueError(f"no body to verify: outcome {self.outcome.value}")
        return verify_entry(
            self.body, ledger_id=self.ledger_id, entry_id=self.entry_id, digest_type=digest_type, password=password
        )


@dataclass(frozen=True, slots=True)
class ReadLacResult(BookieResult):
    """READ_LAC. PRESENT when either body came back (whatever the status says, spec §3.5).

    ABSENT when the bookie answered ENOENTRY or ENOLEDGER without bodies. READ_LAC reports ENOENTRY
    for a ledger it does not know, and also when both of its internal reads failed, so this ABSENT is
    `conclusive=False`: use READ_ENTRY or GET_LIST for proof of absence.
    """

    ledger_id: int
    lac_body: bytes | None = None
    last_entry_body: bytes | None = None
    conclusive: bool = True

    @property
    def last_entry_header(self) -> EntryHeader | None:
        if self.last_entry_body is None:
            return None
        try:
            return parse_header(self.last_entry_body)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class BookieInfoResult(BookieResult):
    """GET_BOOKIE_INFO: PRESENT when the bookie answered EOK (it is alive); never ABSENT."""

    total_disk_capacity: int | None = None
    free_disk_space: int | None = None


@dataclass(frozen=True, slots=True)
class EntryListResult(BookieResult):
    """GET_LIST_OF_ENTRIES_OF_LEDGER.

    PRESENT: the bookie knows the ledger; `entries` lists what its index holds (possibly nothing).
    ABSENT: ENOLEDGER; `entries` is empty. UNKNOWN: `entries` is None; `unsupported` is True when the
    bookie is known not to answer this request (DbLedgerStorage) — fall back to READ_ENTRY.
    """

    ledger_id: int
    entries: EntryList | None = None
    unsupported: bool = False


@dataclass(frozen=True, slots=True)
class BatchReadResult(BookieResult):
    """BATCH_READ_ENTRY (v2, BookKeeper 4.17+): entries `first_entry`, `first_entry + 1`, ... as far as the
    bookie could read them, within the count and size asked.

    PRESENT: `entries` holds (entry id, stored bytes) in order, at least the first. ABSENT: the bookie
    answered ENOENTRY / ENOLEDGER for `first_entry` itself (`entries` empty). UNKNOWN: anything else. The
    batch stops at the first entry the bookie cannot read, for whatever reason: the entry after the last
    one returned is not judged by it (ask a batch starting there).
    """

    ledger_id: int
    first_entry: int
    entries: list[tuple[int, bytes]]


@dataclass(frozen=True, slots=True)
class AuthProbeResult(BookieResult):
    plugin_name: str | None = None


# The kinds of failed request besides a bookie's own status code (error_kind).
TIMEOUT = "timeout"  # no reply within the request's timeout (or not sent: the connection did not drain)
CONNECTION = "connection"  # no connection to send it on, or the connection ended before the reply
MALFORMED = "malformed"  # the bookie answered, but not usably (unknown status, wrong ledger, no body, ...)


def error_kind(result: BookieResult) -> str | None:
    """Why `result` is no answer, in one word: `timeout`, `connection`, `malformed`, or the status code the
    bookie answered with (`EIO`, `ETOOMANYREQUESTS`, `EUNKNOWNLEDGERSTATE`, `EUA`, ...). None for an
    answer (PRESENT, ABSENT) and for a GET_LIST the bookie is known not to serve (DbLedgerStorage: its
    silence is not a failure, the check reads instead)."""
    if result.outcome is not Outcome.UNKNOWN:
        return None
    if isinstance(result, EntryListResult) and result.unsupported:
        return None
    if result.status is not None:
        return MALFORMED if result.status is Status.EOK else result.status.name
    error = result.error
    if isinstance(error, _TimedOut):
        return TIMEOUT
    if isinstance(error, _BadReply):
        return MALFORMED
    return CONNECTION
