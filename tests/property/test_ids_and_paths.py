"""128-bit ledger ids (parse, qualified name) and ledger / marker paths for every manager: every valid
form round-trips; any other text is a LedgerIdError naming it, and a path names a ledger only when it is
exactly where that ledger lives."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from auditor.durability.ids import MAX_ID, LedgerId, LedgerIdError
from auditor.metadata.codecs.paths import HYBRID_SPLIT, LEGACY_TREE, LedgerPaths, MarkerPaths, walk_ledgers
from auditor.metadata.location import LedgerManager, join

from .contract import parse_contract
from .strategies import ledger_ids, scoped_ledger_ids, weird_numbers

MANAGERS = list(LedgerManager)


@given(scoped_ledger_ids, st.sampled_from(["qualified", "0x", "upper", "pair:", "pair/", "decimal", "padded"]))
def test_ledger_id_forms_round_trip(lid: LedgerId, form: str) -> None:
    text = {
        "qualified": lid.qualified_name,
        "0x": "0x" + lid.qualified_name,
        "upper": lid.qualified_name.upper(),
        "pair:": f"{lid.scope}:{lid.ledger}",
        "pair/": f" {lid.scope}/{lid.ledger}\n",
        "decimal": str(lid.ledger),
        "padded": "0" * 5 + str(lid.ledger),
    }[form]  # 32 digits would be hex
    expected = LedgerId(0, lid.ledger) if form in ("decimal", "padded") else lid
    assert LedgerId.parse(text) == expected
    assert LedgerId.parse(expected.qualified_name) == expected and LedgerId.parse(str(expected)) == expected


hostile_ids = st.one_of(
    st.text(max_size=60),
    weird_numbers,
    st.tuples(weird_numbers, st.sampled_from([":", "/", "::", " : "]), weird_numbers).map("".join),
    st.text("0123456789abcdefABCDEFx", min_size=30, max_size=36),
    st.just("9" * 5000),
)


@given(hostile_ids)
def test_ledger_id_hostile(text: str) -> None:
    out = parse_contract(lambda: LedgerId.parse(text), LedgerIdError, names=repr(text[:24])[:-1])
    if out.ok:
        lid = out.value
        assert 0 <= lid.scope <= MAX_ID and 0 <= lid.ledger <= MAX_ID
        assert text.strip().isascii()
        assert LedgerId.parse(lid.qualified_name) == lid


@given(st.sampled_from(MANAGERS), st.sampled_from(["/ledgers", "/a/b-c/ledgers"]), st.data())
def test_ledger_paths_round_trip(manager: LedgerManager, root: str, data: st.DataObject) -> None:
    paths = LedgerPaths(root, manager)
    top = 10**10 - 1 if manager is LedgerManager.LEGACY_HIERARCHICAL else MAX_ID  # 2-4-4 holds 10 digits
    lid = data.draw(
        st.one_of(st.builds(LedgerId, st.just(0), st.integers(0, top)), scoped_ledger_ids.filter(lambda i: i.scope > 0))
    )
    path = paths.path(lid)
    assert paths.parse(path) == lid
    if lid.scope == 0 and (
        manager is LedgerManager.LEGACY_HIERARCHICAL
        or (manager is LedgerManager.HIERARCHICAL and lid.ledger < HYBRID_SPLIT)
    ):  # the 2-4-4 tree's spelled-out path is its parts joined
        assert path == join(root, *LEGACY_TREE.to_parts(lid.ledger))


# Path-like text close to real ledger paths: digits of every script, wrong widths, stray characters.
segment = st.one_of(
    st.text("0123456789", min_size=1, max_size=5),
    st.text("0123456789\u0660\u0661\u0967 \nLx", max_size=6),
    st.sampled_from(["L", "L0007", "L0000000007", "L00000000007", "scoped", "", "L\u0667"]),
)


@given(
    st.sampled_from(MANAGERS),
    st.lists(segment, min_size=1, max_size=11),
    st.sampled_from(["/ledgers", "/ledgers/scoped"]),
)
def test_ledger_path_hostile(manager: LedgerManager, parts: list[str], base: str) -> None:
    paths = LedgerPaths("/ledgers", manager)
    path = "/".join([base, *parts])
    out = parse_contract(lambda: paths.parse(path), ())
    if out.value is not None:  # a path names a ledger only if it is exactly that ledger's path
        assert paths.path(out.value) == path


@given(
    st.sampled_from(MANAGERS),
    st.dictionaries(
        st.sampled_from(["/ledgers", "/ledgers/00", "/ledgers/00/0000", "/ledgers/000", "/ledgers/scoped"]),
        st.lists(segment, max_size=8, unique=True),
        max_size=5,
    ),
)  # names unique, as in ZooKeeper
def test_walk_hostile_children(manager: LedgerManager, tree: dict[str, list[str]]) -> None:
    paths = LedgerPaths("/ledgers", manager)

    async def children(path: str) -> list[str] | None:
        return tree.get(path)

    async def walk() -> list:
        return [b async for b in walk_ledgers(paths, children)]

    batches = parse_contract(lambda: asyncio.run(walk()), ()).value
    seen = [lid for b in batches for lid in b.ledger_ids]
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    for b in batches:
        for lid in b.ledger_ids:
            assert paths.path(lid).rsplit("/", 1)[0] == b.directory  # listed where it lives


@given(st.one_of(scoped_ledger_ids, ledger_ids))
def test_marker_paths_round_trip(lid: LedgerId) -> None:
    m = MarkerPaths("/ledgers")
    assert m.parse_marker(m.marker(lid)) == lid


@given(
    st.lists(
        st.one_of(
            st.text("0123456789abcdef", min_size=4, max_size=4),
            segment,
            st.sampled_from(["urL0000000007", "urL1_0000000007", "urL\u0667", "urL" + "9" * 40]),
        ),
        min_size=1,
        max_size=10,
    ),
    st.sampled_from(["ledgers", "scopedledgers"]),
)
def test_marker_path_hostile(parts: list[str], tree: str) -> None:
    m = MarkerPaths("/ledgers")
    path = "/".join([f"/ledgers/underreplication/{tree}", *parts])
    out = parse_contract(lambda: m.parse_marker(path), ())
    if out.value is not None:
        assert m.marker(out.value) == path
