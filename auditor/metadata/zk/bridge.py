"""Bridge kazoo (thread-based) to asyncio without ever blocking the event loop.

Every request goes through kazoo's `*_async` calls; the completion callback (run on a kazoo thread)
hops to the loop with `call_soon_threadsafe`. A window (`auditor.aio.window`) bounds the requests in flight. Watches and
connection-state listeners hop to the loop the same way. Bulk reads (`get_many`) keep their own window
full from kazoo's callback thread and wake the loop once, when all are answered: a scan is then as
fast as kazoo itself, not bounded by one loop round trip per znode.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, NoNodeError
from kazoo.protocol.states import KazooState, KeeperState, WatchedEvent

from auditor.aio.ratelimit import TokenBucket
from auditor.aio.window import Window
from auditor.logging import get_logger
from auditor.metadata.errors import ZooKeeperUnreachableError
from auditor.metadata.zk.wire import WireReader, WireUnavailable

log = get_logger("auditor.metadata.bridge")

StateCallback = Callable[[KazooState], None]


class KazooBridge:
    def __init__(
        self,
        client: KazooClient,
        loop: asyncio.AbstractEventLoop | None = None,
        max_in_flight: int = 64,
        op_timeout: float | None = 30.0,
        rate_limit: float | None = None,
        write_rate_limit: float | None = None,
        wire: WireReader | None = None,
    ) -> None:
        self.client = client
        self.loop = loop or asyncio.get_running_loop()
        self.max_in_flight = max_in_flight
        self._window = Window(max_in_flight)
        # ZooKeeper requests per second (None: only the in-flight bound), so a scan can't load the ensemble.
        self.rate = TokenBucket(rate_limit) if rate_limit else None
        # Writes (transactions) per second, apart from reads: a lost bookie's thousands of markers are
        # written at a bounded rate (Java's unbounded publish storm: apache/bookkeeper#3529).
        self.write_rate = TokenBucket(write_rate_limit) if write_rate_limit else None
        self.op_timeout = op_timeout
        self.wire = wire  # bulk reads on a session of our own, if given
        self._state_callbacks: list[StateCallback] = []
        self._listener = self._on_state_thread
        client.add_listener(self._listener)

    # ------------------------------------------------------------ requests
    async def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a kazoo `*_async` method (e.g. `client.get_async`) and await its result."""
        return await self._request(self.rate, method, *args, **kwargs)

    async def _request(self, bucket: TokenBucket | None, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        async with self._window:
            if bucket is not None:
                await bucket.acquire()
            fut: asyncio.Future[Any] = self.loop.create_future()

            def settle(ok: bool, value: Any) -> None:
                if not fut.done():
                    (fut.set_result if ok else fut.set_exception)(value)

            def on_done(result: Any) -> None:  # kazoo thread
                ok = result.successful()
                self.loop.call_soon_threadsafe(settle, ok, result.value if ok else result.exception)

            async_result = method(*args, **kwargs)
            async_result.rawlink(on_done)
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancellation that arrives
            # together with the answer, and a cancelled election task then ran on (a CI hang).
            async with asyncio.timeout(self.op_timeout):
                return await fut

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Any] | None | Exception]:
        """Data and Stat of each znode (None: it does not exist; an exception: that read failed), in order.

        Up to `max_in_flight` reads are outstanding at once (apart from single requests, which have their
        own bound), and the rate limit releases them in slices of that window. They go over the wire
        session (`auditor.metadata.zk.wire`) when there is one; a batch it cannot serve, and every batch
        for a while after, goes through kazoo.
        """
        wire = self.wire
        if wire is not None and wire.usable(self.loop):
            try:
                return await wire.get_many(paths, self.max_in_flight, self.rate, self.op_timeout)
            except WireUnavailable as exc:
                wire.failed(self.loop, exc)
        return await self._kazoo_get_many(paths)

    async def _kazoo_get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Any] | None | Exception]:
        """get_many through kazoo: each answer's callback sends the next read from kazoo's thread, and
        the loop is woken once at the end. TimeoutError when no answer arrives for `op_timeout` seconds."""
        n = len(paths)
        results: list[tuple[bytes, Any] | None | Exception] = [None] * n
        if n == 0:
            return results
        lock = threading.Lock()
        cursor = {"next": 0, "released": 0, "outstanding": 0, "done": 0}
        finished: asyncio.Future[None] = self.loop.create_future()
        get_async = self.client.get_async

        def settle() -> None:
            if not finished.done():
                finished.set_result(None)

        def answered(i: int, value: tuple[bytes, Any] | None | Exception) -> None:
            results[i] = value
            with lock:
                cursor["outstanding"] -= 1
                cursor["done"] += 1
                last = cursor["done"] == n
            if last:
                self.loop.call_soon_threadsafe(settle)
            else:
                pump()

        def on_result(i: int, result: Any) -> None:  # kazoo's callback thread
            if result.successful():
                answered(i, result.value)
            else:
                exc = result.exception
                answered(i, None if isinstance(exc, NoNodeError) else exc)

        def pump() -> None:  # either thread: send reads while the window and the released share allow
            while True:
                with lock:
                    if cursor["outstanding"] >= self.max_in_flight or cursor["next"] >= cursor["released"]:
                        return
                    i = cursor["next"]
                    cursor["next"] += 1
                    cursor["outstanding"] += 1
                try:
                    get_async(paths[i]).rawlink(functools.partial(on_result, i))
                except Exception as exc:  # e.g. the session is closing: that read failed
                    answered(i, exc)

        try:
            slice_ = max(1, self.max_in_flight)
            for start in range(0, n, slice_ if self.rate is not None else n):
                stop = min(n, start + (slice_ if self.rate is not None else n))
                if self.rate is not None:
                    await self.rate.acquire(stop - start)
                with lock:
                    cursor["released"] = stop
                pump()
            seen = -1
            while not finished.done():
                try:
                    async with asyncio.timeout(self.op_timeout):
                        await asyncio.shield(finished)
                except TimeoutError:
                    if cursor["done"] == seen:
                        raise
                    seen = cursor["done"]
        finally:
            with lock:  # cancelled or failed: send nothing more (answers still arriving are dropped)
                cursor["released"] = cursor["next"]
        return results

    async def commit(self, transaction: Any) -> list[Any]:
        """Commit a kazoo TransactionRequest; the result list holds an exception per failed op."""
        # kazoo ships no types: a transaction's commit answers a list.
        return cast("list[Any]", await self._request(self.write_rate, transaction.commit_async))

    # ------------------------------------------------------------ watches
    def watcher(self, callback: Callable[[WatchedEvent], None]) -> Callable[[WatchedEvent], None]:
        """Wrap a loop-side callback as a kazoo watch function (called on a kazoo thread)."""

        def on_event(event: WatchedEvent) -> None:
            try:
                self.loop.call_soon_threadsafe(callback, event)
            except RuntimeError:  # loop closed: nobody is listening any more
                pass

        return on_event

    def event_watch(self) -> tuple[Callable[[WatchedEvent], None], asyncio.Future[WatchedEvent]]:
        """A one-shot watch and a future resolved with its event."""
        fut: asyncio.Future[WatchedEvent] = self.loop.create_future()

        def fire(event: WatchedEvent) -> None:
            if not fut.done():
                fut.set_result(event)

        return self.watcher(fire), fut

    # ------------------------------------------------------------ connection state
    def add_state_callback(self, callback: StateCallback) -> None:
        """`callback(state)` runs on the loop for every CONNECTED / SUSPENDED / LOST transition."""
        self._state_callbacks.append(callback)

    def remove_state_callback(self, callback: StateCallback) -> None:
        if callback in self._state_callbacks:
            self._state_callbacks.remove(callback)

    def _on_state_thread(self, state: KazooState) -> None:  # kazoo connection thread: never block
        try:
            self.loop.call_soon_threadsafe(self._dispatch_state, state)
        except RuntimeError:
            pass

    def _dispatch_state(self, state: KazooState) -> None:
        for cb in list(self._state_callbacks):
            try:
                cb(state)
            except Exception:  # one bad subscriber must not starve the others
                log.exception("state callback %r failed", cb)

    def detach(self) -> None:
        self.client.remove_listener(self._listener)
        self._state_callbacks.clear()
        if self.wire is not None:
            self.wire.close()


