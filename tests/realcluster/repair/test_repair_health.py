"""The probes of a real `bk-auditor repair` (auditor/repair/health.py, the chart's repair Deployment): live and
ready on the real cluster; not ready, still live, while its ZooKeeper link is cut; ready again once the
link is back, the same process (the worker rides out the outage); and the endpoint gone after SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from devcluster.chaos.proxy import LinkProxy
from devcluster.cli_util import BIN, log_lines
from devcluster.cluster import Cluster
from devcluster.ports import REPAIR_METRICS_PORT, ZK_PORT

pytestmark = pytest.mark.realcluster

# ZooKeeper listens on 127.0.0.1 only, so a proxy can take the same port on another loopback address.
PROXY_HOST = "127.0.0.29"


def probe(path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{REPAIR_METRICS_PORT}{path}", timeout=5) as r:
            return r.status, r.read().decode().strip()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode().strip()
    except OSError as e:  # not listening (yet, or any more)
        return 0, str(e)


def tail(log: Path) -> str:
    return log.read_text()[-3000:]


async def until(path: str, want: int, proc: asyncio.subprocess.Process, log: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while True:
        status, text = await asyncio.to_thread(probe, path)
        if status == want:
            return text
        assert proc.returncode is None, tail(log)
        assert time.monotonic() < deadline, f"{path}: {status} {text}, wanted {want}\n{tail(log)}"
        await asyncio.sleep(0.2)


async def test_repair_worker_probes_follow_its_zookeeper_session(cluster: Cluster, tmp_path: Path) -> None:
    proxy = LinkProxy(PROXY_HOST, "127.0.0.1", ZK_PORT).start()
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    env["BKAUDIT_METRICS__BIND"] = f"127.0.0.1:{REPAIR_METRICS_PORT}"
    uri = f"zk+hierarchical://{PROXY_HOST}:{ZK_PORT}{cluster.ledgers_root}"
    log = tmp_path / "repair.log"
    with log.open("w") as err:
        proc = await asyncio.create_subprocess_exec(
            str(BIN),
            *("repair", "--metadata-service-uri", uri, "--log-format", "json"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=err,
            stdin=asyncio.subprocess.DEVNULL,
            env=env,
        )
        try:
            assert await until("/readyz", 200, proc, log) == "ready"
            assert probe("/healthz") == (200, "ok")
            assert "bk_auditor_repair_queue_ledgers" in probe("/metrics")[1]
            proxy.stop()  # the session's connection is cut and cannot be made again
            reason = await until("/readyz", 503, proc, log, timeout=30)
            assert reason.startswith("zookeeper "), reason
            assert probe("/healthz") == (200, "ok")  # the loop still turns: no restart wanted
            proxy = LinkProxy(PROXY_HOST, "127.0.0.1", ZK_PORT).start()
            assert await until("/readyz", 200, proc, log, timeout=60) == "ready"
            proc.send_signal(signal.SIGTERM)
            rc = await asyncio.wait_for(proc.wait(), 30)
        finally:
            proxy.stop()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    events = [ln["event"] for ln in log_lines(log.read_text())]
    assert rc == 0 and "repair worker stopped" in events, log.read_text()[-3000:]
    assert probe("/healthz")[0] == 0  # the endpoint closed with the worker
