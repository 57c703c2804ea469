"""The repair worker's probe endpoints (auditor/repair/health.py) on a real HTTP server: `/healthz` from the
loop's heartbeat, `/readyz` from the ZooKeeper session's state and the stop signal, `/metrics` unchanged.
(tests/realcluster/repair/test_repair_health.py asks a real `bk-auditor repair` the same.)"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

from prometheus_client import CollectorRegistry, Counter

from auditor.repair.health import RepairHealth, serve_with_health


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_probes_answer_from_the_heartbeat_the_session_and_the_stop() -> None:
    now = [100.0]
    state = ["CONNECTED"]
    health = RepairHealth(lambda: state[0], stale_after_s=30, clock=lambda: now[0])
    registry = CollectorRegistry()
    Counter("bk_auditor_repair_probe_test", "a series", registry=registry).inc()
    server = serve_with_health(registry, "127.0.0.1:0", health)
    try:
        port = server.port
        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/readyz") == (200, "ready\n")
        status, text = get(port, "/metrics")
        assert status == 200 and "bk_auditor_repair_probe_test_total 1.0" in text
        # ZooKeeper connection lost: alive (kazoo reconnects), not ready
        state[0] = "SUSPENDED"
        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/readyz") == (503, "zookeeper suspended\n")
        state[0] = "LOST"
        assert get(port, "/readyz") == (503, "zookeeper lost\n")
        state[0] = "CONNECTED"
        assert get(port, "/readyz")[0] == 200
        # the loop stops beating: neither live nor ready, until it beats again
        now[0] += 31
        status, text = get(port, "/healthz")
        assert status == 503 and "event loop silent for 31s" in text
        assert get(port, "/readyz")[0] == 503
        health.beat()
        assert get(port, "/healthz")[0] == 200
        # SIGTERM: not ready from then on, still live while it releases its lock
        health.stopping()
        assert get(port, "/readyz") == (503, "stopping\n")
        assert get(port, "/healthz")[0] == 200
    finally:
        server.close()


async def test_the_heartbeat_runs_on_the_loop_until_cancelled() -> None:
    now = [0.0]
    health = RepairHealth(lambda: "CONNECTED", stale_after_s=5, clock=lambda: now[0])
    now[0] = 10.0
    assert health.liveness() is not None  # not beaten since it was made at 0
    cancel = health.start_beating()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert health.liveness() is None and health.readiness() is None
    cancel()
    await asyncio.sleep(0)
    now[0] = 20.0
    assert health.liveness() is not None  # cancelled: no beat since 10
