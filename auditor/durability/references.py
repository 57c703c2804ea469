"""Deletion discipline (BP-31's "validate the durability contract when a ledger is deleted"): the ledgers
an application's metadata still needs against the ledgers BookKeeper has.

Pulsar records, for each topic's managed ledger, its data ledgers (the managed-ledger znode), each
durable cursor's ledger (the cursor znodes) and each schema version's ledger (the schema locators), and
it tags every ledger it creates with the managed ledger (or schema) it belongs to. Two verdicts follow:

* `ledger_missing` (critical): a listed ledger whose BookKeeper metadata is gone. Not a finding when
  the listing says the ledger was offloaded to tiered storage and its BookKeeper copy deleted on
  purpose; only informational when the only listing is a shadow topic's copy (it refreshes late).
* `orphan_ledger` (info): a ledger whose own tags name a managed ledger (or schema) that no longer lists
  it, or that no longer exists, older than a grace period (Pulsar creates a ledger before it records
  it). Only data, cursor and schema ledgers are judged: a compacted topic's current ledger is recorded
  only inside its cursor ledger, so a metadata-only cross-check cannot rule it out.

Positions (mark-delete, terminated position) point into ledgers without owning them: never references.
Pure: the adapters read the znodes (auditor/metadata/pulsar/references.py), the check confirms (checks/references.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .findings import Category, Finding, Method, Severity, pulsar_context, topic_of_managed_ledger
from .ids import LedgerId
from .model import LedgerMetadata

SHADOW_SOURCE_PROPERTY = "PULSAR.SHADOW_SOURCE"  # a shadow topic's managed-ledger property

DATA = "data"
CURSOR = "cursor"
SCHEMA = "schema"


@dataclass(frozen=True, slots=True)
class ListedLedger:
    """One entry of a managed ledger's ledger list."""

    ledger_id: int
    entries: int | None = None
    size: int | None = None
    closed_at_ms: int | None = None  # None (Pulsar stores 0) for the current, open ledger
    offloaded: bool = False  # offload complete
    bookkeeper_deleted: bool = False  # ... and the BookKeeper copy deleted on purpose

    @property
    def absence_expected(self) -> bool:
        return self.offloaded and self.bookkeeper_deleted


@dataclass(frozen=True, slots=True)
class ManagedLedgerListing:
    name: str  # the managed ledger name, e.g. tenant/ns/persistent/topic
    path: str
    ledgers: tuple[ListedLedger, ...] = ()
    shadow_source: str | None = None
    mzxid: int = 0

    def listed(self, ledger_id: int) -> ListedLedger | None:
        for led in self.ledgers:
            if led.ledger_id == ledger_id:
                return led
        return None


@dataclass(frozen=True, slots=True)
class CursorListing:
    managed_ledger: str
    name: str  # as stored (URL-encoded subscription name)
    path: str
    ledger_id: int | None  # None: the cursor has no ledger (-1)


@dataclass(frozen=True, slots=True)
class SchemaListing:
    schema_id: str  # tenant/ns/topic
    path: str
    ledger_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Reference:
    """Who lists a ledger: a managed ledger (its data), a cursor, or a schema."""

    kind: str  # DATA, CURSOR, SCHEMA
    owner: str  # managed ledger name, or schema id
    path: str  # the znode that lists it
    cursor: str | None = None
    listed: ListedLedger | None = None
    shadow: bool = False  # a shadow topic's copy of its source's list

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.kind, "listedBy": self.path}
        if self.kind == SCHEMA:
            out["schemaId"] = self.owner
        else:
            out["managedLedger"] = self.owner
            topic = topic_of_managed_ledger(self.owner)
            if topic:
                out["topic"] = topic
        if self.cursor is not None:
            out["cursor"] = self.cursor
        if self.listed is not None:
            led = self.listed
            out.update({"entries": led.entries, "size": led.size, "closedAtMs": led.closed_at_ms})
            if led.offloaded:
                out["offloaded"] = True
        if self.shadow:
            out["shadow"] = True
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class References:
    """Everything the application's metadata lists, read in one walk."""

    root: str  # the application's metadata root (Pulsar's, e.g. "/")
    managed_ledgers: dict[str, ManagedLedgerListing] = field(default_factory=dict)
    cursors: dict[tuple[str, str], CursorListing] = field(default_factory=dict)
    schemas: dict[str, SchemaListing] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)  # znode path -> problem
    found: bool = False  # any application metadata at all (else: not a Pulsar cluster)

    def by_ledger(self) -> dict[int, list[Reference]]:
        out: dict[int, list[Reference]] = {}
        for ml in self.managed_ledgers.values():
            for led in ml.ledgers:
                out.setdefault(led.ledger_id, []).append(
                    Reference(DATA, ml.name, ml.path, listed=led, shadow=ml.shadow_source is not None)
                )
        for cur in self.cursors.values():
            if cur.ledger_id is not None:
                out.setdefault(cur.ledger_id, []).append(Reference(CURSOR, cur.managed_ledger, cur.path, cur.name))
        for sch in self.schemas.values():
            for lid in sch.ledger_ids:
                out.setdefault(lid, []).append(Reference(SCHEMA, sch.schema_id, sch.path))
        return out

    def owner_unreadable(self, owner_path: str) -> bool:
        """Whether the znode (or any znode below it) that would list a ledger could not be read: then no
        orphan verdict is safe for that owner."""
        prefix = owner_path.rstrip("/") + "/"
        return any(p == owner_path or p.startswith(prefix) for p in self.unreadable)


