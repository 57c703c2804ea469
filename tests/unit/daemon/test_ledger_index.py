"""The bookie watch's ledger index (auditor/daemon/ledger_index.py) against its meaning spelled out plainly:
the dict of per-ledger bookie sets and per-bookie sets of ledgers it replaced. Random updates, forgets and
re-indexes in any id order, scoped ledgers among them; every question asked of both after each step.
Building it (`rebuild`, `refresh_new`) reads real metadata and is covered by the daemon's real-cluster
tests."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Iterable

import pytest

from auditor.daemon.ledger_index import LedgerIndex
from auditor.durability.ids import LedgerId

BOOKIES = [f"127.0.0.{i}:3181" for i in range(1, 9)]


class PlainIndex:
    """The index as it was before it was made compact: the behaviour the compact one must keep."""

    def __init__(self) -> None:
        self.by_bookie: dict[str, set[LedgerId]] = {}
        self.bookies_of: dict[LedgerId, tuple[frozenset[str], int]] = {}
        self.high: LedgerId | None = None

    def update(self, lid: LedgerId, bookies: Iterable[str] | None, version: int = -1) -> None:
        old = self.bookies_of.pop(lid, None)
        for b in old[0] if old else ():
            self.by_bookie.get(b, set()).discard(lid)
        if bookies is not None:
            bs = frozenset(bookies)
            self.bookies_of[lid] = (bs, version)
            for b in bs:
                self.by_bookie.setdefault(b, set()).add(lid)
            if lid.scope == 0 and (self.high is None or lid > self.high):
                self.high = lid

    @property
    def bookies(self) -> set[str]:
        return {b for b, ids in self.by_bookie.items() if ids}


def same(index: LedgerIndex, plain: PlainIndex, probes: list[LedgerId]) -> None:
    assert len(index) == len(plain.bookies_of)
    assert index.bookies == plain.bookies
    assert index.high == plain.high
    for b in [*BOOKIES, "nobody:1"]:
        assert index.ledgers_on(b) == plain.by_bookie.get(b, set()), b
    for lid in probes:
        got = plain.bookies_of.get(lid)
        assert index.version_of(lid) == (None if got is None else got[1]), lid
        for b in BOOKIES:
            assert index.holds(b, lid) == (got is not None and b in got[0]), (b, lid)


@pytest.mark.parametrize("seed", range(20))
def test_answers_as_the_plain_index_through_random_updates(seed: int) -> None:
    rng = random.Random(seed)
    index, plain = LedgerIndex(None), PlainIndex()  # type: ignore[arg-type]  # no store: nothing is read
    top = 0
    probes: list[LedgerId] = []
    for _ in range(400):
        roll = rng.random()
        if roll < 0.4:  # a new ledger above the highest: the scan's order, and ledgers created since
            top += rng.randint(1, 3)
            lid = LedgerId(0, top)
        elif roll < 0.9:  # any id: an old one re-read, one that was forgotten, one in a gap
            lid = LedgerId(0, rng.randint(0, top + 2))
        else:  # our scoped extension
            lid = LedgerId(rng.randint(1, 3), rng.randint(0, 20))
        if rng.random() < 0.2:
            bookies = None  # deleted: forget it
        else:
            bookies = rng.sample(BOOKIES, rng.randint(0, 4))  # an ensemble (or none at all)
        version = rng.randint(-1, 2**31 - 1) if rng.random() < 0.1 else rng.randint(-1, 6)
        index.update(lid, bookies, version)
        plain.update(lid, bookies, version)
        probes.append(lid)
        if rng.random() < 0.1:
            same(index, plain, probes[-30:] + [LedgerId(0, top + 5), LedgerId(0, 0)])
    same(index, plain, probes)


def test_refuses_a_version_it_cannot_hold() -> None:
    index = LedgerIndex(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        index.update(LedgerId(0, 1), BOOKIES[:3], 2**32)
    with pytest.raises(ValueError):
        index.update(LedgerId(0, 1), BOOKIES[:3], -2)
    assert len(index) == 0


def test_a_ledger_costs_a_few_bytes() -> None:
    """100,000 ledgers over a handful of ensembles: the index holds two int64 a ledger (and the arrays'
    spare room), where the plain index held ~720 bytes a ledger (docs/benchmarks.md)."""
    ensembles = [BOOKIES[i : i + 3] for i in range(6)]
    index = LedgerIndex(None)  # type: ignore[arg-type]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for lid in range(1, 100_001):
            index.update(LedgerId(0, lid), ensembles[lid % 6], 0)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(index) == 100_000 and index.ledgers_on(BOOKIES[0]) == {
        LedgerId(0, lid) for lid in range(1, 100_001) if lid % 6 == 0
    }
    assert held / 100_000 < 24, held / 100_000
