"""Findings: the one record every check reports, with a stable category vocabulary.

A finding names what is wrong (category, severity, message), where (ledger, segment, entry range,
ensemble, bookie), how sure we are (unknown bookies, confirmed by a re-check) and how it was found
(method).

Its one wire form (`to_wire`, read back by `from_wire`) is a JSON-ready dict with BookKeeper-style
camelCase keys (`ledgerId`, `bookieId`, `entryId`, `segmentIndex`, `firstEntryId`, `lastEntryId`, ...):
the daemon's log line and admin API `fields_json`, `bk-auditor check --format json`, and the rows a Spark
executor ships to the driver are all this dict. `dedup_key` identifies the fault so the same fault is not
reported twice, and `FindingSummary` aggregates counts per category (BP-34: "group all the durability
violations found in a scrutiny run according to the categories"). `actionable` is the one rule for what
is above informational: logged one line each and counted by the exit codes; `info` findings are counted
only.
"""

from __future__ import annotations

import enum
import functools
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from . import varint
from .ids import LedgerId, LedgerIdError
from .intset import IntSet
from .model import LedgerMetadata, LedgerState
from .ranges import RangeSet
from .slotcopy import slot_copier
from .sortedjson import sorted_json
from .striped import StripedSet

__all__ = [
    "Category",
    "Severity",
    "SEVERITY_OF",
    "Method",
    "Finding",
    "FindingWire",
    "FindingSummary",
    "summarize",
    "pulsar_context",
    "DEFAULT_TEXT_LIMIT",
]

DEFAULT_TEXT_LIMIT = 20  # runs shown in a finding's compressed entry ranges

FindingWire = dict[str, Any]  # `Finding.to_wire()`: camelCase keys, JSON values


class Category(str, enum.Enum):
    """Stable names: they appear in logs, metrics labels and the admin API. Never rename."""

    ENTRY_NO_REPLICA = "entry_no_replica"
    ENTRY_BELOW_ACK_QUORUM = "entry_below_ack_quorum"
    ENTRY_BELOW_WRITE_QUORUM = "entry_below_write_quorum"
    PLACEMENT_VIOLATION = "placement_violation"
    PLACEMENT_SOFT = "placement_soft"
    UNDERREPLICATED_TOO_LONG = "underreplicated_too_long"
    BOOKIE_UNREACHABLE = "bookie_unreachable"
    BOOKIE_REINCARNATED = "bookie_reincarnated"
    DIGEST_MISMATCH = "digest_mismatch"
    TRUNCATION_RISK = "truncation_risk"
    RISKY_QUORUM = "risky_quorum"
    METADATA_UNREADABLE = "metadata_unreadable"
    OVERREPLICATED = "overreplicated"  # informational
    REPAIR_BLOCKED = "repair_blocked"  # a marked ledger the repair role could not repair (why, and until when)
    LEDGER_MISSING = "ledger_missing"  # listed by the application (a Pulsar topic) but gone from BookKeeper
    ORPHAN_LEDGER = "orphan_ledger"  # informational: tagged as an application's, listed by nobody

    def __str__(self) -> str:
        return self.value


