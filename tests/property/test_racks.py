"""Rack maps from outside data: Pulsar's `/bookies` JSON (a znode: CorruptZnodeError naming it) and rack
files (YAML or JSON: MetadataConfigError naming the file)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st

from auditor.metadata.bookkeeper.racks import load_rack_file, normalise_rack, pulsar_rack_map
from auditor.metadata.errors import CorruptZnodeError, MetadataConfigError

from .contract import parse_contract
from .strategies import bookie_ids, deep_json, json_values, mutated

BOOKIES = "/bookies"
racks = st.one_of(st.from_regex(r"/?[a-z0-9-]{1,8}(/[a-z0-9-]{1,8}){0,2}", fullmatch=True), st.sampled_from(["", "/"]))
pulsar_docs = st.dictionaries(
    st.sampled_from(["default", "group-a", "group-b"]),
    # Host names spelled unlike bookie ids ('~'), so that a host key never shadows another bookie's id.
    st.dictionaries(
        bookie_ids,
        st.fixed_dictionaries({"rack": racks}, optional={"hostname": bookie_ids.map("~".__add__)}),
        max_size=4,
    ),
    max_size=3,
)


def lookup(m, ids):
    return asyncio.run(m.racks(ids))


@given(pulsar_docs)
def test_pulsar_rack_json_round_trip(doc: dict) -> None:
    m = pulsar_rack_map(json.dumps(doc).encode(), path=BOOKIES, default_rack="/dflt", host_of=_no_host)
    expected: dict[str, str] = {}
    for members in doc.values():
        for bookie, info in members.items():
            expected.setdefault(bookie, normalise_rack(info["rack"]) or "/dflt")
    assert lookup(m, list(expected)) == expected


async def _no_host(bookie_id: str) -> None:
    return None


@given(
    st.one_of(
        st.binary(max_size=300),
        json_values.map(lambda v: json.dumps(v).encode()),
        deep_json().map(str.encode),
        pulsar_docs.flatmap(lambda d: mutated(json.dumps(d).encode())),
    )
)
def test_pulsar_rack_json_hostile(data: bytes) -> None:
    out = parse_contract(lambda: pulsar_rack_map(data, path=BOOKIES), CorruptZnodeError, names=BOOKIES)
    if out.ok:
        assert all(isinstance(k, str) and v.startswith("/") for k, v in out.value.table.items())
    else:
        assert out.error.path == BOOKIES


_dir = Path(tempfile.mkdtemp(prefix="bk-auditor-racks-"))
rack_tables = st.dictionaries(bookie_ids, racks.filter(lambda r: r not in ("", "/")), max_size=6)


@given(rack_tables, st.sampled_from([".yaml", ".json"]), st.booleans())
def test_rack_file_round_trip(table: dict, suffix: str, nested: bool) -> None:
    p = _dir / f"racks{suffix}"
    doc = {"racks": table} if nested else table
    p.write_text(json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc))
    assert load_rack_file(p).table == {k: normalise_rack(v) for k, v in table.items()}


@given(
    st.one_of(
        st.binary(max_size=300),
        deep_json().map(str.encode),
        json_values.map(lambda v: json.dumps(v).encode()),
        rack_tables.flatmap(lambda t: mutated(yaml.safe_dump(t).encode())),
    ),
    st.sampled_from([".yaml", ".json"]),
)
def test_rack_file_hostile(data: bytes, suffix: str) -> None:
    p = _dir / f"hostile{suffix}"
    p.write_bytes(data)
    out = parse_contract(lambda: load_rack_file(p), MetadataConfigError, names=str(p))
    if out.ok:
        assert all(isinstance(k, str) and v.startswith("/") for k, v in out.value.table.items())
