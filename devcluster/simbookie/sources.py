"""Where the simulated bookies learn which ledgers exist: a planted layout computed on demand, or a
snapshot of the metadata in ZooKeeper."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Protocol

from auditor.durability.ids import LedgerId
from auditor.metadata.interfaces import LedgerRecord
from auditor.metadata.store import ZooKeeperMetadataStore
from devcluster.planted import DEFAULT_SHAPE, Shape, planted

from .stored import WrittenLedger


class LedgerSource(Protocol):
    def ledger(self, ledger_id: int) -> WrittenLedger | None:
        """The ledger as written, or None when no bookie holds it."""
        ...


class PlantedSource:
    """Ledgers 1..count laid out by devcluster/planted.py's rule over `bookies` (the same list and shape the
    planting used). Each ledger is computed when asked for, so a million ledgers cost no memory."""

    def __init__(self, count: int, bookies: list[str], shape: Shape = DEFAULT_SHAPE) -> None:
        self.count = count
        self.bookies = tuple(bookies)
        self.shape = shape

    def ledger(self, ledger_id: int) -> WrittenLedger | None:
        if not 1 <= ledger_id <= self.count:
            return None
        return _planted(ledger_id, self.bookies, self.shape)


@functools.lru_cache(maxsize=1024)
def _planted(ledger_id: int, bookies: tuple[str, ...], shape: Shape) -> WrittenLedger | None:
    # Cached: each ledger is asked for by each of its bookies, close together.
    return WrittenLedger.from_metadata(planted(ledger_id, list(bookies), 0, shape))


class SnapshotSource:
    """The ledgers in ZooKeeper when `read` ran (closed ones whose bytes the metadata determines; see
    stored.WrittenLedger). Held in memory: meant for test-sized clusters."""

    def __init__(self, ledgers: Iterable[WrittenLedger]) -> None:
        self.ledgers = {w.ledger_id: w for w in ledgers}

    def ledger(self, ledger_id: int) -> WrittenLedger | None:
        return self.ledgers.get(ledger_id)

    @classmethod
    async def read(cls, uri: str, ledger_ids: Iterable[int] | None = None) -> SnapshotSource:
        """Every ledger under the metadata service `uri`, or only `ledger_ids`."""
        store = await ZooKeeperMetadataStore.connect(uri, wire_reads=False)
        try:
            records: list[object] = []
            if ledger_ids is None:
                async for batch in store.scan_ledgers(include_scoped=False):
                    records.extend(batch)
            else:
                records.extend(await store.read_ledgers([LedgerId(0, i) for i in ledger_ids]))
        finally:
            await store.close()
        written = (WrittenLedger.from_metadata(r.metadata) for r in records if isinstance(r, LedgerRecord))
        return cls(w for w in written if w is not None)
