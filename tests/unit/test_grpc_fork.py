"""A process that has used gRPC can still start children the way pyspark starts its JVM.

grpcio >= 1.81 with its C core's fork support on restarts a poller thread in the forked child; a child that
closes inherited descriptors before exec (subprocess with preexec_fn) then dies before exec
(grpc/grpc#43055). Measured here before the fix: 8 of 200 such children died, and a real-cluster Spark
suite failed with JAVA_GATEWAY_EXITED. Each run is a fresh interpreter, as the setting is read at import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILDREN = 300

SCRIPT = f"""
import json, os, signal, subprocess
from concurrent import futures

import auditor  # first, as every entry point of ours is
import grpc

server = grpc.server(futures.ThreadPoolExecutor(2))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
channel = grpc.insecure_channel(f"127.0.0.1:{{port}}")
grpc.channel_ready_future(channel).result(timeout=10)

def ignore_sigint() -> None:  # what pyspark's launch_gateway passes
    signal.signal(signal.SIGINT, signal.SIG_IGN)

died = 0
for _ in range({CHILDREN}):
    child = subprocess.Popen(["true"], preexec_fn=ignore_sigint, stdin=subprocess.PIPE)
    child.stdin.close()
    died += child.wait() != 0
channel.close()
server.stop(None)
print(json.dumps({{"died": died, "setting": os.environ.get("GRPC_ENABLE_FORK_SUPPORT")}}))
"""


def run(env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_children_of_a_grpc_process_reach_exec() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    assert run(env) == {"died": 0, "setting": "false"}


def test_an_operator_setting_is_kept() -> None:
    env = {**os.environ, "GRPC_ENABLE_FORK_SUPPORT": "0"}
    assert run(env) == {"died": 0, "setting": "0"}
