"""Ground truth for the campaign, computed without any bk-auditor code.

What a ledger should hold comes from what the real Java tool reported when it wrote it (ensembles,
quorums, entries written). What each bookie really holds comes from the real Java client: the tool's
`copies` census (every entry of the write set read from each bookie by BookieClient, digest verified),
and, for spot checks, the real `BookieShell readledger -b` (which reads one bookie's copy; note that in
4.17.3 its `-le` bound is exclusive when `-b` is given). Which copies are expected where follows the
round-robin rule by brute force (`checks_util.holds`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from devcluster.checks_util import holds
from devcluster.cluster import Cluster, HarnessError

DURABILITY = (
    "entry_no_replica",
    "entry_below_ack_quorum",
    "entry_below_write_quorum",
    "truncation_risk",
    "digest_mismatch",
)


@dataclass
class LedgerRecord:
    """One ledger as the Java tool wrote it."""

    ledger_id: int
    kind: str  # e.g. "E3/WQ2/AQ2" or "E3/WQ2/AQ2 open"
    ensembles: list[tuple[int, list[str]]]
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    end: int  # last entry written (closed: last entry id; open: entries - 1)
    open: bool

    @classmethod
    def from_tool(cls, r: dict[str, Any]) -> LedgerRecord:
        is_open = r["state"] != "CLOSED"
        end = r["entries"] - 1 if is_open else r["lastEntryId"]
        kind = f"E{r['ensembleSize']}/WQ{r['writeQuorum']}/AQ{r['ackQuorum']}" + (" open" if is_open else "")
        return cls(
            r["ledgerId"],
            kind,
            sorted((int(k), v) for k, v in r["ensembles"].items()),
            r["ensembleSize"],
            r["writeQuorum"],
            r["ackQuorum"],
            end,
            is_open,
        )

    @property
    def bookies(self) -> set[str]:
        return {b for _, ens in self.ensembles for b in ens}

    def write_set(self, entry: int) -> list[str]:
        """The bookies that should hold `entry` (round robin over the segment's ensemble)."""
        ens = [e for first, e in self.ensembles if first <= entry][-1]
        return [b for i, b in enumerate(ens) if holds(i, entry, self.ensemble_size, self.write_quorum)]

    def expected_on(self, bookie: str) -> set[int]:
        return {e for e in range(self.end + 1) if bookie in self.write_set(e)}

    def census_spec(self) -> str:
        return f"{self.ledger_id}:{self.end}" if self.open else str(self.ledger_id)


@dataclass
class Damage:
    """What is really gone: per ledger, per bookie, the entries that bookie lacks."""

    lacking: dict[int, dict[str, set[int]]] = field(default_factory=dict)

    def add(self, ledger: int, bookie: str, entries: set[int]) -> None:
        if entries:
            self.lacking.setdefault(ledger, {}).setdefault(bookie, set()).update(entries)

    def copies(self, rec: LedgerRecord) -> dict[int, int]:
        lack = self.lacking.get(rec.ledger_id, {})
        return {e: sum(1 for b in rec.write_set(e) if e not in lack.get(b, ())) for e in range(rec.end + 1)}

    def allowed_categories(self, rec: LedgerRecord) -> set[str]:
        """The durability categories that are true of this ledger (empty: it is healthy)."""
        copies = self.copies(rec)
        if not copies:
            return set()
        least = min(copies.values())
        out = set()
        if least < rec.write_quorum:
            out.add("entry_below_write_quorum")
        if least < rec.ack_quorum:
            out |= {"entry_below_ack_quorum", "truncation_risk"}
        if least == 0:
            out.add("entry_no_replica")
        return out

    def worst_category(self, rec: LedgerRecord) -> str | None:
        allowed = self.allowed_categories(rec)
        for c in ("entry_no_replica", "entry_below_ack_quorum", "entry_below_write_quorum"):
            if c in allowed:
                return c
        return None

    def bookies_lacking(self, ledger: int) -> set[str]:
        return {b for b, es in self.lacking.get(ledger, {}).items() if es}


@dataclass
class CensusRow:
    ledger_id: int
    missing: dict[str, list[int]]
    corrupt: dict[str, list[int]]
    unreadable: dict[str, list[int]]
    error: str | None = None

    @property
    def healthy(self) -> bool:
        return self.error is None and not (self.missing or self.corrupt or self.unreadable)


def census(cluster: Cluster, records: list[LedgerRecord], timeout: float = 600.0) -> dict[int, CensusRow]:
    """Run the tool's `copies` command over `records` (one JVM) and parse its lines."""
    if not records:
        return {}
    out: dict[int, CensusRow] = {}
    for row in cluster.copies([r.census_spec() for r in records], timeout=timeout):
        out[row["ledgerId"]] = CensusRow(
            row["ledgerId"],
            row.get("missing", {}),
            row.get("corrupt", {}),
            row.get("unreadable", {}),
            row.get("metadataError"),
        )
    if len(out) != len(records):
        raise HarnessError(f"ledger tool copies: {len(out)} of {len(records)} ledgers answered")
    return out


_READ_OK = re.compile(r"-+ Lid=[^,]+, Eid=(\d+) -+")
_READ_FAILED = re.compile(r"Failed to read entry (\d+)")


def readledger(cluster: Cluster, rec: LedgerRecord, bookie: str, first: int = 0) -> tuple[set[int], set[int]]:
    """(entries read, entries that failed) from `bookie`'s copy of [first, rec.end], by the real BookieShell
    readledger -b.

    In 4.17.3 `readledger -b` reads entries [fe, le) (exclusive end) and a failed entry ends the read with
    an exception, so the entries not reported either way are unknown."""
    proc = cluster.shell(
        "readledger", "-l", str(rec.ledger_id), "-b", bookie, "-fe", str(first), "-le", str(rec.end + 1), check=False
    )
    ok = {int(m.group(1)) for m in _READ_OK.finditer(proc.stdout)}
    failed = {int(m.group(1)) for m in _READ_FAILED.finditer(proc.stdout)}
    return ok, failed
