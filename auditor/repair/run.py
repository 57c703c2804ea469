"""`bk-auditor repair`: the repair worker from the settings, until interrupted or (`once`) over what is
marked now. Exit codes: 0 every ledger taken was repaired, 1 some ledger was blocked or not taken, 2 a
configuration or connection error (one line on stderr)."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Callable
from typing import TextIO

from auditor.aio import spawn
from auditor.aio.stall import StallFence
from auditor.checks.build import audit_context, bookie_config
from auditor.durability.model import DigestType
from auditor.durability.repairplan import Backoff
from auditor.errors import ConfigError, error_line
from auditor.logging import get_logger
from auditor.metadata.repair.lock import RepairLocks
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.settings import Settings

from .attempt import RepairOptions, Status
from .copy import CopyLimits
from .health import RepairHealth, serve_with_health
from .metrics import RepairMetrics
from .worker import RepairWorker

log = get_logger("auditor.repair")

_DIGESTS = {"CRC32": DigestType.CRC32, "MAC": DigestType.HMAC, "CRC32C": DigestType.CRC32C, "DUMMY": DigestType.DUMMY}


def repair_options(settings: Settings) -> RepairOptions:
    r = settings.repair
    return RepairOptions(
        recovery_password=r.recovery_password.encode("utf-8"),
        recovery_digest=_DIGESTS[r.recovery_digest_type],
        best_effort_placement=r.best_effort_placement,
        bytes_per_second=r.bytes_per_second,
        copy_limits=CopyLimits(max_in_flight=r.entries_in_flight),
        backoff=Backoff(cap_s=r.backoff_cap_seconds),
        newest_first=r.newest_first,
        ledgers_in_parallel=r.ledgers_in_parallel,
        entries_in_flight_per_bookie=r.entries_in_flight_per_bookie,
        recover_open_ledgers=r.recover_open_ledgers,
        open_ledger_grace_s=r.open_ledger_grace_seconds,
        read_unlistable_copies=r.read_unlistable_copies,
    )


def _on_end_of_stdin(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> None:
    """Call `stop` in the loop once stdin reaches end of file: started by the daemon
    (`repair.workers_beside_auditor`), stdin is its pipe, closed when it dies however it dies."""

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass  # closed or unreadable: the parent is gone just the same
        loop.call_soon_threadsafe(stop)

    threading.Thread(target=watch, name="stop-with-parent", daemon=True).start()


async def _until_stopped(
    worker: RepairWorker, poll_s: float, *, stop_with_parent: bool = False, health: RepairHealth | None = None
) -> int:
    """Run the loop until SIGTERM (Kubernetes stopping the pod), SIGINT or, with `stop_with_parent`, the
    end of stdin: each cancels it, and the worker releases a held lock on the way out, so another worker
    can take the ledger at once instead of after our ZooKeeper session expires. From the signal on,
    `health` says the worker is not ready (stopping)."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    terminated = asyncio.Event()

    def on_sigterm() -> None:
        if not terminated.is_set():
            terminated.set()
            if health is not None:
                health.stopping()
            task.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    if stop_with_parent:
        _on_end_of_stdin(loop, on_sigterm)
    log.info("repair worker started", holder=worker.locks.holder)
    try:
        await worker.run(poll_s)
    except asyncio.CancelledError:
        log.info("repair worker stopped")
        if not terminated.is_set():
            raise  # SIGINT (asyncio.run turns it into KeyboardInterrupt) or a caller's cancel
        task.uncancel()  # our own SIGTERM: a clean stop
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
    return 0


def repair_settings(settings: Settings) -> Settings:
    """The settings the repair role runs with: its bookie clients paced by `repair.requests_per_second`
    (its own budget), not by the auditor's `bookie_client.requests_per_second`."""
    # A fixed budget: the adaptive rate paces checks; a repair runs at the rate its operator set.
    paced = settings.bookie_client.model_copy(
        update={"requests_per_second": settings.repair.requests_per_second, "adaptive_rate": False}
    )
    return settings.model_copy(update={"bookie_client": paced})


async def main(settings: Settings, *, once: bool, stop_with_parent: bool = False, err: TextIO | None = None) -> int:
    err = err or sys.stderr
    settings = repair_settings(settings)
    try:
        async with audit_context(settings) as (ctx, locations):
            if not isinstance(ctx.store, ZooKeeperMetadataStore):
                raise ConfigError("repair needs a ZooKeeper metadata store")
            # A worker frozen past its session timeout (SIGSTOP, a paused VM) sends no recovery add
            # until ZooKeeper has confirmed its session again (auditor/aio/stall.py).
            fence = StallFence.for_session(settings.zookeeper.session_timeout_seconds)
            locks = RepairLocks(ctx.store, f"bk-auditor@{settings.election.identity}", fence=fence)
            checks: set[asyncio.Task[None]] = set()
            fencing = spawn(
                fence.run(lambda epoch: spawn(locks.reconfirm(epoch), name="repair session check", keep=checks)),
                name="repair stall fence",
            )
            try:
                metrics = RepairMetrics(cluster=settings.metrics_cluster)
                worker = RepairWorker(
                    ctx,
                    locks,
                    repair_options(settings),
                    locations=locations,
                    bookie_config=bookie_config(settings),
                    recovery_delay_s=int(settings.schedule.lost_bookie_delay_seconds),
                    metrics=metrics,
                )
                if not once:
                    # The probes' answers beside the metrics (health.py): live while this loop turns, ready
                    # while the ZooKeeper session is connected and the worker is not stopping.
                    store = ctx.store
                    health = RepairHealth(lambda: store.state)
                    stop_beating = health.start_beating()
                    server = None
                    if settings.metrics.enabled:
                        server = serve_with_health(metrics.registry, settings.metrics.bind, health)
                        log.info("repair metrics and health served", metrics=settings.metrics.bind)
                    try:
                        return await _until_stopped(
                            worker, settings.repair.poll_seconds, stop_with_parent=stop_with_parent, health=health
                        )
                    finally:
                        stop_beating()
                        if server is not None:
                            server.close()
                if await locks.is_disabled():
                    log.warning("replication is disabled (underreplication/disable exists): nothing repaired")
                results = await worker.run_once()
            finally:
                fencing.cancel()
    except Exception as exc:  # connection refused, bad layout, ...: one clear line, exit 2
        print(error_line(exc), file=err)
        log.debug("repair failed", exc_info=True)
        return 2
    done = sum(r.status in (Status.REPAIRED, Status.KEPT, Status.GONE) for r in results)
    log.info("repair pass finished", ledgersTaken=len(results), ledgersRepaired=done)
    return 0 if done == len(results) else 1
