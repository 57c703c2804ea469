"""Choosing the bookie that replaces one ensemble index, by the ledger's placement policy."""

from __future__ import annotations

from auditor.durability.placement import Adherence, PlacementPolicy, PolicyKind
from auditor.durability.replacement import Choice, Refusal, choose_replacement, touching_quorums

RACKS = {"a": "/r1", "b": "/r2", "c": "/r3", "x": "/r3", "d": "/r1", "e": "/r2", "f": "/r3", "g": "/r4"}


def test_touching_quorums() -> None:
    assert touching_quorums(0, 5, 2) == {0, 4}
    assert touching_quorums(2, 3, 3) == {0, 1, 2}


def test_never_a_member_nor_an_excluded_bookie() -> None:
    got = choose_replacement(["a", "b", "x"], 2, 2, 2, PlacementPolicy(), RACKS, ["a", "b", "x", "f"], exclude=["f"])
    assert isinstance(got, Refusal) and "no writable bookie" in got.reason


def test_rack_aware_avoids_racks_that_would_fail_and_prefers_the_old_rack() -> None:
    # Replacing x (/r3) in [a(/r1), b(/r2), x]: d is /r1 (quorum {b, d} fine, {d, a} fails), f is /r3.
    got = choose_replacement(["a", "b", "x"], 2, 2, 2, PlacementPolicy(), RACKS, ["d", "e", "f", "g"])
    assert isinstance(got, Choice) and got.bookie == "f" and got.adherence is Adherence.MEETS_STRICT
    # Without f, /r4 is the only rack that keeps both quorums on two racks.
    got = choose_replacement(["a", "b", "x"], 2, 2, 2, PlacementPolicy(), RACKS, ["d", "e", "g"])
    assert isinstance(got, Choice) and got.bookie == "g"


def test_no_bookie_satisfies_the_policy_is_refused_unless_best_effort() -> None:
    racks = {"a": "/r1", "b": "/r2", "x": "/r3", "d": "/r1", "e": "/r2"}
    got = choose_replacement(["a", "b", "x"], 2, 2, 2, PlacementPolicy(), racks, ["d", "e"])
    assert isinstance(got, Refusal) and "rackaware" in got.reason and "distinct racks" in got.reason
    got = choose_replacement(["a", "b", "x"], 2, 2, 2, PlacementPolicy(), racks, ["d", "e"], best_effort=True)
    assert isinstance(got, Choice) and got.best_effort and got.adherence is Adherence.FAIL


def test_caller_order_breaks_ties() -> None:
    policy = PlacementPolicy(kind=PolicyKind.DEFAULT)
    got = choose_replacement(["a", "b", "x"], 2, 2, 2, policy, {}, ["g", "e", "d"])
    assert isinstance(got, Choice) and got.bookie == "g"


def test_only_quorums_touching_the_index_count() -> None:
    # E4/WQ2: quorum {c, d} fails (both /r3) whatever replaces a; a's quorums {d, a} and {a, b} decide.
    racks = {"a": "/r1", "b": "/r2", "c": "/r3", "d": "/r3", "g": "/r4"}
    got = choose_replacement(["a", "b", "c", "d"], 0, 2, 2, PlacementPolicy(), racks, ["g"])
    assert isinstance(got, Choice) and got.adherence is Adherence.MEETS_STRICT


def test_structural_zone_failure_refuses_every_candidate() -> None:
    policy = PlacementPolicy(kind=PolicyKind.ZONE_AWARE)
    zones = {"a": "/z1/u1", "b": "/z2/u1", "x": "/z3/u1", "g": "/z4/u1"}
    got = choose_replacement(["a", "b", "x"], 2, 2, 2, policy, zones, ["g"])
    assert isinstance(got, Refusal) and "not a multiple" in got.reason