class Severity(str, enum.Enum):
    CRITICAL = "critical"
    MAJOR = "major"
    MINOR = "minor"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 is the most severe."""
        return _SEVERITY_RANK[self]

    def __str__(self) -> str:
        return self.value


_SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.MAJOR: 1, Severity.MINOR: 2, Severity.INFO: 3}

# Why each severity:
#  critical - data is lost or will be lost by a routine operation (a recovery that truncates; an entry
#             with no copy; corrupt copies; a bookie that came back empty under the same id).
#  major    - one more failure away from loss, or the auditor cannot see (unreachable bookie, unreadable
#             metadata), or repair is not making progress.
#  minor    - below the configured redundancy or placement, normally repaired by auto-recovery.
#  info     - nothing is at risk.
SEVERITY_OF: Mapping[Category, Severity] = MappingProxyType(
    {
        Category.ENTRY_NO_REPLICA: Severity.CRITICAL,
        Category.ENTRY_BELOW_ACK_QUORUM: Severity.MAJOR,
        Category.ENTRY_BELOW_WRITE_QUORUM: Severity.MINOR,
        Category.PLACEMENT_VIOLATION: Severity.MINOR,
        Category.PLACEMENT_SOFT: Severity.INFO,
        Category.UNDERREPLICATED_TOO_LONG: Severity.MAJOR,
        Category.BOOKIE_UNREACHABLE: Severity.MAJOR,
        Category.BOOKIE_REINCARNATED: Severity.CRITICAL,
        Category.DIGEST_MISMATCH: Severity.CRITICAL,
        Category.TRUNCATION_RISK: Severity.CRITICAL,
        Category.RISKY_QUORUM: Severity.MINOR,
        Category.METADATA_UNREADABLE: Severity.MAJOR,
        Category.OVERREPLICATED: Severity.INFO,
        Category.REPAIR_BLOCKED: Severity.MAJOR,  # critical when the reason is data loss
        Category.LEDGER_MISSING: Severity.CRITICAL,  # info when only a shadow topic's stale copy lists it
        Category.ORPHAN_LEDGER: Severity.INFO,
    }
)


class Method(str, enum.Enum):
    """How a finding was established."""

    ENTRY_LIST = "entry-list"  # GET_LIST_OF_ENTRIES_OF_LEDGER answers
    READ = "read"  # entry reads (with digest checks)
    INDEX = "index"  # the bookie's own entry index, read by the agent beside it; absences confirmed by reads
    METADATA = "metadata"  # ledger metadata alone (placement, quorum settings)
    UNDERREPLICATION = "underreplication"  # under-replication markers
    REGISTRATION = "registration"  # bookie registration / cookies
    REPAIR = "repair"  # the repair role's own attempt at the ledger

    def __str__(self) -> str:
        return self.value


# --------------------------------------------------------------------------------------------------
# Pulsar context from ledger custom metadata
#
# Pulsar's managed ledger (org.apache.bookkeeper.mledger.impl.LedgerMetadataUtils) tags ledgers with:
#   application = "pulsar"
#   component   = "managed-ledger" | "schema" | "compacted-ledger"   (older docs say "compacted-topic")
#   pulsar/managed-ledger = managed ledger name  (data ledgers and cursor ledgers)
#   pulsar/cursor         = cursor name           (cursor ledgers, together with pulsar/managed-ledger)
#   pulsar/schemaId       = schema id             (schema ledgers)
#   pulsar/compactedTopic = topic name            (compacted topic ledgers)
#   pulsar/compactedTo    = MessageIdData protobuf bytes (binary)
#   EnsemblePlacementPolicyConfig = JSON of a per-namespace placement policy (bookie isolation)
# A managed ledger name is the topic's persistence naming: "tenant/namespace/persistent/<encoded local
# name>" (or "property/cluster/namespace/persistent/<local>" for v1 names); the local name is URL-encoded.

_PULSAR_TEXT_KEYS = {
    "application": "application",
    "component": "component",
    "pulsar/managed-ledger": "managedLedger",
    "pulsar/cursor": "cursor",
    "pulsar/schemaId": "schemaId",
    "pulsar/compactedTopic": "compactedTopic",
}
_PLACEMENT_KEY = "EnsemblePlacementPolicyConfig"
TOPIC_DOMAINS = ("persistent", "non-persistent")


def _text(value: bytes | str) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", errors="replace")


def split_managed_ledger(name: str) -> tuple[str, str, str] | None:
    """`tenant/ns/persistent/<encoded local>` -> (namespace, domain, local name); None when not a topic's."""
    parts = name.split("/")
    for i, part in enumerate(parts):
        if part in TOPIC_DOMAINS and 0 < i < len(parts) - 1:
            return "/".join(parts[:i]), part, urllib.parse.unquote("/".join(parts[i + 1 :]))
    return None


