"""Start and stop a real `bk-auditor agent` process beside bookie N of a test cluster (loopback ports from
devcluster/ports.py), and snapshot a bookie's files to prove the agent left them as they were."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from devcluster import ports
from devcluster.cluster import Cluster

BIN = Path(sys.executable).with_name("bk-auditor")


@dataclass
class AgentProc:
    bookie: int
    port: int
    metrics_port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def running(self) -> bool:
        return self.proc.poll() is None


def start_agent(
    cluster: Cluster,
    n: int,
    workdir: Path,
    *,
    token_file: Path | None = None,
    insecure: bool = False,
    ledger_dirs: Sequence[Path] | None = None,
    extra: Sequence[str] = (),
    port: int | None = None,
    timeout: float = 30.0,
) -> AgentProc:
    """An agent for bookie `n` (its bk_server.conf, or `ledger_dirs` for a copy of them), listening on
    127.0.0.1:AGENT_PORT_BASE + n; returns once it accepts connections."""
    port = port or ports.AGENT_PORT_BASE + n
    metrics_port = port + 10  # bookie N's agent: AGENT_PORT_BASE + 10 + N
    scratch = workdir / f"agent-{n}-{port}"
    scratch.mkdir(parents=True, exist_ok=True)
    where = (
        ["--ledger-dirs", ",".join(str(d) for d in ledger_dirs)]
        if ledger_dirs is not None
        else ["--bookie-conf", str(cluster.bookie(n).conf_path)]
    )
    argv = [
        str(BIN),
        "agent",
        *where,
        "--listen",
        f"127.0.0.1:{port}",
        "--metrics-listen",
        f"127.0.0.1:{metrics_port}",
        "--scratch-dir",
        str(scratch / "scratch"),
        *(["--token-file", str(token_file)] if token_file is not None else []),
        *(["--insecure"] if insecure else []),
        *extra,
    ]
    log = scratch / "agent.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    agent = AgentProc(n, port, metrics_port, proc, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not agent.running:
            raise RuntimeError(f"agent for bookie {n} exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return agent
        except OSError:
            time.sleep(0.1)
    stop_agent(agent)
    raise RuntimeError(f"agent for bookie {n} did not listen on {port} within {timeout}s: {log.read_text()[-2000:]}")


def stop_agent(agent: AgentProc, timeout: float = 10.0) -> int | None:
    """SIGTERM the agent (by its pid), then SIGKILL after `timeout`; its exit code."""
    if agent.running:
        os.kill(agent.proc.pid, signal.SIGTERM)
        try:
            agent.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(agent.proc.pid, signal.SIGKILL)
            agent.proc.wait(5)
    return agent.proc.returncode


def files_state(roots: Sequence[Path]) -> dict[str, tuple[int, int, str]]:
    """Every file under `roots`: (mtime ns, size, sha256), for a before/after comparison."""
    out: dict[str, tuple[int, int, str]] = {}
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for name in names:
                path = Path(dirpath) / name
                try:
                    st = path.lstat()
                    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "link"
                except FileNotFoundError:
                    continue  # removed by the bookie while we walked
                out[str(path)] = (st.st_mtime_ns, st.st_size, digest)
    return out
