"""Test-only ZooKeeper writes, and the reads that check them, on a store's connection.

The package that ships writes no check-time znodes and no `underreplication/LAYOUT`, and writes ledger
metadata and deletes markers only in the repair role, under a repair lock: tests (and the demo, the
benchmarks) that need to do so use these. Every write goes
through the store's guarded primitives (`guarded_one`, `create_parents`), so a deposed leader's write is
refused here exactly as the store's own writes are.
"""

from __future__ import annotations

import logging

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata
from auditor.metadata.codecs import formats
from auditor.metadata.errors import ConcurrentUpdateError, CorruptZnodeError, NoSuchLedgerError
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.location import join
from auditor.metadata.store import ZooKeeperMetadataStore

log = logging.getLogger(__name__)


def _lid(ledger_id: LedgerId | int) -> LedgerId:
    return ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)


async def write_ledger_metadata(
    store: ZooKeeperMetadataStore,
    metadata: LedgerMetadata,
    guard: WriteGuard,
    *,
    expected_version: int | None,
    format_version: int | None = None,
) -> int:
    """Write metadata (compare-and-set on `expected_version`; None = create a new ledger znode).

    Returns the new znode version. ConcurrentUpdateError if the znode changed or (for a create)
    exists; NoSuchLedgerError if it vanished.
    """
    path = store.paths.path(metadata.ledger_id)
    data = formats.serialize_ledger_metadata(metadata, format_version)
    if expected_version is None:
        for _ in range(3):
            try:
                await store.guarded_one(guard, lambda t, data=data: t.create(path, data))
                return 0
            except NoNodeError:
                await store.create_parents(path, guard)
            except NodeExistsError:
                raise ConcurrentUpdateError(path, "ledger znode already exists") from None
        raise ConcurrentUpdateError(path, "parents keep vanishing")
    try:
        stat = await store.guarded_one(guard, lambda t: t.set_data(path, data, expected_version))
    except BadVersionError:
        raise ConcurrentUpdateError(path, f"version is no longer {expected_version}") from None
    except NoNodeError:
        raise NoSuchLedgerError(path) from None
    return stat.version


async def delete_marker(
    store: ZooKeeperMetadataStore, ledger_id: LedgerId | int, guard: WriteGuard, version: int = -1
) -> bool:
    """Delete a marker (and its empty parents, as Java's workers do). False if it did not exist."""
    try:
        return await store.delete_marker(_lid(ledger_id), guard, version)
    except BadVersionError:
        raise ConcurrentUpdateError(store.markers.marker(_lid(ledger_id)), f"version is no longer {version}") from None


async def ensure_underreplication_layout(store: ZooKeeperMetadataStore, guard: WriteGuard) -> None:
    """Check U/LAYOUT (BASIC v1) or create it exactly as Java would when missing (guarded)."""
    path = store.markers.layout
    got = await store.get(path)
    if got is not None:
        formats.check_ur_layout(got[0], path)
        return
    await store.create_parents(path, guard)
    try:
        await store.guarded_one(guard, lambda t: t.create(path, formats.serialize_ur_layout()))
    except NodeExistsError:
        got = await store.get(path)
        if got is not None:
            formats.check_ur_layout(got[0], path)


async def check_ctime(store: ZooKeeperMetadataStore, name: str) -> int | None:
    """A check-time znode (`checkallledgersctime`, ...) in ms; None if missing or unreadable."""
    path = join(store.markers.base, name)
    got = await store.get(path)
    if got is None:
        return None
    try:
        return formats.parse_check_ctime(name, got[0], path)
    except CorruptZnodeError as exc:
        log.warning("%s (Java treats this as 'never ran')", exc)
        return None


async def set_check_ctime(store: ZooKeeperMetadataStore, name: str, ctime_ms: int, guard: WriteGuard) -> None:
    """Create-if-absent-else-overwrite, as the Java auditor does at the end of a run (guarded)."""
    path = join(store.markers.base, name)
    data = formats.serialize_check_ctime(name, ctime_ms)
    for _ in range(10):
        try:
            await store.guarded_one(guard, lambda t: t.set_data(path, data, -1))
            return
        except NoNodeError:
            pass
        try:
            await store.guarded_one(guard, lambda t, data=data: t.create(path, data))
            return
        except NoNodeError:
            await store.create_parents(path, guard)
        except NodeExistsError:
            pass
    raise ConcurrentUpdateError(path, "could not write the check time")


async def lock_holder(store: ZooKeeperMetadataStore, ledger_id: LedgerId | int) -> str | None:
    """Who holds the replication lock of a ledger (read-only)."""
    path = store.markers.lock(_lid(ledger_id))
    got = await store.get(path)
    return None if got is None else formats.parse_lock(got[0], path)


async def instance_id(store: ZooKeeperMetadataStore) -> str | None:
    """The cluster's INSTANCEID (what its bookies' cookies carry); None if missing."""
    path = join(store.root, "INSTANCEID")
    got = await store.get(path)
    if got is None:
        return None
    try:
        return got[0].decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CorruptZnodeError(path, "not UTF-8 text") from None
