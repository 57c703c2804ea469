"""A loopback socket that only counts the bytes reaching it: where the gate tests prove a refused frame
never got to the wire."""

from __future__ import annotations

import asyncio


class CountingListener:
    """A loopback socket that only counts what reaches it."""

    def __init__(self) -> None:
        self.received = 0
        self.server: asyncio.AbstractServer | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                self.received += len(data)
        finally:
            writer.close()

    async def __aenter__(self) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return ("127.0.0.1", self.server.sockets[0].getsockname()[1])

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()
