"""Bookies in ZooKeeper, read only: registrations (writable and read-only, watched), cookies, where a bookie
id points to (its bookie-rpc endpoint), and Pulsar's rack map (`/bookies`).

A recipe on the connection (zk/connection.py), composed into the store (zk/store.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from auditor.logging import get_logger
from auditor.metadata.bookkeeper.racks import StaticRackMap, pulsar_rack_map
from auditor.metadata.codecs import formats
from auditor.metadata.errors import CorruptZnodeError, MissingZnodeError
from auditor.metadata.interfaces import BookieAddress, BookieRegistration, CookieRecord, NodeStat, Registrations
from auditor.metadata.location import join
from auditor.metadata.zk.connection import ZooKeeperConnection

log = get_logger("auditor.metadata.zkbookies")

READONLY = "readonly"


class BookieRegistry:
    """`<root>/available` (+ `/readonly`) and `<root>/cookies`, with the registrations' endpoints cached
    per session."""

    def __init__(self, zk: ZooKeeperConnection) -> None:
        self._zk = zk
        self._service_info: dict[str, formats.BookieServiceInfo | None] = {}
        zk.on_session_lost(self._service_info.clear)

    @property
    def available_path(self) -> str:
        return join(self._zk.root, "available")

    @property
    def readonly_path(self) -> str:
        return join(self._zk.root, "available", READONLY)

    async def _registrations_under(self, parent: str, read_only: bool) -> dict[str, BookieRegistration]:
        """Registrations under `available` (writable) or `available/readonly`. `available` missing is an
        error (every BookKeeper cluster has it; Java's registration client fails too); `readonly` missing
        means none (Java's clients create it lazily). Names that are not valid bookie ids are skipped with
        a warning: no ensemble can name them (Java's listing throws on them)."""
        names = await self._zk.children(parent)
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
            got = await self._zk.get(path)
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
                self._zk.watch_loop(self.available_path, callback, children=True),
                self._zk.watch_loop(self.readonly_path, callback, children=True),
            )

        return self._zk.spawn_watch(both())

    async def cookies(self) -> dict[str, CookieRecord]:
        parent = join(self._zk.root, "cookies")
        names = await self._zk.children(parent) or []
        recs = await asyncio.gather(*(self.cookie(n) for n in names))
        return {n: r for n, r in zip(names, recs) if r is not None}

    async def cookie(self, bookie_id: str) -> CookieRecord | None:
        path = join(self._zk.root, "cookies", bookie_id)
        got = await self._zk.get(path)
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
                got = await self._zk.get(join(parent, bookie_id))
                if got is not None:
                    try:
                        self._service_info[bookie_id] = formats.parse_bookie_service_info(
                            got[0], join(parent, bookie_id)
                        )
                    except CorruptZnodeError as exc:
                        log.warning("%s", exc)
                    break
        return address_of(bookie_id, self._service_info.get(bookie_id))

    def address_resolver(self) -> Callable[[str], Awaitable[tuple[str, int]]]:
        """An async function bookie id -> (host, port) for the bookie client (LookupError if unknown)."""

        async def resolve(bookie_id: str) -> tuple[str, int]:
            addr = await self.resolve_bookie(bookie_id)
            if addr is None:
                raise LookupError(f"cannot resolve bookie {bookie_id!r}: not registered and not host:port")
            return addr.host, addr.port

        return resolve


def address_of(bookie_id: str, info: formats.BookieServiceInfo | None) -> BookieAddress | None:
    """The bookie-rpc endpoint if the registration has one, else the id parsed as host:port (best effort)."""
    ep = info.rpc_endpoint if info is not None else None
    if ep is not None:
        return BookieAddress(ep.host, ep.port, best_effort=False)
    hp = formats.parse_host_port(bookie_id)
    return None if hp is None else BookieAddress(hp[0], hp[1], best_effort=True)


class RackMapSource(Protocol):
    """What Pulsar's rack map is read with: the store (zk/store.py), raw reads and bookie addresses."""

    async def get(self, path: str, watch: Any = None) -> tuple[bytes, Any] | None: ...

    async def resolve_bookie(self, bookie_id: str) -> BookieAddress | None: ...


async def pulsar_racks(
    store: RackMapSource, *, path: str = "/bookies", default_rack: str = "/default-rack"
) -> StaticRackMap | None:
    """Pulsar's rack map from `/bookies` at the metadata-store root (inside any chroot); None if absent."""
    got = await store.get(path)
    if got is None:
        return None

    async def host_of(bookie_id: str) -> str | None:
        addr = await store.resolve_bookie(bookie_id)
        return addr.host if addr else None

    return pulsar_rack_map(got[0], path=path, default_rack=default_rack, host_of=host_of)
