"""Pulsar's references to ledgers, read from ZooKeeper (read only): the managed ledgers under
`<root>/managed-ledgers`, their durable cursors, and the schema locators under `<root>/schemas`.

A managed ledger's znode is `<root>/managed-ledgers/<tenant>/<ns>/persistent/<topic>` (or, for the
legacy naming, `<property>/<cluster>/<ns>/persistent/<topic>`): the walk takes a znode whose parent is
named `persistent` at depth 4 or 5, never by "has data" (a fresh one holds 0 bytes). Every child of a
managed ledger is a durable cursor. A schema locator is a znode with data at depth 3 or 4 under
`<root>/schemas`. A znode that cannot be parsed is recorded (path and problem) and never guessed at.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from auditor.durability.references import (
    CursorListing,
    ManagedLedgerListing,
    References,
    SchemaListing,
    managed_ledger_path,
    schema_path,
)
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.pulsar.formats import parse_cursor, parse_managed_ledger, parse_schema_locator
from auditor.metadata.zk.connection import ZooKeeperConnection

ML_DEPTHS = (4, 5)  # tenant/ns/persistent/topic; property/cluster/ns/persistent/topic
SCHEMA_DEPTHS = (3, 4)
CHUNK = 1024


def _join(parent: str, child: str) -> str:
    return parent.rstrip("/") + "/" + child


class PulsarReferenceReader:
    """Reads what Pulsar lists, on one ZooKeeper connection (Pulsar's metadata root `root`)."""

    def __init__(self, zk: ZooKeeperConnection, root: str) -> None:
        self.zk = zk
        self.root = root
        self.ml_root = _join(root, "managed-ledgers") if root != "/" else "/managed-ledgers"
        self.schema_root = _join(root, "schemas") if root != "/" else "/schemas"

    async def _walk(self, top: str, take: Sequence[int], descend_below: int) -> list[tuple[str, int]]:
        """(path, depth) of the znodes under `top` at the depths in `take` (depth 1 = a child of top);
        for managed ledgers only those whose parent is `persistent`."""
        out: list[tuple[str, int]] = []
        level = [top]
        for depth in range(1, descend_below + 1):
            nxt: list[str] = []
            for parent in level:
                names = await self.zk.children(parent)
                for name in sorted(names or ()):
                    path = _join(parent, name)
                    is_ml = top != self.ml_root or parent.rsplit("/", 1)[-1] == "persistent"
                    if depth in take and is_ml:
                        out.append((path, depth))
                        if top == self.ml_root:
                            continue  # a managed ledger's children are cursors, not deeper names
                    nxt.append(path)
            level = nxt
        return out

    async def _data(self, paths: Sequence[str]) -> list[tuple[bytes, Any] | None | Exception]:
        out: list[tuple[bytes, Any] | None | Exception] = []
        for i in range(0, len(paths), CHUNK):
            out.extend(await self.zk.bridge.get_many(paths[i : i + CHUNK]))
        return out

    async def read(self) -> References:
        """Every managed ledger, cursor and schema locator (one walk)."""
        refs = References(self.root)
        ml_exists = await self.zk.exists(self.ml_root) is not None
        schemas_exist = await self.zk.exists(self.schema_root) is not None
        refs.found = ml_exists or schemas_exist
        if ml_exists:
            found = await self._walk(self.ml_root, ML_DEPTHS, max(ML_DEPTHS))
            names = [p[len(self.ml_root) + 1 :] for p, _ in found]
            for name in names:
                await self._add_managed_ledger(refs, name)
        if schemas_exist:
            found = await self._walk(self.schema_root, SCHEMA_DEPTHS, max(SCHEMA_DEPTHS))
            paths = [p for p, _ in found]
            for path, got in zip(paths, await self._data(paths), strict=True):
                if isinstance(got, Exception):
                    raise got
                if got is None or not got[0]:
                    continue  # a namespace level, or gone
                self._add(refs, lambda p=path, d=got[0]: parse_schema_locator(p[len(self.schema_root) + 1 :], d, p))
        return refs

    @staticmethod
    def _add(refs: References, parse: Any) -> None:
        try:
            item = parse()
        except CorruptZnodeError as exc:
            refs.unreadable[exc.path] = exc.problem
            return
        if isinstance(item, ManagedLedgerListing):
            refs.managed_ledgers[item.name] = item
        elif isinstance(item, CursorListing):
            refs.cursors[(item.managed_ledger, item.name)] = item
        elif isinstance(item, SchemaListing):
            refs.schemas[item.schema_id] = item

    async def _add_managed_ledger(self, refs: References, name: str) -> None:
        path = managed_ledger_path(self.root, name)
        got = await self.zk.get(path)
        if got is None:
            return  # deleted meanwhile
        data, stat = got
        self._add(refs, lambda: parse_managed_ledger(name, data, path, stat.mzxid))
        cursors = sorted(await self.zk.children(path) or ())
        cursor_paths = [_join(path, c) for c in cursors]
        for cursor, cpath, cgot in zip(cursors, cursor_paths, await self._data(cursor_paths), strict=True):
            if isinstance(cgot, Exception):
                raise cgot
            if cgot is not None:
                self._add(refs, lambda c=cursor, p=cpath, d=cgot[0]: parse_cursor(name, c, d, p))

    async def read_owner(self, kind_schema: bool, owner: str) -> References:
        """Only what one managed ledger (with its cursors) or one schema lists, read fresh: the
        confirmation read before a finding is reported."""
        refs = References(self.root, found=True)
        if kind_schema:
            path = schema_path(self.root, owner)
            got = await self.zk.get(path)
            if got is not None and got[0]:
                self._add(refs, lambda: parse_schema_locator(owner, got[0], path))
        else:
            await self._add_managed_ledger(refs, owner)
        return refs
