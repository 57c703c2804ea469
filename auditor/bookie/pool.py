"""One client (hence one connection) per bookie, created on first use; and, beside it, one v2 batch reader
(its own connection) per bookie, where the settings allow one (not with TLS)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from .agent import Address, AgentClient, AgentsConfig
from .batch import BatchReader
from .capabilities import CapabilityBook, Incarnation
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
        start_windows: Mapping[str, int] | None = None,
        agents: AgentsConfig | None = None,
        capabilities: CapabilityBook | None = None,
        incarnation: Incarnation | None = None,
    ) -> None:
        """`start_rates`, `start_windows`: per bookie, the adaptive rate and window a client starts at instead
        of the policy's start and `max_in_flight` (what an earlier pool's client for it reached:
        `adapted_rates()`, `adapted_windows()`). `agents`: where the bookie-side index agents listen
        (`agent()`); None: no agents. `capabilities`, `incarnation`: the process tree's book of what its
        clients learnt of each bookie, and how to tell a bookie's incarnation (capabilities.py)."""
        self._capabilities, self._incarnation = capabilities, incarnation
        self._resolver = resolver
        self.config = config or BookieClientConfig()
        self._overrides = dict(overrides or {})
        for bookie, rate in (start_rates or {}).items():
            base = self._overrides.get(bookie, self.config)
            if base.adaptive is not None:
                self._overrides[bookie] = replace(base, adaptive=replace(base.adaptive, start=rate))
        for bookie, window in (start_windows or {}).items():
            base = self._overrides.get(bookie, self.config)
            if base.adaptive is not None:
                self._overrides[bookie] = replace(base, max_in_flight=max(1, window))
        self._clients: dict[str, BookieClient] = {}
        self._readers: dict[str, BatchReader] = {}
        self._agents_config = agents
        self._agents: dict[str, AgentClient] = {}
        self._closed = False

    def client(self, bookie_id: str) -> BookieClient:
        if self._closed:
            raise RuntimeError("BookiePool is closed")
        c = self._clients.get(bookie_id)
        if c is None:
            c = BookieClient(bookie_id, self._resolver, self._overrides.get(bookie_id, self.config))
            c.capability_book, c.incarnation_of = self._capabilities, self._incarnation
            self._clients[bookie_id] = c
        return c

    __getitem__ = client

    def agent(self, bookie_id: str) -> AgentClient | None:
        """The client of `bookie_id`'s index agent (auditor/bookie/agent.py), None when no agent is
        configured for it: its `agent.addresses` entry, else the bookie's resolved host at `agent.port`."""
        cfg = self._agents_config
        if cfg is None or (cfg.port is None and bookie_id not in cfg.addresses):
            return None
        if self._closed:
            raise RuntimeError("BookiePool is closed")
        a = self._agents.get(bookie_id)
        if a is None:
            a = AgentClient(bookie_id, cfg.addresses.get(bookie_id) or self._agent_address(bookie_id), cfg.client)
            self._agents[bookie_id] = a
        return a

    def _agent_address(self, bookie_id: str) -> Callable[[], Awaitable[Address]]:
        port = self._agents_config.port if self._agents_config else None

        async def resolve() -> Address:
            got = self._resolver(bookie_id)
            host, _ = await got if inspect.isawaitable(got) else got
            assert port is not None  # agent() hands this out only with a port
            return host, port

        return resolve

    def batch_reader(self, bookie_id: str) -> BatchReader | None:
        """The bookie's v2 batch reader (BATCH_READ_ENTRY), on a connection of its own; None when TLS to
        bookies is configured (v2 reads would go in plaintext: read through `client` instead)."""
        if self._closed:
            raise RuntimeError("BookiePool is closed")
        r = self._readers.get(bookie_id)
        if r is None:
            config = self._overrides.get(bookie_id, self.config)
            if config.tls is not None:
                return None
            r = BatchReader(bookie_id, self._resolver, config)
            self._readers[bookie_id] = r
        return r

    def __contains__(self, bookie_id: object) -> bool:
        return bookie_id in self._clients

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._clients))

    def __len__(self) -> int:
        return len(self._clients)

    def adapted_rates(self) -> dict[str, float]:
        """Each adaptive client's rate now (see `BookieClient.adapted_rate`)."""
        return {b: r for b, c in self._clients.items() if (r := c.adapted_rate) is not None}

    def adapted_windows(self) -> dict[str, int]:
        """Each adaptive client's window now (see `BookieClient.adapted_window`)."""
        return {b: w for b, c in self._clients.items() if (w := c.adapted_window) is not None}

    async def forget(self, bookie_id: str) -> None:
        """Close and drop one bookie's client (e.g. it was decommissioned)."""
        c = self._clients.pop(bookie_id, None)
        if c is not None:
            await c.close()
        r = self._readers.pop(bookie_id, None)
        if r is not None:
            await r.close()

    async def close(self) -> None:
        self._closed = True
        clients, self._clients = self._clients, {}
        readers, self._readers = self._readers, {}
        agents, self._agents = self._agents, {}
        await asyncio.gather(
            *(c.close() for c in clients.values()),
            *(r.close() for r in readers.values()),
            *(a.close() for a in agents.values()),
        )

    async def __aenter__(self) -> BookiePool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


BookieClients = BookiePool
