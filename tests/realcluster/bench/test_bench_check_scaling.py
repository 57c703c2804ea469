"""The smoke version of `bench/check_scaling.py` (`check --processes N`, optionally N processes held to N x F
CPUs): one small run on a ZooKeeper and simulated bookies of its own. Counts, never times: every planted
ledger checked once with exactly the expected findings, the CPU counted with the workers' (a fork
server's children, not the command's), and where a cgroup can be made the quota written and holding."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.check_scaling import check, per_process_budget
from bench.cpuquota import unavailable
from bench.memory import Code, planted_and_served
from devcluster.planted import Shape

pytestmark = pytest.mark.realcluster


def test_check_on_two_processes_counts_every_ledger_and_the_workers_cpu(tmp_path: Path) -> None:
    shape = Shape.parse("3/2/2", "10,50")
    ledgers = 5000
    cgroups = unavailable() is None
    quota = 0.5 if cgroups else None  # where one can be made; else GNU time's count, said so in the row
    with planted_and_served("bk-auditor-bench-check-scaling-", ledgers, False, shape) as (uri, workdir):
        one = check(uri, 1, workdir / "logs", ledgers, shape, Code("this"), None, "shared", cgroups)
        two = check(uri, 2, workdir / "logs", ledgers, shape, Code("this"), quota, "per-process", cgroups)
    for row in (one, two):
        assert "failed" not in row, row
        assert row["exit"] == 0 and row["checked"] == ledgers
        assert row["findings"] == {"risky_quorum": ledgers}
        assert row["cpu_from"] == ("cgroup" if cgroups else "rusage")
    assert two["partitions"] is not None and two["partitions"] >= 2
    if cgroups:
        assert two["cpu_quota"] == 1.0 and two["throttled_s"] >= 0
        # The workers did the checking, and the cgroup counts them: GNU time's count of the command alone
        # (its start-up, the plan, the findings' printing) misses the fork server and its workers.
        assert two["cpu_s"] >= two["command_cpu_s"] + 0.5, two


def test_per_process_budget_gives_each_process_one_process_windows() -> None:
    assert per_process_budget(3) == {
        "BKAUDIT_BOOKIE_CLIENT__MAX_IN_FLIGHT": "24",
        "BKAUDIT_ZOOKEEPER__MAX_CONCURRENT_READS": "192",
    }
