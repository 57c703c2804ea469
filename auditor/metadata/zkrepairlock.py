"""The repair worker's side of Java's under-replication work protocol (repair-and-recovery.md §3,
zookeeper-layout.md §5.3), byte-compatible so Java ReplicationWorkers, the bookies' over-replication GC
and our workers share one cluster.

* take: `exists(marker)` first, remembering its version, then create the EPHEMERAL `locks/urL<id>` with
  Java's lock data (`bookieId: "<holder>"`, text format). NodeExists: someone else (a Java worker, the
  bookie GC, another of ours) has it. Capturing the version *before* the lock, as Java does, errs on the
  safe side: a re-mark in between makes the later delete fail and the marker stay. Unlike Java, the
  marker is looked at again once the lock is ours: Java's worker deletes the marker before it drops the
  lock, so a lock won in between would otherwise be held on a ledger with nothing left to do.
* `underreplication/disable` is honoured before taking (Java checks only there too: a worker holding a
  lock finishes its ledger); `wait_enabled` waits with an exists watch while it is present.
* every write made while holding a lock is guarded by it (`LockGuard`): a multi-op whose first op checks
  the lock znode still exists, and a local check that the session is the one that created it. ZooKeeper
  refuses an expired session's ops, and a new session has a new id, so a write can only succeed while
  our ephemeral lock is alive (another worker's re-created lock has the same path and version 0, which
  is why the session id and not the znode version proves ownership).
* finish: `mark_replicated` deletes the marker with the captured version only when the caller says the
  ledger re-checked clean (a fresh re-mark bumped the version and survives), then empty parents, then
  the lock; `release` only drops the lock (give up now, or after the caller's backoff).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType

from auditor.durability.ids import LedgerId

from . import formats
from .errors import RepairLockLostError
from .interfaces import HeldLock, MarkerRecord, ReleaseOutcome, RepairLockProtocol
from .zkstore import ZooKeeperMetadataStore

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LockGuard:
    """Write guard bound to one held lock: valid while the lock's session is ours and not released."""

    lock_path: str
    session_id: int
    store: ZooKeeperMetadataStore
    released: bool = field(default=False)

    @property
    def guard_path(self) -> str:
        return self.lock_path

    def check(self) -> None:
        if self.released:
            raise RepairLockLostError(self.lock_path, "released by this worker; take it again before writing")
        session = self.store.client.client_id
        if session is None or session[0] != self.session_id:
            raise RepairLockLostError(
                self.lock_path, "the ZooKeeper session that took it has ended; another worker may hold it now"
            )


@dataclass(frozen=True, slots=True)
class ZkHeldLock(HeldLock):
    guard: LockGuard


class RepairLocks:
    """Java's worker lock protocol on one store's connection; `holder` goes into the lock data (what
    `listunderreplicated -printreplicationworkerid` shows), e.g. `bk-auditor@<host>`."""

    def __init__(self, store: ZooKeeperMetadataStore, holder: str) -> None:
        self.store = store
        self.holder = holder
        self._data = formats.serialize_lock(holder)

    # ------------------------------------------------------------ what there is to do
    def markers(self) -> AsyncIterator[MarkerRecord]:
        """Every marker, Java's hex tree (and our scoped one)."""
        return self.store.list_markers()

    async def locked(self) -> frozenset[str]:
        """Leaf names (`urL…`) of the ledgers some worker (or the bookie GC) holds right now."""
        names = await self.store.children(self.store.markers.locks) or []
        scoped = await self.store.children(self.store.markers.scoped_locks) or []
        return frozenset(names) | frozenset(scoped)

    async def is_disabled(self) -> bool:
        return await self.store.is_replication_disabled()

    async def wait_enabled(self, timeout: float | None = None) -> bool:
        """Wait while `underreplication/disable` exists (an exists watch, as Java's worker). True once it
        is absent; False at the timeout."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            watch, fired = self.store.bridge.event_watch()
            if await self.store.exists(self.store.markers.disable, watch) is None:
                return True
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return False
            try:
                event = await asyncio.wait_for(asyncio.shield(fired), left)
            except TimeoutError:
                return False
            if event.type == EventType.NONE:
                await asyncio.sleep(0.2)  # a connection event, not a change: look again shortly

    # ------------------------------------------------------------ take
    async def try_lock(self, ledger_id: LedgerId) -> ZkHeldLock | None:
        """Take the ledger's lock; None when replication is disabled, the marker is gone, or someone
        else holds the lock."""
        if await self.is_disabled():
            return None
        marker = self.store.markers.marker(ledger_id)
        lock = self.store.markers.lock(ledger_id)
        stat = await self.store.exists(marker)
        if stat is None:
            return None
        session = self.store.client.client_id
        if session is None:
            return None
        acl = self.store.security.znode_acl(lock)
        for _ in range(2):
            try:
                await self.store.bridge.call(self.store.client.create_async, lock, self._data, acl, ephemeral=True)
                break
            except NodeExistsError:
                return None
            except NoNodeError:
                await self._create_locks_dir(lock)
        else:
            return None
        guard = LockGuard(lock, session[0], self.store)
        held = ZkHeldLock(ledger_id, marker, lock, stat.version, self.holder, guard)
        if await self.store.exists(marker) is None:
            # A Java worker deletes the marker, cleans its parents and only then drops its lock: a
            # create that won in that gap holds a lock on finished work. Give it back at once.
            await self.release(held)
            return None
        return held

    async def _create_locks_dir(self, lock: str) -> None:
        """`locks` (persistent, empty) as Java's checkLayout creates it; only inside an existing
        `underreplication` (the marker proves it exists), never anything above."""
        parent = lock.rsplit("/", 1)[0]
        try:
            await self.store.bridge.call(
                self.store.client.create_async, parent, b"", self.store.security.znode_acl(parent)
            )
        except NodeExistsError:
            pass

    # ------------------------------------------------------------ finish
    async def mark_replicated(self, held: HeldLock) -> ReleaseOutcome:
        """The ledger re-checked clean: delete its marker at the version captured when the lock was
        taken (guarded by the lock), clean up empty parents, release the lock."""
        guard = _guard(held)
        try:
            guard.check()
            deleted = await self.store.delete_marker(held.ledger_id, guard, held.marker_version)
            outcome = ReleaseOutcome.MARKER_DELETED if deleted else ReleaseOutcome.MARKER_GONE
        except BadVersionError:
            outcome = ReleaseOutcome.MARKER_KEPT  # re-marked while we worked: another pass will look
        finally:
            await self.release(held)
        return outcome

    async def release(self, held: HeldLock) -> None:
        """Drop the lock (Java's releaseUnderreplicatedLedger). Nothing when the session that took it
        has ended: the lock went with it, and the znode at that path may be another worker's now."""
        guard = _guard(held)
        if guard.released:
            return
        try:
            guard.check()
        except RepairLockLostError as exc:
            guard.released = True
            log.info("not releasing %s: %s", held.lock_path, exc)
            return
        guard.released = True
        try:
            await self.store.bridge.call(self.store.client.delete_async, held.lock_path, -1)
        except NoNodeError:
            pass


def _guard(held: HeldLock) -> LockGuard:
    if not isinstance(held, ZkHeldLock):
        raise TypeError(f"{held.lock_path}: not a lock taken by RepairLocks")
    return held.guard


if TYPE_CHECKING:

    def _conforms(locks: RepairLocks) -> RepairLockProtocol:
        """mypy checks here that RepairLocks offers the interface the repair worker codes against."""
        return locks
