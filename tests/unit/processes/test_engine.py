"""`check --processes N` and `sweep --master processes[N]`: how many processes by default, and how the
command's ZooKeeper and bookie budgets are shared among them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from auditor.processes.cpus import available_cpus, quota_cpus
from auditor.processes.engine import local_processes, shared_budget
from auditor.processes.worker import settings_from_wire, settings_to_wire
from auditor.settings import Settings


def test_cgroup_v2_quota_rounds_up(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert quota_cpus(tmp_path) == 2
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    assert quota_cpus(tmp_path) == 1  # half a CPU: still one process
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert quota_cpus(tmp_path) is None


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("400000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert quota_cpus(tmp_path) == 4
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert quota_cpus(tmp_path) is None


def test_no_cgroup_files_no_quota(tmp_path: Path) -> None:
    assert quota_cpus(tmp_path) is None
    assert available_cpus(tmp_path) == len(os.sched_getaffinity(0))


def test_quota_caps_the_affinity_mask(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("100000 100000\n")
    assert available_cpus(tmp_path) == 1
    (tmp_path / "cpu.max").write_text(f"{1000 * 100000} 100000\n")  # more CPUs than the mask allows
    assert available_cpus(tmp_path) == len(os.sched_getaffinity(0))


def test_processes_masters() -> None:
    assert local_processes("processes[3]") == 3
    assert local_processes("processes[*]") == available_cpus()
    assert local_processes("local[2]") is None
    with pytest.raises(ValueError, match="at least one process"):
        local_processes("processes[0]")


def test_budgets_are_shared_so_n_processes_load_no_more_than_one() -> None:
    s = Settings(
        bookie_client={
            "requests_per_second": 1000,
            "start_requests_per_second": 50,
            "min_requests_per_second": 5,
            "max_in_flight": 8,
        },
        zookeeper={"reads_per_second": 2000, "max_concurrent_reads": 64},
    )
    wire = settings_to_wire(s)
    one = settings_from_wire(shared_budget(wire, 3))
    assert one.bookie_client.requests_per_second * 3 == pytest.approx(1000)
    assert one.bookie_client.start_requests_per_second * 3 == pytest.approx(50)
    assert one.bookie_client.min_requests_per_second * 3 == pytest.approx(5)
    assert one.bookie_client.max_in_flight == 2 and one.zookeeper.max_concurrent_reads == 21
    assert one.bookie_client.max_in_flight_cap == 64 // 3  # the adaptive window's cap too
    assert one.zookeeper.reads_per_second * 3 == pytest.approx(2000)
    assert wire["bookie_client"]["max_in_flight"] == 8  # the command's own settings untouched
    many = settings_from_wire(shared_budget(wire, 16))
    assert many.bookie_client.max_in_flight == 1  # never below one request in flight


def test_unlimited_stays_unlimited() -> None:
    s = Settings(bookie_client={"requests_per_second": 0}, zookeeper={"reads_per_second": 0})
    one = settings_from_wire(shared_budget(settings_to_wire(s), 2))
    assert one.bookie_client.requests_per_second == 0 and one.zookeeper.reads_per_second == 0
