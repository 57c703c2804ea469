"""A scripted stand-in for one real bookie: a loopback TCP proxy that forwards every request to the
bookie unchanged and every reply back, except the replies a test chooses to rewrite.

It makes the hostile answers a real bookie would give only after a disk, memory or software fault
(a flipped bit in a READ_LAC body, an entry of another ledger), for a ledger the real Java client wrote
on real bookies. Tests point the auditor at it for one member of the ensemble
(`checks_util.audit_async(redirect=...)`). Listens on `ports.HOSTILE_PROXY_PORT + k` only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from google.protobuf.message import DecodeError

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.bookie import protocol as P
from devcluster import ports

# Rewrites one decoded reply in place; returns False to forward it unchanged.
Rewrite = Callable[[Any], bool]


class ReplyRewritingProxy:
    def __init__(self, upstream: tuple[str, int], port: int, op: P.Op, rewrite: Rewrite) -> None:
        self.upstream = upstream
        self.port = port
        self.op = op
        self.rewrite = rewrite
        self.rewritten = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    async def __aenter__(self) -> ReplyRewritingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection(*self.upstream)
        tasks = {asyncio.create_task(self._pipe(client_r, up_w)), asyncio.create_task(self._replies(up_r, client_w))}
        self._tasks |= tasks
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks -= tasks
            for w in (client_w, up_w):
                w.close()
                with contextlib.suppress(Exception):
                    await w.wait_closed()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Requests, forwarded as they come (`_on_request` sees each one decoded, when a subclass asks)."""
        decoder = P.FrameDecoder() if self.watch_requests else None
        while data := await reader.read(65536):
            if decoder is not None:
                for body in decoder.feed(data):
                    req = pb.Request()
                    req.ParseFromString(body)
                    self._on_request(req)
            writer.write(data)
            await writer.drain()

    async def _replies(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = P.FrameDecoder()
        while data := await reader.read(65536):
            for body in decoder.feed(data):
                resp = pb.Response()
                try:
                    resp.ParseFromString(body)
                except DecodeError:  # a v2 reply (the batch reader's connection): forwarded as it is
                    writer.write(P.frame(body))
                    continue
                if resp.header.operation == int(self.op) and await self._on_reply(resp):
                    self.rewritten += 1
                    body = resp.SerializeToString()
                writer.write(P.frame(body))
            await writer.drain()

    # What a subclass may change: which requests it sees, and what it does with a reply of `op`.
    watch_requests = False

    def _on_request(self, req: Any) -> None:
        pass

    async def _on_reply(self, resp: Any) -> bool:
        """Rewrite a reply of `op` in place (True) or forward it unchanged (False)."""
        return self.rewrite(resp)


class AddCountingProxy(ReplyRewritingProxy):
    """Forwards everything unchanged, counts the adds (ADD_ENTRY requests, RECOVERY_ADD included) that are
    in flight between request and reply, keeps the most seen at once, and holds each add reply
    `reply_delay` seconds first, as a slow bookie would, so a sender's backlog shows."""

    watch_requests = True

    def __init__(self, upstream: tuple[str, int], port: int, reply_delay: float = 0.0) -> None:
        super().__init__(upstream, port, P.Op.ADD_ENTRY, lambda resp: False)
        self.reply_delay = reply_delay
        self.adds = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def _on_request(self, req: Any) -> None:
        if req.header.operation == int(P.Op.ADD_ENTRY):
            self.adds += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    async def _on_reply(self, resp: Any) -> bool:
        await asyncio.sleep(self.reply_delay)
        self.in_flight -= 1
        return False


async def counting_proxies_for(
    stack: contextlib.AsyncExitStack, store: Any, bookies: Mapping[int, Any], monkeypatch: Any, reply_delay: float = 0.0
) -> dict[str, AddCountingProxy]:
    """An AddCountingProxy in front of each bookie of `bookies` (index -> BookieProc; proxy port
    `ports.HOSTILE_PROXY_PORT + index`), closed with `stack`, and `store`'s address resolver redirected
    through them (every client made from it afterwards reaches those bookies through their proxy)."""
    proxies: dict[str, AddCountingProxy] = {
        b.bookie_id: await stack.enter_async_context(
            AddCountingProxy((b.host, b.port), ports.HOSTILE_PROXY_PORT + n, reply_delay=reply_delay)
        )
        for n, b in bookies.items()
    }
    direct = store.address_resolver

    def redirected() -> Callable[[str], Awaitable[tuple[str, int]]]:
        inner = direct()

        async def resolve(bookie_id: str) -> tuple[str, int]:
            proxy = proxies.get(bookie_id)
            return proxy.address if proxy is not None else await inner(bookie_id)

        return resolve

    monkeypatch.setattr(store, "address_resolver", redirected)
    return proxies
