"""One bad znode must not stop the leader (issue 10, defect 5), against real daemons and the real cluster.

* Corrupt or oddly typed state of ours (`<root>/bk-auditor/checks/<check>`, `<root>/bk-auditor/bookies`)
  is reported once, naming the znode, and replaced by a fresh state; the leader keeps leading and the
  bookie watch keeps marking lost bookies' ledgers.
* A task that keeps failing (its state unreadable: no permission) fails alone: it is restarted with a
  growing backoff, shows as `failed` with its error in the admin API and in bk_auditor_task_* metrics,
  and recovers once the cause is gone; the other tasks and the leadership are untouched.
* Malformed rack JSON (Pulsar's /bookies) disables placement judgement only, with a metadata_unreadable
  finding naming /bookies; every other finding is still reported.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.exceptions import NoNodeError
from kazoo.security import OPEN_ACL_UNSAFE, make_acl

from auditor.daemon.bookie_watch import parse_incarnations
from auditor.metadata.own.checkstate import CheckState
from devcluster.checks_util import marker_leaves, remove_markers, rewrite_ensemble
from devcluster.cluster import Cluster
from devcluster.daemon_util import BIN, Daemon
from tests.realcluster.daemon.test_daemon import markers_for, start

pytestmark = pytest.mark.realcluster

DEEP = b"[" * 50_000 + b"]" * 50_000  # json.loads: RecursionError
CORRUPT = {
    "typed": {
        "checks/scrutiny": b'{"cursor": 5}',
        "checks/ledger": b"[]",
        "checks/open": b'{"lastSuccessMs": "x"}',
        "bookies": DEEP,
    },
    "garbled": {
        "checks/scrutiny": DEEP,
        "checks/ledger": b"\xff\xfe not UTF-8",
        "checks/open": b'{"runStartedMs": true, "cursor": "not-a-ledger"}',
        "bookies": b'{"b": "x"}',
    },
}
ALL_CHECKS = {"scrutiny_seconds": 3600, "ledger_check_seconds": 3600, "open_ledger_check_seconds": 3600}
REPLACED = "bk-auditor state is corrupt: replacing it with a fresh state"


@pytest.fixture
def lost_bookie(cluster: Cluster) -> Iterator[int]:
    """Bookie 5, to be stopped by the test with lostBookieRecoveryDelay 0; restarted afterwards, and the
    markers the test caused (on every ledger naming it) removed."""
    n = 5
    before = marker_leaves(cluster)
    delay = f"{cluster.ledgers_root}/underreplication/lostBookieRecoveryDelay"
    cluster.kazoo.create(delay, b"0", makepath=True)
    yield n
    if not cluster.bookie(n).running:
        cluster.start_bookie(n)
    cluster.wait_registered(n, timeout=60)
    remove_markers(cluster, marker_leaves(cluster) - before)


def _lose_and_see_marked(cluster: Cluster, d: Daemon, n: int) -> None:
    """Stop bookie n; the daemon's bookie watch must mark a ledger that names it."""
    victim = cluster.bookie(n).bookie_id
    others = [b for b in cluster.sorted_bookie_ids if b != victim]
    lid = cluster.create_ledger(entries=5, bookies=[others[0], others[1], victim])["ledgerId"]
    d.wait(lambda: any(entry.get("event") == "ledger index built" for entry in d.logs()), 120, "the ledger index")
    cluster.stop_bookie(n)
    cluster.wait_unregistered(n, timeout=30)
    d.wait(lambda: lid in markers_for(cluster, [lid]), 30, f"the lost bookie's ledger {lid} marked")
    assert f'replica: "{victim}"' in markers_for(cluster, [lid])[lid]
    cluster.start_bookie(n)


