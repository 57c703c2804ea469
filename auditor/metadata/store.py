"""The ZooKeeper implementation of the metadata store: one connection (zk/connection.py) with the recipes
for each part of BookKeeper's tree, each taking the connection as kazoo's recipes take the client,
composed into the one class callers use.

    zk/connection.py         kazoo bridged to asyncio: connect (LAYOUT check), reads, watches, guarded writes
    bookkeeper/ledgers.py    ledger metadata: listing, scans, reads (never written)
    bookkeeper/bookies.py    registrations, cookies, bookie addresses, Pulsar's rack map
    bookkeeper/markers.py    under-replication markers (Java's format), the disable flag, lostBookieRecoveryDelay
    own/znodes.py            our own znodes under `<root>/bk-auditor`

Reads never create anything. Every write is a ZooKeeper multi-op whose first op checks that the
leader's guard znode (its election vote) still exists, so a deposed leader's write fails atomically.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from auditor.durability.ids import LedgerId
from auditor.metadata.bookkeeper.bookies import BookieRegistry
from auditor.metadata.bookkeeper.ledgers import LedgerReads
from auditor.metadata.bookkeeper.markers import UnderReplicationMarkers
from auditor.metadata.codecs.paths import LeafDirectory, LedgerBatch
from auditor.metadata.interfaces import (
    BookieAddress,
    CookieRecord,
    CorruptLedger,
    LedgerRecord,
    LockRecord,
    MarkerRecord,
    MarkResult,
    Registrations,
    ScanStats,
    WriteGuard,
)
from auditor.metadata.own.znodes import OwnZnodes
from auditor.metadata.zk.connection import ZooKeeperConnection


class ZooKeeperMetadataStore(ZooKeeperConnection):
    """BookKeeper's ZooKeeper metadata, read (and carefully written) as Java does (`connect()` to open):
    the connection's primitives, and each recipe's methods delegated to it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Each recipe uses the store as its connection, so what is set on the store (e.g. a test's
        # patched `exists`) is what every recipe reads and writes through.
        self._ledger_reads = LedgerReads(self)
        self._bookie_registry = BookieRegistry(self)
        self._under_replication = UnderReplicationMarkers(self)
        self._own_znodes = OwnZnodes(self)

    # ------------------------------------------------------------ ledger metadata (bookkeeper/ledgers.py)
    def list_ledgers(
        self,
        start: LedgerId | None = None,
        end: LedgerId | None = None,
        *,
        include_scoped: bool = True,
        sync: bool = True,
        stats: ScanStats | None = None,
    ) -> AsyncIterator[LedgerBatch]:
        return self._ledger_reads.list_ledgers(start, end, include_scoped=include_scoped, sync=sync, stats=stats)

    async def list_leaf_directories(
        self, *, include_scoped: bool = True, count_children: bool = True, sync: bool = True
    ) -> list[LeafDirectory]:
        return await self._ledger_reads.list_leaf_directories(
            include_scoped=include_scoped, count_children=count_children, sync=sync
        )

    def scan_ledgers(
        self,
        start: LedgerId | None = None,
        end: LedgerId | None = None,
        *,
        include_scoped: bool = True,
        stats: ScanStats | None = None,
    ) -> AsyncIterator[list[LedgerRecord | CorruptLedger]]:
        return self._ledger_reads.scan_ledgers(start, end, include_scoped=include_scoped, stats=stats)

    async def read_ledger(self, ledger_id: LedgerId | int) -> LedgerRecord:
        return await self._ledger_reads.read_ledger(ledger_id)

    async def read_ledgers(self, ids: Iterable[LedgerId]) -> list[LedgerRecord | CorruptLedger | None]:
        return await self._ledger_reads.read_ledgers(ids)

    async def ledger_versions(self, ids: Iterable[LedgerId]) -> list[int | None]:
        return await self._ledger_reads.ledger_versions(ids)

    async def watch_ledger_once(self, ledger_id: LedgerId, callback: Callable[[], None]) -> int | None:
        """One-shot watches on the ledger's metadata znode and on its under-replication marker:
        `callback()` runs on the loop when either is created, changed or deleted (a repair replacing a
        bookie, a marker consumed, an operator's fix). Returns the metadata's last change (ZooKeeper's
        mtime, epoch ms; None when the ledger is gone). Reads only; a lost session drops the watches."""
        watch = self.bridge.watcher(lambda _event: callback())
        stat = await self.exists(self.paths.path(ledger_id), watch)
        await self.exists(self.markers.marker(ledger_id), watch)
        return None if stat is None else int(stat.mtime)

    # ------------------------------------------------------------ bookies (bookkeeper/bookies.py)
    @property
    def available_path(self) -> str:
        return self._bookie_registry.available_path

    @property
    def readonly_path(self) -> str:
        return self._bookie_registry.readonly_path

    async def registrations(self) -> Registrations:
        return await self._bookie_registry.registrations()

    def watch_registrations(self, callback: Callable[[], None]) -> Callable[[], None]:
        return self._bookie_registry.watch_registrations(callback)

    async def cookies(self) -> dict[str, CookieRecord]:
        return await self._bookie_registry.cookies()

    async def cookie(self, bookie_id: str) -> CookieRecord | None:
        return await self._bookie_registry.cookie(bookie_id)

    async def resolve_bookie(self, bookie_id: str) -> BookieAddress | None:
        return await self._bookie_registry.resolve_bookie(bookie_id)

    def address_resolver(self) -> Callable[[str], Awaitable[tuple[str, int]]]:
        return self._bookie_registry.address_resolver()

    # ------------------------------------------------------------ under-replication (bookkeeper/markers.py)
    async def read_marker(self, ledger_id: LedgerId | int) -> MarkerRecord | None:
        return await self._under_replication.read_marker(ledger_id)

    async def read_lock(self, ledger_id: LedgerId | int) -> LockRecord | None:
        return await self._under_replication.read_lock(ledger_id)

    async def mark_underreplicated(
        self,
        ledger_id: LedgerId | int,
        replicas: Iterable[str],
        guard: WriteGuard,
        *,
        store_ctime: bool = True,
        if_metadata_version: int | None = None,
    ) -> MarkResult:
        return await self._under_replication.mark_underreplicated(
            ledger_id, replicas, guard, store_ctime=store_ctime, if_metadata_version=if_metadata_version
        )

    async def create_marker_parents(self, ledger_ids: Iterable[LedgerId], guard: WriteGuard) -> None:
        await self._under_replication.create_marker_parents(ledger_ids, guard)

    async def delete_marker(self, ledger_id: LedgerId | int, guard: WriteGuard, version: int = -1) -> bool:
        return await self._under_replication.delete_marker(ledger_id, guard, version)

    async def marked_ids(self) -> set[LedgerId]:
        return await self._under_replication.marked_ids()

    def list_markers(self, include_scoped: bool = True) -> AsyncIterator[MarkerRecord]:
        return self._under_replication.list_markers(include_scoped)

    async def is_replication_disabled(self) -> bool:
        return await self._under_replication.is_replication_disabled()

    async def lost_bookie_recovery_delay(self) -> int | None:
        return await self._under_replication.lost_bookie_recovery_delay()

    def watch_lost_bookie_recovery_delay(self, callback: Callable[[int | None], None]) -> Callable[[], None]:
        return self._under_replication.watch_lost_bookie_recovery_delay(callback)

    # ------------------------------------------------------------ our own znodes (own/znodes.py)
    @property
    def own_subtree(self) -> str:
        return self._own_znodes.own_subtree

    async def read_own(self, path: str) -> bytes | None:
        return await self._own_znodes.read_own(path)

    async def put(self, path: str, data: bytes, guard: WriteGuard) -> None:
        await self._own_znodes.put(path, data, guard)

    async def delete_own(self, path: str, guard: WriteGuard) -> bool:
        return await self._own_znodes.delete_own(path, guard)

    async def own_children(self, path: str) -> list[str]:
        return await self._own_znodes.own_children(path)
