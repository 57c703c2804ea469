"""Rack data that cannot be used disables placement judgement only: Locations records the problem (naming
the znode or script), answers 'unknown' for every bookie, offers the metadata_unreadable finding, and the
next refresh with good data restores it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from auditor.checks.build import Locations
from auditor.durability.findings import Category
from auditor.metadata.bookkeeper.racks import RackResolver, ScriptRackResolver, pulsar_rack_map

GOOD = json.dumps({"default": {"b1:3181": {"rack": "/r1"}, "b2:3181": {"rack": "/r2"}}}).encode()


async def test_malformed_pulsar_bookies_json_disables_placement_until_fixed() -> None:
    data = [b'{"default": ']

    async def rebuild() -> RackResolver | None:
        return pulsar_rack_map(data[0], path="/bookies")

    loc = Locations(None, rebuild)
    await loc.refresh()
    assert not loc.available and loc.problem is not None and "/bookies" in loc.problem
    f = loc.finding()
    assert f is not None and f.category is Category.METADATA_UNREADABLE and f.ledger is None and f.confirmed
    assert "/bookies" in f.message and "placement is not checked" in f.message
    assert await loc(["b1:3181"]) == {"b1:3181": None}
    data[0] = b'{"default": []}'  # valid JSON, wrong shape
    await loc.refresh()
    assert not loc.available and "/bookies" in (loc.problem or "")
    data[0] = GOOD
    await loc.refresh()
    assert loc.available and loc.problem is None and loc.finding() is None
    assert await loc(["b1:3181", "b2:3181"]) == {"b1:3181": "/r1", "b2:3181": "/r2"}


async def test_a_failing_rack_script_disables_placement_for_the_run(tmp_path: Path) -> None:
    script = tmp_path / "racks.sh"
    script.write_text("#!/bin/sh\necho 'no racks for you' >&2\nexit 3\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    loc = Locations(ScriptRackResolver(script))
    assert loc.available
    assert await loc(["10.0.0.1:3181"]) == {"10.0.0.1:3181": None}
    assert not loc.available and str(script) in (loc.problem or "") and "exit code 3" in (loc.problem or "")
    assert loc.finding() is not None
