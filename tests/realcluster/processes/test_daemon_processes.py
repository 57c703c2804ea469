"""The daemon's scans on worker processes (issue 12, `schedule.scan_processes`): the leader hands the checks
that judge each ledger alone to N worker processes, partition by partition, and keeps everything else: it
reports their findings, writes the ledger check's markers through its guarded writes (the workers only
read), works their suspects' re-checks, saves the cursor below which every partition ended, and holds new
partitions back while paused. Real `bk-auditor run` daemons against the real cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import NoNodeError

from auditor.durability.ids import LedgerId
from devcluster.checks_util import marker_leaves, marker_path, remove_markers, rewrite_ensemble
from devcluster.cluster import Cluster
from devcluster.cluster.processes import descendant_pids
from devcluster.daemon_util import Daemon, reset_auditor_state
from tests.realcluster.daemon.test_daemon import _all_ledgers, saved_cursor, start
from tests.realcluster.second_cluster import second_cluster

pytestmark = pytest.mark.realcluster

BIN = Path(sys.executable).with_name("bk-auditor")
TWO = {"scan_processes": 2, "scan_partition_ledgers": 20}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A cluster of this module's own, shaped as the session one (six bookies, the sixth on DbLedgerStorage).
    Every daemon here scans every ledger of its cluster, some at a few requests a second: on the session
    cluster, after the other modules of its worker had written thousands of ledgers, this module took over
    nine minutes of `make test`'s wall time, where its own ledgers take two."""
    with second_cluster("bk-auditor-procs-", 6, storage={6: "db"}) as c:
        yield c


