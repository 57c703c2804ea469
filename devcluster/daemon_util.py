"""Run real `bk-auditor run` daemons (separate processes) against the test cluster, and talk to them
through their real admin API."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kazoo.exceptions import NoNodeError

from auditor.admin.client import AdminClient, AdminClientError
from devcluster import ports
from devcluster.cluster import Cluster

BIN = Path(sys.executable).with_name("bk-auditor")
_ports = itertools.count(ports.DAEMON_PORT_BASE)
SESSION_TIMEOUT = 4.0  # seconds: our daemons' ZooKeeper session timeout (the server's tickTime is 1 s)


def reset_auditor_state(cluster: Cluster) -> None:
    """Delete our daemons' ZooKeeper state (and the recovery delay they may have set), so that a test
    starts and leaves the cluster fresh."""
    for path in (
        f"{cluster.ledgers_root}/bk-auditor",
        f"{cluster.ledgers_root}/underreplication/lostBookieRecoveryDelay",
    ):
        try:
            cluster.kazoo.delete(path, recursive=True)
        except NoNodeError:
            pass


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


class Daemon:
    def __init__(
        self,
        cluster: Cluster,
        name: str,
        workdir: Path,
        *,
        admin_port: int | None = None,
        metrics_port: int | None = None,
        **settings: Any,
    ) -> None:
        self.cluster = cluster
        self.name = name
        self.admin_port = admin_port if admin_port is not None else next(_ports)
        self.metrics_port = metrics_port if metrics_port is not None else next(_ports)
        base = {
            "metadata_service_uri": cluster.metadata_service_uri,
            "zookeeper": {"session_timeout_seconds": SESSION_TIMEOUT},
            "schedule": {
                "scrutiny_seconds": 3600,
                "ledger_check_seconds": 0,
                "open_ledger_check_seconds": 0,
                "bookie_check_seconds": 3600,
                "references_seconds": 0,  # test_references.py turns it on
            },
            "recheck": {"delays_seconds": [1, 2], "attempts": 2},
            "bookie_client": {"timeout_seconds": 2},
            "admin": {"bind": f"127.0.0.1:{self.admin_port}"},
            "metrics": {"bind": f"127.0.0.1:{self.metrics_port}"},
            "log": {"level": "info", "format": "json"},
        }
        self.config = _merge(base, settings)
        # AdminClient keyword arguments (tls_ca, tls_cert, tls_key) for a daemon whose admin API uses TLS
        self.client_tls: dict[str, Any] = {}
        self.workdir = workdir
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Daemon:
        cfg = self.workdir / f"{self.name}.yaml"
        cfg.write_text(yaml.safe_dump(self.config))
        out = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(BIN), "run", "--config", str(cfg), "--identity", self.name],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> tuple[int, float]:
        """SIGTERM; returns (exit code, seconds to exit)."""
        assert self.proc is not None
        start = time.monotonic()
        if self.running:
            os.kill(self.pid, signal.SIGCONT)
            os.kill(self.pid, signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            rc = self.proc.wait(10)
        return rc, time.monotonic() - start

    def kill(self) -> None:
        if self.running:
            os.kill(self.pid, signal.SIGKILL)
            assert self.proc is not None
            self.proc.wait(10)

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    # ------------------------------------------------------------------ admin API
    def _call(self, fn: str, *args: Any, admin_timeout: float = 5, **kw: Any) -> Any:
        async def go() -> Any:
            async with AdminClient(f"127.0.0.1:{self.admin_port}", timeout=admin_timeout, **self.client_tls) as c:
                return await getattr(c, fn)(*args, **kw)

        return asyncio.run(go())

    def status(self) -> Any:
        return self._call("status")

    def health(self, service: str) -> str:
        try:
            return self._call("health", service)
        except AdminClientError:
            return "UNREACHABLE"

    def findings(self, **kw: Any) -> Any:
        return self._call("findings", **kw)

    def is_leader(self) -> bool:
        try:
            return bool(self.status().leader)
        except AdminClientError:
            return False

    def wait(self, predicate: Any, timeout: float, what: str) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if not self.running:
                raise AssertionError(f"daemon {self.name} exited while waiting for {what}:\n{self.tail()}")
            try:
                if predicate():
                    return time.monotonic() - start
            except AdminClientError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"daemon {self.name}: {what} not within {timeout}s:\n{self.tail()}")

    def metric(self, name: str, **labels: str) -> float | None:
        """One sample from the daemon's /metrics (None when the series does not exist); `labels` are
        matched exactly, except `bookkeeper_cluster`, which every series has."""
        for sample in self.samples():
            if sample.name == name and {k: v for k, v in sample.labels.items() if k != "bookkeeper_cluster"} == labels:
                return float(sample.value)
        return None

    def samples(self) -> list[Any]:
        """Every sample of the daemon's /metrics, as prometheus_client's parser reads them."""
        import urllib.request

        from prometheus_client.parser import text_string_to_metric_families

        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
        return [sample for fam in text_string_to_metric_families(text) for sample in fam.samples]

    def task(self, name: str) -> Any:
        """The admin API status of one task (TaskStatus)."""
        return next(t for t in self.status().tasks if t.name == name)

    def logs(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def tail(self, n: int = 25) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
