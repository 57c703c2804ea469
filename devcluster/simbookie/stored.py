"""What a simulated bookie stores for one ledger, from the ledger's metadata alone.

The write schedule is the plain round-robin rule, written out here on its own (not the auditor's
`durability.schedule`, which it serves to test): in a segment with ensemble list `ens`, entry `e` is
stored on `ens[(e + k) % E]` for every `k < WQ`, where `E` is the ensemble size and `WQ` the write quorum.

The stored bytes are those of a writer that adds one entry at a time (the Java test tool's
`--one-at-a-time`, or devcluster/planted.py's metadata): entry `e` carries LAC `e - 1` and the cumulative length
`(e + 1) * size`, with the payload BkLedgerTool writes (devcluster/cluster/javatools.py `payload`).
Only a closed ledger whose length is a whole number of equal entries can be served; anything else is not
a ledger any simulated bookie knows.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

from auditor.durability.entry import compute_digest, mac_key
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState
from auditor.durability.schedule import write_set_bookies
from devcluster.cluster.javatools import payload

_HEADER = struct.Struct(">qqqq")  # ledgerId, entryId, lastAddConfirmed, length: entry format v1

Run = tuple[int, int]  # first and last entry id of a run of consecutive ids, inclusive
Span = tuple[int, int, tuple[str, ...]]  # a non-empty segment: first and last entry id, its ensemble


@dataclass(frozen=True, slots=True)
class WrittenLedger:
    """A closed ledger as its bookies store it after every add reached its whole write set."""

    ledger_id: int
    write_quorum: int
    last_entry: int
    entry_size: int
    digest: DigestType
    password: bytes
    spans: tuple[Span, ...]

    @classmethod
    def from_metadata(cls, md: LedgerMetadata) -> WrittenLedger | None:
        """None for a ledger no simulated bookie can serve: not closed, empty, scoped, or entries of
        unequal size (their bytes cannot be known from the metadata)."""
        entries = md.last_entry_id + 1
        if md.state is not LedgerState.CLOSED or entries <= 0 or md.ledger_id.scope or md.length % entries:
            return None
        return cls(
            ledger_id=md.ledger_id.ledger,
            write_quorum=md.write_quorum,
            last_entry=md.last_entry_id,
            entry_size=md.length // entries,
            digest=md.digest_type or DigestType.CRC32,
            password=md.password or b"",
            spans=_spans(md),
        )

    def runs_on(self, bookie: str) -> tuple[Run, ...]:
        """The maximal runs of consecutive entry ids `bookie` stores (empty: it never saw the ledger)."""
        return _runs(self.spans, self.write_quorum, bookie)

    def body(self, entry: int) -> bytes:
        """The stored bytes of `entry`: header, digest, payload."""
        header = _HEADER.pack(self.ledger_id, entry, entry - 1, (entry + 1) * self.entry_size)
        data = payload(self.ledger_id, entry, self.entry_size)
        key = mac_key(self.password) if self.digest is DigestType.HMAC else None
        return header + compute_digest(self.digest, header, data, key) + data


def _spans(md: LedgerMetadata) -> tuple[Span, ...]:
    """Each segment's entry range (a segment runs until the next one starts, the last one to the ledger's
    last entry); empty segments left out."""
    out = []
    for k, seg in enumerate(md.segments):
        end = md.segments[k + 1].first_entry_id - 1 if k + 1 < len(md.segments) else md.last_entry_id
        end = min(end, md.last_entry_id)
        if seg.first_entry_id <= end:
            out.append((seg.first_entry_id, end, seg.ensemble))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _runs(spans: tuple[Span, ...], write_quorum: int, bookie: str) -> tuple[Run, ...]:
    # Cached: planted ledgers share a handful of shapes, and each ledger is asked for by several bookies.
    runs: list[list[int]] = []
    for first, last, ens in spans:
        for e in range(first, last + 1):
            if bookie in write_set_bookies(ens, e, write_quorum):
                if runs and runs[-1][1] == e - 1:
                    runs[-1][1] = e
                else:
                    runs.append([e, e])
    return tuple((a, b) for a, b in runs)


def without(runs: tuple[Run, ...], missing: frozenset[int]) -> tuple[Run, ...]:
    """`runs` with the ids in `missing` taken out (a fault: entries a bookie lost)."""
    out: list[Run] = []
    for a, b in runs:
        start = a
        for e in sorted(x for x in missing if a <= x <= b):
            if start < e:
                out.append((start, e - 1))
            start = e + 1
        if start <= b:
            out.append((start, b))
    return tuple(out)


def holds(runs: tuple[Run, ...], entry: int) -> bool:
    return any(a <= entry <= b for a, b in runs)
