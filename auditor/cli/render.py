"""How the commands show what they got: times, durations, plain-text tables, protobuf messages as JSON,
and the tables of findings, of an explained ledger, of marked ledgers and of a decommission report."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:  # annotations only
    from google.protobuf.message import Message

    from auditor._proto import admin_pb2


def timestamp(value: float | None) -> str:
    """Unix seconds as UTC to the second (2024-05-01T12:00:00Z); "-" when unset (0 or None)."""
    if not value:
        return "-"
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def duration(seconds: float | None) -> str:
    """Seconds as 42s, 3m07s or 2h05m; "-" when unknown."""
    if seconds is None or seconds < 0:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def text_table(rows: list[list[str]], header: list[str]) -> str:
    """Rows under a header as plain text, each column as wide as its widest cell."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    return "\n".join(lines)


def message_dict(msg: Message) -> dict[str, Any]:
    """A protobuf answer as a JSON object: camelCase names, fields without presence shown when unset."""
    from google.protobuf.json_format import MessageToDict

    out: dict[str, Any] = MessageToDict(
        msg, preserving_proto_field_name=False, always_print_fields_with_no_presence=True
    )
    return out


def echo_json(kind: str, obj: dict[str, Any]) -> None:
    """One JSON object on one line of stdout, its `kind` first (docs/findings.md, "JSON output"): every
    command's JSON is JSON lines, a list one object per line."""
    typer.echo(json.dumps({"kind": kind, **obj}, sort_keys=True))


def optional_field(msg: Message, name: str) -> Any:
    """An optional field's value, None when it is unset."""
    return getattr(msg, name) if msg.HasField(name) else None


def finding_json(f: admin_pb2.Finding) -> dict[str, Any]:
    """A finding of the admin API as the JSON object `findings --format json` prints."""
    out = json.loads(f.fields_json) if f.fields_json else {}
    out.update(
        {
            "check": f.check,
            "firstSeen": timestamp(f.first_seen),
            "lastSeen": timestamp(f.last_seen),
            "timesSeen": f.times_seen,
            "dedupKey": f.dedup_key,
        }
    )
    if f.HasField("resolved_at"):
        out["resolvedAt"] = timestamp(f.resolved_at)
    return out


def findings_table(findings: Iterable[admin_pb2.Finding]) -> str:
    """Findings as a text table, one row each."""
    rows = [
        [
            f.severity,
            f.category,
            f.ledger_id or "-",
            f.bookie_id or "-",
            str(f.times_seen),
            timestamp(f.first_seen),
            f.message,
        ]
        for f in findings
    ]
    return text_table(rows, ["SEVERITY", "CATEGORY", "LEDGER", "BOOKIE", "SEEN", "FIRST SEEN", "MESSAGE"])


def explain_text(resp: admin_pb2.ExplainLedgerResponse, *, findings_known: bool = True) -> str:
    """What `explain` prints: the ledger's metadata, each segment's copies per bookie, its findings (when
    a daemon answered: `findings_known`)."""
    lines: list[str] = []
    if resp.HasField("metadata"):
        m = resp.metadata
        lines.append(
            f"ledger {m.ledger_id} ({m.qualified_name})  state {m.state}  E/WQ/AQ "
            f"{m.ensemble_size}/{m.write_quorum}/{m.ack_quorum}  last entry {m.last_entry_id}  "
            f"length {m.length}  digest {m.digest_type or '-'}"
        )
        if m.custom_metadata:
            lines.append("custom metadata: " + ", ".join(f"{k}={v}" for k, v in sorted(m.custom_metadata.items())))
    lines.append(f"under-replication marker: {'yes' if resp.under_replicated else 'no'}")
    for s in resp.segments:
        copies = f"  min copies {s.min_copies}" if s.HasField("min_copies") else ""
        lines.append(
            f"segment {s.index}: entries {s.first_entry_id}..{s.last_entry_id}  "
            f"ensemble {', '.join(s.ensemble)}{copies}"
        )
        rows = []
        for b in s.bookies:
            present = str(b.present_entries) if b.HasField("present_entries") else "?"
            missing = ",".join(str(r.first) if r.first == r.last else f"{r.first}-{r.last}" for r in b.missing)
            rows.append(
                [
                    f"  [{b.ensemble_index}] {b.bookie_id}",
                    b.status,
                    str(b.expected_entries),
                    present,
                    missing or "-",
                    ("" if b.registered else "NOT REGISTERED ") + b.error,
                ]
            )
        if rows:
            lines.append(text_table(rows, ["  BOOKIE", "STATUS", "EXPECTED", "PRESENT", "MISSING", "NOTE"]))
    if not findings_known:
        lines.append("findings: not known here (no daemon asked): `bk-auditor check` judges the ledger")
    elif resp.findings:
        lines.append("findings:")
        lines.append(findings_table(resp.findings))
    else:
        lines.append("findings: none")
    lines.extend(f"note: {n}" for n in resp.notes)
    return "\n".join(lines)


