"""Planted ledger metadata for benchmarks at scale: closed E3/WQ2/AQ2 ledgers (v3 binary metadata, as the
Java client writes it) created directly in ZooKeeper, pipelined. Marking a lost bookie and scanning
metadata read only metadata, so the bookies they name need not serve anything.
"""

from __future__ import annotations

import time
from typing import Any

from kazoo.client import KazooClient

from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment
from auditor.metadata import formats
from auditor.metadata.location import LedgerManager
from auditor.metadata.paths import LedgerPaths


def planted(lid: int, bookies: list[str], now_ms: int) -> LedgerMetadata:
    first = lid % len(bookies)
    ensemble = tuple(bookies[(first + k) % len(bookies)] for k in range(3))
    return LedgerMetadata(
        ledger_id=LedgerId(0, lid),
        ensemble_size=3,
        write_quorum=2,
        ack_quorum=2,
        state=LedgerState.CLOSED,
        last_entry_id=99,
        length=6400,
        segments=(Segment(0, ensemble),),
        digest_type=DigestType.CRC32C,
        password=b"",
        ctime=now_ms,
    )


def wait_all(results: list[Any]) -> None:
    for r in results:
        r.get(timeout=60)


def plant(zk: KazooClient, root: str, count: int, bookies: list[str], first: int = 1) -> set[int]:
    """Ledgers `first`..`count` (1..count by default); returns the ids that name the victim (bookies[0]).
    Streamed, 2000 creates in flight: a million ledgers never sit in memory at once."""
    paths = LedgerPaths(root, LedgerManager.HIERARCHICAL)
    now_ms = int(time.time() * 1000)
    parents: set[str] = set()
    victims: set[int] = set()
    for start in range(first, count + 1, 2000):
        chunk = [(paths.path(i), planted(i, bookies, now_ms)) for i in range(start, min(start + 2000, count + 1))]
        for parent in sorted({p.rsplit("/", 1)[0] for p, _ in chunk} - parents):
            zk.ensure_path(parent)
            parents.add(parent)
        wait_all([zk.create_async(p, formats.serialize_ledger_metadata(md, 3)) for p, md in chunk])
        victims.update(md.ledger_id.ledger for _, md in chunk if bookies[0] in md.bookies)
    return victims