def _join(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *parts]) if root.rstrip("/") else "/" + "/".join(parts)


def managed_ledger_path(root: str, name: str) -> str:
    return _join(root, "managed-ledgers", name)


def schema_path(root: str, schema_id: str) -> str:
    return _join(root, "schemas", schema_id)


def _context(refs: Iterable[Reference]) -> dict[str, str]:
    """The Pulsar context of a missing ledger (as a finding's `pulsar`), from its first listing."""
    for r in refs:
        if r.kind == SCHEMA:
            return {"application": "pulsar", "component": "schema", "schemaId": r.owner, "kind": "schema"}
        out = {"application": "pulsar", "component": "managed-ledger", "managedLedger": r.owner}
        topic = topic_of_managed_ledger(r.owner)
        if topic:
            out["topic"] = topic
        if r.cursor is not None:
            out["cursor"] = r.cursor
        out["kind"] = "cursor" if r.kind == CURSOR else "topic"
        return out
    return {}


def _names(refs: Iterable[Reference]) -> str:
    parts = []
    for r in refs:
        if r.kind == SCHEMA:
            parts.append(f"schema {r.owner}")
        elif r.kind == CURSOR:
            parts.append(f"cursor {r.cursor} of {topic_of_managed_ledger(r.owner) or r.owner}")
        else:
            parts.append(f"{'shadow topic ' if r.shadow else ''}{topic_of_managed_ledger(r.owner) or r.owner}")
    return ", ".join(dict.fromkeys(parts))


def missing_finding(ledger_id: int, refs: list[Reference], last_seen_ms: int | None = None) -> Finding | None:
    """The verdict on a listed ledger whose BookKeeper metadata is gone (None: its absence is expected)."""
    live = [r for r in refs if not (r.listed is not None and r.listed.absence_expected)]
    if not live:
        return None  # offloaded, BookKeeper copy deleted on purpose
    lid = LedgerId(0, ledger_id)
    severity = None
    stale = all(r.shadow for r in live)
    if stale:
        severity = Severity.INFO  # only a shadow topic's copy lists it: it refreshes from its source late
        message = f"ledger {lid} is listed only by {_names(live)} (a shadow copy, not refreshed yet) and is gone"
    else:
        message = f"ledger {lid} is gone from BookKeeper but {_names(live)} still lists it: data lost by deletion"
    detail: dict[str, object] = {"listedBy": [r.to_dict() for r in live], "offloaded": False}
    if last_seen_ms is not None:
        detail["lastSeenMs"] = last_seen_ms
    if stale:
        detail["staleShadowListing"] = True
    return Finding.of(
        Category.LEDGER_MISSING,
        message,
        ledger=lid,
        severity=severity,
        method=Method.METADATA,
        detail=detail,
        pulsar=_context(live),
        confirmed=True,
    )


@dataclass(frozen=True, slots=True)
class OrphanCandidate:
    """A ledger the application tagged as its own, with what the verdict needs."""

    metadata: LedgerMetadata
    ctime_ms: int
    owner_kind: str  # DATA, CURSOR, SCHEMA
    owner: str  # managed ledger name or schema id
    cursor: str | None = None


