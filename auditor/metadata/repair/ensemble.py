"""The repair role's one ledger-metadata write: old -> new bookie in one segment's ensemble, a
compare-and-set on the ledger znode's version (Java's MetadataUpdateLoop in updateEnsembleInfo,
repair-and-recovery.md §2.4), guarded by the worker's repair lock.

The write starts from the metadata the repair was planned on (its znode version) and goes through only
while that segment is unchanged (`repairplan.segment_change`). On BADVERSION it re-reads: if the segment
is still as planned (e.g. a live writer appended a segment or closed the ledger meanwhile, §5) the same
replacement is re-applied on the fresh metadata; if the segment changed, or the ledger was deleted, it
gives up with the reason. It is stricter than Java's predicate ("an old bookie is still present"), which
would also re-apply over a segment another party rewrote.

The bytes are Java's for the znode's own format version (`formats.serialize_ledger_metadata`): every
other field is carried over as read, so the Java client reads back the same ledger with one member
changed.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NoNodeError

from auditor.durability.model import LedgerMetadata
from auditor.durability.repairplan import segment_change, with_member
from auditor.metadata.codecs import formats
from auditor.metadata.errors import NoSuchLedgerError
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.store import ZooKeeperMetadataStore

__all__ = ["UpdateOutcome", "EnsembleUpdate", "replace_member"]

MAX_ATTEMPTS = 20  # conflicts come from writers' ensemble changes and closes: a handful at most


class UpdateOutcome(str, enum.Enum):
    UPDATED = "updated"
    SEGMENT_CHANGED = "segment_changed"  # someone else changed this segment: our copies may not fit it
    LEDGER_DELETED = "ledger_deleted"
    GAVE_UP = "gave_up"  # MAX_ATTEMPTS conflicts in a row


@dataclass(frozen=True, slots=True)
class EnsembleUpdate:
    outcome: UpdateOutcome
    metadata: LedgerMetadata | None  # what is stored now (as written, or as last read); None if deleted
    attempts: int
    reason: str = ""


async def replace_member(
    store: ZooKeeperMetadataStore,
    planned: LedgerMetadata,
    segment_index: int,
    index: int,
    new_bookie: str,
    guard: WriteGuard,
) -> EnsembleUpdate:
    """Set `ensemble[index]` of segment `segment_index` to `new_bookie` (planned.version is the znode
    version the plan was made on), re-applying after conflicts while the segment is unchanged."""
    if planned.version is None:
        raise ValueError(f"ledger {planned.ledger_id}: metadata without a znode version cannot be compare-and-set")
    old = planned.segments[segment_index].ensemble[index]
    if new_bookie in planned.segments[segment_index].ensemble:
        raise ValueError(f"ledger {planned.ledger_id}: {new_bookie} is already in segment {segment_index}")
    path = store.paths.path(planned.ledger_id)
    current = planned
    for attempt in range(1, MAX_ATTEMPTS + 1):
        why = segment_change(planned, current, segment_index)
        if why is not None:
            return EnsembleUpdate(UpdateOutcome.SEGMENT_CHANGED, current, attempt, why)
        assert current.version is not None
        updated = with_member(current, segment_index, index, new_bookie)
        data = formats.serialize_ledger_metadata(updated, current.format_version)
        try:
            stat = await store.guarded_one(guard, lambda t, d=data, v=current.version: t.set_data(path, d, v))
        except NoNodeError:
            return EnsembleUpdate(UpdateOutcome.LEDGER_DELETED, None, attempt, f"{path}: deleted")
        except BadVersionError:
            try:
                current = (await store.read_ledger(planned.ledger_id)).metadata
            except NoSuchLedgerError:
                return EnsembleUpdate(UpdateOutcome.LEDGER_DELETED, None, attempt, f"{path}: deleted")
            continue
        done = formats.parse_ledger_metadata(data, planned.ledger_id, path, stat.version)
        return EnsembleUpdate(UpdateOutcome.UPDATED, done, attempt, f"{old} -> {new_bookie} in segment {segment_index}")
    return EnsembleUpdate(UpdateOutcome.GAVE_UP, current, MAX_ATTEMPTS, f"{path}: {MAX_ATTEMPTS} conflicts in a row")