def topic_of_managed_ledger(name: str) -> str | None:
    """`tenant/ns/persistent/local` -> `persistent://tenant/ns/local` (None when not a topic name)."""
    split = split_managed_ledger(name)
    return f"{split[1]}://{split[0]}/{split[2]}" if split else None


def pulsar_context(custom_metadata: Mapping[str, bytes | str] | None) -> dict[str, str] | None:
    """Decode Pulsar's custom metadata keys; None for ledgers that Pulsar did not tag."""
    if not custom_metadata:
        return None
    md = dict(custom_metadata)
    is_pulsar = _text(md.get("application", b"")) == "pulsar" or any(k.startswith("pulsar/") for k in md)
    if not is_pulsar:
        return None
    out: dict[str, str] = {}
    for key, name in _PULSAR_TEXT_KEYS.items():
        if key in md:
            out[name] = _text(md[key])
    if "managedLedger" in out:
        topic = topic_of_managed_ledger(out["managedLedger"])
        if topic:
            out["topic"] = topic
    if "compactedTopic" in out:
        out.setdefault("topic", out["compactedTopic"])
    if "pulsar/compactedTo" in md:
        raw = md["pulsar/compactedTo"]
        raw_b = raw.encode() if isinstance(raw, str) else bytes(raw)
        try:
            f = varint.fields(raw_b)
            out["compactedTo"] = f"{f[1]}:{f[2]}"
        except (varint.VarintError, KeyError):
            out["compactedTo"] = raw_b.hex()
    if _PLACEMENT_KEY in md:
        out["placementPolicyConfig"] = _text(md[_PLACEMENT_KEY])[:512]
    component = out.get("component", "")
    if component == "managed-ledger":
        out["kind"] = "cursor" if "cursor" in out else "topic"
    elif component == "schema":
        out["kind"] = "schema"
    elif component in ("compacted-ledger", "compacted-topic"):
        out["kind"] = "compacted-topic"
    return out


# --------------------------------------------------------------------------------------------------

_CAMEL = re.compile(r"_([a-z0-9])")


@functools.lru_cache(maxsize=4096)
def camel(name: str) -> str:
    """snake_case -> camelCase (cached: the same few detail keys are converted for every finding)."""
    return _CAMEL.sub(lambda m: m.group(1).upper(), name)


# Types a finding's detail mostly holds, returned as they are before the isinstance chain (an ABC
# check for Mapping among it) is walked: every informational finding of a scan is rendered.
_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def _jsonable(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    # A finding's detail is a dict or mapping proxy of lists and plain values: those exact types are
    # taken before any ABC check (the `isinstance` is for other mappings and sequences).
    if kind is dict or kind is MappingProxyType or isinstance(value, Mapping):
        return {camel(str(k)): _jsonable(v) for k, v in value.items()}
    if kind is list or kind is tuple or isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return [_jsonable(v) for v in sorted(value)]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, LedgerId):
        return value.qualified_name
    if isinstance(value, (StripedSet, RangeSet)):
        return value.to_text(DEFAULT_TEXT_LIMIT)
    if isinstance(value, bytes):
        return value.hex()
    return value


