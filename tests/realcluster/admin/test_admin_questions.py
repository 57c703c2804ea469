"""The operator's questions through a real daemon's admin API (`--admin`) give the same answer as the
command line's direct form on the same real cluster state: can-decommission (safe, and not yet with the
blocking ledger and its reason), underreplicated (marker, lock holder, verdict), whoisauditor, and the
recovery delay and replication switches, whose changes through the daemon Java's own shell reads back.
The daemon bounds a question that reads bookies (admin.question_timeout_seconds) with one clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from auditor.admin.client import AdminClient, AdminClientError
from devcluster.checks_util import marker_path, rewrite_ensemble
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon

pytestmark = pytest.mark.realcluster

BIN = Path(sys.executable).with_name("bk-auditor")
AGES = ("markedSeconds", "lockedSeconds")  # seconds since: they move between the two asks


@pytest.fixture(scope="module")
def daemon(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    # No scheduled checks and no bookie watch: the daemon answers questions and changes nothing itself.
    d = Daemon(
        cluster,
        "questions-0",
        tmp_path_factory.mktemp("questions"),
        schedule={"scrutiny_seconds": 0, "bookie_check_seconds": 0},
    )
    d.start()
    try:
        d.wait(d.is_leader, 60, "leadership")
        yield d
    finally:
        d.stop()


def ours(cluster: Cluster, *args: str, admin: Daemon | None = None) -> subprocess.CompletedProcess[str]:
    """The command in a child process: direct (ZooKeeper and bookies), or with --admin through `admin`."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    if admin is None:  # as the daemon reads them: same bookie timeout
        env |= {
            "BKAUDIT_METADATA_SERVICE_URI": cluster.metadata_service_uri,
            "BKAUDIT_BOOKIE_CLIENT__TIMEOUT_SECONDS": "2",
        }
    extra = [] if admin is None else ["--admin", f"127.0.0.1:{admin.admin_port}"]
    return subprocess.run(
        [str(BIN), *args, *extra], capture_output=True, text=True, env=env, timeout=180, stdin=subprocess.DEVNULL
    )


def both(cluster: Cluster, daemon: Daemon, *args: str) -> tuple[int, Any]:
    """Both forms' JSON answers (seconds-since fields aside), which must agree, and their common exit code."""
    direct, via = ours(cluster, *args), ours(cluster, *args, admin=daemon)
    assert direct.returncode in (0, 1) and via.returncode == direct.returncode, (direct.stderr, via.stderr)

    def parsed(out: str) -> Any:
        docs = [json.loads(line) for line in out.splitlines() if line.strip()]
        for doc in docs:
            for row in [doc, *doc.get("ledgers", [])]:
                for age in AGES:
                    row.pop(age, None)
        return docs

    assert parsed(via.stdout) == parsed(direct.stdout)
    return direct.returncode, parsed(direct.stdout)


def test_can_decommission_through_the_daemon_answers_as_directly(cluster: Cluster, daemon: Daemon) -> None:
    b1, b2, x = (cluster.bookie(i).bookie_id for i in (4, 5, 6))
    a = cluster.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=10, bookies=[b1, x])["ledgerId"]
    code, [report] = both(cluster, daemon, "can-decommission", x, "--format", "json")
    rows = {r["ledgerId"]: r for r in report["ledgers"]}
    assert rows[a]["blockers"] == [] and rows[a]["reason"].startswith("other copies complete")

    # Its only other copy gone (the metadata names b1, which never had it): not yet, naming it and why.
    b = cluster.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=10, bookies=[b2, x])["ledgerId"]
    rewrite_ensemble(cluster, b, b2, b1)
    try:
        code, [report] = both(cluster, daemon, "can-decommission", x, "--format", "json")
        table = ours(cluster, "can-decommission", x, "--format", "table", admin=daemon)
    finally:
        rewrite_ensemble(cluster, b, b1, b2)
    rows = {r["ledgerId"]: r for r in report["ledgers"]}
    assert code == 1 and not report["safe"]
    assert rows[b]["blockers"] == ["no_other_copy"] and rows[b]["onlyHere"] == "0-9"
    assert rows[b]["reason"] == f"entries 0-9 exist only on {x}: another copy must be made before it goes"
    assert table.returncode == 1 and table.stdout.startswith(f"{x} (registered): NOT YET;"), table.stdout
    assert str(b) in table.stdout and table.stderr == ""


