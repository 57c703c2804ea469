"""The bookie watch's ledger index: which ledgers name a bookie, and at which metadata version each was read.

A leader builds it once from all ledger metadata and keeps it for the whole leadership, so it has to be
small at a million ledgers. Ensembles repeat (a cluster has far fewer distinct bookie sets than ledgers),
so each distinct set is stored once and a ledger holds only its number; scope-0 ledgers (every ledger
BookKeeper itself writes) are two parallel sorted arrays of 64-bit integers, the id and the set number
with the version packed beside it: 16 bytes a ledger, where a dict of LedgerIds, frozensets and per-bookie
sets of LedgerIds took ~720 (docs/benchmarks.md, "Memory at 10k, 100k and 1M ledgers"). Scoped ledgers
(our 128-bit extension) are few, and keep a dict.

Lookups are binary searches; a new id above the highest (the scan's ascending order, and the ledgers
created since) is an append. Asking which ledgers name one bookie walks the index: that happens when a
bookie is lost or reformatted, not per ledger.
"""

from __future__ import annotations

import time
from array import array
from bisect import bisect_left
from collections.abc import Iterable

from auditor.durability.ids import LedgerId
from auditor.metadata.interfaces import CorruptLedger
from auditor.metadata.store import ZooKeeperMetadataStore

_VERSION_BITS = 32
_VERSION_MASK = (1 << _VERSION_BITS) - 1


def _packed(set_number: int, version: int) -> int:
    """A set number and a metadata version (-1: unknown) in one int64: version + 1 in the low 32 bits.
    ZooKeeper versions are Java ints, so they fit."""
    if not -1 <= version < _VERSION_MASK:
        raise ValueError(f"metadata version {version} is outside -1..2^32-2")
    return set_number << _VERSION_BITS | (version + 1)


class LedgerIndex:
    """bookie id -> ledger ids naming it in any segment, and each ledger's metadata version (so a marker
    can be written on the condition that the ledger is still as indexed, without re-reading it)."""

    def __init__(self, store: ZooKeeperMetadataStore) -> None:
        self.store = store
        self.high: LedgerId | None = None  # highest scope-0 ledger id indexed
        self.built_at: float | None = None
        self._clear()

    def _clear(self) -> None:
        self._ids = array("q")  # scope-0 ledger ids, ascending
        self._vals = array("q")  # for each: its bookie set's number and version (_packed)
        self._scoped: dict[LedgerId, int] = {}  # scoped ledgers -> _packed
        self._sets: list[frozenset[str]] = []  # bookie sets by number
        self._numbers: dict[frozenset[str], int] = {}
        self._uses: list[int] = []  # ledgers indexed with each set

    def __len__(self) -> int:
        return len(self._ids) + len(self._scoped)

    @property
    def bookies(self) -> set[str]:
        return {b for s, uses in zip(self._sets, self._uses) if uses for b in s}

    def ledgers_on(self, bookie: str) -> set[LedgerId]:
        numbers = {n for n, s in enumerate(self._sets) if bookie in s and self._uses[n]}
        if not numbers:
            return set()
        out = {LedgerId(0, lid) for lid, v in zip(self._ids, self._vals) if v >> _VERSION_BITS in numbers}
        out.update(lid for lid, v in self._scoped.items() if v >> _VERSION_BITS in numbers)
        return out

    def holds(self, bookie: str, lid: LedgerId) -> bool:
        """Whether the indexed metadata of `lid` names `bookie`."""
        v = self._value(lid)
        return v is not None and bookie in self._sets[v >> _VERSION_BITS]

    def version_of(self, lid: LedgerId) -> int | None:
        """The metadata version indexed for `lid` (None: not indexed)."""
        v = self._value(lid)
        return None if v is None else (v & _VERSION_MASK) - 1

    def update(self, lid: LedgerId, bookies: Iterable[str] | None, version: int = -1) -> None:
        """Index `lid` at metadata `version` (-1: unknown), or forget it (`bookies` None)."""
        new = None if bookies is None else self._use(frozenset(bookies), version)
        if lid.scope:
            old = self._scoped.pop(lid, None)
            if new is not None:
                self._scoped[lid] = new
        else:
            old = self._put(lid.ledger, new)
            if new is not None and (self.high is None or lid > self.high):
                self.high = lid
        if old is not None:
            self._uses[old >> _VERSION_BITS] -= 1

    def _use(self, bookies: frozenset[str], version: int) -> int:
        n = self._numbers.get(bookies)
        if n is None:
            n = self._numbers[bookies] = len(self._sets)
            self._sets.append(bookies)
            self._uses.append(0)
        packed = _packed(n, version)
        self._uses[n] += 1
        return packed

    def _put(self, ledger: int, value: int | None) -> int | None:
        """Set (or with None remove) a scope-0 ledger's value; returns the value it replaced."""
        ids, vals = self._ids, self._vals
        if not ids or ledger > ids[-1]:  # the common case: ids come in ascending order
            if value is not None:
                ids.append(ledger)
                vals.append(value)
            return None
        i = bisect_left(ids, ledger)
        if ids[i] == ledger:
            old = vals[i]
            if value is None:
                del ids[i]
                del vals[i]
            else:
                vals[i] = value
            return old
        if value is not None:
            ids.insert(i, ledger)
            vals.insert(i, value)
        return None

    def _value(self, lid: LedgerId) -> int | None:
        if lid.scope:
            return self._scoped.get(lid)
        ids = self._ids
        i = bisect_left(ids, lid.ledger)
        return self._vals[i] if i < len(ids) and ids[i] == lid.ledger else None

    async def _scan(self, start: LedgerId | None) -> int:
        n = 0
        async for batch in self.store.scan_ledgers(start):
            for r in batch:
                if not isinstance(r, CorruptLedger):
                    self.update(r.metadata.ledger_id, r.metadata.bookies, r.stat.version)
                    n += 1
        return n

    async def rebuild(self) -> int:
        """Index all ledger metadata afresh. The new index replaces this one only when complete: a lost
        bookie audited meanwhile must not be asked about a half-built index (it would miss ledgers)."""
        fresh = LedgerIndex(self.store)
        n = await fresh._scan(None)
        self.high = fresh.high
        self._ids, self._vals, self._scoped = fresh._ids, fresh._vals, fresh._scoped
        self._sets, self._numbers, self._uses = fresh._sets, fresh._numbers, fresh._uses
        self.built_at = time.time()
        return n

    async def refresh_new(self) -> int:
        """Index ledgers created since the last scan (ids above the highest one seen)."""
        start = LedgerId(0, self.high.ledger + 1) if self.high is not None else None
        return await self._scan(start)