def _kept_leading(d: Daemon, since: float) -> None:
    st = d.status()
    assert st.leader and st.leadership == "leader" and st.leader_since == since, st
    assert not [
        e
        for e in d.logs()
        if e.get("event") in ("not the leader any more: checks stopped", "leader tasks failed; stepping down")
    ]


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_corrupt_state_of_ours_is_replaced_and_the_leader_keeps_leading(
    cluster: Cluster, daemons: list[Daemon], tmp_path: Path, lost_bookie: int, kind: str
) -> None:
    root = f"{cluster.ledgers_root}/bk-auditor"
    for node, data in CORRUPT[kind].items():
        cluster.kazoo.create(f"{root}/{node}", data, makepath=True)
    a = start(daemons, cluster, tmp_path, "auditor-a", schedule=ALL_CHECKS)
    a.wait(a.is_leader, 30, "leadership")
    since = a.status().leader_since

    def replaced() -> bool:
        for node in CORRUPT[kind]:
            data = cluster.kazoo.get(f"{root}/{node}")[0]
            if node == "bookies":
                parse_incarnations(data, node)
            else:
                CheckState.parse(data, node)
        return True

    a.wait(lambda: _quiet(replaced), 60, "every corrupt node replaced by a valid state")
    # Reported once per znode, by name; counted; shown as the task's last error.
    warned = [e["path"] for e in a.logs() if e.get("event") == REPLACED]
    assert sorted(warned) == sorted(f"{root}/{node}" for node in CORRUPT[kind])
    for node in CORRUPT[kind]:
        assert a.metric("bk_auditor_state_resets_total", node=node) == 1, node
        task = a.task(node.split("/")[-1] if node.startswith("checks/") else "bookies")
        assert f"{root}/{node}" in task.last_error and "replaced with a fresh state" in task.last_error
    # Nothing crashed: every leader task is up and never failed; the bookie watch still works.
    _lose_and_see_marked(cluster, a, lost_bookie)
    for task in ("bookies", "scrutiny", "ledger", "open", "underreplication"):
        assert a.metric("bk_auditor_task_up", task=task) == 1, task
        assert a.metric("bk_auditor_task_failures_total", task=task) == 0, task
    _kept_leading(a, since)


def _quiet(predicate: object) -> bool:
    try:
        return bool(predicate())  # type: ignore[operator]
    except Exception:
        return False


def test_a_failing_task_is_restarted_alone_with_backoff_and_shown(
    cluster: Cluster, daemons: list[Daemon], tmp_path: Path, lost_bookie: int
) -> None:
    path = f"{cluster.ledgers_root}/bk-auditor/checks/scrutiny"
    # Nobody may read our scrutiny state (an operator's ACL mistake): the scrutiny task cannot even start.
    cluster.kazoo.ensure_path(path.rsplit("/", 1)[0])
    cluster.kazoo.create(path, CheckState().to_json(), acl=[make_acl("world", "anyone", admin=True)])
    try:
        a = start(daemons, cluster, tmp_path, "auditor-a", schedule={"scrutiny_seconds": 3600})
        a.wait(a.is_leader, 30, "leadership")
        since = a.status().leader_since
        a.wait(
            lambda: (a.metric("bk_auditor_task_failures_total", task="scrutiny") or 0) >= 3,
            60,
            "scrutiny failing repeatedly",
        )
        t = a.task("scrutiny")
        assert t.state in ("failed", "idle") and t.restarts >= 2 and path in t.last_error and "NoAuth" in t.last_error
        failed = [e for e in a.logs() if e.get("event") == "background task failed" and e.get("task") == "scrutiny"]
        delays = [e["restartInSeconds"] for e in failed]
        assert all(later > earlier for earlier, later in zip(delays, delays[1:])), delays  # exponential backoff
        assert all("NoAuth" in e["error"] for e in failed) and all("exception" in e for e in failed)
        # It fails alone: the bookie watch still marks a lost bookie's ledgers, the leader keeps leading.
        _lose_and_see_marked(cluster, a, lost_bookie)
        assert a.metric("bk_auditor_task_up", task="bookies") == 1
        assert a.metric("bk_auditor_task_failures_total", task="bookies") == 0
        _kept_leading(a, since)
        # The cause goes away: the next restart runs the check.
        cluster.kazoo.set_acls(path, OPEN_ACL_UNSAFE)
        a.wait(
            lambda: a.metric("bk_auditor_task_up", task="scrutiny") == 1 and a.task("scrutiny").runs >= 1,
            120,
            "scrutiny restarted and running",
        )
        assert a.metric("bk_auditor_task_restarts_total", task="scrutiny") >= 3
        _kept_leading(a, since)
    finally:
        try:
            cluster.kazoo.set_acls(path, OPEN_ACL_UNSAFE)
        except NoNodeError:
            pass


