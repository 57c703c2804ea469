"""Placement adherence: rack-, region- and zone-aware examples, config parsing, ledger verdicts."""

from __future__ import annotations

import pytest

from auditor.durability.findings import Category
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.placement import (
    DEFAULT_RACK,
    DEFAULT_REGION_RACK,
    Adherence,
    PlacementPolicy,
    PolicyKind,
    check_ensemble,
    check_ledger,
    normalize_location,
)
from tests.unit.durability.placement_conf import policy_from_conf, policy_to_conf

RACK = PlacementPolicy()
STRICT, SOFT, FAIL = Adherence.MEETS_STRICT, Adherence.MEETS_SOFT, Adherence.FAIL


def ens(n: int) -> list[str]:
    return [f"b{i}" for i in range(n)]


def locs(*values: str | None) -> dict[str, str | None]:
    return {f"b{i}": v for i, v in enumerate(values) if v is not None}


# --------------------------------------------------------------------------------------------------
# rack-aware


def test_rack_aware_distinct_racks_pass() -> None:
    v = check_ensemble(ens(3), 2, 2, RACK, locs("/r1", "/r2", "/r3"))
    assert v.adherence is STRICT and not v.quorums


def test_rack_aware_two_neighbours_in_one_rack_fail() -> None:
    v = check_ensemble(ens(3), 2, 2, RACK, locs("/r1", "/r1", "/r2"))
    assert v.adherence is FAIL
    assert [(q.start_index, q.members, q.locations) for q in v.quorums] == [(0, ("b0", "b1"), ("/r1", "/r1"))]
    assert "1 distinct racks, need 2" in v.quorums[0].reasons[0]


def test_rack_aware_lists_every_failing_quorum() -> None:
    v = check_ensemble(ens(4), 2, 2, RACK, locs("/r1", "/r1", "/r2", "/r2"))
    assert [q.start_index for q in v.quorums] == [0, 2]


def test_rack_aware_wrapping_quorum() -> None:
    v = check_ensemble(ens(3), 2, 2, RACK, locs("/r1", "/r2", "/r1"))
    assert [q.start_index for q in v.quorums] == [2]  # members b2, b0


def test_min_racks_capped_by_write_quorum() -> None:
    policy = PlacementPolicy(min_racks_per_write_quorum=3)
    assert check_ensemble(ens(4), 2, 2, policy, locs("/r1", "/r2", "/r1", "/r2")).adherence is STRICT
    assert check_ensemble(ens(4), 3, 2, policy, locs("/r1", "/r2", "/r1", "/r2")).adherence is FAIL


def test_unknown_rack_counts_as_default_rack_not_nothing() -> None:
    # Java drops racks of bookies it does not know as writable; a quorum {r1, ?} would then have 1 rack
    # and FAIL. The writer saw the default rack for it, so it is 2 racks.
    v = check_ensemble(ens(2), 2, 2, RACK, locs("/r1", None))
    assert v.adherence is STRICT and v.unresolved == ("b1",)


def test_two_unknown_racks_share_the_default_rack() -> None:
    v = check_ensemble(ens(3), 2, 2, RACK, locs("/r1", None, None))
    assert v.adherence is FAIL
    assert v.quorums[0].locations == (DEFAULT_RACK, DEFAULT_RACK)


def test_read_only_or_stopped_bookie_keeps_its_rack() -> None:
    # Java's false positive (java-auditor.md §2.3): the rack map is independent of bookie state.
    racks = locs("/r1", "/r2", "/r3")
    writable_now = {"b0", "b2"}  # b1 is read-only: irrelevant here
    assert writable_now and check_ensemble(ens(3), 3, 2, RACK, racks).adherence is STRICT


def test_enforce_min_racks_rejects_default_rack() -> None:
    policy = PlacementPolicy(enforce_min_racks_per_write_quorum=True)
    v = check_ensemble(ens(3), 2, 2, policy, locs("/r1", "/r2", None))
    assert v.adherence is FAIL
    assert [q.start_index for q in v.quorums] == [1, 2]
    assert any("default rack" in r for r in v.quorums[0].reasons)
    v = check_ensemble(ens(3), 2, 2, policy, locs("/r1", "/r2", DEFAULT_RACK))
    assert v.adherence is FAIL


def test_empty_and_impossible_ensembles_fail() -> None:
    assert check_ensemble([], 2, 2, RACK, {}).adherence is FAIL
    assert check_ensemble(ens(2), 3, 2, RACK, {}).adherence is FAIL


def test_normalize_location() -> None:
    assert normalize_location("rack1") == "/rack1"
    assert normalize_location("/a/b/") == "/a/b"
    assert normalize_location("/") is None
    assert normalize_location("") is None
    assert normalize_location(None) is None


