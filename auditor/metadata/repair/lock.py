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
* every write made while holding a lock is guarded by it (`LockGuard`, a `ProvingGuard`): a multi-op
  whose first ops check that this session's *proof* node and the lock still exist. The proof is an
  EPHEMERAL_SEQUENTIAL node of our own subtree, `<root>/bk-auditor/repair-sessions/<session hex>-<seq>`,
  made once per session; the lock itself is created in a multi-op that checks the proof. ZooKeeper
  deletes a session's ephemerals when it expires, before the client can get a new session, and a
  sequential name is never made twice, so a write succeeds only while the session that took the lock
  lives, even when kazoo has meanwhile replaced the expired session (a local session-id check alone
  could straddle that replacement, and a lock re-created by another worker has the same path and
  version 0). An exists watch on the lock marks the guard lost when the lock is deleted (or its watch
  cannot be re-armed on the same lock) while our session lives; an exists watch on the ledger marks it
  deleted. `write_refusal` (no round trip) is what the bookie writes ask before each request: also the
  connection state (no write while SUSPENDED) and the ledger's existence.
* finish: `mark_replicated` deletes the marker with the captured version only when the caller says the
  ledger re-checked clean (a fresh re-mark bumped the version and survives), then empty parents, then
  the lock; `release` only drops the lock (give up now, or after the caller's backoff).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType, KazooState, WatchedEvent

from auditor.aio import spawn
from auditor.aio.stall import StallFence
from auditor.durability.ids import LedgerId
from auditor.logging import get_logger
from auditor.metadata.codecs import formats
from auditor.metadata.errors import RepairLockLostError
from auditor.metadata.interfaces import HeldLock, MarkerRecord, ReleaseOutcome, RepairLockProtocol
from auditor.metadata.location import join
from auditor.metadata.store import ZooKeeperMetadataStore

log = get_logger("auditor.metadata.zkrepairlock")


# Per connection: the lock paths its RepairLocks hold now. A lock of the connection's own session that is
# in none of them is an orphan (its release could not reach ZooKeeper) and may be taken back.
_HELD: weakref.WeakKeyDictionary[ZooKeeperMetadataStore, set[str]] = weakref.WeakKeyDictionary()

PROOF_DIR = "repair-sessions"  # under our own subtree: one ephemeral proof node per session that takes locks


@dataclass(slots=True, eq=False)
class LockGuard:
    """Write guard bound to one held lock: valid while the session that took it lives (its proof node
    exists), the lock is the one we created, and we have not released it."""

    lock_path: str
    session_id: int
    proof_path: str
    store: ZooKeeperMetadataStore
    ledger_path: str | None = None  # watched: bookie writes stop once the ledger is deleted
    lock_czxid: int | None = None  # the lock we created (set when its watch is first armed)
    released: bool = False
    releasing: bool = False  # our own delete of the lock is under way: its watch event is no loss
    lost: str | None = None  # why the lock is known not to be ours any more
    ledger_deleted: bool = False
    watches_down: set[str] = field(default_factory=set)  # kazoo dropped them at a disconnect: re-arming
    fence: StallFence | None = None  # a frozen process holds its bookie writes until ZooKeeper answers
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def guard_path(self) -> str:
        return self.lock_path

    @property
    def guard_paths(self) -> tuple[str, ...]:
        return (self.proof_path, self.lock_path)

    def refused(self, path: str, problem: str) -> RepairLockLostError:
        if self.lost is None:
            self.lost = problem  # the server says so: refuse locally from now on
        return RepairLockLostError(self.lock_path, problem)

    def _local_problem(self) -> str | None:
        if self.released:
            return "released by this worker; take it again before writing"
        if self.lost is not None:
            return self.lost
        if self.session_ended():
            return "the ZooKeeper session that took it has ended; another worker may hold it now"
        return None

    def session_ended(self) -> bool:
        """Whether the session that took the lock is gone; a connection that is only suspended keeps it."""
        session = self.store.session_id
        return session is None or session != self.session_id

    def check(self) -> None:
        """Before a guarded ZooKeeper write (the multi-op proves the rest)."""
        problem = self._local_problem()
        if problem is not None:
            raise RepairLockLostError(self.lock_path, problem)

    def write_refusal(self) -> str | None:
        """Why a bookie write for this ledger must not be sent now, or None. Local (flags set by the
        watches and the connection state), so cheap enough for every request."""
        problem = self._local_problem()
        if problem is not None:
            return f"lock {self.lock_path}: {problem}"
        state = self.store.client.state
        if state != KazooState.CONNECTED:
            return f"lock {self.lock_path}: the ZooKeeper connection is {state}: the lock may be lost"
        if self.watches_down:
            return f"lock {self.lock_path}: watches on {', '.join(sorted(self.watches_down))} not re-armed yet"
        if self.ledger_deleted:
            return f"ledger {self.ledger_path} was deleted"
        stalled = self.fence.problem() if self.fence is not None else None
        if stalled is not None:
            return f"lock {self.lock_path}: {stalled}"
        return None

    # ------------------------------------------------------------ watches (on the loop)
    async def arm(self) -> None:
        """Exists watches on the lock and the ledger; the lock must be the one our session created."""
        await self._arm(self.lock_path)
        if self.ledger_path is not None:
            await self._arm(self.ledger_path)

    async def _arm(self, path: str) -> None:
        stat = await self.store.exists(path, self.store.bridge.watcher(lambda event: self._fired(path, event)))
        self.watches_down.discard(path)
        if path == self.ledger_path:
            if stat is None:
                self.ledger_deleted = True
            return
        if self.lock_czxid is None and stat is not None and stat.ephemeralOwner == self.session_id:
            self.lock_czxid = stat.czxid
        if stat is None or stat.czxid != self.lock_czxid:
            self._lose("the lock znode was deleted (or re-created by another worker)")

    def _lose(self, why: str) -> None:
        if self.lost is None and not self.released:
            self.lost = why
            log.warning("repair lock %s lost: %s", self.lock_path, why)

    def _fired(self, path: str, event: WatchedEvent) -> None:
        if self.released or self.releasing or self.lost is not None:
            return
        if event.type == EventType.DELETED:
            if path == self.ledger_path:
                self.ledger_deleted = True
            else:
                self._lose("the lock znode was deleted while our session lives")
            return
        # NONE: kazoo dropped every watch at a disconnect; refuse until re-armed (the lock compared by
        # czxid). A change of the ledger (its writer, our own ensemble update) only needs the re-arm,
        # whose look also sees a deletion since.
        if event.type == EventType.NONE or path != self.ledger_path:
            self.watches_down.add(path)
        spawn(self._rearm(path), name=f"re-arm watch on {path}", keep=self._tasks)

    async def _rearm(self, path: str) -> None:
        while not self.released and self.lost is None:
            await self.store.wait_connected()
            session = self.store.client.client_id
            if session is None or session[0] != self.session_id:
                return  # a new session: the lock went with the old one (check() says so)
            try:
                await self._arm(path)
                return
            except Exception as exc:  # connection trouble: try again once reconnected
                log.debug("re-arming the watch on %s: %r", path, exc)
                await asyncio.sleep(0.2)


@dataclass(frozen=True, slots=True)
class ZkHeldLock(HeldLock):
    guard: LockGuard


class RepairLocks:
    """Java's worker lock protocol on one store's connection; `holder` goes into the lock data (what
    `listunderreplicated -printreplicationworkerid` shows), e.g. `bk-auditor@<host>`."""

    def __init__(self, store: ZooKeeperMetadataStore, holder: str, fence: StallFence | None = None) -> None:
        self.store = store
        self.holder = holder
        self.fence = fence
        self._data = formats.serialize_lock(holder)
        self._proof: tuple[str, int] | None = None  # (proof node, the session that owns it)
        self._proof_made = asyncio.Lock()  # lanes taking locks at once share one proof per session
        # Lock paths held now (taken, not yet released) through this connection, by any RepairLocks on it.
        self._held = _HELD.setdefault(store, set())

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
        proof = await self.session_proof()
        if proof is None:
            return None
        proof_path, session = proof
        acl = self.store.security.znode_acl(lock)
        for _ in range(2):
            # Created only while the proof exists: the lock is then this session's (Java's lock node as
            # ever: same path, data, ephemeral; the multi only adds the check before it).
            txn = self.store.client.transaction()
            txn.check(proof_path, -1)
            txn.create(lock, self._data, acl, ephemeral=True)
            checked, created = await self.store.bridge.commit(txn)
            if isinstance(checked, NoNodeError):
                self._proof = None  # the session ended (its proof went with it): the next pass makes one
                return None
            if isinstance(created, NoNodeError):
                await self._create_locks_dir(lock)
                continue
            if isinstance(created, NodeExistsError):
                if await self._reclaim_orphan(lock, proof):
                    continue
                return None
            if isinstance(created, Exception):
                raise created
            break
        else:
            return None
        self._held.add(lock)
        guard = LockGuard(
            lock, session, proof_path, self.store, ledger_path=self.store.paths.path(ledger_id), fence=self.fence
        )
        held = ZkHeldLock(ledger_id, marker, lock, stat.version, self.holder, guard)
        try:
            await guard.arm()
        except BaseException:
            await asyncio.shield(self.release(held))
            raise
        if guard.lost is not None:
            return None  # gone already (its session ended since): nothing of ours to release
        if await self.store.exists(marker) is None:
            # A Java worker deletes the marker, cleans its parents and only then drops its lock: a
            # create that won in that gap holds a lock on finished work. Give it back at once.
            await self.release(held)
            return None
        return held

    async def _reclaim_orphan(self, lock: str, proof: tuple[str, int]) -> bool:
        """A lock that exists already: True when it was this session's own, held by none of our lanes (a
        release that could not reach ZooKeeper), and is now deleted, so it can be taken again. Anyone
        else's lock (another session owns it) is left alone. The delete is version-checked and made only
        while our proof exists, i.e. while the session that owns the lock lives."""
        if lock in self._held:
            return False
        stat = await self.store.exists(lock)
        # Held again? A lane of ours may have released and re-taken it while we looked.
        if stat is None or stat.ephemeralOwner != proof[1] or lock in self._held:
            return False
        txn = self.store.client.transaction()
        txn.check(proof[0], -1)
        txn.delete(lock, stat.version)
        checked, deleted = await self.store.bridge.commit(txn)
        if isinstance(checked, Exception) or isinstance(deleted, Exception):
            return False
        log.warning("repair lock %s of this session was held by no worker lane: deleted, taken again", lock)
        return True

    async def session_proof(self) -> tuple[str, int] | None:
        """This session's proof node and the session that owns it (made at the first lock of a session):
        `<root>/bk-auditor/repair-sessions/<session hex>-<seq>`, EPHEMERAL_SEQUENTIAL. Its owner is read
        back, not assumed: the hex in its name is the session we asked on, informational only."""
        async with self._proof_made:
            session = self.store.client.client_id
            if session is None:
                return None
            if self._proof is not None and self._proof[1] == session[0]:
                return self._proof
            base = join(self.store.own_subtree, PROOF_DIR)
            prefix = f"{base}/{session[0]:016x}-"
            acl = self.store.security.znode_acl(prefix)
            for _ in range(2):
                try:
                    path = await self.store.bridge.call(
                        self.store.client.create_async, prefix, b"", acl, ephemeral=True, sequence=True
                    )
                    break
                except NoNodeError:
                    await self._create_own_dirs(base)
            else:
                return None
            stat = await self.store.exists(path)
            if stat is None:
                return None  # its session ended at once
            self._proof = (path, stat.ephemeralOwner)
            return self._proof

    async def reconfirm(self, epoch: int, retry_s: float = 1.0) -> None:
        """After the loop froze (`fence`, epoch `epoch`): release the held bookie writes once a ZooKeeper
        round trip begun now shows this session's proof still owned by the session that made it. A
        session that expired meanwhile fails that round trip, and the client soon says the session ended
        (every guard of it refuses for good then). Tries until confirmed or a newer stall takes over."""
        fence = self.fence
        if fence is None:
            return
        while fence.epoch == epoch and fence.unconfirmed_since is not None:
            proof = self._proof
            try:
                stat = await self.store.exists(proof[0]) if proof is not None else None
            except Exception as exc:  # connection loss, an expired session: not confirmed
                log.info("session not confirmed after the stall: %r", exc)
                stat = None
            session = self.store.client.client_id
            if proof is None or (
                stat is not None and session is not None and stat.ephemeralOwner == proof[1] == session[0]
            ):
                # No proof yet: no lock was taken in this session, so there is nothing to confirm.
                if fence.confirm(epoch):
                    log.warning("session confirmed by ZooKeeper after the stall: repair writes resume")
                return
            await asyncio.sleep(retry_s)

    async def _create_own_dirs(self, base: str) -> None:
        """`<root>/bk-auditor[/repair-sessions]` (persistent, empty), the proofs' parents: only in our own
        subtree, never the ledgers root. Unguarded, as the lock itself: the proof is what guards."""
        for path in (self.store.own_subtree, base):
            if await self.store.exists(path) is not None:
                continue
            try:
                await self.store.bridge.call(
                    self.store.client.create_async, path, b"", self.store.security.znode_acl(path)
                )
            except NodeExistsError:
                pass

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
        guard.releasing = True  # the delete's own watch event may arrive before it returns
        try:
            while True:
                # A connection that is only down (a ZooKeeper restart) keeps the session and its lock:
                # wait until it is back and delete the lock then; else it would stay held by a live
                # session and no worker could take the ledger until that session ends.
                await self.store.wait_connected()
                if guard.session_ended():
                    log.info("not releasing %s: the session that took it has ended", held.lock_path)
                    return
                try:
                    # Deleted in a multi-op that checks the proof first: never a lock of another session.
                    await self.store.guarded_one(guard, lambda t: t.delete(held.lock_path, -1))
                    return
                except RepairLockLostError as exc:
                    log.info("not releasing %s: %s", held.lock_path, exc)
                    return
                except NoNodeError:
                    return  # gone already (a deletion of the ledger's lock by someone else)
                except KazooException as exc:  # the connection went down again: wait and try again
                    log.info("releasing %s: %r; trying again once reconnected", held.lock_path, exc)
                    await asyncio.sleep(0.2)
        finally:
            guard.released = True
            self._held.discard(held.lock_path)


def _guard(held: HeldLock) -> LockGuard:
    if not isinstance(held, ZkHeldLock):
        raise TypeError(f"{held.lock_path}: not a lock taken by RepairLocks")
    return held.guard


if TYPE_CHECKING:

    def _conforms(locks: RepairLocks) -> RepairLockProtocol:
        """mypy checks here that RepairLocks offers the interface the repair worker codes against."""
        return locks
