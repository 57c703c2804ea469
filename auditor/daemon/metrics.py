"""Prometheus metrics of the daemon, `bk_auditor_*`, in a registry of their own (not the process-global
default, so tests and the one-shot CLI can build several). docs/metrics.md maps each one to the Java
Auditor's metric.

Every series carries a `bookkeeper_cluster` label naming the BookKeeper cluster (its value: the setting
`metrics.cluster`). It is
added once, where the registry is collected (`ClusterLabelled`), not by each metric: a metric added later,
or a collector of prometheus_client's own (process_*, python_*), cannot miss it.

Served by prometheus-client's own HTTP server thread (`serve`): it keeps answering while the event loop is
busy, which is what you want when debugging a stuck daemon.
"""

from __future__ import annotations

import os

# Before prometheus_client is imported anywhere: no `*_created` series (the Pulsar chart drops them too).
os.environ.setdefault("PROMETHEUS_DISABLE_CREATED_SERIES", "True")

import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest

from auditor.board.findings import FindingStore, category_of, severity_of
from auditor.board.tasks import TaskBoard, TaskState
from auditor.durability.findings import Finding
from auditor.durability.topics import namespace_ledger_counts
from auditor.metrics.exposition import ClusterLabelled, MetricsServer, serve

from .state import DaemonState

prometheus_client.disable_created_metrics()  # in case prometheus_client was imported before us

PREFIX = "bk_auditor_"
# Check durations run from milliseconds (one ledger) to days (a full sweep of a big cluster).
DURATION_BUCKETS = (
    0.1,
    0.5,
    1,
    5,
    15,
    60,
    300,
    900,
    3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86400,
    3 * 86400,
    7 * 86400,
    float("inf"),
)


# The severities of actionable findings (info is counted in bk_auditor_findings only).
AT_RISK_SEVERITIES = ("critical", "major", "minor")


