"""A TCP proxy a bookie is registered behind (see `Cluster.proxied`), with a switchable bad link.

It runs its own asyncio loop in a daemon thread. In `pass` mode it forwards bytes untouched. A `LinkFault`
makes the link slow (every chunk held back), lossy (stalls and connection resets at random) or corrupting
(a random bit flipped in some of the bookie's answers). Corruption is applied to answers only: a flipped
bit in a request could turn a read into a fencing read, which is a write the auditor never makes.
Every random choice comes from one RNG seeded per fault, so a campaign is repeatable up to timing.

With `decode_requests`, the client -> bookie bytes that are forwarded are also decoded (`bkwire`): every
request is counted per operation (`stats.requests`), and every RECOVERY_ADD is recorded with its time, its
ledger and entry, and the pid of the process that sent it (the accepted connection's peer, looked up in
/proc once per connection, off the loop: `procnet`). Nothing of the forwarding changes.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from .bkwire import RequestStream
from .procnet import pid_of_peer


@dataclass(frozen=True)
class LinkFault:
    kind: str = "pass"  # pass | slow | lossy | corrupt
    delay: float = 0.0  # slow: seconds each chunk is held back (each direction)
    stall_probability: float = 0.0  # lossy: chance per chunk of a stall before it is forwarded
    stall_seconds: float = 0.0
    reset_probability: float = 0.0  # lossy: chance per chunk that the connection is reset instead
    corrupt_probability: float = 0.0  # corrupt: chance per answer chunk of one flipped bit
    seed: int = 0

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (0, 0.0) or k == "kind"}


@dataclass
class LinkStats:
    connections: int = 0
    bytes_to_bookie: int = 0
    bytes_from_bookie: int = 0
    delayed_chunks: int = 0
    stalls: int = 0
    resets: int = 0
    corrupted_chunks: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)  # decode_requests: per operation


@dataclass(frozen=True)
class RecoveryAdd:
    """One RECOVERY_ADD the proxy forwarded to the bookie."""

    time: float  # time.time() when its last byte was forwarded
    pid: int | None  # the sending process (None: not found in /proc)
    ledger: int
    entry: int
    connection: int  # the proxy's connection number (stats.connections when it was accepted)
    protocol: str  # "v3" | "v2"
    peer: tuple[str, int]  # the client's address as the proxy saw it


class LinkProxy:
    """Listens on (listen_host, port) and forwards every connection to (target_host, port)."""

    def __init__(self, listen_host: str, target_host: str, port: int, decode_requests: bool = False) -> None:
        self.listen = (listen_host, port)
        self.target = (target_host, port)
        self.fault = LinkFault()
        self.stats = LinkStats()
        self._rng = random.Random(0)
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.decode_requests = decode_requests
        self._adds: list[RecoveryAdd] = []
        self._conn_pid: dict[int, int | None] = {}
        self._adds_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"proxy-{port}", daemon=True)

    # ------------------------------------------------------------------ control (any thread)
    def start(self) -> LinkProxy:
        self._thread.start()
        self._call(self._start_server())
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._close(server_too=True))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def set_fault(self, fault: LinkFault) -> None:
        """Switch the link; existing connections get the new behaviour from their next chunk."""

        def apply() -> None:
            self.fault = fault
            self._rng = random.Random(fault.seed)

        self._loop.call_soon_threadsafe(apply)

    def heal(self) -> None:
        """Back to a clean link; connections that carried a fault are closed (their streams may be
        out of step after a corruption), so clients reconnect on a clean one."""
        dirty = self.fault.kind != "pass"
        self.set_fault(LinkFault())
        if dirty:
            self._call(self._close(server_too=False))

    def recovery_adds(self) -> list[RecoveryAdd]:
        """Every RECOVERY_ADD forwarded so far (decode_requests only), oldest first, with sender pids."""
        with self._adds_lock:
            adds, pids = list(self._adds), dict(self._conn_pid)
        return [a if a.pid is not None else replace(a, pid=pids.get(a.connection)) for a in adds]

    def _call(self, coro: Any, timeout: float = 20.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # ------------------------------------------------------------------ the loop
    async def _start_server(self) -> None:
        self._server = await asyncio.start_server(self._accept, *self.listen, reuse_address=True)

    async def _close(self, server_too: bool) -> None:
        if server_too and self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        conn = self.stats.connections
        decoder = None
        if self.decode_requests:
            decoder = self._decoder(conn, writer)
            # The sender is looked up before a byte of its is forwarded: a client that sends a few adds and
            # closes would otherwise be gone from /proc (its end in TIME_WAIT has no inode) by the lookup.
            peer = writer.get_extra_info("peername")[:2]
            server = writer.get_extra_info("sockname")[:2]
            await self._loop.run_in_executor(None, self._find_pid, conn, peer, server)
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self.target), 10)
        except (TimeoutError, OSError):
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        try:
            await asyncio.gather(
                self._pump(reader, up_writer, answers=False, decoder=decoder),
                self._pump(up_reader, writer, answers=True),
            )
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()

    def _decoder(self, conn: int, writer: asyncio.StreamWriter) -> RequestStream:
        peer = writer.get_extra_info("peername")[:2]
        stream: RequestStream

        def on_request(op: str, ledger: int, entry: int) -> None:
            self.stats.requests[op] = self.stats.requests.get(op, 0) + 1
            if op == "RECOVERY_ADD":
                add = RecoveryAdd(time.time(), None, ledger, entry, conn, stream.protocol or "?", peer)
                with self._adds_lock:
                    self._adds.append(add)

        stream = RequestStream(on_request)
        return stream

    def _find_pid(self, conn: int, peer: tuple[str, int], server: tuple[str, int]) -> None:
        pid = None
        for _ in range(5):  # the client's end is in /proc as soon as it connected; retry a torn read
            pid = pid_of_peer(peer, server)
            if pid is not None:
                break
            time.sleep(0.02)
        with self._adds_lock:
            self._conn_pid[conn] = pid

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, answers: bool, decoder: RequestStream | None = None
    ) -> None:
        try:
            while True:
                chunk = await src.read(65536)
                if not chunk:
                    break
                f = self.fault
                if f.kind == "slow" and f.delay > 0:
                    self.stats.delayed_chunks += 1
                    await asyncio.sleep(f.delay)
                elif f.kind == "lossy":
                    roll = self._rng.random()
                    if roll < f.reset_probability:
                        self.stats.resets += 1
                        dst.transport.abort()
                        break
                    if roll < f.reset_probability + f.stall_probability:
                        self.stats.stalls += 1
                        await asyncio.sleep(f.stall_seconds)
                elif f.kind == "corrupt" and answers and self._rng.random() < f.corrupt_probability:
                    buf = bytearray(chunk)
                    bit = self._rng.randrange(len(buf) * 8)
                    buf[bit // 8] ^= 1 << (bit % 8)
                    chunk = bytes(buf)
                    self.stats.corrupted_chunks += 1
                if answers:
                    self.stats.bytes_from_bookie += len(chunk)
                else:
                    self.stats.bytes_to_bookie += len(chunk)
                dst.write(chunk)
                if decoder is not None:
                    decoder.feed(chunk)
                await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            dst.transport.abort()
