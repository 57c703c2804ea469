"""What a repair worker started beside the auditor runs with: the daemon's settings as the daemon runs
with them (flags included), its own identity and metrics address; and that `bk-auditor repair` started
that way reads them back as such."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from auditor.daemon.repair_workers import worker_command, worker_environment, worker_metrics_bind
from auditor.settings import Settings, load_settings


def daemon_settings(tmp_path: Path, **repair: object) -> Settings:
    cfg = tmp_path / "auditor.yaml"
    cfg.write_text("zookeeper:\n  session_timeout_seconds: 7\nrepair:\n  ledgers_in_parallel: 3\n")
    return load_settings(
        cfg,
        overrides={
            "metadata_service_uri": "zk+hierarchical://127.0.0.1:2181/ledgers",  # as from --metadata-service-uri
            "election": {"identity": "auditor-0"},  # as from --identity
            "log": {"level": "debug"},  # as from --log-level
            "repair": repair,
        },
    )


def test_the_worker_reads_the_daemons_settings_back_with_its_own_identity_and_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = daemon_settings(tmp_path, workers_beside_auditor=2, worker_metrics_bind="127.0.0.1:9300")
    env = worker_environment(daemon, 1, base={"PATH": "/usr/bin", "BKAUDIT_METRICS__BIND": "0.0.0.0:1"})
    for key in list(os.environ):
        if key.startswith("BKAUDIT_"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    worker = load_settings()
    assert worker.metadata_service_uri == daemon.metadata_service_uri
    assert worker.zookeeper.session_timeout_seconds == 7 and worker.repair.ledgers_in_parallel == 3
    assert worker.election.identity == "auditor-0-repair-1"
    assert worker.log.level == "debug"
    assert (worker.metrics.enabled, worker.metrics.bind) == (True, "127.0.0.1:9301")
    assert env["PATH"] == "/usr/bin"


def test_no_worker_metrics_address_means_none_served(tmp_path: Path) -> None:
    env = worker_environment(daemon_settings(tmp_path, workers_beside_auditor=1), 0, base={})
    assert env["BKAUDIT_METRICS__ENABLED"] == "false" and "BKAUDIT_METRICS__BIND" not in env


@pytest.mark.parametrize(
    ("bind", "index", "expected"),
    [("127.0.0.1:9300", 0, "127.0.0.1:9300"), ("[::1]:9300", 2, "[::1]:9302"), ("0.0.0.0:0", 3, "0.0.0.0:0")],
)
def test_worker_i_serves_on_port_plus_i(tmp_path: Path, bind: str, index: int, expected: str) -> None:
    assert worker_metrics_bind(daemon_settings(tmp_path, worker_metrics_bind=bind), index) == expected


def test_the_worker_stops_with_its_parent() -> None:
    assert worker_command()[-2:] == ["repair", "--stop-with-parent"]
