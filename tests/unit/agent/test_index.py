"""The agent's index reader (auditor/agent/index.py) over RocksDB databases in the bookie's format,
with their writer still open: entries, absence, catching up, and the bookie's directory left untouched."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from auditor.agent.index import BookieIndex, IndexReadError
from auditor.durability.ranges import RangeSet
from devcluster.agent_util import files_state

from .conftest import FakeBookieDir


def test_entries_absence_and_catching_up(bookie_dir: FakeBookieDir, tmp_path: Path) -> None:
    for e in [*range(10), *range(20, 25)]:
        bookie_dir.add(7, e)
    bookie_dir.add(8, 0)
    bookie_dir.flush()
    index = BookieIndex([bookie_dir.root], tmp_path / "scratch", max_age=0.2)
    try:
        seven = index.entries(7)
        assert seven.known and seven.entries == RangeSet.of([(0, 9), (20, 24)])
        assert index.entries(8).entries == RangeSet.span(0, 0)
        nine = index.entries(9)
        assert not nine.known and nine.entries == RangeSet()
        known, located = index.locations(7, 5, 21)
        assert known and [loc.entry_id for loc in located] == [5, 6, 7, 8, 9, 20, 21]
        as_of = index.as_of
        bookie_dir.add(9, 0)  # written (to the WAL only) while we hold the view
        assert not index.entries(9).known  # the view is younger than max_age: not refreshed
        time.sleep(0.3)
        assert index.entries(9).known and index.as_of > as_of
    finally:
        index.close()


def test_the_bookie_directory_is_only_read(bookie_dir: FakeBookieDir, tmp_path: Path) -> None:
    for e in range(100):
        bookie_dir.add(3, e)
    bookie_dir.flush()
    before = files_state([bookie_dir.root])
    index = BookieIndex([bookie_dir.root], tmp_path / "scratch", max_age=0.0)
    try:
        for _ in range(3):
            assert index.entries(3).entries == RangeSet.span(0, 99)
            index.locations(3, 0, 99)
    finally:
        index.close()
    assert files_state([bookie_dir.root]) == before
    mirror = tmp_path / "scratch" / "dir0" / "locations" / "mirror"
    links = {p.name for p in mirror.iterdir() if p.is_symlink()}
    assert links and not any(n.startswith(("LOG", "LOCK", "rocksdict")) for n in links)


def test_a_missing_directory_is_an_error_not_an_absence(tmp_path: Path) -> None:
    index = BookieIndex([tmp_path / "nowhere"], tmp_path / "scratch")
    with pytest.raises(IndexReadError, match="nowhere"):
        index.entries(1)
    index.close()