def _categories() -> list[str]:
    from auditor.durability.findings import Category

    return [c.value for c in Category]


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The outcome of one run of a check."""

    check: str
    started: float  # epoch seconds
    finished: float
    ok: bool
    ledgers: int = 0  # ledgers covered
    findings: Mapping[str, int] = field(default_factory=dict)  # per category, found by this run
    complete: bool = True  # covered everything it meant to (a stopped/partial run is False)

    @property
    def duration(self) -> float:
        return max(0.0, self.finished - self.started)


class AuditorMetrics:
    """All daemon metrics. Attributes are the prometheus-client objects; methods are the update paths.

    `registry` is what gets exposed (`exposition`, `serve`): it holds one `ClusterLabelled` collector over
    a private registry where the metrics live, so every exposed series has `bookkeeper_cluster=<cluster>`.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        cluster: str,
        checks: Iterable[str] = (),
        categories: Iterable[str] | None = None,
        process_metrics: bool = False,
        namespace_limit: int = 20,
    ) -> None:
        self.cluster = cluster
        self.namespace_limit = namespace_limit
        self._namespace_series: set[tuple[str, str]] = set()
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self._metrics = CollectorRegistry(auto_describe=True)
        self.registry.register(ClusterLabelled(r, cluster))
        if process_metrics:  # the daemon's own CPU, memory, fds, GC (process_*, python_*)
            prometheus_client.ProcessCollector(registry=r)
            prometheus_client.PlatformCollector(registry=r)
            prometheus_client.GCCollector(registry=r)
        p = PREFIX
        self.info = Info(p[:-1], "bk-auditor build and identity", registry=r)
        self.is_leader = Gauge(p + "is_leader", "1 while this process is the elected auditor", registry=r)
        self.leadership_changes = Counter(
            p + "leadership_changes", "Times this process gained or lost leadership", registry=r
        )
        self.paused = Gauge(p + "paused", "1 while checks are paused by an operator", registry=r)
        # findings
        self.findings = Gauge(p + "findings", "Active (unresolved) confirmed findings", ["category"], registry=r)
        self.namespace_ledgers_at_risk = Gauge(
            p + "namespace_ledgers_at_risk",
            "Distinct ledgers with an active finding, per Pulsar namespace (the most at risk; the rest summed "
            "as other; none: not Pulsar ledgers) and worst category",
            ["pulsar_namespace", "category"],  # not "namespace": Prometheus's own target label
            registry=r,
        )
        self.ledgers_with_findings = Gauge(
            p + "ledgers_with_findings", "Distinct ledgers with an active finding", ["category"], registry=r
        )
        # data at risk now, per severity (sync_findings, from the actionable findings)
        self.ledgers_at_risk = Gauge(
            p + "ledgers_at_risk",
            "Distinct ledgers with an actionable finding of this severity (a ledger with findings of two "
            "severities counts in both)",
            ["severity"],
            registry=r,
        )
        self.entries_at_risk = Gauge(
            p + "entries_at_risk",
            "Entries named by actionable findings, per severity: per ledger the largest count among its "
            "findings of that severity (entries short of copies on two bookies count once)",
            ["severity"],
            registry=r,
        )
        for sev in AT_RISK_SEVERITIES:
            self.ledgers_at_risk.labels(sev).set(0)
            self.entries_at_risk.labels(sev).set(0)
        self.findings_reported = Counter(
            p + "findings_reported",
            "New findings reported (one per distinct fault)",
            ["category", "severity"],
            registry=r,
        )
        self.findings_resolved = Counter(
            p + "findings_resolved",
            "Findings resolved because a later complete run no longer saw them",
            ["category"],
            registry=r,
        )
        # checks
        self.check_duration = Histogram(
            p + "check_duration_seconds",
            "Duration of check runs",
            ["check", "outcome"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.check_runs = Counter(
            p + "check_runs", "Check runs by outcome (success, failure)", ["check", "outcome"], registry=r
        )
        self.check_skipped = Counter(
            p + "check_skipped", "Scheduled runs skipped, by reason", ["check", "reason"], registry=r
        )
        self.check_last_success = Gauge(
            p + "check_last_success_timestamp_seconds", "End time of the last successful run", ["check"], registry=r
        )
        self.check_running = Gauge(p + "check_running", "1 while the check runs", ["check"], registry=r)
        self.check_progress = Gauge(
            p + "check_progress_ratio", "Progress of the current run (0..1)", ["check"], registry=r
        )
        self.check_eta = Gauge(
            p + "check_eta_seconds", "Estimated seconds left in the current run (-1 unknown)", ["check"], registry=r
        )
        self.ledgers_checked = Counter(p + "ledgers_checked", "Ledgers checked", ["check"], registry=r)
        self.last_run_ledgers = Gauge(
            p + "last_run_ledgers", "Ledgers covered by the last complete run", ["check"], registry=r
        )
        self.last_run_findings = Gauge(
            p + "last_run_findings",
            "Findings of the last complete run, per category (whole run, never per range)",
            ["check", "category"],
            registry=r,
        )
        # bookies
        self.bookie_requests = Counter(
            p + "bookie_requests", "Requests sent to bookies", ["bookie", "operation"], registry=r
        )
        self.bookie_request_errors = Counter(
            p + "bookie_request_errors", "Bookie requests that failed", ["bookie", "operation", "error"], registry=r
        )
        self.lost_bookies = Gauge(
            p + "lost_bookies",
            "Bookies named in ledger metadata but not registered (writable or read-only)",
            registry=r,
        )
        self.bookie_audits_delayed = Counter(
            p + "bookie_audits_delayed", "Bookie audits delayed by lost_bookie_delay_seconds", registry=r
        )
        self.lost_bookies_answering = Counter(
            p + "lost_bookies_answering",
            "Unregistered bookies that still answered when a second bookie was lost (not a second failure)",
            registry=r,
        )
        self.listed_ledger_deletions = Counter(
            p + "listed_ledger_deletions",
            "Deletions of ledgers Pulsar listed, seen by the leader's deletion watch (each cross-checked)",
            registry=r,
        )
        self.delayed_bookie_audits_cancelled = Counter(
            p + "delayed_bookie_audits_cancelled",
            "Delayed bookie audits cancelled (bookie back, or overridden)",
            registry=r,
        )
        # under-replication
        self.underreplicated_ledgers = Gauge(
            p + "underreplicated_ledgers", "Ledgers currently marked under-replicated", registry=r
        )
        self.underreplicated_oldest_age = Gauge(
            p + "underreplicated_oldest_marker_age_seconds",
            "Age of the oldest under-replication marker (0 when none)",
            registry=r,
        )
        self.underreplicated_past_grace = Gauge(
            p + "underreplicated_past_grace_ledgers", "Marked ledgers older than the recovery grace period", registry=r
        )
        self.ledgers_marked = Counter(
            p + "ledgers_marked_underreplicated", "Ledgers this daemon marked under-replicated", registry=r
        )
        # re-check queue
        self.recheck_queue_depth = Gauge(p + "recheck_queue_depth", "Ledgers waiting for a re-check", registry=r)
        self.recheck_outcomes = Counter(
            p + "recheck_outcomes", "Re-check results (confirmed, cleared, gave_up)", ["outcome"], registry=r
        )
        # supervised background tasks (auditor/daemon/supervisor.py)
        self.task_alive = Gauge(
            p + "task_up",
            "1 while a supervised background task runs, 0 while it waits to be "
            "restarted after a failure (no series while it is not meant to run)",
            ["task"],
            registry=r,
        )
        self.task_failures = Counter(
            p + "task_failures", "Background tasks that ended with an error", ["task"], registry=r
        )
        self.task_restarts = Counter(
            p + "task_restarts", "Background tasks restarted after a failure", ["task"], registry=r
        )
        self.state_resets = Counter(
            p + "state_resets", "Corrupt bk-auditor state znodes replaced by a fresh state", ["node"], registry=r
        )
        # admin API TLS files re-read after a change (auditor/admin/credentials.py)
        self.admin_tls_reloads = Counter(
            p + "admin_tls_reloads",
            "Changes of the admin API's TLS files (certificate, key, client CA): accepted (new handshakes use "
            "them) or rejected (unusable: the previous ones stay in use)",
            ["result"],
            registry=r,
        )
        for result in ("accepted", "rejected"):
            self.admin_tls_reloads.labels(result)

        # the digest scrub (docs/scrub.md)
        self.scrub_verified_entries = Counter(
            p + "scrub_verified_entries", "Entry copies whose digest the scrub verified", registry=r
        )
        self.scrub_bytes = Counter(p + "scrub_bytes", "Bytes of entry copies the scrub verified", registry=r)
        self.scrub_corrupt = Counter(
            p + "scrub_corrupt", "Damaged entry copies the scrub found and confirmed", registry=r
        )
        self.scrub_coverage_ratio = Gauge(
            p + "scrub_coverage_ratio",
            "Share of the current scrub pass's planned entry copies verified (of the last pass between passes)",
            registry=r,
        )
        self.scrub_oldest_unverified_seconds = Gauge(
            p + "scrub_oldest_unverified_seconds",
            "Age of the oldest copy verification (or wait since the scrub began): above the period, the "
            "scrub does not keep up",
            registry=r,
        )
        self._request_children: dict[tuple[str, str], Counter] = {}  # bookie_requests' children, looked up once
        self._leader: bool | None = None
        self._categories = list(categories) if categories is not None else _categories()
        self._known_categories: set[str] = set(self._categories)
        for c in self._categories:
            self.findings.labels(c).set(0)
            self.ledgers_with_findings.labels(c).set(0)
        for check in checks:
            self.register_check(check)

    # ------------------------------------------------------------------------------- identity
    def set_info(self, **labels: str) -> None:
        self.info.info({k: str(v) for k, v in labels.items()})

    def set_leader(self, leader: bool) -> None:
        if self._leader is not None and self._leader != leader:
            self.leadership_changes.inc()
        self._leader = leader
        self.is_leader.set(1 if leader else 0)

    def follow_leadership(self, leadership: Any) -> None:
        """`is_leader` reads the live, confirmed leadership at every scrape (a process resuming after a
        freeze must not be scraped as leader from a stale value)."""
        self.is_leader.set_function(lambda: 1.0 if leadership.confirmed else 0.0)

    def set_paused(self, paused: bool) -> None:
        self.paused.set(1 if paused else 0)

    # ------------------------------------------------------------------------------- checks
    def register_check(self, check: str) -> None:
        """Create every per-check series at zero so dashboards and alerts see them before a first run."""
        for outcome in ("success", "failure"):
            self.check_runs.labels(check, outcome)
            self.check_duration.labels(check, outcome)
        self.ledgers_checked.labels(check)
        self.check_running.labels(check).set(0)
        self.check_progress.labels(check).set(0)
        self.check_eta.labels(check).set(-1)

    def observe_run(self, run: RunSummary) -> None:
        outcome = "success" if run.ok else "failure"
        self.check_duration.labels(run.check, outcome).observe(run.duration)
        self.check_runs.labels(run.check, outcome).inc()
        if run.ok:
            self.check_last_success.labels(run.check).set(run.finished)
        if run.ok and run.complete:
            self.last_run_ledgers.labels(run.check).set(run.ledgers)
            for c in set(self._categories) | set(run.findings):
                self.last_run_findings.labels(run.check, c).set(run.findings.get(c, 0))

    @contextmanager
    def time_check(self, check: str) -> Iterator[None]:
        """Times a block as one run (failure if it raises); use observe_run for the full summary."""
        started = time.time()
        ok = False
        try:
            yield
            ok = True
        finally:
            finished = time.time()
            outcome = "success" if ok else "failure"
            self.check_duration.labels(check, outcome).observe(max(0.0, finished - started))
            self.check_runs.labels(check, outcome).inc()
            if ok:
                self.check_last_success.labels(check).set(finished)

    def check_skipped_run(self, check: str, reason: str) -> None:
        self.check_skipped.labels(check, reason).inc()

    def ledger_checked(self, check: str, n: int = 1) -> None:
        self.ledgers_checked.labels(check).inc(n)

    # ------------------------------------------------------------------------------- bookies
    def bookie_request(self, bookie: str, operation: str, error: str | None = None) -> None:
        self.bookie_requests_done(bookie, operation, 1, {error: 1} if error is not None else {})

    def bookie_requests_done(self, bookie: str, operation: str, n: int, errors: Mapping[str, int]) -> None:
        """`n` requests to `bookie` completed for `operation` (the check), `errors` of them failed, by kind
        (`auditor.bookie.results.error_kind`: timeout, connection, malformed, or the bookie's status code).
        Called as requests complete (`RunStats.on_requests`), so rates move during a pass."""
        child = self._request_children.get((bookie, operation))
        if child is None:
            child = self._request_children[(bookie, operation)] = self.bookie_requests.labels(bookie, operation)
        child.inc(n)
        for kind, k in errors.items():
            self.bookie_request_errors.labels(bookie, operation, kind).inc(k)

    def set_lost_bookies(self, n: int) -> None:
        self.lost_bookies.set(n)

    # ------------------------------------------------------------------------------- under-replication
    def set_under_replication(self, ledgers: int, oldest_age_seconds: float | None, past_grace: int) -> None:
        self.underreplicated_ledgers.set(ledgers)
        self.underreplicated_oldest_age.set(oldest_age_seconds or 0)
        self.underreplicated_past_grace.set(past_grace)

    # ------------------------------------------------------------------------------- findings
    def finding_reported(self, finding: Finding) -> None:
        self.findings_reported.labels(category_of(finding), severity_of(finding)).inc()

    def finding_resolved(self, category: str) -> None:
        self.findings_resolved.labels(category).inc()

    def sync_findings(self, store: FindingStore) -> None:
        counts, ledgers = store.counts(), store.ledger_counts()
        self._known_categories |= set(counts)
        for c in self._known_categories:
            self.findings.labels(c).set(counts.get(c, 0))
            self.ledgers_with_findings.labels(c).set(ledgers.get(c, 0))
        self._sync_at_risk(store.actionable_findings())
        at_risk = namespace_ledger_counts(store.actionable_findings(), self.namespace_limit)  # it counts no other
        for gone in self._namespace_series - set(at_risk):
            self.namespace_ledgers_at_risk.remove(*gone)
        for (ns, c), n in at_risk.items():
            self.namespace_ledgers_at_risk.labels(ns, c).set(n)
        self._namespace_series = set(at_risk)

    def _sync_at_risk(self, findings: Iterable[Finding]) -> None:
        """`ledgers_at_risk` and `entries_at_risk` from the actionable findings: one pass, O(findings)."""
        most: dict[tuple[object, str], int] = {}  # (ledger, severity) -> the most entries one finding names
        for f in findings:
            if f.ledger is None:
                continue  # not about a ledger's data (e.g. rack information)
            n = f.affected_count or (1 if f.entry_id is not None else 0)
            key = (f.ledger, f.severity._value_)
            if most.get(key, -1) < n:
                most[key] = n
        ledgers: dict[str, int] = dict.fromkeys(AT_RISK_SEVERITIES, 0)
        entries: dict[str, int] = dict.fromkeys(AT_RISK_SEVERITIES, 0)
        for (_, sev), n in most.items():
            ledgers[sev] = ledgers.get(sev, 0) + 1
            entries[sev] = entries.get(sev, 0) + n
        for sev in ledgers:
            self.ledgers_at_risk.labels(sev).set(ledgers[sev])
            self.entries_at_risk.labels(sev).set(entries[sev])

    # ------------------------------------------------------------------------------- supervised tasks
    def task_up(self, task: str, up: bool) -> None:
        self.task_failures.labels(task)  # the counters exist at 0 from the task's first start
        self.task_restarts.labels(task)
        self.task_alive.labels(task).set(1 if up else 0)

    def task_failed(self, task: str) -> None:
        self.task_failures.labels(task).inc()

    def task_restarted(self, task: str) -> None:
        self.task_restarts.labels(task).inc()

    def task_stopped(self, task: str) -> None:
        try:
            self.task_alive.remove(task)
        except KeyError:
            pass

    def state_replaced(self, node: str) -> None:
        self.state_resets.labels(node).inc()

    def admin_tls_reloaded(self, result: str) -> None:
        """`result`: "accepted" or "rejected"; called from gRPC's handshake thread (Counter is thread-safe)."""
        self.admin_tls_reloads.labels(result).inc()

    # ------------------------------------------------------------------------------- state
    def sync_tasks(self, board: TaskBoard) -> None:
        for t in board.snapshot():
            self.check_running.labels(t.name).set(1 if t.state is TaskState.RUNNING else 0)
            frac = t.fraction
            self.check_progress.labels(t.name).set(frac if frac is not None else 0)
            self.check_eta.labels(t.name).set(t.eta_seconds if t.eta_seconds is not None else -1)

    def sync_state(self, state: DaemonState) -> None:
        """Refresh every gauge that mirrors DaemonState (call after changes or on a timer)."""
        assert state.leadership is not None
        self.set_leader(state.leadership.confirmed)
        self.set_paused(state.pause.paused)
        self.recheck_queue_depth.set(state.recheck_depth())
        self.sync_findings(state.findings)
        self.sync_tasks(state.tasks)

    # ------------------------------------------------------------------------------- exposition
    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def serve(self, bind: str) -> MetricsServer:
        """Start the HTTP endpoint (`/metrics`, any path) on `host:port` in a daemon thread."""
        return serve(self.registry, bind)
