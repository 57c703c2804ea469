"""The smoke version of `bench/daemon_scan.py` (the daemon's scheduled scrutiny on 1 and 2 worker
processes), on a ZooKeeper and simulated bookies of its own: one small pass each, limits off. Counts,
never times: each pass covered every planted ledger once, on the processes asked for, with exactly the
expected findings, and the daemon exited 0 on SIGTERM."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.daemon_scan import one_pass
from bench.memory import planted_and_served
from devcluster.planted import Shape

pytestmark = pytest.mark.realcluster


def test_daemon_scans_every_ledger_once_on_one_and_two_processes(tmp_path: Path) -> None:
    shape = Shape.parse("3/2/2", "10,50")
    ledgers = 1500
    with planted_and_served("bk-auditor-bench-daemon-scan-", ledgers, False, shape) as (uri, workdir):
        rows = [one_pass(uri, k, "off", workdir / "logs", ledgers, shape, 0) for k in (1, 2)]
    for k, row in zip((1, 2), rows):
        assert "failed" not in row, row
        assert row["exit"] == 0 and row["processes_used"] == k and row["ledgers_seen"] == ledgers
        assert row["findings"] == {"risky_quorum": ledgers}
