"""What the operator sees is the truth across a failover and a repair, against real BookKeeper 4.17.3:

* the leader's findings are saved in our subtree; a standby answers `findings` and exports its gauges
  from them (saying so), a SIGKILLed leader's successor starts from them (same first-seen), and the
  findings gauges read across replicas never drop to 0 in between;
* the pause is cluster-wide: refused by a standby (naming the leader), kept in ZooKeeper, obeyed by the
  next leader;
* a finding clears within seconds of its repair (the marker consumed, the ensemble changed), not at the
  check's next pass, and `trigger --ledger` re-checks one ledger.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from auditor.admin.client import AdminClientError
from devcluster.checks_util import marker_leaves, remove_markers, rewrite_ensemble
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon
from tests.realcluster.daemon.test_daemon import markers_for, start

pytestmark = pytest.mark.realcluster

SIZE = 100
ENTRIES = 20
CATEGORY = "entry_below_ack_quorum"


def planted(cluster: Cluster) -> tuple[int, str]:
    """A ledger (E3 WQ2 AQ2) whose metadata names, at index 1, a bookie that never held it: the entries
    striped to index 1 have one copy, below the ack quorum. Returns the ledger and the wrong bookie."""
    ids = cluster.sorted_bookie_ids
    made = cluster.create_ledger(
        ensemble=3, write_quorum=2, ack_quorum=2, entries=ENTRIES, entry_size=SIZE, bookies=ids[:3]
    )
    lid = made["ledgerId"]
    rewrite_ensemble(cluster, lid, ids[1], ids[3])
    return lid, ids[3]


def ours(d: Daemon, lid: int, category: str = CATEGORY, **kw: Any) -> list[Any]:
    """The daemon's actionable findings of `category` ("": any) about ledger `lid`."""
    page = d.findings(category=category, **kw)
    return [f for f in page.findings if f.ledger_id == str(lid) and f.severity != "info"]


STEP = 0.5  # seconds between scrapes (and promtool's evaluations)
Scrape = tuple[float | None, float | None, str]  # findings gauge, is_leader, bookkeeper_cluster ("" if down)


def scraped(d: Daemon) -> Scrape:
    """One scrape of `d`: the findings gauge of CATEGORY, is_leader and the cluster label; Nones when the
    daemon does not answer (a killed pod: Prometheus marks its series stale)."""
    try:
        samples = d.samples()
    except OSError:
        return None, None, ""
    gauge = leader = None
    label = ""
    for sm in samples:
        if sm.name == "bk_auditor_ledgers_with_findings" and sm.labels.get("category") == CATEGORY:
            gauge, label = float(sm.value), sm.labels["bookkeeper_cluster"]
        elif sm.name == "bk_auditor_is_leader":
            leader = float(sm.value)
    return gauge, leader, label


def alert_fires_throughout(scrapes: list[tuple[Scrape, Scrape]], tmp_path: Path) -> None:
    """`promtool test rules`, over the chart's rendered rules, of the series scraped from the two real
    daemons through the failover (each with the namespace, job and instance Prometheus adds): the alert of
    CATEGORY fires at every evaluation from the first scrape to the last."""
    from tests.deploy.promql import alert_rules, promtool, write_rules_file
    from tests.deploy.test_alerts import _annotations

    rules_path = write_rules_file(tmp_path)
    rule = next(r for r in alert_rules() if r["alert"] == "BkAuditorEntryBelowAckQuorum")
    assert rule["expr"].count(CATEGORY) == 1 and rule["for"] == "0m", rule
    cluster = next(sc[2] for pair in scrapes for sc in pair if sc[2])

    def values(i: int, what: int) -> str:
        out, ended = [], False
        for pair in scrapes:
            v = pair[i][what]
            if v is None:
                out.append("_" if ended or not out else "stale")
                ended = bool(out)
            else:
                out.append(str(v))
        return " ".join(out)

    series = []
    for i, pod in enumerate(("auditor-a", "auditor-b")):
        labels = f'bookkeeper_cluster="{cluster}", namespace="pulsar", job="bk-auditor", instance="{pod}"'
        series.append(
            {"series": f'bk_auditor_ledgers_with_findings{{{labels}, category="{CATEGORY}"}}', "values": values(i, 0)}
        )
        series.append({"series": f"bk_auditor_is_leader{{{labels}}}", "values": values(i, 1)})
    alerting = {"bookkeeper_cluster": cluster, "namespace": "pulsar", "severity": rule["labels"]["severity"]}
    tests = []
    for n, pair in enumerate(scrapes):
        top = max(v for v in (pair[0][0], pair[1][0]) if v is not None)
        exp = {"exp_labels": alerting, "exp_annotations": _annotations(rule, f"{top:g}", alerting)}
        tests.append({"eval_time": f"{int(n * STEP * 1000)}ms", "alertname": rule["alert"], "exp_alerts": [exp]})
    test_file = tmp_path / "failover_test.yaml"
    test_file.write_text(
        yaml.safe_dump(
            {
                "rule_files": [rules_path.name],
                "evaluation_interval": f"{int(STEP * 1000)}ms",
                "tests": [{"interval": f"{int(STEP * 1000)}ms", "input_series": series, "alert_rule_test": tests}],
            },
            sort_keys=False,
        )
    )
    proc = subprocess.run([promtool(), "test", "rules", test_file.name], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]


