"""Ledger recovery's two ledger-metadata writes, each a compare-and-set on the ledger znode's version and
guarded by the repair lock (Java's MetadataUpdateLoops of an open with recovery, repair-and-recovery.md
§4.1 and §4.5):

* `mark_in_recovery`: OPEN -> IN_RECOVERY before anything is fenced. Already IN_RECOVERY (a crashed or
  concurrent recoverer): nothing is written and recovery goes on. CLOSED: nothing to do.
* `close_recovered`: IN_RECOVERY -> CLOSED with the last entry id, the length and the write-back segment
  (if members were replaced). On a conflict it re-reads: CLOSED by someone else (the writer, or another
  recoverer) is accepted as it is (`ADOPTED`, theirs wins, as in Java); segments changed since recovery
  started means someone else is changing the ledger, and our close is abandoned (`CHANGED`).

The bytes are Java's for the znode's own format version, every other field carried over as read.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from kazoo.exceptions import BadVersionError, NoNodeError

from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.recovery import closed_metadata_segments
from auditor.metadata.codecs import formats
from auditor.metadata.errors import NoSuchLedgerError
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.store import ZooKeeperMetadataStore

__all__ = ["CloseOutcome", "MetadataStep", "mark_in_recovery", "close_recovered"]

MAX_ATTEMPTS = 20


class CloseOutcome(str, enum.Enum):
    WRITTEN = "written"  # our write went through
    UNCHANGED = "unchanged"  # nothing to write (already in recovery)
    ADOPTED = "adopted"  # someone else closed it: theirs stands
    CHANGED = "changed"  # the segments changed since recovery started: nothing written
    DELETED = "deleted"
    GAVE_UP = "gave_up"


@dataclass(frozen=True, slots=True)
class MetadataStep:
    outcome: CloseOutcome
    metadata: LedgerMetadata | None  # stored now (as written or last read); None if deleted
    reason: str = ""


async def _write(
    store: ZooKeeperMetadataStore, current: LedgerMetadata, updated: LedgerMetadata, guard: WriteGuard
) -> LedgerMetadata:
    path = store.paths.path(current.ledger_id)
    data = formats.serialize_ledger_metadata(updated, current.format_version)
    stat = await store.guarded_one(guard, lambda t, d=data, v=current.version: t.set_data(path, d, v))
    return formats.parse_ledger_metadata(data, current.ledger_id, path, stat.version)


async def _reread(store: ZooKeeperMetadataStore, md: LedgerMetadata) -> LedgerMetadata | None:
    try:
        return (await store.read_ledger(md.ledger_id)).metadata
    except NoSuchLedgerError:
        return None


async def mark_in_recovery(store: ZooKeeperMetadataStore, md: LedgerMetadata, guard: WriteGuard) -> MetadataStep:
    """OPEN -> IN_RECOVERY (compare-and-set at `md.version`, re-read on conflict)."""
    current: LedgerMetadata | None = md
    for _ in range(MAX_ATTEMPTS):
        if current is None:
            return MetadataStep(CloseOutcome.DELETED, None, "deleted")
        if current.state is LedgerState.CLOSED:
            return MetadataStep(CloseOutcome.ADOPTED, current, "closed meanwhile")
        if current.state is LedgerState.IN_RECOVERY:
            return MetadataStep(CloseOutcome.UNCHANGED, current, "already in recovery")
        if current.version is None:
            raise ValueError(f"ledger {md.ledger_id}: metadata without a znode version cannot be compare-and-set")
        try:
            return MetadataStep(
                CloseOutcome.WRITTEN,
                await _write(store, current, replace(current, state=LedgerState.IN_RECOVERY), guard),
            )
        except NoNodeError:
            return MetadataStep(CloseOutcome.DELETED, None, "deleted")
        except BadVersionError:
            current = await _reread(store, current)
    return MetadataStep(CloseOutcome.GAVE_UP, current, f"{MAX_ATTEMPTS} conflicts in a row")


async def close_recovered(
    store: ZooKeeperMetadataStore,
    started: LedgerMetadata,
    last_entry_id: int,
    length: int,
    extra: Segment | None,
    guard: WriteGuard,
) -> MetadataStep:
    """IN_RECOVERY -> CLOSED at `last_entry_id` / `length`, with `extra` (the write-back segment) applied.
    `started`: the metadata recovery fenced and read with; a close goes through only while its segments
    are unchanged."""
    current: LedgerMetadata | None = started
    for _ in range(MAX_ATTEMPTS):
        if current is None:
            return MetadataStep(CloseOutcome.DELETED, None, "deleted")
        if current.state is LedgerState.CLOSED:
            return MetadataStep(CloseOutcome.ADOPTED, current, "closed by someone else meanwhile")
        if current.segments != started.segments:
            return MetadataStep(CloseOutcome.CHANGED, current, "the ledger's ensembles changed during recovery")
        if current.state is not LedgerState.IN_RECOVERY:
            return MetadataStep(CloseOutcome.CHANGED, current, f"state is {current.state.name}, not IN_RECOVERY")
        closed = replace(
            current,
            state=LedgerState.CLOSED,
            last_entry_id=last_entry_id,
            length=length,
            segments=closed_metadata_segments(current.segments, extra),
        )
        try:
            return MetadataStep(CloseOutcome.WRITTEN, await _write(store, current, closed, guard))
        except NoNodeError:
            return MetadataStep(CloseOutcome.DELETED, None, "deleted")
        except BadVersionError:
            current = await _reread(store, current)
    return MetadataStep(CloseOutcome.GAVE_UP, current, f"{MAX_ATTEMPTS} conflicts in a row")
