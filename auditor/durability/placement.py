"""Placement-policy adherence of each segment's ensemble (BP-34 "ledger placement policy").

The policy is the writers' configuration, mirrored into `PlacementPolicy` (Java key names in the field
comments; zookeeper-layout.md §7). Locations come from the caller as `bookie id -> network location`
(the rack map: Pulsar's `/bookies` JSON, a file or a script). A write quorum is the WQ consecutive
members starting at every index i in 0..E-1: `ensemble[(i + j) mod E]`, j < WQ.

Differences from Java's `isEnsembleAdheringToPlacementPolicy`, on purpose:
* A bookie with no known location counts as the policy's default location; it never silently drops out
  of the quorum. Java looks racks up among *currently writable* bookies only, so read-only, stopped or
  decommissioned members contribute no rack and their ledgers flip to FAIL (java-auditor.md §2.3, a
  known false-positive source). Here every member keeps its rack whatever its state.
* Region-aware placement is really checked (Java's adherence check always passes, issue #1898), following
  the intent of RegionAwareEnsemblePlacementPolicy / RRTopologyAwareCoverageEnsemble:
  - within a region the placement is rack-aware: each write quorum spans at least
    min(WQ, minNumRacksPerWriteQuorum) distinct `/region/rack` locations (and none in the default
    location when enforceMinNumRacksPerWriteQuorum is set);
  - when durability is enforced (reppRegionsToWrite configured and reppMinimumRegionsForDurability > 1,
    as Java only enforces it then) each write quorum spans at least min(WQ, minRegions) regions, and no
    (minRegions - 1) regions together hold an ack quorum of it (Java's RackOrRegionDurabilityCoverageSet:
    an acknowledged entry must live in at least minRegions regions);
  - MEETS_SOFT when a write quorum spans fewer regions than it could (min(WQ, regions available)).
  - a member with no known location is in an unknown region: it adds no region and, for the ack-quorum
    rule, is assumed to share the most crowded region (Java's writer would not know its region either).
* Zone-aware follows Java exactly while enforceStrictZoneawarePlacement is true (the default). With it
  false, the writer places bookies randomly and Java never rejects "E not a multiple of WQ" nor
  "WQ <= minNumZonesPerWriteQuorum" for such ledgers, so those two are MEETS_SOFT instead of FAIL; the
  per-write-quorum rules stay.
* Every failing write quorum is listed (Java stops at the first), and empty segments (which hold no
  entries) are skipped unless asked for.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from .findings import Category
from .ids import LedgerId
from .model import LedgerMetadata

__all__ = [
    "PolicyKind",
    "POLICY_CLASSES",
    "Adherence",
    "PlacementPolicy",
    "QuorumCheck",
    "EnsembleVerdict",
    "SegmentVerdict",
    "PlacementVerdict",
    "normalize_location",
    "check_ensemble",
    "check_ledger",
    "DEFAULT_RACK",
    "DEFAULT_REGION_RACK",
    "DEFAULT_ZONE_UD",
]

DEFAULT_RACK = "/default-rack"
DEFAULT_REGION_RACK = "/default-region/default-rack"
DEFAULT_ZONE_UD = "/default-zone/default-upgradedomain"

_PKG = "org.apache.bookkeeper.client."


class PolicyKind(str, enum.Enum):
    """The placement policies judged, by their setting name (`placement.policy`). `java_class` is the
    `ensemblePlacementPolicy` class each stands for; `parse` reads Java class names through `POLICY_CLASSES`,
    the one table that translates them."""

    RACK_AWARE = "rackaware"
    ZONE_AWARE = "zoneaware"
    REGION_AWARE = "regionaware"
    DEFAULT = "default"

    @property
    def java_class(self) -> str:
        """The BookKeeper class of this policy (fully qualified)."""
        return _PKG + next(name for name, kind in POLICY_CLASSES.items() if kind is self)

    @classmethod
    def parse(cls, name: str) -> PolicyKind:
        """An `ensemblePlacementPolicy` class name (any package, any case) or a kind's setting name."""
        text = str(name).strip()
        short = text.rsplit(".", 1)[-1].lower()
        for class_name, kind in POLICY_CLASSES.items():
            if class_name.lower() == short:
                return kind
        for kind in cls:
            if kind.value == text.lower():
                return kind
        raise ValueError(f"unsupported placement policy {text!r}; supported: {', '.join(sorted(POLICY_CLASSES))}")


