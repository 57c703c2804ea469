"""One client (hence one connection) per bookie, created on first use."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from .client import BookieClient
from .config import BookieClientConfig, Resolver, parse_bookie_id_address


def legacy_resolver(bookie_id: str) -> tuple[str, int]:
    """Read the id itself as `host:port`. A best-effort stand-in until the metadata layer supplies a
    resolver built from ZooKeeper registrations (Java would not connect to an unregistered bookie)."""
    return parse_bookie_id_address(bookie_id)


class BookiePool:
    """Hands out one BookieClient per bookie id. `resolver(bookie_id)` returns (host, port), or an
    awaitable of it; it is called on every (re)connect so a bookie that moved is followed."""

    def __init__(
        self,
        resolver: Resolver = legacy_resolver,
        config: BookieClientConfig | None = None,
        overrides: Mapping[str, BookieClientConfig] | None = None,
        start_rates: Mapping[str, float] | None = None,
    ) -> None:
        """`start_rates`: per bookie, the adaptive rate a client starts at instead of the policy's start
        (what an earlier pool's client for it reached: `adapted_rates()`)."""
        self._resolver = resolver
        self.config = config or BookieClientConfig()
        self._overrides = dict(overrides or {})
        for bookie, rate in (start_rates or {}).items():
            base = self._overrides.get(bookie, self.config)
            if base.adaptive is not None:
                self._overrides[bookie] = replace(base, adaptive=replace(base.adaptive, start=rate))
        self._clients: dict[str, BookieClient] = {}
        self._closed = False

    def client(self, bookie_id: str) -> BookieClient:
        if self._closed:
            raise RuntimeError("BookiePool is closed")
        c = self._clients.get(bookie_id)
        if c is None:
            c = BookieClient(bookie_id, self._resolver, self._overrides.get(bookie_id, self.config))
            self._clients[bookie_id] = c
        return c

    __getitem__ = client

    def __contains__(self, bookie_id: object) -> bool:
        return bookie_id in self._clients

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._clients))

    def __len__(self) -> int:
        return len(self._clients)

    def adapted_rates(self) -> dict[str, float]:
        """Each adaptive client's rate now (see `BookieClient.adapted_rate`)."""
        return {b: r for b, c in self._clients.items() if (r := c.adapted_rate) is not None}

    async def forget(self, bookie_id: str) -> None:
        """Close and drop one bookie's client (e.g. it was decommissioned)."""
        c = self._clients.pop(bookie_id, None)
        if c is not None:
            await c.close()

    async def close(self) -> None:
        self._closed = True
        clients, self._clients = self._clients, {}
        await asyncio.gather(*(c.close() for c in clients.values()))

    async def __aenter__(self) -> BookiePool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


BookieClients = BookiePool