# --------------------------------------------------------------------------------------------------
# region-aware


REGION = PlacementPolicy(kind=PolicyKind.REGION_AWARE, regions_to_write=("east", "west"), min_regions_for_durability=2)


def test_region_aware_alternating_regions_pass() -> None:
    v = check_ensemble(ens(4), 2, 2, REGION, locs("/east/r1", "/west/r1", "/east/r2", "/west/r2"))
    assert v.adherence is STRICT


def test_region_aware_quorum_in_one_region_fails() -> None:
    v = check_ensemble(ens(4), 2, 2, REGION, locs("/east/r1", "/west/r1", "/east/r2", "/east/r3"))
    assert v.adherence is FAIL
    assert [q.start_index for q in v.quorums] == [2, 3]
    assert any("distinct regions" in r for r in v.quorums[0].reasons)


def test_region_aware_ack_quorum_must_span_min_regions() -> None:
    # WQ=3 AQ=2 over two regions: two members in one region can acknowledge an entry alone.
    v = check_ensemble(ens(3), 3, 2, REGION, locs("/east/r1", "/east/r2", "/west/r1"))
    assert v.adherence is FAIL
    assert any("ack quorum" in r for r in v.quorums[0].reasons)
    # AQ=3 forces a copy in the second region.
    assert check_ensemble(ens(3), 3, 3, REGION, locs("/east/r1", "/east/r2", "/west/r1")).adherence is STRICT
    # Three regions: any AQ=2 spans two regions.
    three = PlacementPolicy(kind=PolicyKind.REGION_AWARE, regions_to_write=("a", "b", "c"))
    assert check_ensemble(ens(3), 3, 2, three, locs("/a/r", "/b/r", "/c/r")).adherence is STRICT


def test_region_aware_racks_within_region() -> None:
    policy = PlacementPolicy(kind=PolicyKind.REGION_AWARE)  # no regions configured: no durability rule
    v = check_ensemble(ens(2), 2, 2, policy, locs("/east/r1", "/east/r1"))
    assert v.adherence is FAIL and "distinct racks" in v.quorums[0].reasons[0]


def test_region_aware_soft_when_a_quorum_could_span_more_regions() -> None:
    policy = PlacementPolicy(kind=PolicyKind.REGION_AWARE)
    racks = locs("/east/r1", "/east/r2", "/west/r1", "/west/r2")
    v = check_ensemble(ens(4), 2, 2, policy, racks)
    assert v.adherence is SOFT
    assert [q.start_index for q in v.quorums] == [0, 2]


def test_region_aware_unknown_location_is_default_region() -> None:
    v = check_ensemble(ens(2), 2, 2, REGION, locs("/east/r1", None))
    assert v.unresolved == ("b1",)
    assert v.quorums and v.quorums[0].locations[1] == DEFAULT_REGION_RACK
    # an unknown region may well be east: the quorum is not proven to reach two regions
    assert v.adherence is FAIL and "known distinct regions" in v.quorums[0].reasons[0]


def test_region_aware_rack_only_location_is_a_region() -> None:
    # Java's parseBookieRegion takes the first path component as the region.
    v = check_ensemble(ens(2), 2, 2, REGION, locs("/east", "/west"))
    assert v.adherence is STRICT


# --------------------------------------------------------------------------------------------------
# zone-aware (Java parity while strict)


ZONE = PlacementPolicy(kind=PolicyKind.ZONE_AWARE)
SIX_ZONED = locs("/z1/u1", "/z2/u1", "/z3/u1", "/z1/u2", "/z2/u2", "/z3/u2")


def test_zone_aware_three_zones_strict() -> None:
    assert check_ensemble(ens(6), 3, 2, ZONE, SIX_ZONED).adherence is STRICT


def test_zone_aware_two_zones_is_soft() -> None:
    v = check_ensemble(ens(6), 3, 2, ZONE, locs("/z1/u1", "/z2/u1", "/z1/u2", "/z2/u2", "/z1/u3", "/z2/u3"))
    assert v.adherence is SOFT and len(v.quorums) == 6


def test_zone_aware_one_zone_fails() -> None:
    v = check_ensemble(ens(3), 3, 2, ZONE, locs("/z1/u1", "/z1/u2", "/z1/u3"))
    assert v.adherence is FAIL


def test_zone_aware_same_upgrade_domain_in_a_zone_fails() -> None:
    v = check_ensemble(ens(3), 3, 2, ZONE, locs("/z1/u1", "/z1/u1", "/z2/u1"))
    assert v.adherence is FAIL and "upgrade domain" in v.quorums[0].reasons[-1]


def test_zone_aware_unresolvable_location_fails() -> None:
    assert check_ensemble(ens(3), 3, 2, ZONE, locs("/z1/u1", "/z2", "/z3/u1")).adherence is FAIL
    assert check_ensemble(ens(3), 3, 2, ZONE, locs("/z1/u1", None, "/z3/u1")).adherence is FAIL