@pytest.fixture
def daemons(cluster: Cluster, tmp_path: Path) -> Iterator[list[Daemon]]:
    """Daemons started by a test; all stopped (by pid) afterwards, with the worker processes they
    started. Our ZooKeeper state starts fresh."""
    started: list[Daemon] = []
    reset_auditor_state(cluster)
    yield started
    for d in started:
        workers = descendant_pids(d.pid) if d.running else []
        if d.running:
            d.kill()
        for pid in _wait_gone(workers, 30):  # only if a test failed on exactly this
            os.kill(pid, signal.SIGKILL)
    reset_auditor_state(cluster)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    """The pids still alive after `timeout` seconds (none, normally)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


def _finished(d: Daemon, check: str) -> list[dict[str, Any]]:
    return [e for e in d.logs() if e.get("event") == "check finished" and e.get("check") == check]


def _one_shot(cluster: Cluster, checks: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BKAUDIT_")}
    r = subprocess.run(
        [str(BIN), "check", "--checks", checks, "--format", "json", "--processes", "1"],
        capture_output=True,
        text=True,
        env=clean | {"BKAUDIT_METADATA_SERVICE_URI": cluster.metadata_service_uri},
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode in (0, 1), r.stderr[-3000:]
    docs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    return docs[:-1], docs[-1]["summary"]


def _delete_ledger(cluster: Cluster, lid: int) -> None:
    try:
        cluster.kazoo.delete(marker_path(cluster, lid))
    except NoNodeError:
        pass
    cluster.ledger_tool("delete", "--ledger-id", str(lid))


def test_leader_on_two_processes_finds_what_one_process_finds_and_marks_as_the_leader(
    cluster: Cluster, daemons: list[Daemon], tmp_path: Path
) -> None:
    b = cluster.sorted_bookie_ids
    faulty = cluster.create_ledger(entries=30, bookies=b[:3])
    rewrite_ensemble(cluster, faulty["ledgerId"], b[2], b[3])  # b[3] never got the entries
    cluster.create_ledgers(40, entries=5, bookies=b[:3])
    # The marking daemon checks every ledger of the cluster: the other tests' ledgers are marked too if
    # faulty, and must not stay marked (a later check would skip them as under-replicated).
    markers_before = marker_leaves(cluster)
    try:
        one, one_summary = _one_shot(cluster, "scrutiny,ledger")
        a = start(
            daemons,
            cluster,
            tmp_path,
            "auditor-a",
            schedule={"scrutiny_seconds": 3600, "ledger_check_seconds": 3600, **TWO},
        )
        a.wait(a.is_leader, 30, "leadership")
        a.wait(lambda: _finished(a, "scrutiny") and _finished(a, "ledger"), 240, "both checks to finish")
        started = next(e for e in a.logs() if e.get("event") == "bk-auditor started")
        assert started["scanProcesses"] == 2
        runs = {c: _finished(a, c)[0] for c in ("scrutiny", "ledger")}
        one_runs = {r["check"]: r for r in one_summary["checks"]}
        for check, run in runs.items():
            assert run["processes"] == 2
            # Every ledger, once: the same counts as one process over the same cluster.
            for key in ("ledgersSeen", "ledgersChecked", "ledgersSkipped"):
                assert run[key] == one_runs[check][key], (check, key, run, one_runs[check])
        # The same actionable findings as one process, ledger for ledger.
        got = a.findings(limit=100_000).findings
        ours = sorted({(f.category, f.qualified_name) for f in got if f.severity != "info"})
        theirs = sorted({(f["category"], f.get("qualifiedName", "")) for f in one if f["severity"] != "info"})
        assert ours == theirs
        faulty_qn = LedgerId(0, faulty["ledgerId"]).qualified_name
        assert ("entry_below_ack_quorum", faulty_qn) in ours
        assert a.metric("bk_auditor_ledgers_checked_total", check="scrutiny") == runs["scrutiny"]["ledgersSeen"]
        with pytest.raises(NoNodeError):
            cluster.kazoo.get(marker_path(cluster, faulty["ledgerId"]))  # marking is off
        a.stop()

        # Marking on: the ledger check's confirmed loss is marked, by the leader, naming the bookie.
        reset_auditor_state(cluster)
        m = start(
            daemons,
            cluster,
            tmp_path,
            "auditor-m",
            schedule={"scrutiny_seconds": 0, "ledger_check_seconds": 3600, **TWO},
            ledger_check={"mark_under_replicated": True},
        )
        m.wait(lambda: _finished(m, "ledger"), 240, "the ledger check to finish")
        data, _ = cluster.kazoo.get(marker_path(cluster, faulty["ledgerId"]))
        replicas = [line.split('"')[1] for line in data.decode().splitlines() if line.startswith("replica:")]
        assert replicas == [b[3]], data
        assert _finished(m, "ledger")[0]["processes"] == 2
        m.stop()
    finally:
        for d in daemons:
            if d.running:
                d.stop()  # before the markers go: a running leader could write them again
        remove_markers(cluster, marker_leaves(cluster) - markers_before)
        _delete_ledger(cluster, faulty["ledgerId"])


def test_leader_on_two_processes_resumes_after_a_kill_and_its_workers_end_with_it(
    cluster: Cluster, daemons: list[Daemon], tmp_path: Path
) -> None:
    cluster.create_ledgers(150, entries=5, bookies=cluster.sorted_bookie_ids[:3])  # a pass of 30 s or more
    # Slow enough to be killed mid-pass, fast enough to end a partition (10 ledgers) within seconds.
    slow = {"max_concurrent_ledgers": 1, "bookie_client": {"requests_per_second": 5}}
    small = {"scan_processes": 2, "scan_partition_ledgers": 10}
    a = start(daemons, cluster, tmp_path, "auditor-a", schedule={"scrutiny_seconds": 3600, **small}, **slow)
    state_path = f"{cluster.ledgers_root}/bk-auditor/checks/scrutiny"
    a.wait(a.is_leader, 60, "leadership")
    # The standby is up before the kill is due: started after the cursor, under load it once took so
    # long that the leader's pass had ended (cursor cleared) by the kill (CI, 2026-12-03).
    b = start(
        daemons,
        cluster,
        tmp_path,
        "auditor-b",
        schedule={"scrutiny_seconds": 3600, **TWO},
        bookie_client={"requests_per_second": 200},
    )
    b.wait(lambda: b.health("readiness") == "SERVING", 60, "readiness")
    a.wait(lambda: saved_cursor(cluster) is not None, 120, "a saved scan cursor")
    workers = descendant_pids(a.pid)
    # the pool's fork server, the 2 processes it forked (and the resource tracker, if any)
    assert len(workers) >= 3, workers
    a.kill()
    assert _wait_gone(workers, 30) == []  # no worker outlives its killed leader
    cursor = saved_cursor(cluster)
    assert cursor is not None
    b.wait(b.is_leader, 30, "takeover")
    b.wait(lambda: any(e.get("event") == "resuming an interrupted scan" for e in b.logs()), 30, "resume")
    resumed = next(e for e in b.logs() if e.get("event") == "resuming an interrupted scan")
    assert LedgerId.parse(resumed["after"]) >= LedgerId.parse(cursor)
    b.wait(lambda: _finished(b, "scrutiny"), 240, "the resumed scan to finish")
    finished = _finished(b, "scrutiny")[0]
    assert finished["processes"] == 2
    total = sum(1 for _ in _all_ledgers(cluster))
    assert 0 < finished["ledgersSeen"] < total, (finished, total)  # after the cursor, not from the start
    assert json.loads(cluster.kazoo.get(state_path)[0])["cursor"] is None  # a finished pass clears it


def test_pause_holds_back_new_partitions(cluster: Cluster, daemons: list[Daemon], tmp_path: Path) -> None:
    cluster.create_ledgers(60, entries=5, bookies=cluster.sorted_bookie_ids[:3])
    a = start(
        daemons,
        cluster,
        tmp_path,
        "auditor-a",
        schedule={"scrutiny_seconds": 3600, "scan_processes": 2, "scan_partition_ledgers": 10},
        max_concurrent_ledgers=1,
        bookie_client={"requests_per_second": 20},
    )
    a.wait(lambda: a.task("scrutiny").done > 0, 120, "the scan to start")
    a._call("pause", "maintenance")
    # What was running when paused finishes (at most 3 partitions of 10 ledgers); then nothing moves.
    last, since = a.task("scrutiny").done, time.monotonic()
    deadline = time.monotonic() + 90
    while time.monotonic() - since < 6:
        assert time.monotonic() < deadline, "the scan did not stop after the pause"
        time.sleep(0.5)
        now = a.task("scrutiny").done
        if now != last:
            last, since = now, time.monotonic()
    held = last
    total = sum(1 for _ in _all_ledgers(cluster))
    assert held < total and not _finished(a, "scrutiny")
    a._call("resume")
    a.wait(lambda: _finished(a, "scrutiny"), 240, "the scan to finish after resuming")
    assert _finished(a, "scrutiny")[0]["ledgersSeen"] >= total


def test_workers_hand_unanswered_ledgers_to_the_leader_which_rechecks_them(
    cluster: Cluster, daemons: list[Daemon], tmp_path: Path
) -> None:
    """A bookie that does not answer: the workers do not wait out the re-check delays; the leader re-checks
    what they could not settle, on its own delays, and reports no entry missing (a timeout is unknown)."""
    b = cluster.sorted_bookie_ids
    ours = cluster.create_ledgers(6, entries=10, bookies=b[:3])
    mine = {LedgerId(0, r["ledgerId"]).qualified_name for r in ours}
    cluster.pause_bookie(2)
    try:
        a = start(
            daemons,
            cluster,
            tmp_path,
            "auditor-a",
            # Paused longer than its ZooKeeper session, the bookie's registration goes: the bookie watch
            # waits this long before marking its ledgers, so the scan still asks it.
            schedule={"scrutiny_seconds": 3600, "lost_bookie_delay_seconds": 3600, **TWO},
            # No backing off from the silent bookie (down to 2 requests/s a process): it would make the
            # scan of this module's few hundred ledgers a minutes-long one.
            bookie_client={"timeout_seconds": 1, "adaptive_rate": False, "max_in_flight": 32},
        )
        a.wait(lambda: _finished(a, "scrutiny"), 240, "the scan and its re-checks to finish")
    finally:
        cluster.resume_bookie(2)
        # Paused past its ZooKeeper session: registered again only seconds after it resumes. Not before
        # anything else writes ledgers (make test saw one refused for want of bookie 2).
        cluster.wait_registered(2)
    run = _finished(a, "scrutiny")[0]
    assert run["processes"] == 2, run
    for r in ours:  # not marked (lost_bookie_delay_seconds), so asked, not skipped
        assert not cluster.kazoo.exists(marker_path(cluster, r["ledgerId"]))
    assert run["ledgersRechecked"] >= 2 * len(ours), run  # two re-checks each (recheck.attempts 2)
    # The re-checks are the leader's: the workers log at warning, so every "re-check queued" line is its.
    requeued = {
        LedgerId(0, e["ledgerId"]).qualified_name
        for e in a.logs()
        if e.get("event") == "ledger suspect, re-check queued" and e.get("attempt") == 2
    }
    assert mine <= requeued, (mine, requeued)
    got = a.findings(limit=100_000).findings
    assert not [f for f in got if f.qualified_name in mine and f.category.startswith("entry_")]
    # Still registered when the last re-check ran: reported unreachable; else the bookie watch's lost bookie.
    assert {f.bookie_id for f in got if f.category == "bookie_unreachable"} <= {b[1]}
