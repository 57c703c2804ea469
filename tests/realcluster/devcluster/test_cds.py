"""The class-data sharing archives of the harness (devcluster/cluster/cds.py), with the real JDK and the
BookKeeper jars: the first JVM of a kind writes the archive at its exit, one writer at a time, a killed
writer publishes nothing, and a later JVM maps the archive (the JVM says so with -Xshare:on)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from devcluster.cluster import cds
from devcluster.cluster.javatools import classpath

pytestmark = pytest.mark.realcluster

# A class of the BookKeeper jars with a main that exits at once: prints usage, exit code 0 or 1.
MAIN = "org.apache.bookkeeper.bookie.BookieShell"


@pytest.fixture
def cds_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(cds, "CDS_DIR", tmp_path)
    monkeypatch.setattr(cds, "ENABLED", True)
    return tmp_path


def java(run: cds.ArchiveRun, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["java", *run.flags, *extra, "-cp", classpath(), MAIN, "help"], capture_output=True, text=True, timeout=120
    )


def test_the_first_run_writes_the_archive_and_the_next_maps_it(cds_dir: Path) -> None:
    first = cds.archive_run("probe", classpath())
    assert first.written is not None and first.final is not None
    # While the first writes it, a second JVM of the kind runs without an archive and writes none.
    second = cds.archive_run("probe", classpath())
    assert second.written is None and not any("SharedArchiveFile" in f for f in second.flags)
    java(first)
    first.publish(clean_exit=True)
    assert first.final.exists() and not list(cds_dir.glob("*.tmp")) and not list(cds_dir.glob("*.writing"))
    third = cds.archive_run("probe", classpath())
    assert f"-XX:SharedArchiveFile={first.final}" in third.flags
    # -Xshare:on makes the JVM fail instead of running without it: the archive maps.
    mapped = java(third, "-Xshare:on")
    assert "Unable to use shared archive" not in mapped.stderr + mapped.stdout, mapped.stderr[-2000:]
    assert "error" not in mapped.stderr.lower(), mapped.stderr[-2000:]
    # Its CDS messages never reach stdout, which the harness parses.
    assert "[cds]" not in mapped.stdout


def test_a_run_that_did_not_end_cleanly_publishes_nothing_and_the_next_one_tries_again(cds_dir: Path) -> None:
    first = cds.archive_run("probe", classpath())
    first.publish(clean_exit=False)
    assert first.final is not None and not first.final.exists() and not list(cds_dir.iterdir())
    again = cds.archive_run("probe", classpath())
    assert again.written is not None


def test_a_class_path_with_a_directory_gets_no_archive(cds_dir: Path, tmp_path: Path) -> None:
    run = cds.archive_run("probe", f"{tmp_path}:{classpath()}")
    assert run.written is None and not any("Archive" in f for f in run.flags)
