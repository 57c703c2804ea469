"""Driver-side aggregation of the executors' rows, and the sweep's outputs.

Each finding row carries `Finding.to_wire()`; the driver reads it back (`Finding.from_wire`) into the
same `FindingSummary` the one-shot command uses, so duplicates are dropped by `Finding.dedup_key()`,
keeping the first sighting in (partition, row order) order, which is the order the one-shot command
sees them in, and counts have the one-shot JSON summary's shape. The per-check run counters are summed
over partitions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlparse

from auditor.checks.oneshot import run_counts
from auditor.checks.tables import console
from auditor.checks.tables import print_table as table_out
from auditor.durability.findings import Finding, FindingSummary, FindingWire, Severity
from auditor.processes.engine import merge_run_stats
from auditor.processes.worker import FINDING, STATS, Row


class SweepFindings:
    """The sweep's findings: a `FindingSummary` (dedup, counts, `as_dict`) whose findings read as the
    wire dicts the sweep writes, each with the check that reported it (`{"check": name, **to_wire()}`)."""

    def __init__(self) -> None:
        self.summary = FindingSummary()
        self.findings: list[FindingWire] = []

    def add(self, wire: FindingWire, check: str) -> bool:
        if not self.summary.add(Finding.from_wire(wire), check):
            return False
        self.findings.append({"check": check, **wire})
        return True

    @property
    def duplicates(self) -> int:
        return self.summary.duplicates

    @property
    def actionable(self) -> list[FindingWire]:
        return [w for f, w in zip(self.summary.findings, self.findings) if f.actionable]

    def as_dict(self) -> dict[str, Any]:
        return self.summary.as_dict()


@dataclass
class PartitionStats:
    """One partition's stats rows, per check."""

    index: int
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)

    def visited(self, check: str) -> int:
        return int(self.checks.get(check, {}).get("ledgersVisited", 0))

    def ledgers(self, check: str) -> list[str] | None:
        return self.checks.get(check, {}).get("ledgers")


def aggregate(
    rows: Iterable[Row], checks: list[str]
) -> tuple[SweepFindings, dict[int, PartitionStats], list[dict[str, Any]]]:
    """(deduplicated findings, stats per partition, merged run stats per check in `checks` order)."""
    summary = SweepFindings()
    per_part: dict[int, PartitionStats] = {}
    for kind, part, check, _seq, payload in sorted(rows, key=lambda r: (r[1], r[3])):
        doc = json.loads(payload)
        if kind == FINDING:
            summary.add(doc["finding"], check)
        elif kind == STATS:
            per_part.setdefault(part, PartitionStats(part)).checks[check] = doc
    runs = [merge_run_stats(c, (p.checks[c]["stats"] for p in per_part.values() if c in p.checks)) for c in checks]
    for run in runs:
        run["ledgersVisited"] = sum(p.visited(run["check"]) for p in per_part.values())
    return summary, per_part, runs


# ------------------------------------------------------------------------------------------ writing


def _is_local(uri: str) -> bool:
    parsed = urlparse(uri)
    return parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt")


def write_text(uri: str, text: str, spark: Any = None) -> None:
    """Write one file: a plain path directly, any other URI (hdfs://, s3a://, file://, ...) through the
    Hadoop FileSystem of the running Spark driver."""
    if _is_local(uri):
        path = Path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        return
    if spark is None:
        raise ValueError(f"{uri}: writing a URI needs a Spark session (Hadoop FileSystem)")
    sc = spark.sparkContext
    jvm = sc._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(uri)
    fs = hpath.getFileSystem(sc._jsc.hadoopConfiguration())
    fs.setWriteChecksum(False)  # no .crc side files on the local file system
    stream = fs.create(hpath, True)
    try:
        data = text.encode("utf-8")
        step = 1 << 20
        for i in range(0, len(data), step):
            stream.write(bytearray(data[i : i + step]))
    finally:
        stream.close()


def join_uri(base: str, name: str) -> str:
    return str(Path(base) / name) if _is_local(base) else base.rstrip("/") + "/" + name


def findings_jsonl(findings: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(f, sort_keys=True) + "\n" for f in findings)


# ------------------------------------------------------------------------------------------ printing


def _sort_key(f: dict[str, Any]) -> tuple[Any, ...]:
    return (Severity(f["severity"]).rank, f["category"], f.get("qualifiedName", ""))


def print_table(summary: SweepFindings, runs: list[dict[str, Any]], sweep: dict[str, Any], out: TextIO) -> None:
    con = console(out)
    findings = summary.findings
    if findings:
        rows = []
        for f in sorted(findings, key=_sort_key):
            count = f.get("affectedEntries", 0)
            entries = f"{count} [{f.get('affectedEntryRanges', '')}]" if count else str(f.get("entryId", ""))
            ledger = str(f["ledgerId"]) if "ledgerId" in f and "scopeId" not in f else f.get("qualifiedName", "")
            rows.append(
                (f["severity"], f["category"], ledger, f.get("bookieId", ""), entries, f["check"], f["message"])
            )
        columns = ("severity", "category", "ledger", "bookie", "entries", "check", "detail")
        table_out(columns, rows, title=f"{len(findings)} finding(s)", out=out)
    else:
        con.print("no findings: every checked ledger is healthy")
    for r in runs:
        con.print(f"{r['check']}: {run_counts(r)}, {r['durationSeconds']}s over {r['partitions']} partition(s)")
    failed = sweep.get("failedPartitions") or []
    con.print(
        f"sweep: {sweep['partitionsDone']}/{sweep['partitionsTotal']} partitions on {sweep['master']} "
        f"in {sweep['durationSeconds']}s" + (f", {len(failed)} FAILED" if failed else "")
    )
    for p in failed:
        con.print(f"  failed partition {p['index']} [{p['start']}, {p['end'] or 'end'}): {p['error']}")
