"""No secret leaves the process: against real BookKeeper 4.17.3 and ZooKeeper, with known test passwords
(a MAC ledger's password stored in its metadata, `repair.recovery_password` for a ledger whose metadata
stores none, a ZooKeeper digest login), a one-shot check, the daemon with its repair worker (a bookie
lost, the ledgers marked and repaired, one blocked), explain, findings and both metrics pages are
collected, and none of the passwords appears in any log line, finding, answer or metric: neither as
text, nor as bytes' repr, base64 (Java's toString form) or the keys derived from them."""

from __future__ import annotations

import base64
import hashlib
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from auditor.durability.ids import LedgerId
from devcluster.checks_util import bookie_lost
from devcluster.cli_util import cli
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon
from devcluster.ports import REPAIR_WORKER_METRICS_PORT
from tests.realcluster.daemon.test_daemon import start

pytestmark = pytest.mark.realcluster

SIZE = 60
ENTRIES = 12
VICTIM = 5
LEDGER_SECRET = "LedgerPw-9c41e0"  # stored in the metadata of a MAC ledger
RECOVERY_SECRET = "RecoveryPw-5d2b71"  # repair.recovery_password: a v1 ledger's writer used it
OTHER_SECRET = "OtherPw-e803aa"  # a v1 ledger's writer used it, the settings do not know it
DIGEST_SECRET = "ZkDigestPw-71aa35"  # zookeeper.auth.digest_password
SECRETS = (LEDGER_SECRET, RECOVERY_SECRET, OTHER_SECRET, DIGEST_SECRET)


def forms(secret: str) -> list[str]:
    raw = secret.encode()
    derived = [hashlib.sha1(p + raw).digest() for p in (b"ledger", b"mac")]
    return [secret, repr(raw), base64.b64encode(raw).decode(), *(d.hex() for d in derived), *map(repr, derived)]


def leaks(texts: dict[str, str]) -> list[tuple[str, str]]:
    return [(where, f) for where, text in texts.items() for s in SECRETS for f in forms(s) if f in text]


def v1_ledger(cluster: Cluster, conf: Path, password: str, bookies: list[str]) -> dict[str, Any]:
    """A MAC ledger whose metadata (format v1) stores no password, written by the real Java client."""
    return cluster.ledger_tool(
        "create",
        *("--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2", "--digest", "MAC"),
        *("--password", password, "--entries", str(ENTRIES), "--entry-size", str(SIZE)),
        *("--bookies", ",".join(bookies), "--allowed", ",".join(cluster.sorted_bookie_ids)),
        *("--client-conf", str(conf)),
    )


def get(url: str) -> str:
    return urllib.request.urlopen(url, timeout=10).read().decode()


def test_no_secret_in_logs_findings_explain_or_metrics(cluster: Cluster, daemons: list[Daemon], tmp_path: Path) -> None:
    victim = cluster.bookie(VICTIM).bookie_id
    ensemble = [*[b for b in cluster.sorted_bookie_ids if b != victim][:2], victim]
    conf = tmp_path / "v1.conf"
    conf.write_text(
        ((cluster.conf_dir / "client.conf").read_text() if cluster.client_conf else "") + "ledgerMetadataVersion=1\n"
    )
    made = {
        "stored": cluster.create_ledger(
            ensemble=3, write_quorum=2, digest="MAC", password=LEDGER_SECRET, entries=ENTRIES, entry_size=SIZE,
            bookies=ensemble,
        ),
        "recovery": v1_ledger(cluster, conf, RECOVERY_SECRET, ensemble),
        "unknown": v1_ledger(cluster, conf, OTHER_SECRET, ensemble),
    }  # fmt: skip
    lids = {name: str(LedgerId.of(r["ledgerId"])) for name, r in made.items()}
    settings: dict[str, Any] = {
        "zookeeper": {"auth": {"digest_username": "bk-auditor-test", "digest_password": DIGEST_SECRET}},
        "repair": {
            "workers_beside_auditor": 1,
            "poll_seconds": 1,
            "backoff_cap_seconds": 64,
            "worker_metrics_bind": f"127.0.0.1:{REPAIR_WORKER_METRICS_PORT}",
            "recovery_password": RECOVERY_SECRET,
            "recovery_digest_type": "MAC",
        },
        "under_replication": {"poll_seconds": 1},
        "log": {"level": "debug", "format": "json"},
    }
    texts: dict[str, str] = {}
    cluster.kazoo.create(f"{cluster.ledgers_root}/underreplication/lostBookieRecoveryDelay", b"0", makepath=True)
    a = start(daemons, cluster, tmp_path, "auditor-secrets", **settings)
    a.wait(a.is_leader, 30, "leadership")
    with bookie_lost(cluster, VICTIM, made.values()):
        cluster.wait_unregistered(VICTIM, timeout=30)

        def events(name: str) -> set[str]:
            return {ln.get("ledgerId") for ln in a.logs() if ln.get("event") == name}

        a.wait(lambda: {lids["stored"], lids["recovery"]} <= events("ledger repaired"), 180, "both repaired")
        a.wait(lambda: lids["unknown"] in events("ledger repair blocked"), 60, "the unknown one blocked")
        blocked = [ln for ln in a.logs() if ln.get("event") == "ledger repair blocked"]
        assert {ln["reason"] for ln in blocked if ln["ledgerId"] == lids["unknown"]} == {"credentials_mismatch"}
        a.wait(lambda: a.findings(category="repair_blocked").findings, 60, "the repair_blocked finding")

        admin = f"127.0.0.1:{a.admin_port}"
        for name, r in made.items():
            for fmt in ("json", "table"):
                run = cli("explain", str(r["ledgerId"]), "--admin", admin, "--format", fmt, "--timeout", "60")
                assert run.returncode == 0, run.stderr[-2000:]
                texts[f"explain {name} {fmt}"] = run.stdout + run.stderr
        run = cli("findings", "--admin", admin, "--format", "json", "--include-resolved")
        assert run.returncode == 1 and lids["unknown"] in run.stdout.replace('"', " "), run.stdout[-2000:]
        texts["findings"] = run.stdout + run.stderr
        texts["metrics"] = get(f"http://127.0.0.1:{a.metrics_port}/metrics")
        texts["worker metrics"] = get(f"http://127.0.0.1:{REPAIR_WORKER_METRICS_PORT}/metrics")
        assert 'reason="credentials_mismatch"' in texts["worker metrics"], texts["worker metrics"][-3000:]

        # A one-shot check with the same settings (its own process, findings on stdout).
        check_conf = tmp_path / "check.yaml"
        check_conf.write_text(
            yaml.safe_dump({"metadata_service_uri": cluster.metadata_service_uri, **settings, "repair": {}})
        )
        run = cli("check", "--config", str(check_conf), "--format", "json", "--log-format", "json")
        assert run.returncode in (0, 1), run.stderr[-3000:]
        texts["check"] = run.stdout + run.stderr
    rc, _ = a.stop()
    assert rc == 0, a.tail()
    texts["daemon and worker log"] = a.log_path.read_text(errors="replace")
    assert '"ledger repaired"' in texts["daemon and worker log"]  # the worker's lines are in it
    assert leaks(texts) == []