def gauge_matches_findings(d: Daemon) -> bool:
    """`bk_auditor_ledgers_with_findings{category=CATEGORY}` counts the ledgers of the daemon's active
    findings of CATEGORY (the session cluster's other ledgers may have some), read twice around it."""
    before = {f.ledger_id for f in d.findings(category=CATEGORY).findings}
    value = d.metric("bk_auditor_ledgers_with_findings", category=CATEGORY)
    after = {f.ledger_id for f in d.findings(category=CATEGORY).findings}
    return before == after and value == len(after)


def test_findings_and_pause_survive_a_failover_and_a_standby_answers_honestly(
    cluster: Cluster, daemons: list[Daemon], tmp_path: Path
) -> None:
    lid, _ = planted(cluster)
    try:
        a = start(daemons, cluster, tmp_path, "auditor-a")
        a.wait(a.is_leader, 30, "leadership")
        b = start(daemons, cluster, tmp_path, "auditor-b")
        b.wait(lambda: b.health("readiness") == "SERVING", 30, "readiness")
        a._call("trigger", "scrutiny")
        a.wait(lambda: ours(a, lid), 60, "the planted finding on the leader")
        [found] = ours(a, lid)
        page = a.findings()
        assert (page.source, page.leader_identity) == ("leader", "auditor-a"), page

        # The standby answers with what the leader saved, and says so; its gauges follow.
        b.wait(lambda: ours(b, lid), 30, "the standby to hold the leader's saved finding")
        page = b.findings()
        assert (page.source, page.saved_by, page.leader_identity) == ("persisted", "auditor-a", "auditor-a"), page
        [copy] = ours(b, lid)
        assert (copy.first_seen, copy.dedup_key, copy.check) == (found.first_seen, found.dedup_key, "scrutiny")
        st = b.status()
        assert (st.findings_source, st.findings_saved_by) == ("persisted", "auditor-a"), st
        assert st.finding_counts[CATEGORY] >= 1, st
        b.wait(lambda: (b.metric("bk_auditor_ledgers_with_findings", category=CATEGORY) or 0) >= 1, 15, "gauge")

        # Pause: a standby refuses it, naming the leader; the leader's is the cluster's.
        with pytest.raises(AdminClientError, match="standby; the leader is auditor-a"):
            b._call("pause", "from the standby")
        assert a._call("pause", "disk replacement").changed
        b.wait(lambda: b.status().paused, 10, "the standby to follow the cluster-wide pause")
        st = b.status()
        assert (st.pause_reason, st.paused_by) == ("disk replacement", "auditor-a"), st

        # SIGKILL the leader; scrape both replicas every STEP s, as Prometheus would, until the standby
        # leads: its gauge never reads 0 in between, and the chart's alert fires at every evaluation.
        scrapes: list[tuple[Scrape, Scrape]] = []
        done = threading.Event()

        def scrape() -> None:
            while not done.is_set():
                scrapes.append((scraped(a), scraped(b)))
                time.sleep(STEP)

        scraper = threading.Thread(target=scrape)
        scraper.start()
        try:
            time.sleep(3 * STEP)
            a.kill()
            b.wait(b.is_leader, 30, "takeover")
            time.sleep(1.0)
        finally:
            done.set()
            scraper.join()
        standby = [sb[0] for _, sb in scrapes]
        assert standby and all(v is not None and v >= 1 for v in standby), standby
        alert_fires_throughout(scrapes, tmp_path)

        # The new leader starts from the saved finding (same first sighting) and keeps the pause.
        [kept] = ours(b, lid)
        assert (kept.first_seen, kept.dedup_key) == (found.first_seen, found.dedup_key), kept
        st = b.status()
        assert (st.leader, st.paused, st.pause_reason, st.findings_source) == (
            True,
            True,
            "disk replacement",
            "leader",
        ), st
        b._call("trigger", "scrutiny")
        time.sleep(2.0)
        [still] = ours(b, lid)
        assert still.times_seen == kept.times_seen, still  # paused: the triggered pass waits
        assert not b.task("scrutiny").HasField("last_success"), b.task("scrutiny")
        assert b._call("resume").changed
        b.wait(lambda: b.task("scrutiny").HasField("last_success"), 60, "scrutiny to run once resumed")
        [again] = ours(b, lid)
        assert again.first_seen == found.first_seen and again.times_seen > kept.times_seen, again
    finally:
        cluster.delete_ledger(lid)