def test_zone_aware_structural_rules_fail_when_strict() -> None:
    v = check_ensemble(ens(5), 3, 2, ZONE, locs("/z1/u1", "/z2/u1", "/z3/u1", "/z1/u2", "/z2/u2"))
    assert v.adherence is FAIL and "not a multiple" in v.reasons[0]
    v = check_ensemble(ens(4), 2, 2, ZONE, locs("/z1/u1", "/z2/u1", "/z1/u2", "/z2/u2"))
    assert v.adherence is FAIL and "minNumZonesPerWriteQuorum" in v.reasons[0]


def test_zone_aware_structural_rules_soft_when_not_strict() -> None:
    relaxed = PlacementPolicy(kind=PolicyKind.ZONE_AWARE, enforce_strict_zoneaware_placement=False)
    v = check_ensemble(ens(4), 2, 2, relaxed, locs("/z1/u1", "/z2/u1", "/z1/u2", "/z2/u2"))
    assert v.adherence is SOFT
    # per write quorum rules still apply
    v = check_ensemble(ens(4), 2, 2, relaxed, locs("/z1/u1", "/z1/u2", "/z1/u3", "/z2/u2"))
    assert v.adherence is FAIL


def test_default_policy_always_strict() -> None:
    policy = PlacementPolicy(kind=PolicyKind.DEFAULT)
    assert check_ensemble(ens(3), 3, 2, policy, {}).adherence is STRICT


# --------------------------------------------------------------------------------------------------
# configuration and ledgers


def test_from_conf_java_keys() -> None:
    p = policy_from_conf(
        {
            "ensemblePlacementPolicy": "org.apache.bookkeeper.client.RegionAwareEnsemblePlacementPolicy",
            "minNumRacksPerWriteQuorum": "3",
            "enforceMinNumRacksPerWriteQuorum": "true",
            "reppRegionsToWrite": "east;west;",
            "reppMinimumRegionsForDurability": "2",
            "minNumZonesPerWriteQuorum": 2,
            "desiredNumZonesPerWriteQuorum": 4,
            "enforceStrictZoneawarePlacement": False,
            "unrelated": "x",
        }
    )
    assert p.kind is PolicyKind.REGION_AWARE and p.min_racks_per_write_quorum == 3
    assert p.enforce_min_racks_per_write_quorum and p.regions_to_write == ("east", "west")
    assert p.desired_zones_per_write_quorum == 4 and not p.enforce_strict_zoneaware_placement
    assert policy_from_conf(policy_to_conf(p)) == p
    assert (
        policy_from_conf({"ensemblePlacementPolicy": "ZoneawareEnsemblePlacementPolicy"}).kind is PolicyKind.ZONE_AWARE
    )
    with pytest.raises(ValueError):
        policy_from_conf({"ensemblePlacementPolicy": "com.example.Custom"})


def test_check_ledger_worst_segment_and_empty_segments() -> None:
    md = LedgerMetadata(
        LedgerId.of(5),
        3,
        2,
        2,
        LedgerState.CLOSED,
        9,
        0,
        (Segment(0, ("a", "b", "c")), Segment(5, ("a", "d", "c")), Segment(10, ("x", "y", "z"))),
    )
    racks = {"a": "/r1", "b": "/r2", "c": "/r3", "d": "/r1", "x": "/r1", "y": "/r1", "z": "/r1"}
    v = check_ledger(md, RACK, racks)
    assert v.adherence is FAIL and v.category is Category.PLACEMENT_VIOLATION
    assert [s.segment_index for s in v.segments] == [0, 1]  # the empty last segment is skipped
    assert [s.segment_index for s in v.offending] == [1]
    d = v.detail()
    assert d["adherence"] == "FAIL" and d["segments"][0]["write_quorums"][0]["members"] == ["a", "d"]
    v_all = check_ledger(md, RACK, racks, include_empty=True)
    assert [s.segment_index for s in v_all.segments] == [0, 1, 2]
    assert v_all.segments[2].last_entry_id is None


def test_check_ledger_soft_category() -> None:
    md = LedgerMetadata(LedgerId.of(6), 6, 3, 2, LedgerState.CLOSED, 9, 0, (Segment(0, tuple(ens(6))),))
    v = check_ledger(md, ZONE, locs("/z1/u1", "/z2/u1", "/z1/u2", "/z2/u2", "/z1/u3", "/z2/u3"))
    assert v.adherence is SOFT and v.category is Category.PLACEMENT_SOFT
    strict = check_ledger(md, ZONE, SIX_ZONED)
    assert strict.category is None and strict.offending == ()