# Java's placement policy classes (simple names) -> the kind judged: the one translation of these names.
# The first class listed for a kind is BookKeeper's own (`PolicyKind.java_class`).
POLICY_CLASSES: Mapping[str, PolicyKind] = MappingProxyType(
    {
        "RackawareEnsemblePlacementPolicy": PolicyKind.RACK_AWARE,
        # Pulsar's isolation policy extends the rack-aware one; isolation groups are not audited.
        "IsolatedBookieEnsemblePlacementPolicy": PolicyKind.RACK_AWARE,
        "ZoneawareEnsemblePlacementPolicy": PolicyKind.ZONE_AWARE,
        "RegionAwareEnsemblePlacementPolicy": PolicyKind.REGION_AWARE,
        "DefaultEnsemblePlacementPolicy": PolicyKind.DEFAULT,
    }
)


class Adherence(enum.IntEnum):
    """Java's PlacementPolicyAdherence; lower is worse."""

    FAIL = 0
    MEETS_SOFT = 1
    MEETS_STRICT = 2


@dataclass(frozen=True, slots=True)
class PlacementPolicy:
    """The writers' placement configuration, its fields spelt as the `placement` settings that build it
    (`PlacementSettings.build_policy`; client configuration keys in comments)."""

    kind: PolicyKind = PolicyKind.RACK_AWARE  # ensemblePlacementPolicy (the setting `placement.policy`)
    min_racks_per_write_quorum: int = 2  # minNumRacksPerWriteQuorum
    enforce_min_racks_per_write_quorum: bool = False  # enforceMinNumRacksPerWriteQuorum
    regions_to_write: tuple[str, ...] = ()  # reppRegionsToWrite ("R1;R2;..."); no setting sets it
    min_regions_for_durability: int = 2  # reppMinimumRegionsForDurability
    min_zones_per_write_quorum: int = 2  # minNumZonesPerWriteQuorum
    desired_zones_per_write_quorum: int = 3  # desiredNumZonesPerWriteQuorum
    enforce_strict_zoneaware_placement: bool = True  # enforceStrictZoneawarePlacement
    default_location: str | None = None  # None: the policy's default (/default-rack, ...)

    @property
    def default(self) -> str:
        if self.default_location:
            return normalize_location(self.default_location) or DEFAULT_RACK
        return {PolicyKind.REGION_AWARE: DEFAULT_REGION_RACK, PolicyKind.ZONE_AWARE: DEFAULT_ZONE_UD}.get(
            self.kind, DEFAULT_RACK
        )


def normalize_location(location: object) -> str | None:
    """`rack1` -> `/rack1`, `/a/b/` -> `/a/b`; empty, `/` or non-text -> None (unknown)."""
    if not isinstance(location, str):
        return None
    parts = [p for p in location.strip().split("/") if p]
    return "/" + "/".join(parts) if parts else None


@dataclass(frozen=True, slots=True)
class QuorumCheck:
    """A write quorum that is not strictly adhering."""

    start_index: int
    members: tuple[str, ...]
    locations: tuple[str, ...]
    adherence: Adherence
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EnsembleVerdict:
    adherence: Adherence
    reasons: tuple[str, ...]  # ensemble-wide reasons
    quorums: tuple[QuorumCheck, ...]  # write quorums below MEETS_STRICT
    unresolved: tuple[str, ...]  # members with no known location (given the default location)


@dataclass(frozen=True, slots=True)
class SegmentVerdict:
    segment_index: int
    first_entry_id: int
    last_entry_id: int | None  # None when the segment holds no entries
    ensemble: tuple[str, ...]
    verdict: EnsembleVerdict

    @property
    def adherence(self) -> Adherence:
        return self.verdict.adherence


@dataclass(frozen=True, slots=True)
class PlacementVerdict:
    ledger_id: LedgerId
    policy: PolicyKind
    adherence: Adherence
    segments: tuple[SegmentVerdict, ...]

    @property
    def category(self) -> Category | None:
        """FAIL -> placement_violation, MEETS_SOFT -> placement_soft, MEETS_STRICT -> None."""
        return {Adherence.FAIL: Category.PLACEMENT_VIOLATION, Adherence.MEETS_SOFT: Category.PLACEMENT_SOFT}.get(
            self.adherence
        )

    @property
    def offending(self) -> tuple[SegmentVerdict, ...]:
        """Segments at the ledger's (non-strict) adherence level."""
        if self.adherence is Adherence.MEETS_STRICT:
            return ()
        return tuple(s for s in self.segments if s.adherence is self.adherence)

    def detail(self, max_quorums: int = 10) -> dict[str, object]:
        out = []
        for s in self.offending:
            out.append(
                {
                    "segment_index": s.segment_index,
                    "first_entry_id": s.first_entry_id,
                    "last_entry_id": s.last_entry_id,
                    "ensemble": list(s.ensemble),
                    "reasons": list(s.verdict.reasons),
                    "write_quorums": [
                        {
                            "start_index": q.start_index,
                            "members": list(q.members),
                            "locations": list(q.locations),
                            "reasons": list(q.reasons),
                        }
                        for q in s.verdict.quorums[:max_quorums]
                    ],
                    "unresolved": list(s.verdict.unresolved),
                }
            )
        return {"policy": self.policy.java_class.rsplit(".", 1)[-1], "adherence": self.adherence.name, "segments": out}


