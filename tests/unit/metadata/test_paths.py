"""Ledger and marker paths: id <-> path for every manager, the scoped extension, and the range walk."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.durability.ids import MAX_ID, LedgerId
from auditor.metadata.codecs.paths import HYBRID_SPLIT, LedgerPaths, MarkerPaths, walk_ledgers
from auditor.metadata.location import LedgerManager

ids63 = st.integers(min_value=0, max_value=MAX_ID)
small = st.integers(min_value=0, max_value=HYBRID_SPLIT - 1)


def test_spec_examples() -> None:
    assert LedgerPaths("/ledgers", LedgerManager.HIERARCHICAL).path(1234567890) == "/ledgers/12/3456/L7890"
    assert LedgerPaths("/ledgers", LedgerManager.LEGACY_HIERARCHICAL).path(1234567890) == "/ledgers/12/3456/L7890"
    assert (
        LedgerPaths("/ledgers", LedgerManager.LONG_HIERARCHICAL).path(1234567890) == "/ledgers/000/0000/0012/3456/L7890"
    )
    assert LedgerPaths("/ledgers", LedgerManager.FLAT).path(1234567890) == "/ledgers/L1234567890"
    hy = LedgerPaths("/pulsar/ledgers", LedgerManager.HIERARCHICAL)
    assert hy.path(HYBRID_SPLIT - 1) == "/pulsar/ledgers/21/4748/L3646"
    assert hy.path(HYBRID_SPLIT) == "/pulsar/ledgers/000/0000/0021/4748/L3647"
    assert hy.path(MAX_ID) == "/pulsar/ledgers/922/3372/0368/5477/L5807"


@given(ids63)
def test_hybrid_and_long_round_trip(n: int) -> None:
    for m in (LedgerManager.HIERARCHICAL, LedgerManager.LONG_HIERARCHICAL):
        p = LedgerPaths("/ledgers", m)
        assert p.parse(p.path(n)) == LedgerId(0, n)


@given(small)
def test_legacy_and_flat_round_trip(n: int) -> None:
    for m in (LedgerManager.LEGACY_HIERARCHICAL, LedgerManager.FLAT):
        p = LedgerPaths("/a/b", m)
        assert p.parse(p.path(n)) == LedgerId(0, n)


@given(st.integers(min_value=1, max_value=MAX_ID), ids63)
def test_scoped_round_trip_and_separate_tree(scope: int, n: int) -> None:
    p = LedgerPaths("/ledgers", LedgerManager.HIERARCHICAL)
    lid = LedgerId(scope, n)
    path = p.path(lid)
    assert path.startswith("/ledgers/scoped/")
    assert len(path.split("/")) == 3 + 10
    assert p.parse(path) == lid
    # Never a digit-named root child: Java's walk must not see it.
    assert not path.split("/")[2].isdigit()


@given(ids63)
def test_marker_path_round_trip(n: int) -> None:
    m = MarkerPaths("/ledgers")
    path = m.marker(n)
    assert path.endswith(f"/urL{n:010d}")
    hexes = path.split("/")[4:8]
    assert int("".join(hexes), 16) == n
    assert m.parse_marker(path) == LedgerId(0, n)


@given(st.integers(min_value=1, max_value=MAX_ID), ids63)
def test_scoped_marker_outside_java_tree(scope: int, n: int) -> None:
    m = MarkerPaths("/ledgers")
    path = m.marker(LedgerId(scope, n))
    assert path.startswith("/ledgers/underreplication/scopedledgers/")
    assert m.parse_marker(path) == LedgerId(scope, n)


def test_marker_spec_example() -> None:
    assert (
        MarkerPaths("/ledgers").marker(1234567890)
        == "/ledgers/underreplication/ledgers/0000/0000/4996/02d2/urL1234567890"
    )


@pytest.mark.parametrize(
    "path",
    [
        "/ledgers/12/3456/L789",
        "/ledgers/12/3456/7890",
        "/ledgers/123/3456/L7890",
        "/ledgers/1a/3456/L7890",
        "/ledgers/12/3456/L7890/x",
        "/ledgers/LAYOUT",
        "/ledgers/idgen/ID-0000000001",
        "/other/12/3456/L7890",
        "/ledgers/21/4748/L3647",  # legacy path of an id the hybrid manager keeps in the long tree
        "/ledgers/000/0000/0000/0000/L0005",  # long path of an id the hybrid manager keeps in the legacy tree
    ],
)
def test_parse_rejects_non_ledgers(path: str) -> None:
    assert LedgerPaths("/ledgers", LedgerManager.HIERARCHICAL).parse(path) is None


def _tree(paths: list[str]) -> dict[str, list[str]]:
    kids: dict[str, set[str]] = {}
    for p in paths:
        parts = p.split("/")
        for i in range(2, len(parts) + 1):
            parent, child = "/".join(parts[: i - 1]) or "/", parts[i - 1]
            kids.setdefault(parent, set()).add(child)
    # In reverse: ZooKeeper lists children in no particular order, and the walk must sort them.
    return {k: sorted(v, reverse=True) for k, v in kids.items()}


def _walk(
    p: LedgerPaths, tree: dict[str, list[str]], start=None, end=None
) -> tuple[list[LedgerId], list[str], list[str]]:
    listed: list[str] = []
    skipped: list[str] = []

    async def children(path: str):
        listed.append(path)
        return tree.get(path)

    async def run():
        out = []
        async for b in walk_ledgers(p, children, start, end, on_skip=lambda d, n: skipped.append(f"{d}/{n}")):
            assert b.ledger_ids == sorted(b.ledger_ids)
            out += b.ledger_ids
        return out

    return asyncio.run(run()), listed, skipped


@settings(max_examples=60, deadline=None)
@given(
    st.lists(ids63 | small, min_size=0, max_size=40, unique=True),
    ids63,
    ids63,
    st.lists(st.integers(1, 5), max_size=4),
    st.sampled_from(list(LedgerManager)),
)
def test_walk_lists_exactly_the_range_in_order(
    ids: list[int], a: int, b: int, scopes: list[int], manager: LedgerManager
) -> None:
    if manager in (LedgerManager.LEGACY_HIERARCHICAL, LedgerManager.FLAT):
        ids = [i for i in ids if i < HYBRID_SPLIT]
    p = LedgerPaths("/ledgers", manager)
    lids = [LedgerId(0, i) for i in ids] + [LedgerId(s, i) for s, i in zip(scopes, ids)]
    noise = [
        "/ledgers/LAYOUT",
        "/ledgers/INSTANCEID",
        "/ledgers/available/readonly",
        "/ledgers/idgen/ID-1",
        "/ledgers/cookies/127.0.0.1:3181",
        "/ledgers/underreplication/ledgers/0000",
    ]
    tree = _tree([p.path(x) for x in lids] + noise)
    lo, hi = sorted((a, b))
    got, _, _ = _walk(p, tree)
    assert got == sorted(lids)
    start, end = LedgerId(0, lo), LedgerId(0, hi)
    got, _, _ = _walk(p, tree, start, end)
    assert got == sorted(x for x in lids if start <= x < end)


def test_walk_prunes_directories_outside_the_range_and_skips_strays() -> None:
    p = LedgerPaths("/ledgers", LedgerManager.HIERARCHICAL)
    ids = [5, 12_000_000, 1_500_000_000, 2**40]
    tree = _tree(
        [p.path(i) for i in ids] + ["/ledgers/00/0000/Lxxxx", "/ledgers/00/0000/L12345", "/ledgers/00/abcd/L0001"]
    )
    got, listed, skipped = _walk(p, tree, LedgerId(0, 10_000_000), LedgerId(0, HYBRID_SPLIT))
    assert got == [LedgerId(0, 12_000_000), LedgerId(0, 1_500_000_000)]
    assert "/ledgers/00/0000" not in listed  # 0..9 999 999 cannot hold anything in range
    assert "/ledgers/000" not in listed  # the long tree starts at 2^31-1, excluded here
    assert listed.count("/ledgers") == 1  # nor is the long pass started
    got, listed, skipped = _walk(p, tree)
    assert got == [LedgerId(0, i) for i in ids]
    assert sorted(skipped) == ["/ledgers/00/0000/L12345", "/ledgers/00/0000/Lxxxx", "/ledgers/00/abcd"]


def test_walk_tolerates_vanished_directories() -> None:
    p = LedgerPaths("/ledgers", LedgerManager.LONG_HIERARCHICAL)
    tree = _tree([p.path(7), p.path(10**12)])
    del tree["/ledgers/000/0000/0000/0000"]  # deleted between listing its parent and listing it
    got, _, _ = _walk(p, tree)
    assert got == [LedgerId(0, 10**12)]


@pytest.mark.parametrize("manager", list(LedgerManager))
def test_only_ascii_digits_name_a_ledger(manager: LedgerManager) -> None:
    """`L٠٠٠٧` (Arabic-Indic digits) or a trailing newline must not be read as ledger 7: no BookKeeper
    writes such a name, and reading ledger 7's metadata would fetch another znode."""
    paths = LedgerPaths("/ledgers", manager)
    good = paths.path(7)
    parent, leaf = good.rsplit("/", 1)
    arabic = "".join(chr(ord(c) - ord("0") + 0x660) if c.isdigit() else c for c in leaf)
    for bad in (f"{parent}/{arabic}", good + "\n", f"{parent}/L{'0' * (len(leaf) - 2)}\u0667", " " + good):
        assert paths.parse(bad) is None, repr(bad)
    assert paths.parse(good) == LedgerId(0, 7)


