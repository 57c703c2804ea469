"""Rack maps: Pulsar's /bookies JSON, static files, and a ScriptBasedMapping-like script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor.metadata.bookkeeper.racks import (
    DEFAULT_RACK,
    ScriptRackResolver,
    load_rack_file,
    normalise_rack,
    pulsar_rack_map,
)
from auditor.metadata.errors import CorruptZnodeError, MetadataConfigError


def test_normalise_rack() -> None:
    assert normalise_rack("rack-a") == "/rack-a"
    assert normalise_rack("/region/rack") == "/region/rack"
    assert normalise_rack("") is None and normalise_rack("/") is None and normalise_rack(None) is None


async def test_pulsar_json() -> None:
    doc = {
        "default": {"127.0.0.1:3181": {"rack": "rack-a", "hostname": "bk1.local"}, "127.0.0.2:3182": {"rack": "/"}},
        "other": {"127.0.0.3:3183": {"rack": "/r/b"}},
    }
    m = pulsar_rack_map(json.dumps(doc).encode())
    got = await m.racks(["127.0.0.1:3181", "127.0.0.2:3182", "127.0.0.3:3183", "127.0.0.9:3189"])
    assert got == {
        "127.0.0.1:3181": "/rack-a",
        "127.0.0.2:3182": DEFAULT_RACK,
        "127.0.0.3:3183": "/r/b",
        "127.0.0.9:3189": DEFAULT_RACK,
    }

    async def host_of(b: str) -> str:
        return "bk1.local"

    by_host = pulsar_rack_map(json.dumps(doc).encode(), host_of=host_of)
    assert (await by_host.racks(["custom-id"]))["custom-id"] == "/rack-a"
    with pytest.raises(CorruptZnodeError, match="/bookies"):
        pulsar_rack_map(b"{not json")


async def test_static_files(tmp_path: Path) -> None:
    y = tmp_path / "racks.yaml"
    y.write_text("127.0.0.1:3181: /rack-a\n127.0.0.2: rack-b\n")
    m = load_rack_file(y)
    assert await m.racks(["127.0.0.1:3181", "127.0.0.2:3182", "x:1"]) == {
        "127.0.0.1:3181": "/rack-a",
        "127.0.0.2:3182": "/rack-b",
        "x:1": DEFAULT_RACK,
    }
    j = tmp_path / "racks.json"
    j.write_text(json.dumps({"racks": {"h": "/r"}}))
    assert (await load_rack_file(j, default_rack="/dr").racks(["h:1", "z:1"])) == {"h:1": "/r", "z:1": "/dr"}
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    with pytest.raises(MetadataConfigError, match=str(bad)):
        load_rack_file(bad)
    with pytest.raises(MetadataConfigError, match="missing.yaml"):
        load_rack_file(tmp_path / "missing.yaml")
    empty = tmp_path / "e.yaml"
    empty.write_text("a: ''\n")
    with pytest.raises(MetadataConfigError, match="e.yaml"):
        load_rack_file(empty)


def _script(tmp_path: Path, body: str) -> Path:
    s = tmp_path / "rack.sh"
    s.write_text("#!/bin/sh\n" + body)
    s.chmod(0o755)
    return s


async def test_script_batches_and_parses(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    s = _script(tmp_path, f'echo "$#" >> {calls}\nfor h in "$@"; do echo -n "/rack-${{h##*.}} "; done\n')
    r = ScriptRackResolver(s)
    ids = [f"10.0.{i // 250}.{i % 250}:3181" for i in range(250)]
    got = await r.racks(ids)
    assert got["10.0.0.7:3181"] == "/rack-7" and len(got) == 250
    assert [int(x) for x in calls.read_text().split()] == [100, 100, 50]
    await r.racks(ids[:5])  # cached: no new call
    assert len(calls.read_text().split()) == 3
    assert (await r.racks(["custom-id"]))["custom-id"] == DEFAULT_RACK


async def test_script_errors_name_the_script(tmp_path: Path) -> None:
    s = _script(tmp_path, "echo rack-without-slash\n")
    with pytest.raises(MetadataConfigError, match="rack.sh.*start with '/'"):
        await ScriptRackResolver(s).racks(["1.2.3.4:1"])
    s = _script(tmp_path, "echo /a /b\n")
    with pytest.raises(MetadataConfigError, match="printed 2 racks for 1"):
        await ScriptRackResolver(s).racks(["1.2.3.4:1"])
    s = _script(tmp_path, "echo boom >&2; exit 3\n")
    with pytest.raises(MetadataConfigError, match="exit code 3: boom"):
        await ScriptRackResolver(s).racks(["1.2.3.4:1"])
    with pytest.raises(MetadataConfigError, match="nope.sh"):
        ScriptRackResolver(tmp_path / "nope.sh")
    s.chmod(0o644)
    with pytest.raises(MetadataConfigError, match="cannot run"):
        await ScriptRackResolver(s).racks(["1.2.3.4:1"])


@pytest.mark.parametrize(
    "name, data, words",
    [
        ("deep.yaml", b"racks: " + b"[" * 3000 + b"]" * 3000, "nested deeper than 64 levels"),
        ("deep.json", b'{"racks": ' + b"[" * 3000 + b"]" * 3000 + b"}", "nested too deeply"),
        ("latin1.yaml", b"bk1: /r\xe9\n", "not UTF-8"),
        ("big.yaml", b"bk1: " + b"9" * 5000, "not valid YAML"),
    ],
)
def test_hostile_rack_files_are_config_errors(tmp_path: Path, name: str, data: bytes, words: str) -> None:
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(MetadataConfigError) as err:
        load_rack_file(p)
    assert str(p) in str(err.value) and words in str(err.value), str(err.value)


@pytest.mark.parametrize("data", [b"[" * 5000 + b"]" * 5000, b"\xff", b"[]", b'{"g": []}'])
def test_hostile_pulsar_rack_json_names_the_znode(data: bytes) -> None:
    with pytest.raises(CorruptZnodeError) as err:
        pulsar_rack_map(data, path="/bookies")
    assert err.value.path == "/bookies"