def _freeze(d: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True, slots=True)
class Finding:
    """One fault. Construct with `Finding.of` (fills severity, ledger fields and Pulsar context)."""

    category: Category
    severity: Severity
    message: str
    ledger: LedgerId | None = None
    ledger_state: LedgerState | None = None
    segment_index: int | None = None
    first_entry_id: int | None = None  # of the segment, or of the affected range when no segment
    last_entry_id: int | None = None
    ensemble: tuple[str, ...] = ()
    bookie: str | None = None
    entry_id: int | None = None  # a single entry (e.g. a digest mismatch)
    affected_count: int = 0
    affected_ranges: str = ""  # compressed `0-9,12,...(+N runs)`
    unknown_bookies: tuple[str, ...] = ()
    confirmed: bool = False  # confirmed by a re-check
    method: str = Method.ENTRY_LIST.value
    detail: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), compare=False, hash=False)
    pulsar: Mapping[str, str] | None = field(default=None, compare=False, hash=False)

    @classmethod
    def of(
        cls,
        category: Category,
        message: str,
        *,
        metadata: LedgerMetadata | None = None,
        ledger: LedgerId | None = None,
        severity: Severity | None = None,
        affected: StripedSet | RangeSet | None = None,
        text_limit: int = DEFAULT_TEXT_LIMIT,
        detail: Mapping[str, Any] | None = None,
        method: str | Method = Method.ENTRY_LIST,
        unknown_bookies: Iterable[str] = (),
        **fields: Any,
    ) -> Finding:
        if type(category) is not Category:  # (an Enum call costs even for a member)
            category = Category(category)
        if metadata is not None:
            ledger = ledger or metadata.ledger_id
            fields.setdefault("ledger_state", metadata.state)
            fields.setdefault("pulsar", pulsar_context(metadata.custom_metadata))
        if affected is not None:
            fields["affected_count"] = affected.count() if isinstance(affected, StripedSet) else len(affected)
            fields["affected_ranges"] = affected.to_text(text_limit)
        if "ensemble" in fields:
            fields["ensemble"] = tuple(fields["ensemble"])
        pulsar = fields.pop("pulsar", None)
        return cls(
            category=category,
            severity=severity or SEVERITY_OF[category],
            message=message,
            ledger=ledger,
            detail=_freeze(detail),
            method=method._value_ if isinstance(method, Method) else str(method),
            unknown_bookies=tuple(sorted(set(unknown_bookies))) if unknown_bookies else (),
            pulsar=MappingProxyType(dict(pulsar)) if pulsar else None,
            **fields,
        )

    def dedup_key(self) -> tuple[Any, ...]:
        """Identity of the fault: the same category at the same place. Counts and methods may differ
        between two sightings of one fault, so they are not part of the key."""
        return (
            self.category.value,
            self.ledger.qualified_name if self.ledger else None,
            self.segment_index,
            self.bookie,
            self.entry_id,
        )

    @property
    def whole_ledger(self) -> bool:
        """About one whole ledger (no segment, bookie or entry): its key is its category and ledger."""
        return self.ledger is not None and self.segment_index is None and self.bookie is None and self.entry_id is None

    def confirm(self) -> Finding:
        """This finding, confirmed."""
        return self if self.confirmed else self.copy_with(confirmed=True)

    def copy_with(self, **changes: Any) -> Finding:
        """This finding with `changes` (field names, values as stored). A field-by-field copy:
        `dataclasses.replace` re-runs the checks of __init__ and costs three times as much, and it runs
        for nearly every finding of a scan (confirming it; the daemon's store keeping it): see slotcopy."""
        return _copy_finding(self, changes)

    @property
    def actionable(self) -> bool:
        """Above informational: logged one line each, and a reason for exit code 1. An `info` finding is
        counted, not logged one by one."""
        return self.severity is not Severity.INFO

    def to_wire(self) -> FindingWire:
        """The wire form: camelCase, JSON-ready; fields that are not set are left out."""
        # (`_value_`/`_name_`: the members' own attributes; `.value` and `.name` are Python-level
        # properties, three calls for every finding rendered.)
        out: FindingWire = {
            "category": self.category._value_,
            "severity": self.severity._value_,
            "message": self.message,
        }
        if self.ledger is not None:
            out["ledgerId"] = self.ledger.ledger
            if self.ledger.scope:
                out["scopeId"] = self.ledger.scope
            out["qualifiedName"] = self.ledger.qualified_name
        # (One `if` each rather than a dict of them filtered: every informational finding of a scan is
        # rendered, and most of these are unset.)
        if self.ledger_state:
            out["ledgerState"] = self.ledger_state._name_
        if self.segment_index is not None:
            out["segmentIndex"] = self.segment_index
        if self.first_entry_id is not None:
            out["firstEntryId"] = self.first_entry_id
        if self.last_entry_id is not None:
            out["lastEntryId"] = self.last_entry_id
        if self.ensemble:
            out["ensemble"] = list(self.ensemble)
        if self.bookie is not None:
            out["bookieId"] = self.bookie
        if self.entry_id is not None:
            out["entryId"] = self.entry_id
        out["affectedEntries"] = self.affected_count
        if self.affected_ranges:
            out["affectedEntryRanges"] = self.affected_ranges
        if self.unknown_bookies:
            out["unknownBookies"] = list(self.unknown_bookies)
        out["confirmed"] = self.confirmed
        out["method"] = self.method
        if self.detail:
            out["detail"] = _jsonable(self.detail)
        if self.pulsar:
            out["pulsar"] = dict(self.pulsar)
        return out

    to_log_dict = to_wire  # what `auditor.logging.log_finding` asks of a finding

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> Finding:
        """The finding `to_wire` rendered (`from_wire(f.to_wire()).to_wire() == f.to_wire()`); `detail`
        comes back in its JSON form."""
        ledger: LedgerId | None = None
        if "qualifiedName" in wire:
            ledger = LedgerId.parse(wire["qualifiedName"])
        state = wire.get("ledgerState")
        pulsar = wire.get("pulsar")
        return cls(
            category=Category(wire["category"]),
            severity=Severity(wire["severity"]),
            message=wire["message"],
            ledger=ledger,
            ledger_state=LedgerState[state] if state is not None else None,
            segment_index=wire.get("segmentIndex"),
            first_entry_id=wire.get("firstEntryId"),
            last_entry_id=wire.get("lastEntryId"),
            ensemble=tuple(wire.get("ensemble") or ()),
            bookie=wire.get("bookieId"),
            entry_id=wire.get("entryId"),
            affected_count=wire.get("affectedEntries", 0),
            affected_ranges=wire.get("affectedEntryRanges", ""),
            unknown_bookies=tuple(wire.get("unknownBookies") or ()),
            confirmed=wire.get("confirmed", False),
            method=wire.get("method", Method.ENTRY_LIST.value),
            detail=_freeze(wire.get("detail")),
            pulsar=MappingProxyType(dict(pulsar)) if pulsar else None,
        )

    def to_json(self) -> str:
        """`json.dumps(self.to_wire(), sort_keys=True)`, with one encoder for every finding (sortedjson)."""
        return sorted_json(self.to_wire())


