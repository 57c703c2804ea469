"""Per-ledger checks run on worker processes: what their engine (`auditor.processes.engine`) takes and hands
back, so that the checks that use it need not import it (the CLI injects it into the one-shot command; the
daemon makes it only when `schedule.scan_processes` > 1, in `auditor.daemon.service.scan_engine`).

The one-shot command (`check --processes N`) wants every finding in id order and the re-checks done by the
workers. The daemon's leader (`schedule.scan_processes`) wants more (`ScanHooks`): to resume a pass after
a cursor, to hold back new partitions while paused or outside its time windows, to hear of each partition
as it ends (its findings, the cursor below which every partition is done, its run counters), and to work
the suspects' re-checks itself, on its own minutes-long delays, instead of leaving a worker process idle
through them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from auditor.durability.findings import Finding
from auditor.durability.ids import LedgerId
from auditor.errors import AuditorError

from .runner import ProgressSink

FindingSink = Callable[[Finding, str], None]


class RunHere(AuditorError):
    """Raised by a `ShardedChecks` before it starts anything: the cluster is too small for worker processes
    to pay for their start-up (`ledgers`: the plan's estimate); run the checks in the caller's process. (A
    decision, not a failure: the one-shot command catches it and never shows it.)"""

    def __init__(self, ledgers: int) -> None:
        super().__init__(f"about {ledgers} ledgers: run in one process")
        self.ledgers = ledgers


@dataclass(frozen=True, slots=True)
class Suspect:
    """A ledger a worker could not settle (a bookie did not answer): re-check number `attempt` is due."""

    check: str
    ledger: LedgerId
    attempt: int


@dataclass(frozen=True, slots=True)
class PartitionDone:
    """One partition ended; its findings went to the sink just before.

    `cursor`: every ledger up to it is done (the partitions before this one have ended too); None when this
    partition did not move it (an earlier one is still running) or it would be past the last id.
    `stats`: each check's `RunStats.as_dict()` for the partition; `visited`: ledgers the scan handed each
    check; `suspects`: what is left to re-check (only with `ScanHooks.leader_rechecks`)."""

    cursor: LedgerId | None
    stats: dict[str, dict[str, Any]]
    visited: dict[str, int]
    suspects: list[Suspect] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ScanHooks:
    """The daemon's hold on a scan on worker processes.

    `may_start`: asked before each new partition, on the engine's thread; False holds new partitions back
    (those running finish). `partition_done`: called on the engine's thread as each partition ends (in the
    order they end); a returned future is waited for (or given up when the run is stopped) before the
    next partition is handed on, so the caller's cursor never runs ahead of what it took in.
    `leader_rechecks`: workers queue nothing to wait out; their suspects come back in `PartitionDone`."""

    start: LedgerId | None = None
    may_start: Callable[[], bool] | None = None
    partition_done: Callable[[PartitionDone], Future[Any] | None] | None = None
    leader_rechecks: bool = False


class ShardedChecks(Protocol):
    """Runs per-ledger `checks` on worker processes; every finding goes to `sink` (with its check); returns
    each check's run counters. It blocks, so it is run on a thread, and gives up soon after `stop` is set."""

    def __call__(
        self,
        checks: list[str],
        sink: FindingSink,
        progress: ProgressSink | None = None,
        stop: threading.Event | None = None,
        *,
        hooks: ScanHooks | None = None,
    ) -> list[dict[str, Any]]: ...
