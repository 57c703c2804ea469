"""Test ports, movable as one block so that several suites (or developers) can share one machine.

`BK_TEST_PORT_SLOT=k` shifts every default port by a fixed stride per slot (and pytest-xdist worker gwN
adds N to it: `pytest -n 2` runs two workers, on slots k and k + 1); the older per-port
variables (`BK_TEST_ZK_PORT`, `BK_TEST_PORT_BASE`, `BK_TEST_HTTP_BASE`, `BK_TEST_DAEMON_PORT_BASE`) still
override single values. Slot 0 keeps the historical ports.
"""

from __future__ import annotations

import os


def _slot() -> int:
    """The slot of this process. A pytest-xdist worker gwN takes slot BK_TEST_PORT_SLOT + N, so each
    worker of `pytest -n N` has its own real cluster; it writes that slot back into its environment, marked
    as resolved, so the processes its tests start (the CLI, bench scripts) use the same ports."""
    slot = int(os.environ.get("BK_TEST_PORT_SLOT", "0"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and not os.environ.get("BK_TEST_PORT_SLOT_RESOLVED"):
        slot += int(worker[2:])
        os.environ["BK_TEST_PORT_SLOT"] = str(slot)
        os.environ["BK_TEST_PORT_SLOT_RESOLVED"] = "1"
    return slot


SLOT = _slot()
_ZK_STRIDE = 20
_STRIDE = 400


def _env(name: str, default: int) -> int:
    return int(os.environ.get(name, str(default)))


ZK_PORT = _env("BK_TEST_ZK_PORT", 21810 + _ZK_STRIDE * SLOT)
BOOKIE_PORT_BASE = _env("BK_TEST_PORT_BASE", 3180 + _STRIDE * SLOT)  # bookie N: BOOKIE_PORT_BASE + N
HTTP_BASE = _env("BK_TEST_HTTP_BASE", 8180 + _STRIDE * SLOT)
DAEMON_PORT_BASE = _env("BK_TEST_DAEMON_PORT_BASE", 17900 + _STRIDE * SLOT)
# A second, one-bookie cluster some tests and benchmarks start beside the session one.
SECOND_ZK_PORT = ZK_PORT + 1
SECOND_PORT_BASE = BOOKIE_PORT_BASE + 100
SECOND_HTTP_BASE = HTTP_BASE + 100
# The chaos campaign's own cluster (bench/chaos.py and its smoke test), beside the session one.
CHAOS_ZK_PORT = ZK_PORT + 2
CHAOS_PORT_BASE = BOOKIE_PORT_BASE + 200
CHAOS_HTTP_BASE = HTTP_BASE + 200
CHAOS_DAEMON_PORT_BASE = DAEMON_PORT_BASE + 200
# The bookie-side index agent beside bookie N (devcluster/agent_util.py): its gRPC port base + N, its
# metrics + 10 + N; between daemon_util's (DAEMON_PORT_BASE + 0..99) and test_admin_tls.py's (+ 150..).
AGENT_PORT_BASE = DAEMON_PORT_BASE + 120
# The demo's five-bookie cluster (`make demo`), beside the session one: bookies base + 11..15.
DEMO_ZK_PORT = ZK_PORT + 3
DEMO_PORT_BASE = BOOKIE_PORT_BASE + 10
DEMO_HTTP_BASE = HTTP_BASE + 10
DEMO_AGENT_PORT_BASE = HTTP_BASE + 40  # the demo bookies' agents: + 41..45, their metrics + 51..55
# The bookie-TLS tests' own cluster (tests/realcluster/security/test_bookie_tls.py), beside the session one.
TLS_ZK_PORT = ZK_PORT + 5
TLS_PORT_BASE = BOOKIE_PORT_BASE + 320
TLS_HTTP_BASE = HTTP_BASE + 320
# Simulated bookies (devcluster/simbookie): those of tests/realcluster/devcluster/test_simbookie.py, bookie N on
# 127.0.0.N:SIM_PORT_BASE + N; bench/memory.py's beside its own ZooKeeper (the second cluster's block).
SIM_PORT_BASE = BOOKIE_PORT_BASE + 340
BENCH_SIM_PORT_BASE = SECOND_PORT_BASE + 80
# Identities (host:port) for Java auditor processes and Java-format votes: nothing listens on them.
JAVA_AUDITOR_PORT = BOOKIE_PORT_BASE + 19
OUR_VOTE_PORT = BOOKIE_PORT_BASE + 18
# A scripted stand-in (TCP proxy) registered for one bookie in hostile-bookie tests: base + k, k < 10.
HOSTILE_PROXY_PORT = BOOKIE_PORT_BASE + 90
# The secured ZooKeepers of tests/realcluster/security/test_zookeeper_{tls,sasl}.py (one module at a time):
# plaintext clientPort and TLS secureClientPort of the TLS one, the SASL one; their one bookie each.
SECURE_ZK_PORT = ZK_PORT + 10
SECURE_ZK_TLS_PORT = ZK_PORT + 11
SASL_ZK_PORT = ZK_PORT + 12
SECURE_PORT_BASE = BOOKIE_PORT_BASE + 330
SECURE_HTTP_BASE = HTTP_BASE + 330
# A Spark standalone master (port, web UI) and two workers (port, its web UI next) for
# tests/realcluster/spark/test_spark_standalone.py.
SPARK_MASTER_PORT = HTTP_BASE + 350
SPARK_MASTER_UI_PORT = HTTP_BASE + 351
SPARK_WORKER_PORTS = (HTTP_BASE + 352, HTTP_BASE + 354)
# bench/sweep_scaling.py's four workers (same master ports: run it on a slot no test session uses).
SPARK_BENCH_WORKER_PORTS = tuple(HTTP_BASE + 352 + 2 * i for i in range(4))

REPAIR_METRICS_PORT = HTTP_BASE + 360  # `bk-auditor repair`'s own metrics endpoint in its tests
REPAIR_WORKER_METRICS_PORT = HTTP_BASE + 362  # worker 0 of `repair.workers_beside_auditor` (worker i: + i)
