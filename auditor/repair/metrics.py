"""Prometheus metrics of the repair role, `bk_auditor_repair_*`, in a registry of their own, every series
labelled with the cluster (auditor/metrics/exposition.py). docs/metrics.md maps them to Java's ReplicationWorker
metrics."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from auditor.durability.repairplan import WorkClass, WorkItem
from auditor.metrics.exposition import ClusterLabelled

PREFIX = "bk_auditor_repair_"
# One ledger takes from milliseconds (nothing to copy) to hours (a long ledger at a low byte rate).
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600, 4 * 3600)


class RepairMetrics:
    def __init__(self, *, cluster: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = CollectorRegistry(auto_describe=True)
        self.registry.register(ClusterLabelled(r, cluster))
        p = PREFIX
        self.ledgers = Counter(
            p + "ledgers",
            "Ledger repair attempts by outcome (repaired, kept: repaired but re-marked, blocked, skipped)",
            ["outcome"],
            registry=r,
        )
        self.blocked = Counter(p + "blocked", "Attempts that ended blocked, by reason", ["reason"], registry=r)
        self.entries_copied = Counter(p + "entries_copied", "Entries sent with RECOVERY_ADD", registry=r)
        self.bytes_copied = Counter(p + "bytes_copied", "Entry bytes sent with RECOVERY_ADD", registry=r)
        self.ledger_seconds = Histogram(
            p + "ledger_duration_seconds",
            "Time for one ledger: lock to release",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.queue = Gauge(
            p + "queue_ledgers",
            "Marked ledgers this worker may take now, by work class (worst first)",
            ["work_class"],
            registry=r,
        )
        self.blocked_now = Gauge(
            p + "blocked_ledgers", "Ledgers with a repair_blocked record, by reason", ["reason"], registry=r
        )
        self.corrupt_copies = Counter(
            p + "corrupt_copies",
            "Corrupt copies the copies met, by what became of them (healed, re-added but not served yet, "
            "not healed: the bookie is not a writable member)",
            ["outcome"],
            registry=r,
        )
        self.recoveries = Counter(
            p + "open_ledger_recoveries",
            "Open-ledger recoveries (repair.recover_open_ledgers) by outcome: closed, adopted (someone else "
            "closed it), stopped (an unknown answer: not closed), refused (would truncate: not closed)",
            ["outcome"],
            registry=r,
        )
        for c in WorkClass:
            self.queue.labels(c.name.lower())

    def observe(self, outcome: str, reason: str, entries: int, nbytes: int, seconds: float) -> None:
        self.ledgers.labels(outcome).inc()
        if outcome == "blocked":
            self.blocked.labels(reason).inc()
        self.entries_copied.inc(entries)
        self.bytes_copied.inc(nbytes)
        self.ledger_seconds.observe(seconds)

    def recovered(self, outcome: str) -> None:
        self.recoveries.labels(outcome).inc()

    def corrupt(self, outcome: str, copies: int) -> None:
        self.corrupt_copies.labels(outcome).inc(copies)

    def set_queue(self, items: Iterable[WorkItem]) -> None:
        by_class = Tally(i.work_class for i in items)
        for c in WorkClass:
            self.queue.labels(c.name.lower()).set(by_class.get(c, 0))

    def set_blocked(self, reasons: Mapping[str, int]) -> None:
        self.blocked_now.clear()
        for reason, n in reasons.items():
            self.blocked_now.labels(reason).set(n)
