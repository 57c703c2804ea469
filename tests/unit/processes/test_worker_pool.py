"""The worker processes of `check --processes N`, the daemon's scans and `sweep --master processes[N]`:
forked by a fork server that imported the partitions' code once, and never outliving their owner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from auditor.processes import engine as processes
from auditor.processes.engine import PRELOAD, new_pool

ROOT = Path(__file__).resolve().parents[3]


def worker_facts() -> dict[str, object]:
    """Run in a worker (pickled by name)."""
    return {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "preloaded": [m for m in PRELOAD if m in sys.modules],
        "grpc": "grpc" in sys.modules,
    }


def test_workers_come_from_a_fork_server_with_the_code_imported_and_no_grpc() -> None:
    with new_pool(2) as pool:
        facts = [pool.submit(worker_facts).result(timeout=60) for _ in range(2)]
    for f in facts:
        assert f["ppid"] != os.getpid()  # forked by the fork server, not by us
        assert f["preloaded"] == PRELOAD
        # gRPC is never carried across a fork (docs/spark.md): the fork server is a fresh interpreter
        # that does not import it, even when its owner serves gRPC.
        assert f["grpc"] is False


OWNER = """
import json, sys, time
sys.path.insert(0, {root!r})
from tests.unit.processes.test_worker_pool import worker_facts
from auditor.processes.engine import new_pool

pool = new_pool(2)
pids = sorted({{pool.submit(worker_facts).result(timeout=60)["pid"] for _ in range(8)}})
print(json.dumps(pids), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_workers_end_soon_after_their_owner_is_killed() -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert owner.stdout is not None
        workers = json.loads(owner.stdout.readline())
        assert workers and all(_alive(p) for p in workers)
        owner.send_signal(signal.SIGKILL)  # no clean-up of its own: the workers must see it themselves
        owner.wait(10)
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p in workers if _alive(p)] == []
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(10)


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polled"])
def test_waiting_for_a_process_returns_once_it_has_ended(monkeypatch: pytest.MonkeyPatch, pidfd: bool) -> None:
    if not pidfd:  # a kernel or OS without pidfd_open: the number is polled
        monkeypatch.delattr(os, "pidfd_open", raising=False)
        monkeypatch.setattr(processes, "OWNER_POLL_SECONDS", 0.05)
    child = subprocess.Popen(["sleep", "0.5"])
    waiter = threading.Thread(target=processes._wait_for_end, args=(child.pid,), daemon=True)
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()  # still running: still waiting
    child.wait(10)  # ended and reaped
    waiter.join(5)
    assert not waiter.is_alive()
    started = time.monotonic()
    processes._wait_for_end(child.pid)  # already gone: at once
    assert time.monotonic() - started < 1