# --------------------------------------------------------------------------------------------------


def _quorums(ensemble: Sequence[str], wq: int) -> list[tuple[int, tuple[str, ...]]]:
    e = len(ensemble)
    return [(i, tuple(ensemble[(i + j) % e] for j in range(wq))) for i in range(e)]


def _rack_reasons(locs: Sequence[str], wq: int, policy: PlacementPolicy, default: str) -> list[str]:
    need = min(wq, policy.min_racks_per_write_quorum)
    reasons = []
    distinct = set(locs)
    if len(distinct) < need:
        reasons.append(f"{len(distinct)} distinct racks, need {need}")
    if policy.enforce_min_racks_per_write_quorum and default in distinct:
        reasons.append(f"a member is in the default rack {default} (enforceMinNumRacksPerWriteQuorum)")
    return reasons


def _region(location: str) -> str:
    parts = location.split("/")
    return parts[1] if len(parts) > 1 and parts[1] else location


def _zone_ud(location: str, default: str) -> tuple[str, str] | None:
    if location == default:
        return None
    parts = [p for p in location.split("/") if p]
    if len(parts) != 2:
        return None
    return "/" + parts[0], "/" + parts[1]


def check_ensemble(
    ensemble: Sequence[str],
    write_quorum: int,
    ack_quorum: int,
    policy: PlacementPolicy,
    locations: Mapping[str, str | None],
) -> EnsembleVerdict:
    """Adherence of one ensemble; `locations` maps bookie id -> network location (missing = unknown)."""
    default = policy.default
    resolved: dict[str, str] = {}
    unresolved: list[str] = []
    for b in ensemble:
        loc = normalize_location(locations.get(b))
        if loc is None:
            unresolved.append(b)
            loc = default
        resolved[b] = loc
    unresolved_t = tuple(dict.fromkeys(unresolved))

    def verdict(adh: Adherence, reasons: list[str], quorums: list[QuorumCheck]) -> EnsembleVerdict:
        return EnsembleVerdict(adh, tuple(reasons), tuple(quorums), unresolved_t)

    if policy.kind is PolicyKind.DEFAULT:
        return verdict(Adherence.MEETS_STRICT, [], [])
    e = len(ensemble)
    if e == 0:
        return verdict(Adherence.FAIL, ["empty ensemble"], [])
    if not 1 <= write_quorum <= e:
        return verdict(Adherence.FAIL, [f"write quorum {write_quorum} does not fit ensemble size {e}"], [])

    overall = Adherence.MEETS_STRICT
    reasons: list[str] = []
    if policy.kind is PolicyKind.ZONE_AWARE:
        structural = []
        if e % write_quorum:
            structural.append(f"ensemble size {e} is not a multiple of write quorum {write_quorum}")
        if write_quorum <= policy.min_zones_per_write_quorum:
            structural.append(
                f"write quorum {write_quorum} <= minNumZonesPerWriteQuorum {policy.min_zones_per_write_quorum}"
            )
        if structural:
            reasons.extend(structural)
            if policy.enforce_strict_zoneaware_placement:
                return verdict(Adherence.FAIL, reasons, [])
            overall = Adherence.MEETS_SOFT

    checks: list[QuorumCheck] = []
    for start, members in _quorums(ensemble, write_quorum):
        locs = tuple(resolved[b] for b in members)
        if policy.kind is PolicyKind.RACK_AWARE:
            adh, why = _check_rack_quorum(locs, write_quorum, policy, default)
        elif policy.kind is PolicyKind.REGION_AWARE:
            adh, why = _check_region_quorum(locs, write_quorum, ack_quorum, policy, default, resolved, locations)
        else:
            adh, why = _check_zone_quorum(locs, write_quorum, policy, default)
        if adh is not Adherence.MEETS_STRICT:
            checks.append(QuorumCheck(start, members, locs, adh, tuple(why)))
            overall = min(overall, adh)
    return verdict(overall, reasons, checks)


