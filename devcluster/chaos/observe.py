"""What the system under test says: the daemons' JSON logs (read incrementally), their findings (admin
API, resolved ones included) and the under-replication markers in ZooKeeper (Java's text format, parsed
here with a regular expression, not with bk-auditor's parser)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from posixpath import join
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from devcluster.daemon_util import Daemon


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@dataclass
class LogTail:
    """New JSON lines of one daemon's log since the last call."""

    name: str
    path: Path
    offset: int = 0
    _partial: bytes = b""

    def poll(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        out = []
        for raw in lines:
            if not raw.startswith(b"{"):
                continue
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            ev["_daemon"] = self.name
            ts = ev.get("timestamp")
            ev["_t"] = _epoch(ts) if isinstance(ts, str) else 0.0
            out.append(ev)
        return out


@dataclass(frozen=True)
class PassEvent:
    daemon: str
    check: str
    start: float
    end: float
    ledgers_seen: int


@dataclass(frozen=True)
class Seen:
    """One finding as reported: from a log line (first report) or the admin API (with re-sightings)."""

    daemon: str
    category: str
    severity: str
    ledger: int | None
    bookie: str | None
    claimed: frozenset[str]  # bookies the finding says lack copies
    first_seen: float
    last_seen: float
    check: str
    message: str

    @property
    def key(self) -> tuple[str, int | None, str | None]:
        return (self.category, self.ledger, self.bookie)

    @classmethod
    def of(cls, daemon: str, fields: dict[str, Any], first: float, last: float, check: str) -> Seen:
        detail = fields.get("detail") or {}
        claimed = {m.get("bookie") for m in detail.get("missing", []) if isinstance(m, dict) and m.get("missing")}
        ledger = fields.get("ledgerId")
        return cls(
            daemon,
            str(fields.get("category", "")),
            str(fields.get("severity", "")).lower(),
            int(ledger) if ledger is not None and str(ledger).isdigit() else None,
            fields.get("bookieId"),
            frozenset(b for b in claimed if b),
            first,
            last,
            check,
            str(fields.get("message", ""))[:300],
        )


@dataclass
class Observer:
    daemons: dict[str, Daemon]
    tails: dict[str, LogTail] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    passes: list[PassEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tails = {n: LogTail(n, d.log_path) for n, d in self.daemons.items()}

    KEEP = {
        "check finished",
        "finding",
        "became the leader: starting checks",
        "not the leader any more: checks stopped",
        "bookies lost",
        "lost bookie came back: delayed audit cancelled",
        "priority scrutiny",
        "check failed",
        "lost bookie's ledgers marked under-replicated",
        "leader tasks failed; stepping down",
        "resuming an interrupted scan",
    }

    def poll(self) -> None:
        for tail in self.tails.values():
            for ev in tail.poll():
                name = ev.get("event")
                if name == "check finished":
                    dur = float(ev.get("durationSeconds", 0.0))
                    self.passes.append(
                        PassEvent(
                            ev["_daemon"], str(ev.get("check")), ev["_t"] - dur, ev["_t"], int(ev.get("ledgersSeen", 0))
                        )
                    )
                if name in self.KEEP or ev.get("level") in ("error", "critical"):
                    self.events.append(ev)

    def events_between(self, t0: float, t1: float, name: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if t0 <= e["_t"] <= t1 and (name is None or e.get("event") == name)]

    def errors_between(self, t0: float, t1: float) -> list[dict[str, Any]]:
        return [e for e in self.events_between(t0, t1) if e.get("level") in ("error", "critical")]

    def full_pass(self, check: str, started_after: float, pool: int) -> PassEvent | None:
        for p in self.passes:
            if p.check == check and p.start >= started_after and p.ledgers_seen >= pool:
                return p
        return None

    def pass_durations(self, check: str) -> list[float]:
        return [p.end - p.start for p in self.passes if p.check == check]

    # ------------------------------------------------------------------ findings
    def findings(self, since: float) -> list[Seen]:
        """Every finding reported or seen again at or after `since`, by any daemon: its log line (kept
        even when the daemon was killed since) merged with its admin API record (re-sightings, resolved
        ones included), one per daemon, category, ledger and bookie."""
        self.poll()
        merged: dict[tuple[Any, ...], Seen] = {}
        for f in self._sightings(since):
            k = (f.daemon,) + f.key
            old = merged.get(k)
            merged[k] = (
                f
                if old is None
                else replace(
                    old,
                    first_seen=min(old.first_seen, f.first_seen),
                    last_seen=max(old.last_seen, f.last_seen),
                    claimed=old.claimed | f.claimed,
                )
            )
        return list(merged.values())

    def _sightings(self, since: float) -> list[Seen]:
        out: list[Seen] = []
        for ev in self.events:
            if ev.get("event") == "finding" and ev["_t"] >= since:
                fields = dict(ev)
                out.append(Seen.of(ev["_daemon"], fields, ev["_t"], ev["_t"], str(ev.get("check", ""))))
        for name, d in self.daemons.items():
            if not d.running:
                continue
            try:
                got = d.findings(limit=100000, include_resolved=True)
            except Exception:
                continue
            for f in got.findings:
                if f.last_seen < since:
                    continue
                try:
                    fields = json.loads(f.fields_json) if f.fields_json else {}
                except ValueError:
                    fields = {}
                fields.setdefault("category", f.category)
                fields.setdefault("severity", f.severity)
                fields.setdefault("bookieId", f.bookie_id or None)
                if f.ledger_id.isdigit():
                    fields.setdefault("ledgerId", int(f.ledger_id))
                out.append(Seen.of(name, fields, f.first_seen, f.last_seen, f.check))
        return out


_REPLICA = re.compile(r'^replica:\s*"([^"]*)"\s*$', re.M)


def read_markers(zk: KazooClient, root: str) -> dict[int, tuple[str, set[str]]]:
    """ledger id -> (marker path, replicas named) for every marker under `<root>/underreplication/ledgers`."""
    base = join(root, "underreplication", "ledgers")
    out: dict[int, tuple[str, set[str]]] = {}
    stack = [base]
    while stack:
        path = stack.pop()
        try:
            children = zk.get_children(path)
        except NoNodeError:
            continue
        for c in children:
            p = join(path, c)
            if c.startswith("urL") and c[3:].isdigit():
                try:
                    data, _ = zk.get(p)
                except NoNodeError:
                    continue
                out[int(c[3:])] = (p, set(_REPLICA.findall(data.decode(errors="replace"))))
            else:
                stack.append(p)
    return out
