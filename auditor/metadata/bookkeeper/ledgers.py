"""Ledger metadata in ZooKeeper, read only: listing (streamed, one leaf directory at a time), scans and reads.

A recipe on the connection (zk/connection.py), composed into the store (zk/store.py). Nothing here writes
ledger metadata: the auditor never does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

from auditor.durability.ids import LedgerId
from auditor.logging import get_logger
from auditor.metadata.codecs import formats
from auditor.metadata.codecs.paths import LeafDirectory, LedgerBatch, walk_leaf_directories, walk_ledgers
from auditor.metadata.errors import CorruptZnodeError, MissingZnodeError, NoSuchLedgerError
from auditor.metadata.interfaces import CorruptLedger, LedgerRecord, NodeStat, ScanStats
from auditor.metadata.zk.connection import ZooKeeperConnection

log = get_logger("auditor.metadata.zkledgers")

# Ledgers parsed between two yields to the event loop (about 10-20 ms of parsing).
PARSE_SLICE = 256
# Ledgers per bulk read: one chunk is parsed (and checked, in a scan) while the next is read.
READ_CHUNK = 1024
# A directory's first bulk read: the check starts on it; the reads after it double up to READ_CHUNK.
FIRST_CHUNK = 128


class LedgerReads:
    """The ledgers under the root, by every ledger manager's layout (+ our scoped extension)."""

    def __init__(self, zk: ZooKeeperConnection) -> None:
        self._zk = zk

    async def _ledger_children(self, path: str, sync: bool) -> list[str] | None:
        """Children of a ledger directory; None if it vanished (a race: nothing to list). The ledgers root
        itself missing is an error: listing it as empty would report a cluster with no ledgers."""
        names = await self._zk.children(path, sync)
        if names is None and path == self._zk.root:
            raise MissingZnodeError(path, "the ledgers root is gone")
        return names

    def list_ledgers(
        self,
        start: LedgerId | None = None,
        end: LedgerId | None = None,
        *,
        include_scoped: bool = True,
        sync: bool = True,
        stats: ScanStats | None = None,
    ) -> AsyncIterator[LedgerBatch]:
        """Every ledger id in [start, end), ascending, one leaf directory per batch (streamed)."""
        st = stats if stats is not None else ScanStats()

        def skip(parent: str, name: str) -> None:
            st.skipped_names += 1
            log.info("skipping non-ledger znode %s/%s", parent, name)

        async def children(path: str) -> list[str] | None:
            return await self._ledger_children(path, sync)

        async def gen() -> AsyncIterator[LedgerBatch]:
            async for batch in walk_ledgers(self._zk.paths, children, start, end, include_scoped, skip):
                st.directories += 1
                st.listed += len(batch.ledger_ids)
                yield batch

        return gen()

    async def list_leaf_directories(
        self, *, include_scoped: bool = True, count_children: bool = True, sync: bool = True
    ) -> list[LeafDirectory]:
        """Every leaf directory (ascending ids) without listing any of them; with `count_children`, each
        directory's child count from its Stat (one exists() per directory, pipelined)."""

        async def children(path: str) -> list[str] | None:
            return await self._ledger_children(path, sync)

        dirs = [d async for d in walk_leaf_directories(self._zk.paths, children, include_scoped)]
        if not count_children:
            return dirs

        async def counted(d: LeafDirectory) -> LeafDirectory:
            stat = await self._zk.exists(d.path)
            return LeafDirectory(d.path, d.first, d.last, stat.numChildren if stat is not None else 0)

        return list(await asyncio.gather(*(counted(d) for d in dirs)))

    def scan_ledgers(
        self,
        start: LedgerId | None = None,
        end: LedgerId | None = None,
        *,
        include_scoped: bool = True,
        stats: ScanStats | None = None,
    ) -> AsyncIterator[list[LedgerRecord | CorruptLedger]]:
        """Metadata of every ledger in [start, end), in batches of at most READ_CHUNK ledgers of one leaf
        directory, as their reads come in (`_read_chunks`): the check starts on a directory's first ledgers
        while the rest are still being read, as it does on the next directory's.

        Ledgers deleted between listing and reading are dropped (counted in `stats.vanished`); corrupt
        ones are yielded as CorruptLedger (counted) and never stop the scan.
        """
        st = stats if stats is not None else ScanStats()

        async def gen() -> AsyncIterator[list[LedgerRecord | CorruptLedger]]:
            async for batch in self.list_ledgers(start, end, include_scoped=include_scoped, stats=st):
                async for ids, results in self._read_chunks(batch.ledger_ids):
                    out: list[LedgerRecord | CorruptLedger] = []
                    for r in results:
                        if r is None:
                            st.vanished += 1
                        else:
                            if isinstance(r, CorruptLedger):
                                st.corrupt += 1
                            else:
                                st.read += 1
                            out.append(r)
                    st.last_ledger = ids[-1]
                    yield out

        return gen()

    async def read_ledger(self, ledger_id: LedgerId | int) -> LedgerRecord:
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        path = self._zk.paths.path(lid)
        got = await self._zk.get(path)
        if got is None:
            raise NoSuchLedgerError(path)
        data, stat = got
        md = formats.parse_ledger_metadata(data, lid, path, stat.version)
        return LedgerRecord(md, path, NodeStat.from_zk(stat))

    async def read_ledgers(self, ids: Iterable[LedgerId]) -> list[LedgerRecord | CorruptLedger | None]:
        """Read many in parallel (`_read_chunks`, READ_CHUNK at a time: nothing checks the first ones
        while the rest are read); None for a ledger that does not exist."""
        out: list[LedgerRecord | CorruptLedger | None] = []
        async for _, results in self._read_chunks(list(ids), first=READ_CHUNK):
            out += results
        return out

    async def _read_chunks(
        self, lids: list[LedgerId], first: int = FIRST_CHUNK
    ) -> AsyncIterator[tuple[list[LedgerId], list[LedgerRecord | CorruptLedger | None]]]:
        """The ledgers' records (None: no such ledger), chunk by chunk, each with its ids: bulk reads (bounded
        by the bridge), each chunk parsed while the next one is read, parsing yielding to the loop every
        PARSE_SLICE ledgers, so a 10,000-ledger directory never holds the loop for long. The first chunk
        is `first` ledgers, the next ones double up to READ_CHUNK: a scan's first answers come back soon."""
        paths = [self._zk.paths.path(lid) for lid in lids]
        spans: list[tuple[int, int]] = []
        at, size = 0, first
        while at < len(lids):
            spans.append((at, min(len(lids), at + size)))
            at, size = at + size, min(READ_CHUNK, size * 2)
        chunks = iter(spans)

        def read_next() -> tuple[int, int, asyncio.Future[list[Any]]] | None:
            span = next(chunks, None)
            if span is None:
                return None
            start, stop = span
            return start, stop, asyncio.ensure_future(self._zk.bridge.get_many(paths[start:stop]))

        current = read_next()
        try:
            while current is not None:
                start, stop, reading = current
                answers = await reading
                current = read_next()  # read the next chunk while this one is parsed
                out: list[LedgerRecord | CorruptLedger | None] = []
                for i, got in enumerate(answers, start):
                    if i % PARSE_SLICE == 0 and i > start:
                        await asyncio.sleep(0)
                    out.append(self._parsed(lids[i], paths[i], got))
                yield lids[start:stop], out
        finally:
            if current is not None:
                current[2].cancel()
                await asyncio.gather(current[2], return_exceptions=True)

    async def ledger_versions(self, ids: Iterable[LedgerId]) -> list[int | None]:
        """The metadata znode version of each ledger (None: it does not exist), read in bulk without
        parsing: enough to tell that a ledger read earlier is still there, unchanged."""
        answers = await self._zk.bridge.get_many([self._zk.paths.path(lid) for lid in ids])
        out: list[int | None] = []
        for got in answers:
            if isinstance(got, Exception):
                raise got
            out.append(None if got is None else got[1].version)
        return out

    @staticmethod
    def _parsed(
        lid: LedgerId, path: str, got: tuple[bytes, Any] | None | Exception
    ) -> LedgerRecord | CorruptLedger | None:
        if isinstance(got, Exception):
            raise got
        if got is None:
            return None
        data, stat = got
        try:
            md = formats.parse_ledger_metadata(data, lid, path, stat.version)
        except CorruptZnodeError as exc:
            log.warning("corrupt ledger metadata: %s", exc)
            return CorruptLedger(lid, exc.path, exc.problem)
        return LedgerRecord(md, path, NodeStat.from_zk(stat))