_copy_finding = slot_copier(Finding)  # `Finding.copy_with`


def whole_ledger_key(category: str, ledger: LedgerId) -> tuple[Any, ...]:
    """`Finding.dedup_key()` of a finding of `category` about the whole of `ledger`."""
    return (category, ledger.qualified_name, None, None, None)


def parse_whole_ledger_key(key: object) -> tuple[str, LedgerId] | None:
    """(category, ledger) when `key` is the `dedup_key()` of a finding about a whole ledger; else None."""
    if type(key) is not tuple or len(key) != 5 or type(key[1]) is not str or key[2:] != (None, None, None):
        return None
    try:
        return key[0], LedgerId.parse(key[1])
    except LedgerIdError:
        return None  # not a key a finding makes


class FindingSummary:
    """Aggregates findings of one run: counts per category and severity, distinct ledgers per category
    (the Java auditor's gauges count ledgers), duplicates dropped by `dedup_key` (the first sighting is
    kept, with the check that saw it).

    `keep` says which findings to hold in `findings` (default: all); the others are counted and
    deduplicated all the same. A scan of a million ledgers can bring a million informational findings
    (`risky_quorum` on every WQ == AQ ledger): the one-shot command prints those as they come and holds
    only what it still needs. What deduplication remembers of a finding about a whole scope-0 ledger
    (the common kind) is the ledger id in a compact `IntSet`, 9 bytes or so, not its key.
    """

    def __init__(self, keep: Callable[[Finding], bool] | None = None) -> None:
        self._keep = keep
        self._seen: set[tuple[Any, ...]] = set()  # dedup keys of findings about less than a whole ledger
        self._whole: dict[Category, IntSet] = {}  # scope-0 ledgers with a whole-ledger finding, per category
        self.findings: list[Finding] = []
        self.checks: list[str | None] = []  # per finding, the check that reported it (when given)
        self.by_category: dict[Category, int] = {c: 0 for c in Category}
        self.by_severity: dict[Severity, int] = {s: 0 for s in Severity}
        self.informational: dict[Category, int] = {c: 0 for c in Category}  # findings not `actionable`
        self._ledgers: dict[Category, set[LedgerId]] = {c: set() for c in Category}  # the other findings'
        self.duplicates = 0
        self._total = 0

    def add(self, finding: Finding, check: str | None = None) -> bool:
        """Add unless the same fault is already in; True when added."""
        lid = finding.ledger
        if lid is not None and lid.scope == 0 and finding.whole_ledger:
            # Its dedup key is (category, ledger) and nothing more: the ledger id stands for it.
            if not self._whole.setdefault(finding.category, IntSet()).add(lid.ledger):
                self.duplicates += 1
                return False
        else:
            key = finding.dedup_key()
            if key in self._seen:
                self.duplicates += 1
                return False
            self._seen.add(key)
            if lid is not None:
                self._ledgers[finding.category].add(lid)
        if self._keep is None or self._keep(finding):
            self.findings.append(finding)
            self.checks.append(check)
        self._total += 1
        self.by_category[finding.category] += 1
        self.by_severity[finding.severity] += 1
        if not finding.actionable:
            self.informational[finding.category] += 1
        return True

    def extend(self, findings: Iterable[Finding]) -> int:
        return sum(self.add(f) for f in findings)

    def __contains__(self, key: object) -> bool:
        """Whether a finding of this `dedup_key()` was added."""
        whole = parse_whole_ledger_key(key)
        if whole is not None and whole[1].scope == 0:
            return self.has_whole_ledger(whole[0], whole[1].ledger)
        return key in self._seen

    def has_whole_ledger(self, category: str, ledger: int) -> bool:
        """Whether a finding of `category` about the whole of scope-0 ledger `ledger` was added."""
        ints = self._whole.get(category)  # type: ignore[call-overload]  # a Category is its str value
        return ints is not None and ledger in ints

    def counts(self) -> dict[str, int]:
        """Findings added per category, those with any."""
        return {c.value: n for c, n in self.by_category.items() if n}

    def ledgers(self, category: Category) -> int:
        whole = self._whole.get(category, ())
        return len(whole) + sum(1 for lid in self._ledgers[category] if lid.scope or lid.ledger not in whole)

    @property
    def total(self) -> int:
        """Findings added (held or not)."""
        return self._total

    @property
    def actionable(self) -> list[Finding]:
        return [f for f in self.findings if f.actionable]

    def sightings(self) -> Iterator[tuple[Finding, str | None]]:
        """Each finding kept, with the check that reported it."""
        return zip(self.findings, self.checks)

    @property
    def worst_severity(self) -> Severity | None:
        present = [s for s, n in self.by_severity.items() if n]
        return min(present, key=lambda s: s.rank) if present else None

    def as_dict(self) -> dict[str, Any]:
        """The counts as every command's JSON summary names them (docs/findings.md, "JSON output"):
        `findingCount` each fault once, `actionable` those above info, `repeatSightings` the sightings of
        a fault already counted (dropped: not more data at risk)."""
        return {
            "findingCount": self.total,
            "actionable": sum(n for s, n in self.by_severity.items() if s is not Severity.INFO),
            "repeatSightings": self.duplicates,
            "byCategory": {c.value: n for c, n in self.by_category.items()},
            "ledgersByCategory": {c.value: self.ledgers(c) for c in Category},
            "bySeverity": {s.value: n for s, n in self.by_severity.items()},
        }


def summarize(findings: Iterable[Finding]) -> FindingSummary:
    s = FindingSummary()
    s.extend(findings)
    return s
