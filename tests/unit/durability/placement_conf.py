"""`PlacementPolicy` from and to BookKeeper client configuration keys: a test helper only (the auditor reads
Java keys once, into its settings: `auditor.settings.javakeys`; the settings build the policy,
`PlacementSettings.build_policy`). Tests write a policy the way a writer's configuration spells it."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from auditor.durability.placement import PlacementPolicy, PolicyKind

# Java client configuration key -> PlacementPolicy field
CONF_KEYS: Mapping[str, str] = MappingProxyType(
    {
        "ensemblePlacementPolicy": "kind",
        "minNumRacksPerWriteQuorum": "min_racks_per_write_quorum",
        "enforceMinNumRacksPerWriteQuorum": "enforce_min_racks_per_write_quorum",
        "reppRegionsToWrite": "regions_to_write",
        "reppMinimumRegionsForDurability": "min_regions_for_durability",
        "minNumZonesPerWriteQuorum": "min_zones_per_write_quorum",
        "desiredNumZonesPerWriteQuorum": "desired_zones_per_write_quorum",
        "enforceStrictZoneawarePlacement": "enforce_strict_zoneaware_placement",
    }
)


def _bool(value: str | int | bool) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() == "true"


def policy_from_conf(conf: Mapping[str, str | int | bool]) -> PlacementPolicy:
    """Build from BookKeeper client configuration keys; unknown keys are ignored."""
    kw: dict[str, Any] = {}
    for key, attr in CONF_KEYS.items():
        if key not in conf:
            continue
        v = conf[key]
        if attr == "kind":
            kw[attr] = PolicyKind.parse(str(v))
        elif attr == "regions_to_write":
            kw[attr] = tuple(r.strip() for r in str(v).split(";") if r.strip())
        elif attr.startswith("enforce"):
            kw[attr] = _bool(v)
        else:
            kw[attr] = int(v)
    return PlacementPolicy(**kw)


def policy_to_conf(policy: PlacementPolicy) -> dict[str, str]:
    out = {}
    for key, attr in CONF_KEYS.items():
        v = getattr(policy, attr)
        if attr == "kind":
            out[key] = v.java_class
        elif attr == "regions_to_write":
            out[key] = ";".join(v)
        elif isinstance(v, bool):
            out[key] = "true" if v else "false"
        else:
            out[key] = str(v)
    return out
