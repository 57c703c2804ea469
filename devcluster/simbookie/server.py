"""The simulated bookies on the network: one asyncio server per bookie id, each on its own loopback
address and port, answering pipelined frames in order (replies.BookieView decides each v3 answer,
v2replies.answer_v2 each v2 one). As a bookie does, a connection speaks v3 until a frame is not a v3
request, and v2 from then on."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Mapping
from types import TracebackType

from .replies import BookieView, Faults
from .sources import LedgerSource
from .v2replies import answer_v2

Address = tuple[str, int]
_LENGTH = struct.Struct(">i")
MAX_FRAME = 5 * 1024 * 1024  # a bookie's default nettyMaxFrameSizeBytes, the 4 length bytes included


class _Connection(asyncio.Protocol):
    def __init__(self, view: BookieView, open_connections: set[_Connection]) -> None:
        self.view = view
        self.open = open_connections
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.v2 = False  # switched for good by the first frame that is not a v3 request

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.open.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.open.discard(self)

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        out: list[bytes] = []
        pos = 0
        broken = False
        while len(buf) - pos >= 4:
            (n,) = _LENGTH.unpack_from(buf, pos)
            if n < 0 or n + 4 > MAX_FRAME:
                broken = True  # a bookie closes the connection on a negative or too long frame
                break
            if len(buf) - pos - 4 < n:
                break
            body = bytes(buf[pos + 4 : pos + 4 + n])
            pos += 4 + n
            if self.view.silent:
                self.view.requests += 1
                continue
            if self.v2:
                self.view.requests += 1
                reply = answer_v2(self.view, body)
            else:
                reply = self.view.answer(body)  # (counts the request)
                if reply is None:
                    self.v2 = True
                    reply = answer_v2(self.view, body)
            if reply is None:
                broken = True  # not a request it can decode: what came before is answered, then the link closes
                break
            out.append(_LENGTH.pack(len(reply)) + reply)
        del buf[:pos]
        if self.transport is None:
            return
        if out:
            self.transport.write(b"".join(out))
        if broken:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class SimBookies:
    """Simulated bookies serving `source`: bookie id -> the address it listens on."""

    def __init__(self, source: LedgerSource, addresses: Mapping[str, Address], faults: Faults | None = None) -> None:
        self.source = source
        self.addresses = dict(addresses)
        self.views = {b: BookieView(b, source, faults) for b in self.addresses}
        self._servers: list[asyncio.Server] = []
        self._connections: set[_Connection] = set()

    async def start(self) -> SimBookies:
        loop = asyncio.get_running_loop()
        try:
            for bookie, (host, port) in self.addresses.items():
                view = self.views[bookie]
                server = await loop.create_server(
                    lambda v=view: _Connection(v, self._connections), host, port, reuse_address=True
                )
                self._servers.append(server)
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        servers, self._servers = self._servers, []
        for s in servers:
            s.close()
        for c in list(self._connections):
            c.abort()  # clients may keep theirs open; a stopped bookie drops them
        for s in servers:
            await s.wait_closed()

    async def __aenter__(self) -> SimBookies:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def requests(self) -> dict[str, int]:
        return {b: v.requests for b, v in self.views.items()}
