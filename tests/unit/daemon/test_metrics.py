"""The daemon's metrics: names, values after updates, separate registries, and the real HTTP exposition
parsed with prometheus_client's own parser."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from auditor.board.findings import FindingStore
from auditor.board.tasks import TaskBoard
from auditor.daemon.metrics import AuditorMetrics, RunSummary
from auditor.daemon.state import DaemonState
from auditor.durability.findings import Category, Finding
from auditor.durability.ids import LedgerId

CLUSTER = "zk-0:2181,zk-1:2181/ledgers"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by name and labels, the `bookkeeper_cluster` label (checked on every sample) left out."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = dict(s.labels)
            assert labels.pop("bookkeeper_cluster", None) == CLUSTER, s
            out[(s.name, tuple(sorted(labels.items())))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, tuple(sorted(labels.items())))]


def test_every_series_is_prefixed_and_no_created_series() -> None:
    m = AuditorMetrics(cluster=CLUSTER, checks=["scrutiny", "ledger_check"])
    text = m.exposition().decode()
    names = {name for name, _ in samples(text)}
    assert names and all(n.startswith("bk_auditor_") for n in names)
    assert not any(n.endswith("_created") for n in names)
    # series exist at zero before anything happened, per category and per check
    for c in Category:
        assert value(text, "bk_auditor_findings", category=c.value) == 0
    assert value(text, "bk_auditor_check_runs_total", check="scrutiny", outcome="failure") == 0
    assert value(text, "bk_auditor_ledgers_checked_total", check="ledger_check") == 0
    assert value(text, "bk_auditor_check_eta_seconds", check="scrutiny") == -1
    assert value(text, "bk_auditor_is_leader") == 0


def test_registries_are_independent() -> None:
    a, b = AuditorMetrics(cluster=CLUSTER), AuditorMetrics(cluster=CLUSTER)
    a.set_lost_bookies(3)
    assert value(a.exposition().decode(), "bk_auditor_lost_bookies") == 3
    assert value(b.exposition().decode(), "bk_auditor_lost_bookies") == 0


def test_updates_are_exposed() -> None:
    m = AuditorMetrics(cluster=CLUSTER, checks=["scrutiny"])
    m.set_info(version="0.1.0", identity="pod-0")
    m.set_leader(True)
    m.set_leader(True)
    m.set_leader(False)
    m.set_leader(True)
    m.set_paused(True)
    m.observe_run(
        RunSummary(
            "scrutiny",
            started=100.0,
            finished=160.0,
            ok=True,
            ledgers=1234,
            findings={"entry_no_replica": 2, "entry_below_write_quorum": 5},
        )
    )
    m.observe_run(RunSummary("scrutiny", started=200.0, finished=201.0, ok=False))
    m.ledger_checked("scrutiny", 1234)
    m.bookie_request("b1:3181", "get_list_of_entries")
    m.bookie_request("b1:3181", "get_list_of_entries", error="timeout")
    m.bookie_request("b2:3181", "read_entry")
    m.set_under_replication(4, 7200.5, 1)
    m.set_lost_bookies(1)
    m.bookie_audits_delayed.inc()
    m.check_skipped_run("scrutiny", "paused")
    m.recheck_outcomes.labels("confirmed").inc()
    with m.time_check("bookie_check"):
        pass
    t = m.exposition().decode()
    assert value(t, "bk_auditor_info", version="0.1.0", identity="pod-0") == 1
    assert value(t, "bk_auditor_is_leader") == 1
    assert value(t, "bk_auditor_leadership_changes_total") == 2
    assert value(t, "bk_auditor_paused") == 1
    assert value(t, "bk_auditor_check_runs_total", check="scrutiny", outcome="success") == 1
    assert value(t, "bk_auditor_check_runs_total", check="scrutiny", outcome="failure") == 1
    assert value(t, "bk_auditor_check_duration_seconds_sum", check="scrutiny", outcome="success") == 60
    assert value(t, "bk_auditor_check_duration_seconds_count", check="scrutiny", outcome="failure") == 1
    assert value(t, "bk_auditor_check_last_success_timestamp_seconds", check="scrutiny") == 160
    assert value(t, "bk_auditor_last_run_ledgers", check="scrutiny") == 1234
    # run summaries count the whole run, and name every category (zeros included)
    assert value(t, "bk_auditor_last_run_findings", check="scrutiny", category="entry_below_write_quorum") == 5
    assert value(t, "bk_auditor_last_run_findings", check="scrutiny", category="entry_below_ack_quorum") == 0
    assert value(t, "bk_auditor_ledgers_checked_total", check="scrutiny") == 1234
    assert value(t, "bk_auditor_bookie_requests_total", bookie="b1:3181", operation="get_list_of_entries") == 2
    assert (
        value(
            t,
            "bk_auditor_bookie_request_errors_total",
            bookie="b1:3181",
            operation="get_list_of_entries",
            error="timeout",
        )
        == 1
    )
    assert value(t, "bk_auditor_underreplicated_ledgers") == 4
    assert value(t, "bk_auditor_underreplicated_oldest_marker_age_seconds") == 7200.5
    assert value(t, "bk_auditor_underreplicated_past_grace_ledgers") == 1
    assert value(t, "bk_auditor_lost_bookies") == 1
    assert value(t, "bk_auditor_bookie_audits_delayed_total") == 1
    assert value(t, "bk_auditor_check_skipped_total", check="scrutiny", reason="paused") == 1
    assert value(t, "bk_auditor_recheck_outcomes_total", outcome="confirmed") == 1
    assert value(t, "bk_auditor_check_runs_total", check="bookie_check", outcome="success") == 1


def test_sync_from_daemon_state() -> None:
    st = DaemonState("pod-0", findings=FindingStore(), tasks=TaskBoard(), recheck_depth=lambda: 7)
    st.tasks.register("scrutiny")
    st.tasks.start("scrutiny", total=10)
    st.tasks.progress("scrutiny", 4)
    for ledger in (1, 2):
        f = Finding.of(Category.ENTRY_NO_REPLICA, "x", ledger=LedgerId.of(ledger), bookie="b1:3181", segment_index=0)
        st.findings.add(f)
    st.findings.add(
        Finding.of(Category.ENTRY_NO_REPLICA, "x", ledger=LedgerId.of(2), bookie="b1:3181", segment_index=1)
    )
    st.leadership.set(True)
    st.pause.pause("test")
    m = AuditorMetrics(cluster=CLUSTER)
    m.sync_state(st)
    for f in st.findings.query():
        m.finding_reported(f.finding)
    t = m.exposition().decode()
    assert value(t, "bk_auditor_findings", category="entry_no_replica") == 3
    assert value(t, "bk_auditor_ledgers_with_findings", category="entry_no_replica") == 2
    assert value(t, "bk_auditor_findings_reported_total", category="entry_no_replica", severity="critical") == 3
    assert value(t, "bk_auditor_recheck_queue_depth") == 7
    assert value(t, "bk_auditor_is_leader") == 1 and value(t, "bk_auditor_paused") == 1
    assert value(t, "bk_auditor_check_running", check="scrutiny") == 1
    assert value(t, "bk_auditor_check_progress_ratio", check="scrutiny") == 0.4
    # a category that goes back to zero is exported as 0, not left stale
    for rec in st.findings.query():
        st.findings.resolve(rec.key)
        m.finding_resolved(rec.category)
    m.sync_findings(st.findings)
    t = m.exposition().decode()
    assert value(t, "bk_auditor_findings", category="entry_no_replica") == 0
    assert value(t, "bk_auditor_findings_resolved_total", category="entry_no_replica") == 3


def test_http_exposition() -> None:
    m = AuditorMetrics(cluster=CLUSTER, checks=["scrutiny"])
    m.set_lost_bookies(2)
    server = m.serve("127.0.0.1:0")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as resp:
            assert resp.status == 200
            body = resp.read().decode()
    finally:
        server.close()
    assert value(body, "bk_auditor_lost_bookies") == 2
    assert value(body, "bk_auditor_check_runs_total", check="scrutiny", outcome="success") == 0
    # only our registry: no process_* / python_* collectors of the global default registry
    assert all(name.startswith("bk_auditor_") for name, _ in samples(body))


def test_process_metrics_on_request() -> None:
    names = {n for n, _ in samples(AuditorMetrics(cluster=CLUSTER, process_metrics=True).exposition().decode())}
    assert "python_info" in names and any(n.startswith("python_gc_") for n in names)
    assert {n for n in names if not n.startswith(("process_", "python_"))} <= {
        n for n, _ in samples(AuditorMetrics(cluster=CLUSTER).exposition().decode())
    }


def test_every_metric_the_daemon_exports_carries_the_cluster_label() -> None:
    """Every metric object of the daemon's AuditorMetrics (found by type, so a metric added later is
    included), each with a series, and the process collectors: every exposed sample has the cluster."""
    from prometheus_client.metrics import MetricWrapperBase

    from auditor.daemon.service import daemon_metrics
    from auditor.settings import Settings

    m = daemon_metrics(Settings(metadata_service_uri="zk+hierarchical://zk-0:2181,zk-1:2181/ledgers"))
    assert m.cluster == CLUSTER
    objects = {name: obj for name, obj in vars(m).items() if isinstance(obj, MetricWrapperBase)}
    assert len(objects) >= 30  # the table of docs/metrics.md
    for obj in objects.values():
        if obj._labelnames:  # one series per metric, whatever its labels
            obj.labels(*("x" for _ in obj._labelnames))
    families = list(text_string_to_metric_families(m.exposition().decode()))
    exposed = {s.name for f in families for s in f.samples}
    for name, obj in objects.items():
        series = {obj._name + suffix for suffix in ("", "_total", "_info", "_bucket", "_count", "_sum")}
        assert series & exposed, f"{name} ({obj._name}) is not exposed"
    assert any(f.name.startswith("process_") for f in families)  # the standard process metrics
    assert any(f.name.startswith("python_") for f in families)
    for f in families:
        assert f.samples, f"{f.name} has no series"
        for s in f.samples:
            assert s.labels.get("bookkeeper_cluster") == CLUSTER, s


def test_cluster_label_setting_and_default() -> None:
    from auditor.settings import Settings

    def cluster(**kw: object) -> str:
        return Settings(**kw).metrics_cluster  # type: ignore[arg-type]

    assert cluster(metadata_service_uri="zk+hierarchical://pulsar-zookeeper:2181/ledgers") == (
        "pulsar-zookeeper:2181/ledgers"
    )
    assert cluster(metadata_service_uri="zk+null://zk-0:2181;zk-1:2181/my-cluster/ledgers") == (
        "zk-0:2181,zk-1:2181/my-cluster/ledgers"
    )
    assert cluster(metadata_service_uri="metadata-store:zk:zk:2181/pulsar") == "zk:2181/pulsar/ledgers"
    assert cluster(zookeeper={"servers": "zk:2181", "ledgers_root": "/other/ledgers"}) == "zk:2181/other/ledgers"
    assert cluster(metadata_service_uri="zk://zk:2181/ledgers", metrics={"cluster": "prod-eu"}) == "prod-eu"
    import pydantic
    import pytest

    with pytest.raises(pydantic.ValidationError, match="must not be empty"):
        Settings(metrics={"cluster": " "})  # type: ignore[arg-type]


def test_a_metric_of_ours_cannot_take_the_cluster_label() -> None:
    import pytest
    from prometheus_client import Gauge

    m = AuditorMetrics(cluster=CLUSTER)
    Gauge("bk_auditor_bad", "defines the label itself", ["bookkeeper_cluster"], registry=m._metrics).labels(
        "other"
    ).set(1)
    with pytest.raises(ValueError, match="reserved"):
        m.exposition()


def test_namespace_gauge_is_bounded_and_forgets_namespaces_that_recovered() -> None:
    m = AuditorMetrics(cluster=CLUSTER, namespace_limit=1)
    store = FindingStore()
    tagged = [
        ("acme/billing/persistent/orders", 1, Category.ENTRY_NO_REPLICA),
        ("acme/shop/persistent/carts", 2, Category.ENTRY_BELOW_WRITE_QUORUM),
    ]
    for ml, lid, category in tagged:
        pulsar = {"managedLedger": ml, "topic": "persistent://" + ml.replace("/persistent/", "/")}
        store.add(Finding.of(category, f"ledger {lid}", ledger=LedgerId.of(lid), pulsar=pulsar).confirm())
    m.sync_findings(store)
    t = m.exposition().decode()
    assert (
        value(t, "bk_auditor_namespace_ledgers_at_risk", pulsar_namespace="acme/billing", category="entry_no_replica")
        == 1
    )
    assert (
        value(t, "bk_auditor_namespace_ledgers_at_risk", pulsar_namespace="other", category="entry_below_write_quorum")
        == 1
    )
    for rec in store.query():
        if rec.finding.ledger == LedgerId.of(1):
            store.resolve(rec.key)
    m.sync_findings(store)
    got = {k for k in samples(m.exposition().decode()) if k[0] == "bk_auditor_namespace_ledgers_at_risk"}
    assert [dict(labels)["pulsar_namespace"] for _, labels in got] == ["acme/shop"]  # billing's series is gone


def test_a_burst_of_reports_syncs_the_gauges_once_per_interval_and_they_catch_up() -> None:
    import asyncio

    from auditor.daemon import replica, reporter
    from auditor.settings import Settings

    st = DaemonState("pod-0")
    m = AuditorMetrics(cluster=CLUSTER)
    auditor = replica.Auditor(Settings(), st, m)
    syncs = []
    real_sync = m.sync_findings
    m.sync_findings = lambda store: (syncs.append(len(store)), real_sync(store))  # type: ignore[method-assign]

    async def burst() -> None:
        for ledger in range(5000):
            auditor.report("scrutiny", Finding.of(Category.RISKY_QUORUM, "wq == aq", ledger=LedgerId.of(ledger)))
        assert len(syncs) == 1  # the first report syncs at once; the rest wait for the interval
        await asyncio.sleep(reporter.FINDINGS_SYNC_SECONDS + 0.3)

    asyncio.run(burst())
    assert syncs == [1, 5000]  # one more when the interval was up: the gauges caught up
    assert value(m.exposition().decode(), "bk_auditor_findings", category="risky_quorum") == 5000