def orphan_candidate(md: LedgerMetadata, ctime_ms: int) -> OrphanCandidate | None:
    """The owner a ledger's own Pulsar tags name; None for ledgers not judged (not Pulsar's, compacted
    topic and delayed-delivery ledgers, no owner named)."""
    ctx = pulsar_context(md.custom_metadata)
    if not ctx or ctx.get("application") != "pulsar":
        return None
    component = ctx.get("component")
    if component == "managed-ledger" and ctx.get("managedLedger"):
        cursor = ctx.get("cursor")
        return OrphanCandidate(md, ctime_ms, CURSOR if cursor else DATA, ctx["managedLedger"], cursor)
    if component == "schema" and ctx.get("schemaId"):
        return OrphanCandidate(md, ctime_ms, SCHEMA, ctx["schemaId"])
    return None


def owner_path(refs_root: str, c: OrphanCandidate) -> str:
    if c.owner_kind == SCHEMA:
        return schema_path(refs_root, c.owner)
    return managed_ledger_path(refs_root, c.owner)


def orphan_reason(c: OrphanCandidate, refs: References) -> str | None:
    """Why the ledger is unowned (None: it is listed where its tags say, or no verdict is safe)."""
    lid = c.metadata.ledger_id.ledger
    if refs.owner_unreadable(owner_path(refs.root, c)):
        return None
    if c.owner_kind == SCHEMA:
        sch = refs.schemas.get(c.owner)
        if sch is None:
            return f"its schema {c.owner} no longer exists"
        return None if lid in sch.ledger_ids else f"schema {c.owner} does not list it"
    ml = refs.managed_ledgers.get(c.owner)
    if ml is None:
        return f"its managed ledger {c.owner} no longer exists"
    if c.owner_kind == CURSOR:
        cur = refs.cursors.get((c.owner, c.cursor or ""))
        if cur is None:
            return f"its cursor {c.cursor} of {c.owner} no longer exists"
        return None if cur.ledger_id == lid else f"cursor {c.cursor} of {c.owner} now uses ledger {cur.ledger_id}"
    if ml.listed(lid) is not None:
        return None
    first = min((led.ledger_id for led in ml.ledgers), default=None)
    if first is not None and lid < first:
        return f"managed ledger {c.owner} no longer lists it (trimmed but not deleted)"
    return f"managed ledger {c.owner} does not list it"


def entries_and_bytes(md: LedgerMetadata) -> tuple[int | None, int | None]:
    """A closed ledger's size (entries, bytes); (None, None) while open."""
    if not md.is_closed:
        return None, None
    return md.last_entry_id + 1, md.length


def orphan_finding(
    c: OrphanCandidate, refs: References, *, now_ms: int, grace_seconds: float, referenced: Mapping[int, object]
) -> Finding | None:
    """`orphan_ledger` when the ledger is not listed anywhere, its owner no longer lists it, and it is
    older than the grace period (Pulsar creates a ledger a moment before it records it)."""
    lid = c.metadata.ledger_id
    if lid.scope != 0 or lid.ledger in referenced:
        return None
    age_s = (now_ms - c.ctime_ms) / 1000
    if age_s < grace_seconds:
        return None
    reason = orphan_reason(c, refs)
    if reason is None:
        return None
    entries, size = entries_and_bytes(c.metadata)
    size_text = f"{entries} entries, {size} bytes" if entries is not None else "open, size unknown"
    return Finding.of(
        Category.ORPHAN_LEDGER,
        f"ledger {lid} ({size_text}) is unowned: {reason}",
        metadata=c.metadata,
        method=Method.METADATA,
        confirmed=True,
        detail={
            "reason": reason,
            "owner": c.owner,
            "ownerKind": c.owner_kind,
            "ageSeconds": round(age_s),
            "ctimeMs": c.ctime_ms,
            "entries": entries,
            "bytes": size,
            "cleanup": cleanup_command(lid),
        },
    )


def cleanup_command(lid: LedgerId) -> str:
    """The dry-run plan's line for one orphan: what an operator would run (bk-auditor deletes nothing)."""
    return f"bin/bookkeeper shell deleteledger -ledgerid {lid.ledger} -force"