def repair_limit(msg: Message, name: str, setting: str) -> str:
    """One run-time repair limit, or which setting applies when it is unset."""
    value = optional_field(msg, name)
    return f"{value:g}" if value is not None else f"unset ({setting} of each worker)"


def age(seconds: float | None) -> str:
    """An age as 12s, 3.5m, 2.0h or 1.5d; "-" when unknown."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def print_underreplicated(rows: list[Any]) -> None:
    """The table `underreplicated` prints: one row per marked ledger."""
    from auditor.checks.tables import print_table

    if not rows:
        typer.echo("no ledger is marked under-replicated")
        return
    print_table(
        ("ledger", "marked", "lost replicas", "lock", "verdict", "worst"),
        (
            (
                str(m.ledger.ledger),
                age(m.marked_seconds),
                ", ".join(m.replicas),
                f"{m.lock_holder} ({age(m.locked_seconds)})" if m.lock_holder else "-",
                m.verdict,
                f"{m.worst} ({m.entries} entries)" if m.worst else "-",
            )
            for m in rows
        ),
        title=f"{len(rows)} ledger(s) marked under-replicated",
    )


def print_decommission(report: Any) -> None:
    """What `can-decommission` prints: the verdict, then every ledger still on the bookie, blocked first."""
    from auditor.checks.tables import print_table

    state = "registered" if report.registered else "not registered"
    verdict = "safe to decommission" if report.safe else "NOT YET"
    typer.echo(f"{report.bookie} ({state}): {verdict}; {len(report.ledgers)} ledger(s) still name it")
    if report.replication_disabled:
        typer.echo("replication is disabled: no worker moves marked ledgers")
    for path in report.unreadable:
        typer.echo(f"unreadable ledger metadata (it may name the bookie): {path}")
    if not report.ledgers:
        return
    print_table(
        ("ledger", "state", "blocking", "reason"),
        (
            (
                str(x.ledger.ledger),
                "closed" if x.closed else "open",
                ", ".join(b.value for b in x.blockers) or "-",
                x.reason,
            )
            for x in sorted(report.ledgers, key=lambda x: (not x.blockers, x.ledger.ledger))
        ),
    )


def print_findings_by_topic(resp: Any, fmt: str) -> None:
    """The daemon's active findings grouped by Pulsar topic (what `check --by topic` shows for one run)."""
    from auditor.checks.oneshot import print_topics
    from auditor.durability.findings import Finding
    from auditor.durability.topics import at_risk_by_topic

    active = [Finding.from_wire(json.loads(f.fields_json)) for f in resp.findings if not f.HasField("resolved_at")]
    if fmt == "json":
        for r in at_risk_by_topic(active):
            echo_json("topic", r.to_dict())
    else:
        print_topics(active, sys.stdout)
    if resp.total_matching > len(resp.findings):
        typer.echo(f"(from {len(resp.findings)} of {resp.total_matching} findings; use --limit)", err=True)
