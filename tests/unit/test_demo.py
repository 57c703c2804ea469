"""`make demo` (devcluster/demo.py) without its cluster: the daemon it starts is configured as the demo
says (one repair worker beside it, the ledger check marking, a lost bookie waited for, the scrub left to
the one-shot command), in settings the real loader accepts, on ports no other part of the demo uses. The
whole demo runs against real bookies as `make demo` (3 to 5 minutes on 2 cores)."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest
import yaml

from auditor.settings import Settings, load_settings
from devcluster import demo, ports

BOOKIES = range(1, 6)


def demo_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in [k for k in os.environ if k.upper().startswith("BKAUDIT_")]:
        monkeypatch.delenv(name)
    token = tmp_path / "agent.token"
    token.write_text("a-token-for-the-demo-settings-test\n")
    token.chmod(0o600)
    addresses = {
        f"127.0.0.{n}:{ports.DEMO_PORT_BASE + n}": f"127.0.0.1:{ports.DEMO_AGENT_PORT_BASE + n}" for n in BOOKIES
    }
    # The daemon's configuration needs only the cluster's URI, nothing that runs.
    cluster = types.SimpleNamespace(metadata_service_uri=f"zk+hierarchical://127.0.0.1:{ports.DEMO_ZK_PORT}/ledgers")
    daemon = demo.demo_daemon(cluster, tmp_path, token, addresses)
    path = tmp_path / "demo-daemon.yaml"
    path.write_text(yaml.safe_dump(daemon.config))
    return load_settings(path)


def test_the_demo_daemon_runs_one_repair_worker_and_marks_what_its_ledger_check_confirms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = demo_settings(tmp_path, monkeypatch)
    assert s.repair.workers_beside_auditor == 1
    assert s.ledger_check.mark_under_replicated is True
    # Bookie 2's few seconds away are not a loss yet: its new cookie is what the daemon reacts to.
    assert s.schedule.lost_bookie_delay_seconds >= 30
    assert s.scrub.enabled is False
    assert s.schedule.ledger_check_seconds > 0  # `trigger ledger` needs the check scheduled
    assert s.agent.token_file == tmp_path / "agent.token"


def test_the_demo_daemon_has_ports_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = demo_settings(tmp_path, monkeypatch)
    daemon_ports = {
        int(s.admin.bind.rsplit(":", 1)[1]),
        int(s.metrics.bind.rsplit(":", 1)[1]),
        int(str(s.repair.worker_metrics_bind).rsplit(":", 1)[1]),
    }
    assert daemon_ports == {demo.DEMO_ADMIN_PORT, demo.DEMO_METRICS_PORT, demo.DEMO_WORKER_METRICS_PORT}
    others = {ports.DEMO_ZK_PORT}
    for n in BOOKIES:  # bookies, their HTTP admin, the agents and the agents' metrics
        others |= {ports.DEMO_PORT_BASE + n, ports.DEMO_HTTP_BASE + n}
        others |= {ports.DEMO_AGENT_PORT_BASE + n, ports.DEMO_AGENT_PORT_BASE + 10 + n}
    others |= {ports.REPAIR_METRICS_PORT, ports.REPAIR_WORKER_METRICS_PORT, ports.SPARK_MASTER_PORT}
    assert not daemon_ports & others
