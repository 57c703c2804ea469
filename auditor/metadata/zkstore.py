"""The ZooKeeper implementation of the metadata store (kazoo, bridged to asyncio).

Reads never create anything. Every write is a ZooKeeper multi-op whose first op checks that the
leader's guard znode (its election vote) still exists, so a deposed leader's write fails atomically.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, RolledBackError
from kazoo.protocol.states import EventType, KazooState, WatchedEvent

from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata

from . import formats
from .bridge import KazooBridge, start_client, stop_client
from .election import OUR_SUBTREE
from .errors import (
    ConcurrentUpdateError,
    CorruptZnodeError,
    MissingZnodeError,
    NoSuchLedgerError,
    NotALedgersRootError,
    NotLeaderError,
)
from .interfaces import (
    BookieAddress,
    BookieRegistration,
    CookieRecord,
    CorruptLedger,
    LedgerRecord,
    MarkerRecord,
    MarkResult,
    NodeStat,
    Registrations,
    ScanStats,
    WriteGuard,
)
from .layout import LedgerLayout, parse_layout, resolve_manager
from .location import LedgerManager, MetadataLocation, join, parse_service_uri
from .paths import LeafDirectory, LedgerBatch, LedgerPaths, MarkerPaths, walk_leaf_directories, walk_ledgers
from .racks import StaticRackMap

log = logging.getLogger(__name__)

READONLY = "readonly"


class ZooKeeperMetadataStore:
    """BookKeeper's ZooKeeper metadata, read (and carefully written) as Java does."""

    def __init__(
        self,
        client: KazooClient,
        location: MetadataLocation,
        manager: LedgerManager,
        layout: LedgerLayout | None,
        bridge: KazooBridge,
        owns_client: bool = True,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.client = client
        self.location = location
        self.manager = manager
        self.layout = layout
        self.bridge = bridge
        self.paths = LedgerPaths(location.ledgers_root, manager)
        self.markers = MarkerPaths(location.ledgers_root)
        self.root = location.ledgers_root
        self._owns_client = owns_client
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._service_info: dict[str, formats.BookieServiceInfo | None] = {}
        self.state: KazooState = KazooState.CONNECTED if client.connected else KazooState.SUSPENDED
        self._connected = asyncio.Event()
        if client.connected:
            self._connected.set()
        self._lost: asyncio.Future[None] = bridge.loop.create_future()
        self._watch_tasks: set[asyncio.Task[None]] = set()
        bridge.add_state_callback(self._on_state)

    # ------------------------------------------------------------ connection state (on the loop)
    def _on_state(self, state: KazooState) -> None:
        self.state = state
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        if state == KazooState.LOST:
            # Watches die with the session: wake every watch loop so it re-arms after reconnecting.
            if not self._lost.done():
                self._lost.set_result(None)
            self._lost = self.bridge.loop.create_future()
            self._service_info.clear()

    async def wait_connected(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self._connected.wait(), timeout)

    def _spawn(self, coro: Any) -> Callable[[], None]:
        task = asyncio.ensure_future(coro)
        self._watch_tasks.add(task)
        task.add_done_callback(self._watch_tasks.discard)
        return task.cancel

    # ------------------------------------------------------------ lifecycle
    @classmethod
    async def connect(
        cls,
        location: MetadataLocation | str,
        *,
        max_in_flight: int = 64,
        connect_timeout: float = 30.0,
        client: KazooClient | None = None,
        op_timeout: float | None = 30.0,
        reads_per_second: float | None = None,
    ) -> ZooKeeperMetadataStore:
        """Connect, check that the ledgers root is a BookKeeper cluster's, read LAYOUT (never written) and
        check it against the configured manager.

        NotALedgersRootError when the root has neither LAYOUT nor `available` (a wrong path would
        otherwise look like a healthy, empty cluster). Nothing is created, whatever the outcome.
        """
        loc = parse_service_uri(location) if isinstance(location, str) else location
        owns = client is None
        if client is None:
            client = KazooClient(hosts=loc.connect_string, timeout=loc.session_timeout_ms / 1000.0, read_only=False)
        if not client.connected:
            await start_client(client, connect_timeout)
        bridge = KazooBridge(
            client, max_in_flight=max_in_flight, op_timeout=op_timeout, rate_limit=reads_per_second or None
        )
        layout_path = join(loc.ledgers_root, "LAYOUT")
        try:
            try:
                data, _ = await bridge.call(client.get_async, layout_path)
                layout: LedgerLayout | None = parse_layout(data, layout_path)
            except NoNodeError:
                await _require_ledgers_root(bridge, loc)
                layout = None
                log.warning("%s is missing: assuming the hybrid hierarchical layout (not creating it)", layout_path)
            manager = resolve_manager(loc.manager, layout, loc.driver, layout_path)
        except BaseException:
            bridge.detach()
            if owns:
                await stop_client(client)
            raise
        return cls(client, loc, manager, layout, bridge, owns)

    async def close(self) -> None:
        for task in list(self._watch_tasks):
            task.cancel()
        self.bridge.detach()
        if self._owns_client:
            await stop_client(self.client)

    async def __aenter__(self) -> ZooKeeperMetadataStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------ raw helpers
    async def _get(self, path: str, watch: Any = None) -> tuple[bytes, Any] | None:
        try:
            return await self.bridge.call(self.client.get_async, path, watch)
        except NoNodeError:
            return None

    async def _children(self, path: str, sync: bool = False) -> list[str] | None:
        try:
            if sync:
                # As Java does before each listing: a follower must not serve a stale directory.
                await self.bridge.call(self.client.sync_async, path)
            return await self.bridge.call(self.client.get_children_async, path)
        except NoNodeError:
            return None

    async def _ledger_children(self, path: str, sync: bool) -> list[str] | None:
        """Children of a ledger directory; None if it vanished (a race: nothing to list). The ledgers root
        itself missing is an error: listing it as empty would report a cluster with no ledgers."""
        names = await self._children(path, sync)
        if names is None and path == self.root:
            raise MissingZnodeError(path, "the ledgers root is gone")
        return names

    async def _exists(self, path: str, watch: Any = None) -> Any:
        return await self.bridge.call(self.client.exists_async, path, watch)

    async def _guarded(self, guard: WriteGuard, add_ops: Callable[[Any], None]) -> list[Any]:
        """Commit `check(guard) + ops` atomically. NotLeaderError if the guard znode is gone.

        Returns the per-op results of the ops after the check (an exception instance for a failed op).
        """
        guard.check()
        txn = self.client.transaction()
        txn.check(guard.guard_path, -1)  # -1: any version; the vote must simply still exist
        add_ops(txn)
        results = await self.bridge.commit(txn)
        # When another op fails, ZooKeeper reports the (passed) check as RolledBackError.
        if isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
            raise NotLeaderError(
                f"write refused: guard {guard.guard_path} is gone "
                f"({type(results[0]).__name__}); this process is not the leader"
            )
        return results[1:]

    async def _guarded_one(self, guard: WriteGuard, add_op: Callable[[Any], None]) -> Any:
        (result,) = await self._guarded(guard, add_op)
        if isinstance(result, Exception):
            raise result
        return result

    async def _create_parents(self, path: str, guard: WriteGuard) -> None:
        """Create the missing persistent, empty parents of `path` strictly below the ledgers root (each
        create guarded). The root itself is never created: if it vanished, the write fails."""
        top = self.root.rstrip("/") + "/"
        if not path.startswith(top):
            raise ValueError(f"{path} is outside the ledgers root {self.root}")
        parts = path.split("/")
        for parent in ("/".join(parts[:i]) for i in range(2, len(parts))):
            if not parent.startswith(top) or await self._exists(parent):
                continue
            try:
                await self._guarded_one(guard, lambda t, p=parent: t.create(p, b""))
            except NodeExistsError:
                pass

    @property
    def own_subtree(self) -> str:
        """`<root>/bk-auditor`: the one place the daemon keeps znodes of its own."""
        return join(self.root, OUR_SUBTREE)

    async def put(self, path: str, data: bytes, guard: WriteGuard) -> None:
        """Guarded set-or-create of one of our own znodes, under `own_subtree` (missing parents created,
        each guarded)."""
        if not path.startswith(self.own_subtree + "/"):
            raise ValueError(f"{path} is not under bk-auditor's own subtree {self.own_subtree}")
        for _ in range(3):
            try:
                await self._guarded_one(guard, lambda t: t.set_data(path, data))
                return
            except NoNodeError:
                await self._create_parents(path, guard)
                try:
                    await self._guarded_one(guard, lambda t, data=data: t.create(path, data))
                    return
                except NodeExistsError:
                    continue  # created meanwhile: set it on the next round
        raise ConcurrentUpdateError(path, "keeps changing between set and create")

    # ------------------------------------------------------------ cluster identity
    async def instance_id(self) -> str | None:
        got = await self._get(join(self.root, "INSTANCEID"))
        if got is None:
            return None
        try:
            return got[0].decode("utf-8").strip()
        except UnicodeDecodeError:
            raise CorruptZnodeError(join(self.root, "INSTANCEID"), "not UTF-8 text") from None

    # ------------------------------------------------------------ ledgers
    def list_ledgers(
        self,
        start: LedgerId | None = None,
        end: LedgerId | None = None,
        *,
        include_scoped: bool = True,
        sync: bool = True,
        stats: ScanStats | None = None,
    ) -> AsyncIterator[LedgerBatch]:
        """Every ledger id in [start, end), ascending, one leaf directory per batch (streamed)."""
        st = stats if stats is not None else ScanStats()

        def skip(parent: str, name: str) -> None:
            st.skipped_names += 1
            log.info("skipping non-ledger znode %s/%s", parent, name)

        async def children(path: str) -> list[str] | None:
            return await self._ledger_children(path, sync)

        async def gen() -> AsyncIterator[LedgerBatch]:
            async for batch in walk_ledgers(self.paths, children, start, end, include_scoped, skip):
                st.directories += 1
                st.listed += len(batch.ledger_ids)
                yield batch

        return gen()

    async def list_leaf_directories(
        self, *, include_scoped: bool = True, count_children: bool = True, sync: bool = True
    ) -> list[LeafDirectory]:
        """Every leaf directory (ascending ids) without listing any of them; with `count_children`, each
        directory's child count from its Stat (one exists() per directory, pipelined)."""

        async def children(path: str) -> list[str] | None:
            return await self._ledger_children(path, sync)

        dirs = [d async for d in walk_leaf_directories(self.paths, children, include_scoped)]
        if not count_children:
            return dirs

        async def counted(d: LeafDirectory) -> LeafDirectory:
            stat = await self._exists(d.path)
            return LeafDirectory(d.path, d.first, d.last, stat.numChildren if stat is not None else 0)

        return list(await asyncio.gather(*(counted(d) for d in dirs)))

    def scan_ledgers(
        self,
        start: LedgerId | None = None,
        end: LedgerId | None = None,
        *,
        include_scoped: bool = True,
        stats: ScanStats | None = None,
    ) -> AsyncIterator[list[LedgerRecord | CorruptLedger]]:
        """Metadata of every ledger in [start, end), one leaf directory per batch, reads in parallel.

        Ledgers deleted between listing and reading are dropped (counted in `stats.vanished`); corrupt
        ones are yielded as CorruptLedger (counted) and never stop the scan.
        """
        st = stats if stats is not None else ScanStats()

        async def gen() -> AsyncIterator[list[LedgerRecord | CorruptLedger]]:
            async for batch in self.list_ledgers(start, end, include_scoped=include_scoped, stats=st):
                results = await self.read_ledgers(batch.ledger_ids)
                out: list[LedgerRecord | CorruptLedger] = []
                for r in results:
                    if r is None:
                        st.vanished += 1
                    else:
                        if isinstance(r, CorruptLedger):
                            st.corrupt += 1
                        else:
                            st.read += 1
                        out.append(r)
                st.last_ledger = batch.ledger_ids[-1]
                yield out

        return gen()

    async def read_ledger(self, ledger_id: LedgerId | int) -> LedgerRecord:
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        path = self.paths.path(lid)
        got = await self._get(path)
        if got is None:
            raise NoSuchLedgerError(path)
        data, stat = got
        md = formats.parse_ledger_metadata(data, lid, path, stat.version)
        return LedgerRecord(md, path, NodeStat.from_zk(stat))

    async def read_ledgers(self, ids: Iterable[LedgerId]) -> list[LedgerRecord | CorruptLedger | None]:
        """Read many in parallel (bounded by the bridge); None for a ledger that does not exist."""

        async def one(lid: LedgerId) -> LedgerRecord | CorruptLedger | None:
            try:
                return await self.read_ledger(lid)
            except NoSuchLedgerError:
                return None
            except CorruptZnodeError as exc:
                log.warning("corrupt ledger metadata: %s", exc)
                return CorruptLedger(lid, exc.path, exc.problem)

        return list(await asyncio.gather(*(one(i) for i in ids)))

    async def write_ledger_metadata(
        self,
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
        path = self.paths.path(metadata.ledger_id)
        data = formats.serialize_ledger_metadata(metadata, format_version)
        if expected_version is None:
            for _ in range(3):
                try:
                    await self._guarded_one(guard, lambda t, data=data: t.create(path, data))
                    return 0
                except NoNodeError:
                    await self._create_parents(path, guard)
                except NodeExistsError:
                    raise ConcurrentUpdateError(path, "ledger znode already exists") from None
            raise ConcurrentUpdateError(path, "parents keep vanishing")
        try:
            stat = await self._guarded_one(guard, lambda t: t.set_data(path, data, expected_version))
        except BadVersionError:
            raise ConcurrentUpdateError(path, f"version is no longer {expected_version}") from None
        except NoNodeError:
            raise NoSuchLedgerError(path) from None
        return stat.version

    # ------------------------------------------------------------ bookies
    @property
    def available_path(self) -> str:
        return join(self.root, "available")

    @property
    def readonly_path(self) -> str:
        return join(self.root, "available", READONLY)

    async def _registrations_under(self, parent: str, read_only: bool) -> dict[str, BookieRegistration]:
        """Registrations under `available` (writable) or `available/readonly`. `available` missing is an
        error (every BookKeeper cluster has it; Java's registration client fails too); `readonly` missing
        means none (Java's clients create it lazily). Names that are not valid bookie ids are skipped with
        a warning: no ensemble can name them (Java's listing throws on them)."""
        names = await self._children(parent)
        if names is None:
            if not read_only:
                raise MissingZnodeError(
                    parent, "bookie registration directory is missing; this is not a readable BookKeeper cluster"
                )
            names = []
        valid = []
        for n in names:
            if n == READONLY and not read_only:
                continue
            if formats.is_valid_bookie_id(n):
                valid.append(n)
            else:
                log.warning("skipping %s/%r: not a valid bookie id", parent, n)
        names = valid

        async def one(name: str) -> BookieRegistration | None:
            path = join(parent, name)
            got = await self._get(path)
            if got is None:
                return None  # unregistered while we looked
            data, stat = got
            try:
                info, err = formats.parse_bookie_service_info(data, path), None
            except CorruptZnodeError as exc:
                info, err = None, exc.problem
            self._service_info[name] = info
            return BookieRegistration(name, read_only, info, NodeStat.from_zk(stat), err)

        regs = await asyncio.gather(*(one(n) for n in names))
        return {r.bookie_id: r for r in regs if r is not None}

    async def registrations(self) -> Registrations:
        writable, read_only = await asyncio.gather(
            self._registrations_under(self.available_path, False), self._registrations_under(self.readonly_path, True)
        )
        return Registrations(writable, read_only)

    def watch_registrations(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback()` (on the loop) whenever the writable or read-only bookie list may have
        changed (a child watch fired, or the session was lost and re-established). Returns a canceller.
        """

        async def both() -> None:
            await asyncio.gather(
                self._watch_loop(self.available_path, callback, children=True),
                self._watch_loop(self.readonly_path, callback, children=True),
            )

        return self._spawn(both())

    async def cookies(self) -> dict[str, CookieRecord]:
        parent = join(self.root, "cookies")
        names = await self._children(parent) or []
        recs = await asyncio.gather(*(self.cookie(n) for n in names))
        return {n: r for n, r in zip(names, recs) if r is not None}

    async def cookie(self, bookie_id: str) -> CookieRecord | None:
        path = join(self.root, "cookies", bookie_id)
        got = await self._get(path)
        if got is None:
            return None
        data, stat = got
        try:
            return CookieRecord(formats.parse_cookie(data, path), NodeStat.from_zk(stat))
        except CorruptZnodeError as exc:
            return CookieRecord(None, NodeStat.from_zk(stat), exc.problem)

    async def resolve_bookie(self, bookie_id: str) -> BookieAddress | None:
        """bookie id -> (host, port): the registration's bookie-rpc endpoint, else `host:port` parsing."""
        if bookie_id not in self._service_info:
            for parent in (self.available_path, self.readonly_path):
                got = await self._get(join(parent, bookie_id))
                if got is not None:
                    try:
                        self._service_info[bookie_id] = formats.parse_bookie_service_info(
                            got[0], join(parent, bookie_id)
                        )
                    except CorruptZnodeError as exc:
                        log.warning("%s", exc)
                    break
        return address_of(bookie_id, self._service_info.get(bookie_id))

    def address_resolver(self) -> Callable[[str], Any]:
        """An async function bookie id -> (host, port) for the bookie client (LookupError if unknown)."""

        async def resolve(bookie_id: str) -> tuple[str, int]:
            addr = await self.resolve_bookie(bookie_id)
            if addr is None:
                raise LookupError(f"cannot resolve bookie {bookie_id!r}: not registered and not host:port")
            return addr.host, addr.port

        return resolve

    # ------------------------------------------------------------ under-replication
    async def read_marker(self, ledger_id: LedgerId | int) -> MarkerRecord | None:
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        path = self.markers.marker(lid)
        got = await self._get(path)
        if got is None:
            return None
        ur = formats.parse_marker(got[0], path)
        return MarkerRecord(lid, path, ur.replicas, ur.ctime, NodeStat.from_zk(got[1]))

    async def mark_underreplicated(
        self, ledger_id: LedgerId | int, replicas: Iterable[str], guard: WriteGuard, *, store_ctime: bool = True
    ) -> MarkResult:
        """Create or merge a marker exactly as Java's markLedgerUnderreplicatedAsync (spec §5.2), guarded."""
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        wanted = list(dict.fromkeys(replicas))
        path = self.markers.marker(lid)
        for _ in range(100):
            data = formats.serialize_marker(wanted, self._clock_ms() if store_ctime else None)
            try:
                await self._guarded_one(guard, lambda t, data=data: t.create(path, data))
                return MarkResult.CREATED
            except NoNodeError:
                # A parent is missing (maybe a worker is removing empty parents right now): create, retry.
                await self._create_parents(path, guard)
                continue
            except NodeExistsError:
                pass
            got = await self._get(path)
            if got is None:
                continue  # removed in between: create again
            existing = formats.parse_marker(got[0], path)
            merged, changed = formats.merge_replicas(existing.replicas, wanted)
            if not changed:
                return MarkResult.UNCHANGED
            ctime = self._clock_ms() if store_ctime else (existing.ctime if existing.ctime >= 0 else None)
            new = formats.serialize_marker(merged, ctime)
            try:
                await self._guarded_one(
                    guard, lambda t, new=new, version=got[1].version: t.set_data(path, new, version)
                )
                return MarkResult.MERGED
            except (BadVersionError, NoNodeError):
                continue  # changed or removed since we read it: start over, as Java does
        raise ConcurrentUpdateError(path, "marker kept changing; gave up after 100 attempts")

    async def delete_marker(self, ledger_id: LedgerId | int, guard: WriteGuard, version: int = -1) -> bool:
        """Delete a marker (and its empty parents, as Java's workers do). False if it did not exist."""
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        path = self.markers.marker(lid)
        try:
            await self._guarded_one(guard, lambda t: t.delete(path, version))
        except NoNodeError:
            return False
        except BadVersionError:
            raise ConcurrentUpdateError(path, f"version is no longer {version}") from None
        top = self.markers.ledgers if lid.scope == 0 else self.markers.scoped_ledgers
        parent = path.rsplit("/", 1)[0]
        while parent != top and parent.startswith(top + "/"):
            try:
                await self._guarded_one(guard, lambda t, p=parent: t.delete(p, -1))
            except (NotEmptyError, NoNodeError):
                break
            parent = parent.rsplit("/", 1)[0]
        return True

    def list_markers(self, include_scoped: bool = True) -> AsyncIterator[MarkerRecord]:
        """Every marker (walks the 4 hex levels; scoped markers from their own tree), streamed."""

        async def walk(base: str, levels: int) -> AsyncIterator[str]:
            stack = [(base, 0)]
            while stack:
                d, depth = stack.pop()
                names = sorted(await self._children(d) or [], reverse=True)
                for n in names:
                    p = join(d, n)
                    if depth == levels:
                        yield p
                    else:
                        stack.append((p, depth + 1))

        async def gen() -> AsyncIterator[MarkerRecord]:
            trees = [(self.markers.ledgers, 4)] + ([(self.markers.scoped_ledgers, 8)] if include_scoped else [])
            for base, levels in trees:
                async for p in walk(base, levels):
                    lid = self.markers.parse_marker(p)
                    if lid is None:
                        log.info("skipping non-marker znode %s", p)
                        continue
                    try:
                        rec = await self.read_marker(lid)
                    except CorruptZnodeError as exc:
                        log.warning("corrupt marker: %s", exc)
                        continue
                    if rec is not None:
                        yield rec

        return gen()

    async def locks(self) -> set[str]:
        """Names of the worker locks held now (`urL<id>` leaves of U/locks)."""
        return set(await self._children(self.markers.locks) or [])

    async def lock_holder(self, ledger_id: LedgerId | int) -> str | None:
        """Who holds the replication lock of a ledger (read-only; we never take locks)."""
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        path = self.markers.lock(lid)
        got = await self._get(path)
        return None if got is None else formats.parse_lock(got[0], path)

    async def is_replication_disabled(self) -> bool:
        return await self._exists(self.markers.disable) is not None

    async def lost_bookie_recovery_delay(self) -> int | None:
        path = self.markers.lost_bookie_recovery_delay
        got = await self._get(path)
        return None if got is None else formats.parse_lost_bookie_recovery_delay(got[0], path)

    def watch_lost_bookie_recovery_delay(self, callback: Callable[[int | None], None]) -> Callable[[], None]:
        """`callback(seconds)` on the loop at every data change of the znode, same value included
        (`triggeraudit` rewrites the same value). None when the znode is deleted or unparsable.
        Returns a canceller.
        """
        path = self.markers.lost_bookie_recovery_delay

        async def report() -> None:
            got = await self._get(path)
            callback(None if got is None else _safe_int(got[0], path))

        return self._spawn(self._watch_loop(path, report, children=False))

    async def _watch_loop(self, path: str, on_change: Callable[[], Any], *, children: bool) -> None:
        """Keep a one-shot watch armed on `path` (children or data/existence) and call `on_change` on the
        loop each time it fires. After a session loss (watches die with it) re-arm once reconnected and
        report a change only if the znode moved on meanwhile (mzxid/cversion).
        """
        last_seen: tuple[int, int] | None = None
        while True:
            await self._connected.wait()
            lost = self._lost
            watch, fired = self.bridge.event_watch()
            try:
                if children:
                    try:
                        _, stat = await self.bridge.call(self.client.get_children_async, path, watch, True)
                    except NoNodeError:
                        stat = await self._exists(path, watch)
                else:
                    stat = await self._exists(path, watch)
            except NoNodeError:
                stat = None
            except Exception as exc:  # connection trouble: wait and re-arm
                log.debug("watch on %s: %r; re-arming", path, exc)
                await asyncio.sleep(0.5)
                continue
            seen = (stat.mzxid, stat.cversion) if stat is not None else (-1, -1)
            if last_seen is not None and seen != last_seen:
                await _call(on_change)  # changed while the watch was down (e.g. during a session loss)
            last_seen = seen
            done, _ = await asyncio.wait({fired, lost}, return_when=asyncio.FIRST_COMPLETED)
            if fired in done:
                event: WatchedEvent = fired.result()
                if event.type != EventType.NONE:
                    last_seen = None
                    await _call(on_change)

    async def check_ctime(self, name: str) -> int | None:
        """A check-time znode (`checkallledgersctime`, ...) in ms; None if missing or unreadable."""
        path = join(self.markers.base, name)
        got = await self._get(path)
        if got is None:
            return None
        try:
            return formats.parse_check_ctime(name, got[0], path)
        except CorruptZnodeError as exc:
            log.warning("%s (Java treats this as 'never ran')", exc)
            return None

    async def set_check_ctime(self, name: str, ctime_ms: int, guard: WriteGuard) -> None:
        """Create-if-absent-else-overwrite, as the Java auditor does at the end of a run (guarded)."""
        path = join(self.markers.base, name)
        data = formats.serialize_check_ctime(name, ctime_ms)
        for _ in range(10):
            try:
                await self._guarded_one(guard, lambda t: t.set_data(path, data, -1))
                return
            except NoNodeError:
                pass
            try:
                await self._guarded_one(guard, lambda t, data=data: t.create(path, data))
                return
            except NoNodeError:
                await self._create_parents(path, guard)
            except NodeExistsError:
                pass
        raise ConcurrentUpdateError(path, "could not write the check time")

    async def ensure_underreplication_layout(self, guard: WriteGuard) -> None:
        """Check U/LAYOUT (BASIC v1) or create it exactly as Java would when missing (guarded)."""
        path = self.markers.layout
        got = await self._get(path)
        if got is not None:
            formats.check_ur_layout(got[0], path)
            return
        await self._create_parents(path, guard)
        try:
            await self._guarded_one(guard, lambda t: t.create(path, formats.serialize_ur_layout()))
        except NodeExistsError:
            got = await self._get(path)
            if got is not None:
                formats.check_ur_layout(got[0], path)


async def _require_ledgers_root(bridge: KazooBridge, loc: MetadataLocation) -> None:
    """Refuse a root with neither LAYOUT (the caller found none) nor `available`: every formatted
    BookKeeper cluster has both, so this is a wrong path (e.g. /wrongroot, /zookeeper). Read-only."""
    root = loc.ledgers_root
    if await bridge.call(bridge.client.exists_async, join(root, "available")) is not None:
        return
    exists = await bridge.call(bridge.client.exists_async, root) is not None
    shown = loc.chroot + root
    raise NotALedgersRootError(
        shown,
        "not a BookKeeper ledgers root: "
        + ("it has neither LAYOUT nor available" if exists else "no such znode")
        + " (check the path of the metadata service URI or zkLedgersRootPath)",
    )


async def _call(fn: Callable[[], Any]) -> None:
    try:
        result = fn()
        if asyncio.iscoroutine(result):
            await result
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("watch callback %r failed", fn)


def _safe_int(data: bytes, path: str) -> int | None:
    try:
        return formats.parse_lost_bookie_recovery_delay(data, path)
    except CorruptZnodeError as exc:
        log.warning("%s", exc)
        return None


def address_of(bookie_id: str, info: formats.BookieServiceInfo | None) -> BookieAddress | None:
    """The bookie-rpc endpoint if the registration has one, else the id parsed as host:port (best effort)."""
    ep = info.rpc_endpoint if info is not None else None
    if ep is not None:
        return BookieAddress(ep.host, ep.port, best_effort=False)
    hp = formats.parse_host_port(bookie_id)
    return None if hp is None else BookieAddress(hp[0], hp[1], best_effort=True)


async def pulsar_racks(
    store: ZooKeeperMetadataStore, *, path: str = "/bookies", default_rack: str = "/default-rack"
) -> StaticRackMap | None:
    """Pulsar's rack map from `/bookies` at the metadata-store root (inside any chroot); None if absent."""
    from .racks import pulsar_rack_map

    got = await store._get(path)
    if got is None:
        return None

    async def host_of(bookie_id: str) -> str | None:
        addr = await store.resolve_bookie(bookie_id)
        return addr.host if addr else None

    return pulsar_rack_map(got[0], path=path, default_rack=default_rack, host_of=host_of)
