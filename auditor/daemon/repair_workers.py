"""Repair workers beside the auditor (`repair.workers_beside_auditor`): `bk-auditor repair` processes the
daemon starts, keeps running and stops with itself.

Processes, not tasks, on purpose: the write path (the repair gate, its writer, its add messages) never
enters the auditor's process (the `repair-writes-apart` contract), and a worker busy copying cannot
delay the leader's loop, its election or its health answers. Each worker is one supervised task
(`Supervisor.keep`, named `repair-worker-<i>`): a worker that exits is logged, counted and started again
after the supervisor's backoff; cancelling the task (the daemon stopping) sends SIGTERM, so the worker
releases a held lock, and SIGKILL only if it has not exited `STOP_GRACE_S` later. Its stdin is a pipe
from the daemon: if the daemon dies without stopping it (SIGKILL, OOM), the worker sees end of file
and stops too, so no worker outlives its pod's auditor.

A worker gets the daemon's settings: the same config file and `BKAUDIT_*` environment, plus what the
daemon took from its command line (`worker_environment`), its own identity `<identity>-repair-<i>` (the
holder written in Java's lock), and worker i's metrics on `repair.worker_metrics_bind` port + i, or none.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sys
from collections.abc import Mapping

from auditor.errors import AuditorError
from auditor.logging import get_logger
from auditor.settings import ENV_PREFIX, Settings
from auditor.settings.load import ENV_CONFIG_FILE
from auditor.settings.values import parse_bind

from .supervisor import Supervisor

log = get_logger("auditor.daemon.repair")

STOP_GRACE_S = 20.0  # SIGTERM to SIGKILL: a worker releases its lock and finishes its current add first


class RepairWorkerExited(AuditorError):
    """A worker process ended while the daemon runs: the supervisor starts it again after its backoff."""


def worker_identity(settings: Settings, index: int) -> str:
    return f"{settings.election.identity}-repair-{index}"


def worker_metrics_bind(settings: Settings, index: int) -> str | None:
    """Worker `index`'s metrics address: `repair.worker_metrics_bind` with port + index (port 0 stays 0:
    any free port), or None when not set."""
    bind = settings.repair.worker_metrics_bind
    if bind is None:
        return None
    host, port = parse_bind(bind)
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port + index if port else 0}"


def worker_environment(settings: Settings, index: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The worker's environment: the daemon's, with the values a command-line flag may have set written
    out (environment variables beat the config file, and these are the values the daemon runs with)."""
    env = dict(os.environ if base is None else base)
    if settings.config_file is not None:
        env[ENV_CONFIG_FILE] = str(settings.config_file)
    if settings.metadata_service_uri is not None:
        env[f"{ENV_PREFIX}METADATA_SERVICE_URI"] = settings.metadata_service_uri
    env[f"{ENV_PREFIX}ELECTION__IDENTITY"] = worker_identity(settings, index)
    env[f"{ENV_PREFIX}LOG__LEVEL"] = settings.log.level
    env[f"{ENV_PREFIX}LOG__FORMAT"] = settings.log.format
    env[f"{ENV_PREFIX}EVENT_LOOP"] = settings.event_loop
    bind = worker_metrics_bind(settings, index)
    env[f"{ENV_PREFIX}METRICS__ENABLED"] = "true" if bind is not None else "false"
    if bind is not None:
        env[f"{ENV_PREFIX}METRICS__BIND"] = bind
    return env


def worker_command() -> list[str]:
    """`bk-auditor repair` with this interpreter, stopping when its stdin (the daemon's pipe) closes."""
    return [sys.executable, "-m", "auditor.cli", "repair", "--stop-with-parent"]


class RepairWorkers:
    """`settings.repair.workers_beside_auditor` worker processes, each kept by `supervisor`."""

    def __init__(self, settings: Settings, supervisor: Supervisor) -> None:
        self.settings = settings
        self.supervisor = supervisor
        self.pids: dict[int, int] = {}  # worker index -> pid of its running process

    def start(self) -> None:
        for i in range(self.settings.repair.workers_beside_auditor):
            self.supervisor.keep(f"repair-worker-{i}", functools.partial(self._run, i))

    async def _run(self, index: int) -> None:
        proc = await asyncio.create_subprocess_exec(
            *worker_command(),
            stdin=asyncio.subprocess.PIPE,
            env=worker_environment(self.settings, index),
            start_new_session=True,  # a terminal's Ctrl-C stops the daemon, which stops its workers
        )
        self.pids[index] = proc.pid
        log.info(
            "repair worker started",
            worker=index,
            pid=proc.pid,
            holder=f"bk-auditor@{worker_identity(self.settings, index)}",
            metrics=worker_metrics_bind(self.settings, index),
        )
        try:
            code = await proc.wait()
        except asyncio.CancelledError:
            await asyncio.shield(_stop(proc))
            raise
        finally:
            self.pids.pop(index, None)
        raise RepairWorkerExited(f"repair worker {index} (pid {proc.pid}) exited with code {code}")


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM, then SIGKILL after the grace; only this process, which we started."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
        except TimeoutError:
            log.warning("repair worker did not stop in time: killed", pid=proc.pid, graceSeconds=STOP_GRACE_S)
            proc.kill()
            await proc.wait()
    if proc.stdin is not None:
        proc.stdin.close()
    log.info("repair worker stopped", pid=proc.pid, code=proc.returncode)