def test_underreplicated_through_the_daemon_answers_as_directly(cluster: Cluster, daemon: Daemon) -> None:
    bs = [cluster.bookie(i).bookie_id for i in (1, 2, 3, 4)]
    healthy = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=12, bookies=bs[:3])["ledgerId"]
    broken = cluster.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, entries=12, bookies=bs[:3])["ledgerId"]
    an_hour_ago = int(time.time() * 1000) - 3600 * 1000
    markers = [marker_path(cluster, lid) for lid in (healthy, broken)]
    lock = f"{cluster.ledgers_root}/underreplication/locks/urL{broken:010d}"
    rewrite_ensemble(cluster, broken, bs[2], bs[3])  # bookie 4 holds nothing of it
    try:
        for path in markers:
            cluster.kazoo.create(path, f'replica: "{bs[2]}"\nctime: {an_hour_ago}\n'.encode(), makepath=True)
        cluster.kazoo.create(lock, b'bookieId: "worker-7"\n', ephemeral=True, makepath=True)
        code, rows = both(cluster, daemon, "underreplicated", "--format", "json")
    finally:
        for path in (*markers, lock):
            if cluster.kazoo.exists(path):
                cluster.kazoo.delete(path)
        rewrite_ensemble(cluster, broken, bs[3], bs[2])
    by_id = {r["ledgerId"]: r for r in rows}
    assert code == 1
    assert by_id[broken]["verdict"] == "broken" and by_id[broken]["lockHolder"] == "worker-7"
    assert by_id[healthy]["verdict"] == "stale" and by_id[healthy]["replicas"] == [bs[2]]


def test_whoisauditor_through_the_daemon_answers_as_directly(cluster: Cluster, daemon: Daemon) -> None:
    _, [answer] = both(cluster, daemon, "whoisauditor", "--format", "json")
    assert "questions-0" in [leader["identity"] for leader in answer["leaders"]]


@pytest.mark.usefixtures("restore_switches")
def test_switches_through_the_daemon_are_read_back_by_javas_shell(cluster: Cluster, daemon: Daemon) -> None:
    r = ours(cluster, "recovery-delay", "45", "--yes", admin=daemon)
    assert r.returncode == 0 and r.stdout.strip().endswith("-> 45s (read back)"), (r.stdout, r.stderr)
    assert "LostBookieRecoveryDelay value in ZK: 45" in cluster.shell("lostbookierecoverydelay", "-get").stdout
    cluster.shell("lostbookierecoverydelay", "-set", "7")
    assert both(cluster, daemon, "recovery-delay", "--format", "json")[1] == [
        {"kind": "recoveryDelay", "lostBookieRecoveryDelaySeconds": 7}
    ]
    # Off a terminal, a change needs --yes, as directly: refused in one line, nothing written.
    r = ours(cluster, "recovery-delay", "60", admin=daemon)
    assert r.returncode == 2 and r.stderr.startswith("error: refusing to set lostBookieRecoveryDelay of ")
    assert cluster.kazoo.get(f"{cluster.ledgers_root}/underreplication/lostBookieRecoveryDelay")[0] == b"7"
    changes = [e for e in daemon.logs() if e.get("event") == "lostBookieRecoveryDelay set on an operator's request"]
    assert changes[-1]["seconds"] == 45 and changes[-1]["caller"].startswith("ipv4:127.0.0.1:")

    r = ours(cluster, "replication", "disable", "--yes", admin=daemon)
    assert r.returncode == 0 and r.stdout.strip() == "replication: enabled -> disabled (read back)", r.stderr
    assert "Autorecovery is disabled" in cluster.shell("autorecovery").stdout
    assert both(cluster, daemon, "replication", "--format", "json")[1] == [
        {"kind": "replication", "replicationEnabled": False, "changed": False}
    ]
    r = ours(cluster, "replication", "enable", "--yes", admin=daemon)
    assert r.returncode == 0 and r.stdout.strip() == "replication: disabled -> enabled (read back)", r.stderr
    assert "Autorecovery is enabled" in cluster.shell("autorecovery").stdout


@pytest.mark.usefixtures("restore_switches")
async def test_a_change_through_the_daemon_is_compare_and_set(cluster: Cluster, daemon: Daemon) -> None:
    async with AdminClient(f"127.0.0.1:{daemon.admin_port}", timeout=10) as client:
        read = await client.recovery_delay()
        cluster.shell("lostbookierecoverydelay", "-set", "11")  # another operator, between our read and write
        with pytest.raises(AdminClientError, match="changed since it was read") as exc:
            await client.set_recovery_delay(99, read.version if read.HasField("version") else None)
        assert exc.value.code is grpc.StatusCode.ABORTED
        assert (await client.recovery_delay()).seconds == 11


def test_a_question_past_its_bound_fails_with_one_clear_line(cluster: Cluster, tmp_path: Path) -> None:
    d = Daemon(
        cluster,
        "questions-slow",
        tmp_path,
        schedule={"scrutiny_seconds": 0, "bookie_check_seconds": 0},
        admin={"question_timeout_seconds": 0.001},
    )
    d.start()
    try:
        d.wait(lambda: d.status().identity == "questions-slow", 60, "the admin API")
        r = ours(cluster, "can-decommission", cluster.bookie(1).bookie_id, admin=d)
        assert d.running  # and a standby answers too: questions are reads
    finally:
        d.stop()
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "not answered within 0.001s (admin.question_timeout_seconds" in lines[0]
    assert "DEADLINE_EXCEEDED" in lines[0]
