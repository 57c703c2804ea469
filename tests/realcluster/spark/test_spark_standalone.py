"""The sweep on a real Spark standalone cluster (a master and two workers from the pyspark distribution,
on loopback), not only `local[*]`: it covers every ledger exactly once and agrees with the one-shot
checks ledger for ledger (issue 12, "beyond one machine, on a real engine")."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.spark.session import get_session
from auditor.spark.sweep import SweepOptions, SweepResult, run_sweep
from devcluster import ports
from devcluster.checks_util import settings_for
from devcluster.cluster import Cluster
from devcluster.cluster.sparkstandalone import SparkStandalone
from tests.realcluster.spark_util import (
    CHECKS,
    assert_agrees_with_one_shot,
    assert_covers_every_ledger_once,
    planted_ledgers,
)

pytestmark = pytest.mark.realcluster


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    spark = SparkStandalone(
        Path(tmp_path_factory.mktemp("spark-standalone")),
        master_port=ports.SPARK_MASTER_PORT,
        ui_port=ports.SPARK_MASTER_UI_PORT,
        worker_ports=ports.SPARK_WORKER_PORTS,
    ).start()
    try:
        yield spark
    finally:
        spark.stop()


@pytest.fixture(scope="module")
def swept(cluster: Cluster, standalone: SparkStandalone) -> Iterator[tuple[SweepResult, Any]]:
    planted = planted_ledgers(cluster)
    session, created = get_session(
        standalone.master_url,
        {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": "512m",
            "spark.pyspark.python": sys.executable,
        },
    )
    assert created, "another SparkSession is still active in this process"
    try:
        result = run_sweep(
            session, settings_for(cluster), SweepOptions(checks=CHECKS, partitions=4, trace_ledgers=True)
        )
        executors = session.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
        yield result, {"planted": planted, "executors": executors}
    finally:
        session.stop()


def test_sweep_on_a_standalone_cluster_covers_every_ledger_once(
    cluster: Cluster, standalone: SparkStandalone, swept: tuple[SweepResult, Any]
) -> None:
    result, info = swept
    assert result.master == standalone.master_url and result.failed == []
    assert info["executors"] == 2  # one per worker: the partitions ran in other JVMs and Pythons
    assert len(result.plan.partitions) >= 2
    assert_covers_every_ledger_once(cluster, result, info["planted"])


def test_sweep_on_a_standalone_cluster_agrees_with_the_one_shot_checks(
    cluster: Cluster, swept: tuple[SweepResult, Any]
) -> None:
    result, info = swept
    assert_agrees_with_one_shot(cluster, result, info["planted"])
    assert result.exit_code == 1  # the planted fault
