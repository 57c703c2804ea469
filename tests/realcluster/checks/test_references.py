"""Deletion discipline against Pulsar's own managed-ledger library (4.0.x) on the real cluster.

Topics are written, rolled, trimmed, offloaded and deleted properly by the library (MlTool); then things
are broken behind Pulsar's back: a listed ledger's metadata deleted with the real BookKeeper client, and
a ledger tagged as a topic's that no topic lists. `check --checks references` and the daemon must report
exactly the broken ones: `ledger_missing` (critical, naming the topic), `orphan_ledger` (info, with its
size), nothing for what Pulsar did itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor._proto import pulsar_mledger_pb2 as pb
from devcluster.cli_util import BIN, json_findings
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon

pytestmark = pytest.mark.realcluster

RUN = uuid.uuid4().hex[:6]
TENANT = f"refs-{RUN}"
SCHEMA_PATH = f"/schemas/{TENANT}/ns/victim"


def ml(topic: str) -> str:
    return f"{TENANT}/ns/persistent/{topic}"


def topic(name: str) -> str:
    return f"persistent://{TENANT}/ns/{name}"


def ids(info: dict[str, Any]) -> list[int]:
    return [led["ledgerId"] for led in info["ledgers"]]


class Topics:
    """The planted state, shared by the tests of this module (built once: each JVM call takes seconds)."""

    def __init__(self, cluster: Cluster, offload_dir: Path) -> None:
        self.cluster = cluster
        self.offload_dir = offload_dir
        c = cluster
        # Pulsar did all of this itself: no finding may come of it.
        trimmed = c.ml_create(ml("trimmed"), 4, 3, cursors=["sub"], leave_open=True)
        self.trimmed_removed = c.ml_trim(ml("trimmed"), ids(trimmed)[1])["removed"]
        gone = c.ml_create(ml("deleted"), 2, 3, cursors=["sub"])
        self.deleted_ledgers = ids(gone)
        c.ml_delete(ml("deleted"))
        c.ml_create(ml("offloaded"), 3, 3)
        self.offloaded = c.ml_offload(ml("offloaded"), 2, offload_dir)["bookkeeperDeleted"]
        c.ml_create(ml("zstd"), 2, 3, compression="ZSTD")  # compressed znodes, all ledgers present
        # Behind Pulsar's back: a listed data ledger deleted with the BookKeeper client.
        victim = c.ml_create(ml("victim"), 3, 3, cursors=["sub"], leave_open=True)
        self.victim_listed = ids(victim)
        self.victim_ledger = self.victim_listed[1]
        c.delete_ledger(self.victim_ledger)
        # ... and a cursor's ledger.
        self.cursor_ledger = victim["cursors"]["sub"]["cursorsLedgerId"]
        assert self.cursor_ledger >= 0, victim
        c.delete_ledger(self.cursor_ledger)
        # A ledger tagged as topic `victim`'s that it does not list (a failed trim's leftover), and one
        # tagged as a topic that no longer exists.
        self.orphan = self.tagged(ml("victim"), entries=7, entry_size=50)
        self.orphan_of_deleted = self.tagged(ml("deleted"), entries=3, entry_size=10)
        # Schemas (Pulsar's broker writes these; here by hand, in its format): a locator listing two
        # versions' ledgers, one of them deleted behind its back; and a schema ledger it does not list.
        schema = {"application": "pulsar", "component": "schema", "pulsar/schemaId": f"{TENANT}/ns/victim"}
        self.schema_kept, self.schema_lost, self.schema_orphan = (
            c.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=1, custom=schema)["ledgerId"]
            for _ in range(3)
        )
        locator = pb.SchemaLocator()
        for version, lid in enumerate((self.schema_lost, self.schema_kept)):
            entry = locator.index.add(version=version)
            entry.position.ledger_id, entry.position.entry_id = lid, 0
        locator.info.CopyFrom(locator.index[-1])
        c.kazoo.create(SCHEMA_PATH, locator.SerializeToString(), makepath=True)
        c.delete_ledger(self.schema_lost)

    def tagged(self, managed_ledger: str, entries: int, entry_size: int) -> int:
        """A ledger written by the real client with the tags Pulsar puts on a topic's data ledger."""
        tags = {"application": "pulsar", "component": "managed-ledger", "pulsar/managed-ledger": managed_ledger}
        return self.cluster.create_ledger(
            ensemble=2, write_quorum=2, ack_quorum=2, entries=entries, entry_size=entry_size, custom=tags
        )["ledgerId"]

    def cleanup(self) -> None:
        """Leave the session cluster as other tests expect it: no listed ledger missing."""
        for name in ("trimmed", "offloaded", "zstd", "victim"):
            self.cluster.ml_delete(ml(name), offload_dir=self.offload_dir)
        self.cluster.kazoo.delete(f"/schemas/{TENANT}", recursive=True)
        for lid in (self.orphan, self.orphan_of_deleted, self.schema_kept, self.schema_orphan):
            self.cluster.delete_ledger(lid)


