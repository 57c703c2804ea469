"""What a check needs to run: the metadata store, the bookie clients, the options, and run counters."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from auditor.bookie.pool import BookiePool
from auditor.bookie.results import BookieResult, Outcome, error_kind
from auditor.durability.placement import PlacementPolicy
from auditor.metadata.interfaces import MetadataStore


@dataclass(frozen=True)
class CheckOptions:
    """Knobs shared by the checks. Defaults suit a one-shot run; the daemon fills them from Settings."""

    max_concurrent_ledgers: int = 32
    # Re-check delays (seconds) for ledgers whose check could not finish (a bookie did not answer).
    recheck_delays: tuple[float, ...] = (2.0, 5.0)
    # A marker older than this (seconds) is `underreplicated_too_long` (Java:
    # underreplicatedLedgerRecoveryGracePeriod; 0 = never).
    underreplicated_grace_period: float = 0.0
    # Periodic ledger check: percentage of each fragment's other entries read besides first and last
    # (Java: auditorLedgerVerificationPercentage).
    verification_percentage: float = 0.0
    # Reads per bookie per ledger when a bookie cannot list its entries (DbLedgerStorage).
    fallback_read_budget: int = 2000
    # How many times metadata may change under one ledger's analysis before we give up on it this run.
    max_reanalysis: int = 3
    report_overreplicated: bool = False
    text_limit: int = 20
    placement: PlacementPolicy | None = None  # None: placement is not judged
    racks: Mapping[str, str] | Callable[[str], str | None] | None = None
    # The references check: Pulsar's metadata root (None: the parent of the ledgers root) and how old an
    # unlisted ledger must be before it is an orphan (Pulsar creates a ledger before it records it).
    pulsar_root: str | None = None
    orphan_grace_seconds: float = 3600.0


# Told of requests to one bookie as they complete: the bookie, how many, and how many of them failed by
# error kind (`auditor.bookie.results.error_kind`). The daemon's live request metrics.
RequestsDone = Callable[[str, int, Mapping[str, int]], None]


@dataclass
class RunStats:
    """Counters of one run of one check (exported as metrics and in the run summary).

    Requests are counted as they complete (`requests_done`), and `on_requests`, when set, is told at once:
    the daemon's request metrics rise during a long pass, not at its end. A worker process's partition
    comes in whole (`absorb`), and is told to `on_requests` then.
    """

    check: str
    started: float = field(default_factory=time.time)
    finished: float | None = None
    ledgers_seen: int = 0
    ledgers_checked: int = 0
    ledgers_skipped: Counter[str] = field(default_factory=Counter)
    ledgers_rechecked: int = 0
    metadata_unreadable: int = 0
    bookie_requests: Counter[str] = field(default_factory=Counter)
    bookie_unknown: Counter[str] = field(default_factory=Counter)  # a bookie's answers of a ledger unknown
    bookie_errors: dict[str, Counter[str]] = field(default_factory=dict)  # bookie -> error kind -> requests
    index_answers: Counter[str] = field(default_factory=Counter)  # ledgers a bookie's agent answered
    reanalysed: int = 0
    note: str | None = None  # what the run has to say beyond counts (e.g. no application metadata)
    on_requests: RequestsDone | None = field(default=None, repr=False, compare=False)

    @property
    def duration(self) -> float:
        return (self.finished or time.time()) - self.started

    def requests_done(self, bookie: str, results: Iterable[BookieResult]) -> None:
        """Count requests to `bookie` that have completed, each failed one by its error kind."""
        n = 0
        errors: Counter[str] | None = None
        for r in results:
            n += 1
            if r.outcome is Outcome.UNKNOWN and (kind := error_kind(r)) is not None:
                if errors is None:
                    errors = Counter()
                errors[kind] += 1
        self.bookie_requests[bookie] += n
        if errors:
            self.bookie_errors.setdefault(bookie, Counter()).update(errors)
        if n and self.on_requests is not None:
            self.on_requests(bookie, n, errors or {})

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "durationSeconds": round(self.duration, 3),
            "ledgersSeen": self.ledgers_seen,
            "ledgersChecked": self.ledgers_checked,
            "ledgersSkipped": dict(self.ledgers_skipped),
            "ledgersRechecked": self.ledgers_rechecked,
            "metadataUnreadable": self.metadata_unreadable,
            "bookieRequests": sum(self.bookie_requests.values()),
            "bookieRequestsByBookie": dict(self.bookie_requests),
            "bookieUnknownByBookie": dict(self.bookie_unknown),
            "bookieErrorsByBookie": {b: dict(kinds) for b, kinds in self.bookie_errors.items()},
            "indexAnswersByBookie": dict(self.index_answers),
            "reanalysed": self.reanalysed,
            **({"note": self.note} if self.note else {}),
        }

    def absorb(self, part: dict[str, Any]) -> None:
        """Add the counters of another run's `as_dict()` (a worker process's partition of this run); its
        requests are told to `on_requests`."""
        self.ledgers_seen += int(part.get("ledgersSeen", 0))
        self.ledgers_checked += int(part.get("ledgersChecked", 0))
        self.ledgers_skipped.update(part.get("ledgersSkipped", {}))
        self.ledgers_rechecked += int(part.get("ledgersRechecked", 0))
        self.metadata_unreadable += int(part.get("metadataUnreadable", 0))
        requests: dict[str, int] = part.get("bookieRequestsByBookie", {})
        errors: dict[str, dict[str, int]] = part.get("bookieErrorsByBookie", {})
        self.bookie_requests.update(requests)
        self.bookie_unknown.update(part.get("bookieUnknownByBookie", {}))
        for bookie, kinds in errors.items():
            self.bookie_errors.setdefault(bookie, Counter()).update(kinds)
        if self.on_requests is not None:
            for bookie in sorted(set(requests) | set(errors)):
                n = int(requests.get(bookie, 0))
                if n or errors.get(bookie):
                    self.on_requests(bookie, n, errors.get(bookie, {}))
        self.index_answers.update(part.get("indexAnswersByBookie", {}))
        self.reanalysed += int(part.get("reanalysed", 0))


@dataclass
class AuditContext:
    store: MetadataStore
    bookies: BookiePool
    options: CheckOptions = field(default_factory=CheckOptions)