def _check_rack_quorum(
    locs: Sequence[str], wq: int, policy: PlacementPolicy, default: str
) -> tuple[Adherence, list[str]]:
    why = _rack_reasons(locs, wq, policy, default)
    return (Adherence.FAIL if why else Adherence.MEETS_STRICT), why


def _check_region_quorum(
    locs: Sequence[str],
    wq: int,
    aq: int,
    policy: PlacementPolicy,
    default: str,
    resolved: Mapping[str, str],
    locations: Mapping[str, str | None],
) -> tuple[Adherence, list[str]]:
    why = _rack_reasons(locs, wq, policy, default)
    # A member without a known location may sit in any region: it never counts as a region of its own,
    # and for the ack-quorum rule it is assumed to share the most crowded ones (the worst case).
    unknown_region = _region(default)
    regions = Counter(r for r in map(_region, locs) if r != unknown_region)
    unresolved = sum(1 for loc in locs if _region(loc) == unknown_region)
    min_regions = policy.min_regions_for_durability
    if policy.regions_to_write and min_regions > 1:
        need = min(wq, min_regions)
        if len(regions) < need:
            why.append(f"{len(regions)} known distinct regions, need {need} (reppMinimumRegionsForDurability)")
        top = sum(n for _, n in regions.most_common(min_regions - 1)) + unresolved
        if top >= aq:
            why.append(
                f"{top} members, an ack quorum of {aq}, may sit in {min_regions - 1} region(s): an "
                f"acknowledged entry may not reach {min_regions} regions"
            )
    if why:
        return Adherence.FAIL, why
    if policy.regions_to_write:
        available = len(set(policy.regions_to_write))
    else:
        known = {normalize_location(v) for v in locations.values()} | set(resolved.values())
        available = len({_region(v) for v in known if v} - {unknown_region})
    want = min(wq, available)
    if len(regions) < want:
        return Adherence.MEETS_SOFT, [f"{len(regions)} known distinct regions, {want} possible"]
    return Adherence.MEETS_STRICT, []


def _check_zone_quorum(
    locs: Sequence[str], wq: int, policy: PlacementPolicy, default: str
) -> tuple[Adherence, list[str]]:
    parsed = [_zone_ud(loc, default) for loc in locs]
    if any(p is None for p in parsed):
        bad = sorted({loc for loc, p in zip(locs, parsed) if p is None})
        return Adherence.FAIL, [f"unresolvable zone/upgrade-domain location(s) {', '.join(bad)}"]
    zones: dict[str, set[str]] = {}
    members: Counter[str] = Counter()
    for z, ud in parsed:  # type: ignore[misc]
        zones.setdefault(z, set()).add(ud)
        members[z] += 1
    why = []
    if len(zones) < policy.min_zones_per_write_quorum:
        why.append(f"{len(zones)} distinct zones, need {policy.min_zones_per_write_quorum}")
    crowded = sorted(z for z, n in members.items() if n > 1 and len(zones[z]) < 2)
    if crowded:
        why.append(f"zone(s) {', '.join(crowded)} hold several members in one upgrade domain")
    if why:
        return Adherence.FAIL, why
    desired = min(wq, policy.desired_zones_per_write_quorum)
    if len(zones) < desired:
        return Adherence.MEETS_SOFT, [f"{len(zones)} distinct zones, desired {desired}"]
    return Adherence.MEETS_STRICT, []


def check_ledger(
    metadata: LedgerMetadata,
    policy: PlacementPolicy,
    locations: Mapping[str, str | None],
    end: int | None = None,
    include_empty: bool = False,
) -> PlacementVerdict:
    """Check every segment (empty ones only when `include_empty`); the ledger gets the worst verdict."""
    segs = []
    overall = Adherence.MEETS_STRICT
    for span in metadata.spans(end):
        if not span.entries and not include_empty:
            continue
        v = check_ensemble(span.ensemble, metadata.write_quorum, metadata.ack_quorum, policy, locations)
        segs.append(SegmentVerdict(span.index, span.first_entry_id, span.entries.last, span.ensemble, v))
        overall = min(overall, v.adherence)
    return PlacementVerdict(metadata.ledger_id, policy.kind, overall, tuple(segs))