def test_a_repair_clears_its_finding_within_seconds_and_trigger_rechecks_one_ledger(
    cluster: Cluster, daemons: list[Daemon], tmp_path: Path
) -> None:
    remove_markers(cluster, marker_leaves(cluster))  # other modules' markers would keep the worker busy
    lid, wrong = planted(cluster)
    try:
        a = start(
            daemons,
            cluster,
            tmp_path,
            "auditor-a",
            schedule={"ledger_check_seconds": 3600},
            ledger_check={"mark_under_replicated": True},
            repair={"workers_beside_auditor": 1, "poll_seconds": 1},
        )
        a.wait(a.is_leader, 30, "leadership")  # the ledger check's first pass starts now (no saved state)
        # (scrutiny and the ledger check see the same fault: one finding, kept under whichever saw it last)
        a.wait(lambda: ours(a, lid, ""), 60, "the finding of the planted ledger")

        # The worker repairs it (the member that holds none of its stripe replaced); the finding goes
        # within seconds of the marker, not at the ledger check's next pass (an hour away).
        a.wait(lambda: markers_for(cluster, [lid]) == {}, 90, "the ledger repaired and its marker deleted")
        repaired_at = time.time()
        a.wait(lambda: not ours(a, lid, ""), 15, "every finding of the ledger resolved after the repair")
        gone = ours(a, lid, "", include_resolved=True)
        assert gone and all(f.HasField("resolved_at") and f.resolved_at - repaired_at < 10 for f in gone), gone
        assert a.task("ledger").runs == 1, a.task("ledger")  # no second pass did it
        a.wait(lambda: gauge_matches_findings(a), 10, "the gauge to count the findings left (other ledgers')")
        info = cluster.ledger_info(lid)
        assert all(wrong not in ens for ens in info["ensembles"].values()), info
        read = cluster.read_ledger(lid, SIZE)
        assert (read["read"], read["badContent"]) == (ENTRIES, []), read

        # trigger --ledger: re-check one ledger now, by every scheduled check; a finding's key works too.
        ids = cluster.sorted_bookie_ids
        made = cluster.create_ledger(
            ensemble=3, write_quorum=2, ack_quorum=2, entries=ENTRIES, entry_size=SIZE, bookies=ids[:3]
        )
        other = made["ledgerId"]
        try:
            rewrite_ensemble(cluster, other, ids[0], ids[4])
            # Scrutiny only: it never marks, so the worker beside leaves this ledger alone.
            resp = a._call("trigger", "scrutiny", ledger=str(other))
            assert resp.accepted and "re-checked by scrutiny" in resp.message, resp
            a.wait(lambda: ours(a, other), 30, "the re-checked ledger's finding")
            [f] = [f for f in ours(a, other) if f.check == "scrutiny"]
            with pytest.raises(AdminClientError, match="no active finding"):
                a._call("trigger", "", finding_key='["entry_no_replica","x",0,null,null]')
            assert a._call("trigger", "", finding_key=f.dedup_key).accepted
        finally:
            cluster.delete_ledger(other)
    finally:
        try:
            cluster.delete_ledger(lid)
        except Exception:
            pass