@pytest.fixture(scope="module")
def topics(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topics]:
    t = Topics(cluster, tmp_path_factory.mktemp("offload"))
    try:
        yield t
    finally:
        t.cleanup()


def references(cluster: Cluster, fmt: str = "json", **settings: str) -> subprocess.CompletedProcess[str]:
    """`bk-auditor check --checks references` as an operator runs it, settings given as BKAUDIT_ variables."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    env["BKAUDIT_METADATA_SERVICE_URI"] = cluster.metadata_service_uri
    env.update({f"BKAUDIT_REFERENCES__{k.upper()}": v for k, v in settings.items()})
    return subprocess.run(
        [str(BIN), "check", "--checks", "references", "--format", fmt],
        capture_output=True, text=True, env=env, timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def run_check(cluster: Cluster, grace: float = 0) -> tuple[int, list[dict[str, Any]], str]:
    r = references(cluster, orphan_grace_seconds=str(grace))
    assert r.returncode in (0, 1), r.stderr[-3000:]
    return r.returncode, json_findings(r.stdout), r.stdout


def mine(findings: list[dict[str, Any]], category: str) -> dict[int, dict[str, Any]]:
    """This module's findings of a category, by ledger id (other tests share the cluster)."""
    out = {}
    for f in findings:
        if f["category"] != category:
            continue
        names = json.dumps(f.get("pulsar", {})) + json.dumps(f.get("detail", {}))
        if TENANT in names:
            out[f["ledgerId"]] = f
    return out


def test_check_reports_missing_and_orphan_ledgers_and_nothing_pulsar_did(cluster: Cluster, topics: Topics) -> None:
    rc, findings, _ = run_check(cluster)
    assert rc == 1
    missing = mine(findings, "ledger_missing")
    assert set(missing) == {topics.victim_ledger, topics.cursor_ledger, topics.schema_lost}, missing
    data = missing[topics.victim_ledger]
    assert data["severity"] == "critical" and data["pulsar"]["topic"] == topic("victim")
    assert data["detail"]["listedBy"][0]["kind"] == "data" and data["detail"]["listedBy"][0]["entries"] == 3
    cursor = missing[topics.cursor_ledger]
    assert cursor["pulsar"]["cursor"] == "sub" and cursor["detail"]["listedBy"][0]["kind"] == "cursor"
    schema = missing[topics.schema_lost]["detail"]["listedBy"]
    assert schema == [{"kind": "schema", "listedBy": SCHEMA_PATH, "schemaId": f"{TENANT}/ns/victim"}]
    orphans = mine(findings, "orphan_ledger")
    assert {topics.orphan, topics.orphan_of_deleted, topics.schema_orphan} <= set(orphans), orphans
    assert topics.schema_kept not in orphans and "does not list it" in orphans[topics.schema_orphan]["detail"]["reason"]
    # The library itself leaves unlisted ledgers behind when its process ends during a rollover or
    # before an asynchronous delete (Pulsar's own leaks): real orphans. Each must be unlisted by the
    # library's own reading of its managed ledger.
    for lid in set(orphans) - {topics.orphan, topics.orphan_of_deleted, topics.schema_orphan}:
        info = cluster.ml_info(orphans[lid]["pulsar"]["managedLedger"])
        cursor_ledgers = [c["cursorsLedgerId"] for c in info["cursors"].values()]
        assert lid not in ids(info) + cursor_ledgers, (lid, info)
    o = orphans[topics.orphan]
    assert o["severity"] == "info" and o["detail"]["entries"] == 7 and o["detail"]["bytes"] == 350
    assert o["detail"]["cleanup"] == f"bin/bookkeeper shell deleteledger -ledgerid {topics.orphan} -force"
    assert "no longer exists" in orphans[topics.orphan_of_deleted]["detail"]["reason"]
    # Pulsar's own deletions (trim, topic delete, offload) are not findings of any kind
    reported = {f.get("ledgerId") for f in findings}
    assert not reported & set(topics.trimmed_removed + topics.deleted_ledgers + topics.offloaded)