async def start_client(client: KazooClient, timeout: float = 30.0, how: str = "") -> None:
    """Start a kazoo client without blocking the loop. AuthFailedError as soon as ZooKeeper rejects our
    credentials (kazoo stops trying then); TimeoutError, saying `how` we connect, when it never answers
    (e.g. a TLS handshake that keeps failing)."""
    loop = asyncio.get_running_loop()
    event = client.start_async()
    deadline = loop.time() + timeout
    # kazoo's connection thread ends, without setting `event`, when the server closes a session for
    # want of SASL (e.g. a wrong password): once seen running, its stopping means it gave up.
    stopped = getattr(getattr(client, "_connection", None), "connection_stopped", None)
    seen_running = False

    def gave_up() -> bool:
        nonlocal seen_running
        if stopped is not None and not stopped.is_set():
            seen_running = True
        return client.client_state == KeeperState.AUTH_FAILED or (
            seen_running and stopped is not None and stopped.is_set()
        )

    # Polled: kazoo never sets the event when authentication fails, and its listeners may run before
    # `connected` turns true, so an asyncio.Event set from them could miss the moment. The first polls come
    # soon (a ZooKeeper nearby answers within a millisecond or two, and a fixed 50 ms pause made every
    # `check` start 50 ms late), then every 50 ms.
    pause = 0.001
    while not event.is_set() and not gave_up() and loop.time() < deadline:
        await asyncio.sleep(pause)
        pause = min(0.05, pause * 2)
    if not client.connected:
        failed = gave_up()
        await stop_client(client)
        servers = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in client.hosts)
        if failed:
            raise AuthFailedError(f"ZooKeeper at {servers} ended our session while authenticating")
        raise ZooKeeperUnreachableError(servers, timeout, how)


async def connection_abandoned(client: KazooClient, wait: float = 1.0) -> bool:
    """After a ConnectionLoss on a started client: has kazoo's connection loop ended although nobody
    stopped the client, i.e. did it give up (authentication failed, or the server closed a session that
    lacked SASL)? Waits up to `wait` seconds for the loop to finish ending."""
    stopped = getattr(getattr(client, "_connection", None), "connection_stopped", None)
    if stopped is None:
        return False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while not stopped.is_set() and loop.time() < deadline:  # noqa: ASYNC110 (a kazoo thread's event)
        await asyncio.sleep(0.05)
    return client.client_state == KeeperState.AUTH_FAILED or (stopped.is_set() and not client._stopped.is_set())


async def stop_client(client: KazooClient) -> None:
    """Stop and close a kazoo client off the loop (stop() joins kazoo's threads)."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, client.stop)
    await loop.run_in_executor(None, client.close)
