"""Under-replication in ZooKeeper (`<root>/underreplication`): markers read, created and merged exactly as
Java's markLedgerUnderreplicatedAsync does (guarded), listed, deleted with their empty parents as Java's
markLedgerReplicated does (guarded: the repair lock holder's write, repair/lock.py); the disable
flag; lostBookieRecoveryDelay (read and watched).

A recipe on the connection (zk/connection.py), composed into the store (zk/store.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, RolledBackError

from auditor.durability.ids import LedgerId
from auditor.logging import get_logger
from auditor.metadata.codecs import formats
from auditor.metadata.errors import ConcurrentUpdateError, CorruptZnodeError, MetadataVersionChangedError
from auditor.metadata.interfaces import LockRecord, MarkerRecord, MarkResult, NodeStat, WriteGuard
from auditor.metadata.location import join
from auditor.metadata.zk.connection import ZooKeeperConnection

log = get_logger("auditor.metadata.zkmarkers")


class UnderReplicationMarkers:
    """Markers and the under-replication settings under the connection's `markers` (MarkerPaths)."""

    def __init__(self, zk: ZooKeeperConnection) -> None:
        self._zk = zk

    async def read_marker(self, ledger_id: LedgerId | int) -> MarkerRecord | None:
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        path = self._zk.markers.marker(lid)
        got = await self._zk.get(path)
        if got is None:
            return None
        ur = formats.parse_marker(got[0], path)
        return MarkerRecord(lid, path, ur.replicas, ur.ctime, NodeStat.from_zk(got[1]))

    async def read_lock(self, ledger_id: LedgerId | int) -> LockRecord | None:
        """The worker lock on a marked ledger, if one is held (Java's `locks/urL<id>`, ephemeral)."""
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        path = self._zk.markers.lock(lid)
        got = await self._zk.get(path)
        if got is None:
            return None
        return LockRecord(lid, path, formats.parse_lock(got[0], path), got[1].ctime)

    async def mark_underreplicated(
        self,
        ledger_id: LedgerId | int,
        replicas: Iterable[str],
        guard: WriteGuard,
        *,
        store_ctime: bool = True,
        if_metadata_version: int | None = None,
    ) -> MarkResult:
        """Create or merge a marker exactly as Java's markLedgerUnderreplicatedAsync (spec §5.2), guarded.

        `if_metadata_version`: write only while the ledger's metadata znode is still at that version
        (checked atomically with the write), so a caller that decided from an indexed copy of the
        metadata needs no re-read; MetadataVersionChangedError when it moved on or was deleted.
        """
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        wanted = list(dict.fromkeys(replicas))
        path = self._zk.markers.marker(lid)
        ledger_path = self._zk.paths.path(lid) if if_metadata_version is not None else None
        leaf_dir = path.rsplit("/", 1)[0]
        # A missing marker usually lacks its own directory too (workers remove empty parents with the
        # marker, as Java's do), so the directory is created in the marker's transaction: one write.
        with_dir = True
        for _ in range(100):
            data = formats.serialize_marker(wanted, self._zk.now_ms() if store_ctime else None)

            def create(t: Any, data: bytes = data, with_dir: bool = with_dir) -> None:
                if ledger_path is not None:
                    t.check(ledger_path, if_metadata_version)
                if with_dir:
                    t.create(leaf_dir, b"")
                t.create(path, data)

            failed = self._failed_op(await self._zk.guarded(guard, create), ledger_path)
            if failed is None:
                return MarkResult.CREATED
            index, failure = failed
            if with_dir and index == 0 and isinstance(failure, NodeExistsError):
                with_dir = False  # the directory is there: create the marker alone
                continue
            if isinstance(failure, NoNodeError):
                # More than the directory is missing (or a worker removed empty parents just now).
                await self._zk.create_parents(leaf_dir if with_dir else path, guard)
                continue
            if not isinstance(failure, NodeExistsError):
                raise failure
            got = await self._zk.get(path)
            if got is None:
                continue  # removed in between: create again
            existing = formats.parse_marker(got[0], path)
            merged, changed = formats.merge_replicas(existing.replicas, wanted)
            if not changed:
                return MarkResult.UNCHANGED
            ctime = self._zk.now_ms() if store_ctime else (existing.ctime if existing.ctime >= 0 else None)
            new = formats.serialize_marker(merged, ctime)

            def merge(t: Any, new: bytes = new, version: int = got[1].version) -> None:
                if ledger_path is not None:
                    t.check(ledger_path, if_metadata_version)
                t.set_data(path, new, version)

            failed = self._failed_op(await self._zk.guarded(guard, merge), ledger_path)
            if failed is None:
                return MarkResult.MERGED
            if not isinstance(failed[1], (BadVersionError, NoNodeError)):
                raise failed[1]
            # changed or removed since we read it: start over, as Java does
        raise ConcurrentUpdateError(path, "marker kept changing; gave up after 100 attempts")

    async def create_marker_parents(self, ledger_ids: Iterable[LedgerId], guard: WriteGuard) -> None:
        """Create the shared upper directories of these ledgers' markers, each once, before marking them
        all at once: otherwise every concurrent marker finds them missing and races to create them."""
        by_upper: dict[str, str] = {}
        for lid in ledger_ids:
            leaf_dir = self._zk.markers.marker(lid).rsplit("/", 1)[0]
            by_upper.setdefault(leaf_dir.rsplit("/", 1)[0], leaf_dir)
        for leaf_dir in by_upper.values():
            await self._zk.create_parents(leaf_dir, guard)

    @staticmethod
    def _failed_op(results: list[Any], ledger_path: str | None) -> tuple[int, Exception] | None:
        """The failed op of a transaction (the others report RolledBackError), as (index among the ops
        after the ledger-version check, error). That check, when there is one, comes first; its failure
        means the ledger changed."""
        if ledger_path is not None:
            if isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
                raise MetadataVersionChangedError(ledger_path, "ledger metadata changed or was deleted")
            results = results[1:]
        for i, r in enumerate(results):
            if isinstance(r, Exception) and not isinstance(r, RolledBackError):
                return i, r
        return None

    async def delete_marker(self, ledger_id: LedgerId | int, guard: WriteGuard, version: int = -1) -> bool:
        """Delete a marker at `version` (-1: any), then its hex parents while empty, as Java's
        markLedgerReplicated does (guarded). False if it did not exist; BadVersionError if it changed
        since `version` (a re-mark: it must stay)."""
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        path = self._zk.markers.marker(lid)
        try:
            await self._zk.guarded_one(guard, lambda t: t.delete(path, version))
        except NoNodeError:
            return False
        top = self._zk.markers.ledgers if lid.scope == 0 else self._zk.markers.scoped_ledgers
        parent = path.rsplit("/", 1)[0]
        while parent != top and parent.startswith(top + "/"):
            try:
                await self._zk.guarded_one(guard, lambda t, p=parent: t.delete(p, -1))
            except (NotEmptyError, NoNodeError):
                break  # another ledger of this directory is marked (or a worker cleaned it first)
            parent = parent.rsplit("/", 1)[0]
        return True

    async def _marker_ids(self, include_scoped: bool) -> AsyncIterator[LedgerId]:
        """Every marker's ledger, from the names alone (walks the 4 hex levels; scoped markers from their
        own tree), streamed."""
        trees = [(self._zk.markers.ledgers, 4)] + ([(self._zk.markers.scoped_ledgers, 8)] if include_scoped else [])
        for base, levels in trees:
            stack = [(base, 0)]
            while stack:
                d, depth = stack.pop()
                for n in sorted(await self._zk.children(d) or [], reverse=True):
                    p = join(d, n)
                    if depth < levels:
                        stack.append((p, depth + 1))
                        continue
                    lid = self._zk.markers.parse_marker(p)
                    if lid is None:
                        log.info("skipping non-marker znode %s", p)
                    else:
                        yield lid

    async def marked_ids(self) -> set[LedgerId]:
        """The ledgers marked now, from one listing of the marker tree (no marker read)."""
        return {lid async for lid in self._marker_ids(True)}

    def list_markers(self, include_scoped: bool = True) -> AsyncIterator[MarkerRecord]:
        """Every marker, read, streamed."""

        async def gen() -> AsyncIterator[MarkerRecord]:
            async for lid in self._marker_ids(include_scoped):
                try:
                    rec = await self.read_marker(lid)
                except CorruptZnodeError as exc:
                    log.warning("corrupt marker: %s", exc)
                    continue
                if rec is not None:
                    yield rec

        return gen()

    async def is_replication_disabled(self) -> bool:
        return await self._zk.exists(self._zk.markers.disable) is not None

    async def lost_bookie_recovery_delay(self) -> int | None:
        path = self._zk.markers.lost_bookie_recovery_delay
        got = await self._zk.get(path)
        return None if got is None else formats.parse_lost_bookie_recovery_delay(got[0], path)

    def watch_lost_bookie_recovery_delay(self, callback: Callable[[int | None], None]) -> Callable[[], None]:
        """`callback(seconds)` on the loop at every data change of the znode, same value included
        (`triggeraudit` rewrites the same value). None when the znode is deleted or unparsable.
        Returns a canceller.
        """
        path = self._zk.markers.lost_bookie_recovery_delay

        async def report() -> None:
            got = await self._zk.get(path)
            callback(None if got is None else _safe_int(got[0], path))

        return self._zk.spawn_watch(self._zk.watch_loop(path, report, children=False))


def _safe_int(data: bytes, path: str) -> int | None:
    try:
        return formats.parse_lost_bookie_recovery_delay(data, path)
    except CorruptZnodeError as exc:
        log.warning("%s", exc)
        return None
