"""The pure data model shared by adapters and checks: ledger metadata as BookKeeper stores it.

Adapters (auditor.metadata) build these from ZooKeeper bytes; the core (auditor.durability) decides on
them. Nothing here does I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .ids import LedgerId
from .ranges import RangeSet


class LedgerState(enum.Enum):
    OPEN = 1
    IN_RECOVERY = 2
    CLOSED = 3


class DigestType(enum.Enum):
    """Values as in BookKeeper's LedgerMetadataFormat.DigestType (HMAC is the API's MAC)."""

    CRC32 = 1
    HMAC = 2
    CRC32C = 3
    DUMMY = 4


@dataclass(frozen=True, slots=True)
class Segment:
    """One ensemble of a ledger, from `first_entry_id` until the next segment starts."""

    first_entry_id: int
    ensemble: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SegmentSpan:
    """A segment with its entry range resolved; `entries` is empty for an empty segment."""

    index: int
    first_entry_id: int
    ensemble: tuple[str, ...]
    entries: RangeSet


@dataclass(frozen=True, slots=True)
class LedgerMetadata:
    ledger_id: LedgerId
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    state: LedgerState
    last_entry_id: int
    length: int
    segments: tuple[Segment, ...]
    digest_type: DigestType | None = None
    password: bytes | None = field(default=None, repr=False)  # a secret: never printed
    custom_metadata: Mapping[str, bytes] = field(default_factory=lambda: MappingProxyType({}))
    ctime: int | None = None
    creator_token: int | None = None
    format_version: int = 3
    # ZooKeeper znode version the metadata was read at (None when not read from ZooKeeper). Used to
    # notice that metadata changed between the first read and a report.
    version: int | None = None

    @property
    def is_closed(self) -> bool:
        return self.state is LedgerState.CLOSED

    @property
    def bookies(self) -> frozenset[str]:
        """Every bookie named by any segment."""
        return frozenset(b for s in self.segments for b in s.ensemble)

    def spans(self, end: int | None = None) -> tuple[SegmentSpan, ...]:
        """Each segment with its entry range.

        For a closed ledger the last segment ends at `last_entry_id`; for an open one the caller passes
        `end` (e.g. the highest last-add-confirmed seen); without it an open ledger's last segment is
        treated as ending at `last_entry_id` (normally -1, i.e. nothing known yet).
        """
        return tuple(
            SegmentSpan(i, seg.first_entry_id, seg.ensemble, RangeSet.span(seg.first_entry_id, last))
            for i, (seg, last) in enumerate(self.segment_ends(end))
        )

    def segment_ends(self, end: int | None = None) -> Iterator[tuple[Segment, int]]:
        """Each segment with the last entry it can hold (below its first entry id when it holds none):
        `spans` without building them, for the hot paths that need only the bounds."""
        stop = self.last_entry_id if end is None else end
        segments = self.segments
        for i, seg in enumerate(segments):
            nxt = segments[i + 1].first_entry_id - 1 if i + 1 < len(segments) else stop
            # Defensive clamp: no segment can hold entries past the end of the ledger.
            yield seg, min(nxt, stop)