def test_a_young_unlisted_ledger_is_not_an_orphan(cluster: Cluster, topics: Topics) -> None:
    _, findings, _ = run_check(cluster, grace=3600)
    assert mine(findings, "orphan_ledger") == {}
    assert set(mine(findings, "ledger_missing")) == {topics.victim_ledger, topics.cursor_ledger, topics.schema_lost}


def test_the_table_has_a_dry_run_cleanup_plan(cluster: Cluster, topics: Topics) -> None:
    r = references(cluster, "table", orphan_grace_seconds="0")
    assert r.returncode == 1, r.stderr[-2000:]
    assert "cleanup plan (dry run)" in r.stdout
    [row] = [line for line in r.stdout.splitlines() if f"│ {topics.orphan} " in line]
    assert "│ 7 " in row and "350" in row, r.stdout
    assert "ledger_missing" in r.stdout


def test_a_cluster_without_pulsar_metadata_says_so(cluster: Cluster) -> None:
    r = references(cluster, "table", pulsar_root=f"/no-pulsar-{RUN}")
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"no application metadata found under /no-pulsar-{RUN}" in r.stdout


def test_the_daemon_finds_a_deleted_listed_ledger_within_seconds(
    cluster: Cluster, topics: Topics, tmp_path: Path
) -> None:
    d = Daemon(
        cluster,
        "refs",
        tmp_path,
        schedule={"scrutiny_seconds": 0, "bookie_check_seconds": 0, "references_seconds": 3600},
        references={"orphan_grace_seconds": 0, "confirm_seconds": 1},
    ).start()
    try:
        d.wait(lambda: d.task("references").last_success > 0, 120, "a references pass")
        listed = {int(f.ledger_id) for f in d.findings(category="ledger_missing").findings}
        assert {topics.victim_ledger, topics.cursor_ledger} <= listed
        # A new topic, listed after the pass (the watch follows rollovers too), then a listed ledger of
        # an older topic and one of the new topic deleted behind Pulsar's back.
        fresh = cluster.ml_create(ml("watched"), 2, 2, leave_open=True)
        target = topics.victim_listed[0]
        t0 = time.monotonic()
        cluster.delete_ledger(target)
        took = d.wait(
            lambda: any(int(f.ledger_id) == target for f in d.findings(category="ledger_missing").findings),
            30,
            "ledger_missing for the deleted ledger",
        )
        new_target = ids(fresh)[0]
        cluster.delete_ledger(new_target)
        took_new = d.wait(
            lambda: any(int(f.ledger_id) == new_target for f in d.findings(category="ledger_missing").findings),
            30,
            "ledger_missing for the new topic's deleted ledger",
        )
        print(f"deletion watch: found in {took:.1f} s (from the delete call: {time.monotonic() - t0:.1f} s), "
              f"new topic's ledger in {took_new:.1f} s")  # fmt: skip
        [f] = [f for f in d.findings(category="ledger_missing").findings if int(f.ledger_id) == target]
        wire = json.loads(f.fields_json)
        assert wire["pulsar"]["topic"] == topic("victim") and f.severity == "critical"
        assert wire["detail"]["lastSeenMs"] > 0  # the pass saw it before the deletion
        assert d.metric("bk_auditor_ledgers_with_findings", category="ledger_missing") >= 4
        assert d.metric("bk_auditor_listed_ledger_deletions_total") == 2
        # Still only the leader's pass had to run once: the watch did the rest.
        assert d.task("references").runs == 1
    finally:
        d.stop()
        cluster.ml_delete(ml("watched"))
    # The pass's memory is in our own subtree: a one-shot check after the daemon is gone knows when a
    # ledger deleted since was last seen.
    stored = json.loads(cluster.kazoo.get("/ledgers/bk-auditor/references/seen")[0])
    later = topics.victim_listed[2]
    cluster.delete_ledger(later)
    _, findings, _ = run_check(cluster, grace=3600)
    f = mine(findings, "ledger_missing")[later]
    assert f["detail"]["lastSeenMs"] == stored["passMs"] > 0
