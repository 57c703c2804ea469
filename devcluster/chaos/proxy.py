"""A TCP proxy a bookie is registered behind (see `Cluster.proxied`), with a switchable bad link.

It runs its own asyncio loop in a daemon thread. In `pass` mode it forwards bytes untouched. A `LinkFault`
makes the link slow (every chunk held back), lossy (stalls and connection resets at random) or corrupting
(a random bit flipped in some of the bookie's answers). Corruption is applied to answers only: a flipped
bit in a request could turn a read into a fencing read, which is a write the auditor never makes.
Every random choice comes from one RNG seeded per fault, so a campaign is repeatable up to timing.
"""

from __future__ import annotations

import asyncio
import random
import threading
from dataclasses import dataclass, field
from typing import Any


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


class LinkProxy:
    """Listens on (listen_host, port) and forwards every connection to (target_host, port)."""

    def __init__(self, listen_host: str, target_host: str, port: int) -> None:
        self.listen = (listen_host, port)
        self.target = (target_host, port)
        self.fault = LinkFault()
        self.stats = LinkStats()
        self._rng = random.Random(0)
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
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
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self.target), 10)
        except (TimeoutError, OSError):
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        try:
            await asyncio.gather(
                self._pump(reader, up_writer, answers=False), self._pump(up_reader, writer, answers=True)
            )
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, answers: bool) -> None:
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
                await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            dst.transport.abort()