def test_malformed_rack_json_disables_placement_only(
    cluster: Cluster,
    daemons: list[Daemon],
    tmp_path: Path,
) -> None:
    b = cluster.sorted_bookie_ids
    gap = cluster.create_ledger(entries=30, bookies=b[:3])["ledgerId"]
    rewrite_ensemble(cluster, gap, b[2], b[3])  # b[3] never got the entries: entry_below_ack_quorum
    same_rack = cluster.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=5, bookies=[b[0], b[1]])
    lid = str(same_rack["ledgerId"])
    cluster.kazoo.create("/bookies", b'{"default": {"' + b[0].encode() + b'": {"rack": "/rack-a"')  # cut short
    try:
        # The one-shot command: the gap is reported, and so is why placement was not judged (exit 1).
        proc = subprocess.run(
            [
                str(BIN),
                "check",
                "--metadata-service-uri",
                cluster.metadata_service_uri,
                "--checks",
                "scrutiny",
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 1, proc.stderr[-2000:]
        found = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"')]
        assert any(f.get("category") == "metadata_unreadable" and "/bookies" in f["message"] for f in found)
        assert any(f.get("category") == "entry_below_ack_quorum" and f.get("ledgerId") == gap for f in found)
        assert not any(f.get("category") == "placement_violation" and str(f.get("ledgerId")) == lid for f in found)
        a = start(daemons, cluster, tmp_path, "auditor-a", schedule={"scrutiny_seconds": 3600})
        a.wait(a.is_leader, 60, "leadership")
        since = a.status().leader_since

        def runs_finished() -> int:
            return sum(1 for e in a.logs() if e.get("event") == "check finished" and e.get("check") == "scrutiny")

        def rack_finding() -> list[object]:
            return [f for f in a.findings(category="metadata_unreadable").findings if "/bookies" in f.message]

        a.wait(lambda: runs_finished() >= 1, 240, "a complete scrutiny pass")
        assert rack_finding(), "no metadata_unreadable finding naming /bookies"
        assert any("/bookies" in e.get("event", "") for e in a.logs() if e.get("level") == "warning")
        # Everything else is still audited: the real gap is reported; placement is not judged.
        assert any(f.ledger_id == str(gap) for f in a.findings(category="entry_below_ack_quorum").findings)
        assert not [f for f in a.findings(category="placement_violation").findings if f.ledger_id == lid]
        # Fixed: placement is judged again and the finding resolves.
        racks = {"default": {b[0]: {"rack": "/rack-a"}, b[1]: {"rack": "/rack-a"}}}
        cluster.kazoo.set("/bookies", json.dumps(racks).encode())
        assert a._call("trigger", "scrutiny").accepted
        a.wait(lambda: runs_finished() >= 2, 240, "the second pass")
        assert [f for f in a.findings(category="placement_violation").findings if f.ledger_id == lid]
        assert not rack_finding()
        # Broken again while running: the next pass reports it and goes on.
        cluster.kazoo.set("/bookies", b'{"default": []}')
        assert a._call("trigger", "scrutiny").accepted
        a.wait(lambda: runs_finished() >= 3, 240, "the third pass")
        assert rack_finding()
        assert any(f.ledger_id == str(gap) for f in a.findings(category="entry_below_ack_quorum").findings)
        assert a.metric("bk_auditor_task_failures_total", task="scrutiny") == 0
        _kept_leading(a, since)
    finally:
        cluster.kazoo.delete("/bookies")
