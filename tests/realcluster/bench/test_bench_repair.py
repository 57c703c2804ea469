"""The smoke version of `bench/repair.py` (ours vs Java's ReplicationWorker on the same loss), on a cluster
of its own: one run a side, three small ledgers of each shape. Counts, never times: the bookies' own
counters say ours adds exactly the lost copies, where Java re-adds whole fragments when E > WQ, and
Java's census finds every ledger whole after either side."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.repair import JavaSide, OurSide, one_run
from devcluster.cluster import Cluster
from tests.realcluster.second_cluster import second_cluster

pytestmark = pytest.mark.realcluster


@pytest.fixture(scope="module")
def six() -> Iterator[Cluster]:
    with second_cluster("bk-auditor-bench-repair-", 6) as c:
        yield c


def test_ours_adds_exactly_the_lost_copies_and_java_more(six: Cluster, tmp_path: Path) -> None:
    args = argparse.Namespace(ledgers=3, entries=30, entry_size=100)
    java = one_run(six, JavaSide(six), args)
    ours = one_run(six, OurSide(six, tmp_path), args)
    # 30 entries: E3/WQ3 loses 30 copies, E3/WQ2 20, E5/WQ2 12 (exact: 30 x WQ / E has no remainder).
    assert java["lost_copies"] == ours["lost_copies"] == 30 + 20 + 12
    assert ours["adds"] == ours["lost_copies"] and ours["reads"] == ours["lost_copies"], ours
    assert ours["write_bytes"] > ours["adds"] * args.entry_size
    # Java re-adds the whole E5/WQ2 fragment (30 entries where 12 were lost), and reads at least that.
    assert java["adds"] >= ours["adds"] + (30 - 12), java
    assert java["reads"] >= java["adds"], java
