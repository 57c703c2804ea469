"""Planted ledger metadata for benchmarks at scale: closed ledgers (v3 binary metadata, as the Java client
writes it) created directly in ZooKeeper, pipelined; E3/WQ2/AQ2 of 100 entries unless a `Shape` says
otherwise. Marking a lost bookie and scanning metadata read only metadata, so the bookies they name need
not serve anything; the simulated bookies (devcluster/simbookie) serve the same layout from the same rule.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient

from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment
from auditor.metadata.codecs import formats
from auditor.metadata.codecs.paths import LedgerPaths
from auditor.metadata.location import LedgerManager


@dataclass(frozen=True)
class Shape:
    """Every planted ledger's quorums, and its entry count: `entries[lid % len(entries)]`."""

    ensemble: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2
    entries: tuple[int, ...] = (100,)

    @classmethod
    def parse(cls, quorums: str, entries: str = "100") -> Shape:
        """`E/WQ/AQ` and a comma list of entry counts, e.g. `Shape.parse("5/2/2", "10,50,100,200")`."""
        e, wq, aq = (int(x) for x in quorums.split("/"))
        counts = tuple(int(x) for x in entries.split(",") if x.strip())
        if not (1 <= aq <= wq <= e) or not counts or min(counts) < 1:
            raise ValueError(f"not a ledger shape: {quorums} with entries {entries}")
        return cls(e, wq, aq, counts)

    @property
    def label(self) -> str:
        return f"E{self.ensemble}/WQ{self.write_quorum}/AQ{self.ack_quorum}, entries {','.join(map(str, self.entries))}"

    def expected_findings(self, ledgers: int) -> dict[str, int]:
        """What a scrutiny of `ledgers` healthy planted ledgers finds: one informational `risky_quorum` each
        when WQ == AQ, nothing otherwise."""
        return {"risky_quorum": ledgers} if self.write_quorum == self.ack_quorum else {}

    @staticmethod
    def add_arguments(ap: argparse.ArgumentParser) -> None:
        """A benchmark's `--shape` and `--entries` options (read back with `from_arguments`)."""
        ap.add_argument("--shape", default="3/2/2", help="the planted ledgers' E/WQ/AQ (default %(default)s)")
        ap.add_argument("--entries", default="100", help="their entry counts, cycled (comma list; default %(default)s)")

    @classmethod
    def from_arguments(cls, ap: argparse.ArgumentParser, args: argparse.Namespace) -> Shape:
        try:
            return cls.parse(args.shape, args.entries)
        except ValueError as exc:
            ap.error(str(exc))

    @property
    def argv(self) -> list[str]:
        """The options that give this shape to `python -m devcluster.simbookie planted`."""
        quorums = f"{self.ensemble}/{self.write_quorum}/{self.ack_quorum}"
        return ["--shape", quorums, "--entries", ",".join(map(str, self.entries))]


DEFAULT_SHAPE = Shape()


def planted(lid: int, bookies: list[str], now_ms: int, shape: Shape = DEFAULT_SHAPE) -> LedgerMetadata:
    if shape.ensemble > len(bookies):
        raise ValueError(f"an ensemble of {shape.ensemble} needs more than the {len(bookies)} bookies given")
    first = lid % len(bookies)
    ensemble = tuple(bookies[(first + k) % len(bookies)] for k in range(shape.ensemble))
    entries = shape.entries[lid % len(shape.entries)]
    return LedgerMetadata(
        ledger_id=LedgerId(0, lid),
        ensemble_size=shape.ensemble,
        write_quorum=shape.write_quorum,
        ack_quorum=shape.ack_quorum,
        state=LedgerState.CLOSED,
        last_entry_id=entries - 1,
        length=64 * entries,
        segments=(Segment(0, ensemble),),
        digest_type=DigestType.CRC32C,
        password=b"",
        ctime=now_ms,
    )


def wait_all(results: list[Any]) -> None:
    for r in results:
        r.get(timeout=60)


def plant(
    zk: KazooClient, root: str, count: int, bookies: list[str], first: int = 1, shape: Shape = DEFAULT_SHAPE
) -> set[int]:
    """Ledgers `first`..`count` (1..count by default); returns the ids that name the victim (bookies[0]).
    Streamed, 2000 creates in flight: a million ledgers never sit in memory at once."""
    paths = LedgerPaths(root, LedgerManager.HIERARCHICAL)
    now_ms = int(time.time() * 1000)
    parents: set[str] = set()
    victims: set[int] = set()
    for start in range(first, count + 1, 2000):
        chunk = [
            (paths.path(i), planted(i, bookies, now_ms, shape)) for i in range(start, min(start + 2000, count + 1))
        ]
        for parent in sorted({p.rsplit("/", 1)[0] for p, _ in chunk} - parents):
            zk.ensure_path(parent)
            parents.add(parent)
        wait_all([zk.create_async(p, formats.serialize_ledger_metadata(md, 3)) for p, md in chunk])
        victims.update(md.ledger_id.ledger for _, md in chunk if bookies[0] in md.bookies)
    return victims
