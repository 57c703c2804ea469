"""The ZooKeeper connection under the metadata store: the primitives its recipes are built on.

As kazoo keeps its client apart from its recipes, this module holds only the connection (kazoo bridged
to asyncio, the LAYOUT check at connect, session state), raw reads, kept-armed watches and the guarded
write; what the znodes mean lives in one recipe per part of the tree, each taking the connection
(bookkeeper/ledgers.py, bookkeeper/bookies.py, bookkeeper/markers.py, own/znodes.py), composed into one
store by metadata/store.py.

Reads never create anything. Every write is a ZooKeeper multi-op whose first op checks that the writer's
guard znode (the leader's election vote) still exists, so a deposed leader's write fails atomically; a
repair lock's write checks its session's proof node and the lock first (`ProvingGuard`,
repair/lock.py).
Missing parents are created only strictly below the ledgers root: never the root itself, never outside it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from contextlib import ExitStack
from typing import Any, Self, cast

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionLoss,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    SessionClosedRequireSaslError,
)
from kazoo.protocol.states import EventType, KazooState, KeeperState, WatchedEvent

from auditor.aio import spawn
from auditor.logging import get_logger
from auditor.metadata.codecs.layout import LedgerLayout, parse_layout, resolve_manager
from auditor.metadata.codecs.paths import LedgerPaths, MarkerPaths
from auditor.metadata.errors import NotALedgersRootError, NotLeaderError
from auditor.metadata.interfaces import ProvingGuard, WriteGuard
from auditor.metadata.location import LedgerManager, MetadataLocation, join, parse_service_uri
from auditor.metadata.zk.bridge import KazooBridge, connection_abandoned, start_client, stop_client
from auditor.metadata.zk.security import PLAINTEXT, ZkSecurity, ZooKeeperAuthError
from auditor.metadata.zk.wire import reader_for

log = get_logger("auditor.metadata.zkconnection")


def reconnect_policy(session_timeout: float) -> dict[str, float]:
    """kazoo's reconnect backoff, capped well below the session timeout. kazoo's default doubles up to an
    hour: after a ZooKeeper restart of a few seconds our clients next tried 7-8 s later, past a 4 s
    session, so the session expired and the leader changed 9 s after ZooKeeper was back (chaos seed 1,
    round 115). Java's client retries about every second."""
    return {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": min(1.0, session_timeout / 4), "max_jitter": 0.1}


class ZooKeeperConnection:
    """One kazoo session on a BookKeeper cluster's ledgers root: reads, watches, guarded writes."""

    def __init__(
        self,
        client: KazooClient,
        location: MetadataLocation,
        manager: LedgerManager,
        layout: LedgerLayout | None,
        bridge: KazooBridge,
        owns_client: bool = True,
        clock_ms: Callable[[], int] | None = None,
        resources: ExitStack | None = None,
        security: ZkSecurity = PLAINTEXT,
    ) -> None:
        self.client = client
        self.security = security  # how we connected; `security.znode_acl(path)` for a create's ACL
        self.location = location
        self.manager = manager
        self.layout = layout
        self.bridge = bridge
        self.paths = LedgerPaths(location.ledgers_root, manager)
        self.markers = MarkerPaths(location.ledgers_root)
        self.root = location.ledgers_root
        self._owns_client = owns_client
        self._resources = resources or ExitStack()  # e.g. converted TLS stores, removed at close
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.state: KazooState = KazooState.CONNECTED if client.connected else KazooState.SUSPENDED
        self._connected = asyncio.Event()
        if client.connected:
            self._connected.set()
        self._lost: asyncio.Future[None] = bridge.loop.create_future()
        live = client.client_id
        self._session: int | None = live[0] if live is not None else None
        self._watch_tasks: set[asyncio.Task[None]] = set()
        self._session_lost_callbacks: list[Callable[[], None]] = []
        bridge.add_state_callback(self._on_state)

    # ------------------------------------------------------------ connection state (on the loop)
    def _on_state(self, state: KazooState) -> None:
        self.state = state
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        if state == KazooState.LOST:
            self._session = None
            # Watches die with the session: wake every watch loop so it re-arms after reconnecting.
            if not self._lost.done():
                self._lost.set_result(None)
            self._lost = self.bridge.loop.create_future()
            for forget in self._session_lost_callbacks:
                forget()

    @property
    def session_id(self) -> int | None:
        """The ZooKeeper session this client holds, also while its connection is suspended: a disconnect
        does not end a session (its ephemerals, a repair lock among them, live on until it expires, and
        kazoo reconnects with it). None once the session is lost (LOST) or the client closed. kazoo's
        `client_id` is None whenever the connection is down, so it cannot tell the two apart."""
        live = self.client.client_id
        if live is not None:
            self._session = live[0]
        elif self.client.client_state in (KeeperState.CLOSED, KeeperState.EXPIRED_SESSION, KeeperState.AUTH_FAILED):
            self._session = None
        return self._session

    def on_session_lost(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (on the loop) each time the session is lost: for the recipes to forget what
        they cached under it."""
        self._session_lost_callbacks.append(callback)

    def now_ms(self) -> int:
        """The wall clock in milliseconds (a test's clock if one was given), e.g. for a marker's ctime."""
        return self._clock_ms()

    def spawn_watch(self, coro: Coroutine[Any, Any, None]) -> Callable[[], None]:
        """Run a watch loop in the background (kept until it ends, its failure logged); returns its canceller."""
        task = spawn(coro, name="zookeeper watch", keep=self._watch_tasks)

        def cancel() -> None:
            task.cancel()

        return cancel

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
        writes_per_second: float | None = None,
        security: ZkSecurity = PLAINTEXT,
        wire_reads: bool = True,
    ) -> Self:
        """Connect, check that the ledgers root is a BookKeeper cluster's, read LAYOUT (never written) and
        check it against the configured manager.

        NotALedgersRootError when the root has neither LAYOUT nor `available` (a wrong path would
        otherwise look like a healthy, empty cluster). Nothing is created, whatever the outcome.
        `security` says how (TLS, credentials) and which ACL our creates carry; with TLS asked for,
        nothing is ever sent in plaintext. ZooKeeperAuthError when ZooKeeper refuses us. With
        `wire_reads`, bulk reads use a read-only session of our own (`zk.wire`), on a plaintext connection
        without credentials only: it implements neither TLS nor authentication.
        """
        loc = parse_service_uri(location) if isinstance(location, str) else location
        owns = client is None
        resources = ExitStack()
        try:
            if client is None:
                client = KazooClient(
                    hosts=loc.connect_string,
                    timeout=loc.session_timeout_ms / 1000.0,
                    read_only=False,
                    connection_retry=reconnect_policy(loc.session_timeout_ms / 1000.0),
                    **resources.enter_context(security.client_arguments()),
                )
            if not client.connected:
                try:
                    await start_client(
                        client, connect_timeout, how="" if security == PLAINTEXT else security.describe()
                    )
                except AuthFailedError:
                    raise _auth_refused(loc, security) from None
        except BaseException:
            resources.close()
            raise
        bridge = KazooBridge(
            client,
            max_in_flight=max_in_flight,
            op_timeout=op_timeout,
            rate_limit=reads_per_second or None,
            write_rate_limit=writes_per_second or None,
            wire=reader_for(client, loc.session_timeout_ms / 1000.0, connect_timeout)
            if wire_reads and security == PLAINTEXT
            else None,
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
        except (SessionClosedRequireSaslError, AuthFailedError):
            await _abandon(bridge, client, owns, resources)
            raise _auth_refused(loc, security) from None
        except ConnectionLoss:
            # A session without (valid) SASL is let in, then closed by a server that requires it.
            abandoned = await connection_abandoned(client)
            await _abandon(bridge, client, owns, resources)
            if abandoned:
                raise _auth_refused(loc, security) from None
            raise
        except NoAuthError:
            await _abandon(bridge, client, owns, resources)
            raise ZooKeeperAuthError(
                f"ZooKeeper at {loc.connect_string} refused to let us read {loc.chroot}{layout_path} (NoAuth; "
                f"we connected with {security.describe()}): configure the credentials the cluster's znodes "
                "are created with (zookeeper.auth.*)"
            ) from None
        except BaseException:
            await _abandon(bridge, client, owns, resources)
            raise
        return cls(client, loc, manager, layout, bridge, owns, resources=resources, security=security)

    async def close(self) -> None:
        for task in list(self._watch_tasks):
            task.cancel()
        self.bridge.detach()
        if self._owns_client:
            await stop_client(self.client)
        self._resources.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------ reads
    async def get(self, path: str, watch: Any = None) -> tuple[bytes, Any] | None:
        """A znode's data and Stat; None if it does not exist."""
        try:
            # kazoo ships no types: get answers (data, ZnodeStat), get_children the children's names.
            return cast("tuple[bytes, Any]", await self.bridge.call(self.client.get_async, path, watch))
        except NoNodeError:
            return None

    async def children(self, path: str, sync: bool = False) -> list[str] | None:
        """A znode's children; None if it does not exist."""
        try:
            if sync:
                # As Java does before each listing: a follower must not serve a stale directory.
                await self.bridge.call(self.client.sync_async, path)
            return cast("list[str]", await self.bridge.call(self.client.get_children_async, path))
        except NoNodeError:
            return None

    async def exists(self, path: str, watch: Any = None) -> Any:
        """A znode's Stat; None if it does not exist."""
        return await self.bridge.call(self.client.exists_async, path, watch)

    # ------------------------------------------------------------ guarded writes
    async def guarded(self, guard: WriteGuard, add_ops: Callable[[Any], None]) -> list[Any]:
        """Commit `check(guard) + ops` atomically. NotLeaderError if the guard znode is gone.

        Returns the per-op results of the ops after the check (an exception instance for a failed op).
        """
        # A repair lock's guard names its session's proof node and the lock (both checked: the local
        # check alone could straddle kazoo's replacement of an expired session); a vote, itself.
        paths = guard.guard_paths if isinstance(guard, ProvingGuard) else (guard.guard_path,)
        guard.check()
        txn = self.client.transaction()
        for path in paths:
            txn.check(path, -1)  # -1: any version; the znode must simply still exist
        add_ops(txn)
        results = await self.bridge.commit(txn)
        # When another op fails, ZooKeeper reports the (passed) checks as RolledBackError.
        for path, result in zip(paths, results):
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                if isinstance(guard, ProvingGuard):
                    raise guard.refused(path, f"write refused: {path} is gone ({type(result).__name__})")
                raise NotLeaderError(
                    f"write refused: guard {path} is gone ({type(result).__name__}); this process is not the leader"
                )
        return results[len(paths) :]

    async def wait_connected(self) -> None:
        """Until the connection is up (it may be a new session: compare `client.client_id`)."""
        await self._connected.wait()

    async def guarded_one(self, guard: WriteGuard, add_op: Callable[..., None]) -> Any:
        """One guarded op; its failure (e.g. NoNodeError, NodeExistsError, BadVersionError) is raised."""
        (result,) = await self.guarded(guard, add_op)
        if isinstance(result, Exception):
            raise result
        return result

    async def create_parents(self, path: str, guard: WriteGuard) -> None:
        """Create the missing persistent, empty parents of `path` strictly below the ledgers root (each
        create guarded). The root itself is never created: if it vanished, the write fails."""
        top = self.root.rstrip("/") + "/"
        if not path.startswith(top):
            raise ValueError(f"{path} is outside the ledgers root {self.root}")
        parts = path.split("/")
        for parent in ("/".join(parts[:i]) for i in range(2, len(parts))):
            if not parent.startswith(top) or await self.exists(parent):
                continue
            try:
                await self.guarded_one(guard, lambda t, p=parent: t.create(p, b""))
            except NodeExistsError:
                pass

    # ------------------------------------------------------------ watches
    async def watch_loop(self, path: str, on_change: Callable[[], Any], *, children: bool) -> None:
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
                        stat = await self.exists(path, watch)
                else:
                    stat = await self.exists(path, watch)
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


def _auth_refused(loc: MetadataLocation, security: ZkSecurity) -> ZooKeeperAuthError:
    if security.sasl is not None:
        return ZooKeeperAuthError(
            f"ZooKeeper at {loc.connect_string} refused our credentials ({security.describe()}): "
            "check the user and password"
        )
    return ZooKeeperAuthError(
        f"ZooKeeper at {loc.connect_string} requires SASL authentication and closed our session "
        f"({security.describe()}): configure zookeeper.auth.jaas_file or zookeeper.auth.sasl_username"
    )


async def _abandon(bridge: KazooBridge, client: KazooClient, owns: bool, resources: ExitStack) -> None:
    bridge.detach()
    if owns:
        await stop_client(client)
    resources.close()


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
