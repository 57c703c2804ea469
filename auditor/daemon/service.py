"""`bk-auditor run`: the long-running, leader-elected service, from its settings to its exit code.

`serve` puts one replica together: the in-memory state (state.py), the metrics, the admin API (with the
operator's questions, operator.py), the loop watchdog, the repair workers beside the daemon and, when
`schedule.scan_processes` > 1, the engine that runs the per-ledger checks on worker processes
(`auditor.processes`; never pyspark); then runs the replica (`replica.Auditor`) until SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import functools
import signal

from auditor.admin.server import AdminServer
from auditor.checks.per_ledger import CHECKS as CHECK_CLASSES
from auditor.checks.sharded import ShardedChecks
from auditor.logging import get_logger
from auditor.processes.cpus import available_cpus
from auditor.settings import Settings

from .backend import StateBackend
from .metrics import AuditorMetrics
from .operator import OperatorBackend
from .repair_workers import RepairWorkers
from .replica import Auditor
from .state import DaemonState
from .supervisor import Supervisor
from .watchdog import LoopWatchdog

log = get_logger("auditor.daemon")


def daemon_metrics(settings: Settings) -> AuditorMetrics:
    """The daemon's metrics: every check's series, the process collectors, `cluster` from the settings."""
    metrics = AuditorMetrics(
        cluster=settings.metrics_cluster,
        checks=list(CHECK_CLASSES),
        process_metrics=True,
        namespace_limit=settings.metrics.namespace_limit,
    )
    metrics.set_info(version=__import__("auditor").__version__, identity=settings.election.identity)
    return metrics


def scan_engine(settings: Settings) -> tuple[ShardedChecks | None, int]:
    """The engine that runs the per-ledger checks on worker processes, and how many: `schedule.scan_processes`,
    at most the CPUs this process may use; no engine (None) when that is one (they run in this process)."""
    processes = min(settings.schedule.scan_processes, available_cpus())
    if processes <= 1:
        return None, processes
    # Imported only when used: the engine (multiprocessing, its fork server) stays out of a daemon that
    # scans in its own process.
    from auditor.processes.engine import check_on_processes

    engine = functools.partial(
        check_on_processes, settings, processes, max_ledgers=settings.schedule.scan_partition_ledgers
    )
    return engine, processes


async def serve(settings: Settings) -> int:
    """Run until SIGTERM/SIGINT; exit 0 after releasing the election node."""
    sharded, scan_processes = scan_engine(settings)
    state = DaemonState(settings.election.identity)
    metrics = daemon_metrics(settings)
    assert state.leadership is not None
    metrics.follow_leadership(state.leadership)
    server = metrics.serve(settings.metrics.bind) if settings.metrics.enabled else None
    background = Supervisor(metrics=metrics)  # this process's own tasks (the leader's have their own)
    auditor = Auditor(settings, state, metrics, sharded, scan_processes)
    questions = OperatorBackend(
        lambda: auditor.ctx,
        election_path=settings.election_path,
        timeout=settings.admin.question_timeout_seconds,
        leader_guard=auditor.leader_guard,
    )
    # ExplainLedger reads bookies: bounded with the operator's questions (one at a time, question_timeout).
    backend = StateBackend(
        state,
        trigger=auditor.trigger,
        explain=questions.explain,
        set_pause=auditor.set_pause,
        recheck=auditor.recheck,
    )
    admin = AdminServer(
        backend,
        settings.admin.bind,
        tls_cert=settings.admin.tls_cert,
        tls_key=settings.admin.tls_key,
        tls_client_ca=settings.admin.tls_client_ca,
        authorized_clients=settings.admin.authorized_clients,
        unauthenticated_reads=settings.admin.unauthenticated_reads,
        probe_bind=settings.admin.probe_bind,
        spawn=background.fire,
        questions=questions,
        tls_reloaded=metrics.admin_tls_reloaded,
        max_concurrent_calls=settings.admin.max_concurrent_calls,
    )
    port = await admin.start()
    admin.follow_leadership(state.leadership)
    watchdog = LoopWatchdog(
        state.leadership,
        auditor.confirm_leadership,
        background.fire,
        session_timeout=settings.zookeeper.session_timeout_seconds,
    )
    background.keep("watchdog", watchdog.run)
    background.keep("metrics-sync", lambda: _sync_metrics(metrics, state))
    RepairWorkers(settings, background).start()  # repair.workers_beside_auditor processes, 0 by default
    await admin.set_health(live=True, ready=False, leader=False)
    log.info(
        "bk-auditor started",
        identity=settings.election.identity,
        adminPort=port,
        adminTls="mutual" if settings.admin.tls_client_ca else ("server" if settings.admin.tls_cert else "off"),
        probePort=admin.probe_port,
        metrics=settings.metrics.bind if server else None,
        cluster=settings.metrics_cluster,
        election=settings.election_path,
        repairWorkers=settings.repair.workers_beside_auditor,
        scanProcesses=scan_processes if sharded is not None else 1,
    )
    if scan_processes < settings.schedule.scan_processes:
        log.warning(
            "schedule.scan_processes is more than the CPUs this process may use: using fewer",
            configured=settings.schedule.scan_processes,
            using=scan_processes,
        )
    if settings.admin.tls_cert is not None and settings.admin.tls_client_ca is None:
        log.warning(
            "admin API: TLS without admin.tls_client_ca: no client can authenticate, so pause, resume and "
            "trigger are refused"
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = asyncio.ensure_future(auditor.run(stop, admin))
    await stop.wait()
    log.warning("stopping: health NOT_SERVING, checks stopped")
    await admin.set_health(live=False, ready=False, leader=False)
    try:
        await asyncio.wait_for(runner, timeout=10)
    except (TimeoutError, asyncio.CancelledError):
        runner.cancel()
    await background.close()
    await admin.stop(grace=1.0)
    if server is not None:
        server.close()
    return 2 if auditor.fatal else 0


async def _sync_metrics(metrics: AuditorMetrics, state: DaemonState) -> None:
    while True:
        metrics.sync_state(state)
        await asyncio.sleep(5)