async def test_walk_skips_names_with_non_ascii_digits() -> None:
    paths = LedgerPaths("/ledgers", LedgerManager.HIERARCHICAL)
    tree = {
        "/ledgers": ["00", "\u0660\u0660"],
        "/ledgers/00": ["0000"],
        "/ledgers/00/0000": ["L0007", "L\u0660\u0660\u0660\u0668", "L0009\n"],
    }
    skipped: list[str] = []

    async def children(path: str):
        return tree.get(path)

    got = [b async for b in walk_ledgers(paths, children, include_scoped=False, on_skip=lambda d, n: skipped.append(n))]
    assert [i.ledger for b in got for i in b.ledger_ids] == [7]
    assert sorted(skipped) == sorted(["L\u0660\u0660\u0660\u0668", "L0009\n"])


def test_marker_paths_only_ascii() -> None:
    m = MarkerPaths("/ledgers")
    good = m.marker(7)
    assert m.parse_marker(good) == LedgerId(0, 7)
    assert m.parse_marker(good.replace("urL0000000007", "urL000000000\u0667")) is None
    assert m.parse_marker(good + "\n") is None
    assert m.parse_marker(good.replace("urL0000000007", "urL" + "9" * 5000)) is None


def test_flat_names_must_be_canonical() -> None:
    """Ledger 7 lives at L0000000007 (%010d); L00000000007 names no ledger (Java would parse it as 7)."""
    paths = LedgerPaths("/ledgers", LedgerManager.FLAT)
    assert paths.parse("/ledgers/L0000000007") == LedgerId(0, 7)
    assert paths.parse("/ledgers/L00000000007") is None
    assert paths.parse("/ledgers/L12345678901") == LedgerId(0, 12345678901)
