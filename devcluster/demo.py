"""The main job as a demo (`make demo`): a real local cluster, a fault, and bk-auditor finding it.

1. Start ZooKeeper and five BookKeeper 4.17.3 bookies on loopback, on DbLedgerStorage as Pulsar runs them,
   each with a `bk-auditor agent` beside it (reading the bookie's index read-only, token required).
2. Write four closed ledgers with the real Java client (one a Pulsar topic's, one with an ensemble change).
3. Run `bk-auditor check`: healthy.
4. Break something: bookie 2 loses its disks and comes back empty (alive, registered, but its data is gone).
5. Run `bk-auditor check` again and show what it finds, as a table (what a person reads) and as JSON lines
   (stdout only: the JSON logs on stderr are left out, as a pipe would separate them).
6. Rot one stored copy on another bookie's disk and run `bk-auditor scrub`: the agents check every copy's
   digest where it is stored and name the damaged one.
Everything is torn down at the end (by pid).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from devcluster import ports
from devcluster.agent_util import AgentProc, start_agent, stop_agent
from devcluster.checks_util import corrupt_entry_on_disk
from devcluster.cluster import Cluster

BIN = Path(sys.executable).with_name("bk-auditor")


def say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if sys.stdout.isatty() else f"\n== {text}", flush=True)


def shown(path: Path) -> str:
    """The command as a person would type it from the repository root (`.venv/bin/bk-auditor`)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def run_check(cluster: Cluster, config: Path, fmt: str) -> int:
    argv = [
        str(BIN),
        "check",
        "--config",
        str(config),
        "--metadata-service-uri",
        cluster.metadata_service_uri,
        "--format",
        fmt,
    ]
    argv_shown = " ".join([shown(BIN), *argv[1:]])
    if fmt == "json":  # the report is stdout; its JSON logs go to stderr, shown separately by any pipe
        print(f"$ {argv_shown} 2>/dev/null", flush=True)
        return subprocess.run(argv, timeout=600, stderr=subprocess.DEVNULL).returncode
    print(f"$ {argv_shown}", flush=True)
    return subprocess.run(argv, timeout=600).returncode


def run_scrub(cluster: Cluster, config: Path) -> int:
    argv = [
        str(BIN),
        "scrub",
        "--config",
        str(config),
        "--metadata-service-uri",
        cluster.metadata_service_uri,
        "--format",
        "table",
    ]
    print(f"$ {' '.join([shown(BIN), *argv[1:]])}", flush=True)
    return subprocess.run(argv, timeout=600).returncode


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="bk-auditor-demo-"))
    # Ports follow BK_TEST_PORT_SLOT (devcluster/ports.py), so the demo can run beside a test session.
    cluster = Cluster(
        workdir,
        num_bookies=5,
        storage={n: "db" for n in range(1, 6)},  # DbLedgerStorage, as Pulsar's bookies run
        zk_port=ports.DEMO_ZK_PORT,
        port_base=ports.DEMO_PORT_BASE,
        http_base=ports.DEMO_HTTP_BASE,
    )
    agents: list[AgentProc] = []
    try:
        say("starting ZooKeeper and 5 real BookKeeper bookies (DbLedgerStorage) on 127.0.0.1-5")
        t = time.monotonic()
        cluster.start()
        print(f"cluster up in {time.monotonic() - t:.1f}s: {cluster.metadata_service_uri}")
        for b in cluster.bookies:
            print(f"  bookie {b.index}: {b.bookie_id} (pid {b.pid}, {b.storage} storage)")
        say("starting a bk-auditor agent beside each bookie (its index opened read-only)")
        token = workdir / "agent.token"
        token.write_text(secrets.token_urlsafe(24) + "\n")
        token.chmod(0o600)
        for b in cluster.bookies:
            agents.append(
                start_agent(cluster, b.index, workdir, token_file=token, port=ports.DEMO_AGENT_PORT_BASE + b.index)
            )
            print(f"  agent of bookie {b.index}: 127.0.0.1:{agents[-1].port} (pid {agents[-1].proc.pid})")
        config = workdir / "bk-auditor.yaml"
        config.write_text(
            "agent:\n"
            f"  token_file: {token}\n"
            "  addresses:\n"
            + "".join(f'    "{cluster.bookie(a.bookie).bookie_id}": "127.0.0.1:{a.port}"\n' for a in agents)
        )
        print(f"  {shown(config)}: where the agents are, and their token")

        say("writing ledgers with the real Java client")
        ids = [b.bookie_id for b in cluster.bookies]
        ledgers = [
            cluster.create_ledger(
                ensemble=3, write_quorum=2, ack_quorum=2, entries=200, bookies=[ids[0], ids[1], ids[2]], digest="CRC32C"
            ),
            cluster.create_ledger(
                ensemble=3,
                write_quorum=3,
                ack_quorum=2,
                entries=100,
                bookies=[ids[1], ids[2], ids[3]],
                digest="CRC32",
                custom={
                    "application": "pulsar",
                    "component": "managed-ledger",
                    "pulsar/managed-ledger": "public/default/persistent/orders",
                },
            ),
            cluster.create_ledger(
                ensemble=2, write_quorum=2, ack_quorum=2, entries=50, bookies=[ids[3], ids[4]], digest="MAC"
            ),
            cluster.write_with_ensemble_change(
                ensemble=3,
                write_quorum=2,
                ack_quorum=2,
                entries=60,
                change_after=30,
                bookies=[ids[2], ids[3], ids[4]],
                allowed=ids,
                victim=ids[4],
            ),
        ]
        for r in ledgers:
            print(
                f"  ledger {r['ledgerId']}: {r['state']}, entries 0-{r['lastEntryId']}, "
                f"E/WQ/AQ={r['ensembleSize']}/{r['writeQuorum']}/{r['ackQuorum']}, ensembles {r['ensembles']}"
            )

        say("the cluster is healthy: bk-auditor check")
        rc = run_check(cluster, config, "table")
        print(f"exit code {rc} (0 = clean)")

        say("fault: bookie 2 loses its disks and comes back empty (same id, new cookie)")
        cluster.stop_bookie(2)
        cluster.wipe_bookie(2)
        cluster.start_bookie(2)
        print(f"  bookie 2 is registered again (pid {cluster.bookie(2).pid}) but holds nothing; its agent runs on")

        say("bk-auditor check finds the lost copies")
        rc_table = run_check(cluster, config, "table")
        print(f"exit code {rc_table} (1 = findings)")
        say("the same as JSON lines (one object per finding, then a summary)")
        rc_json = run_check(cluster, config, "json")

        say("fault: one stored copy rots on bookie 4's disk (a byte of ledger 1, entry 7, in its entry log)")
        cluster.stop_bookie(4)
        changed = corrupt_entry_on_disk(
            cluster.bookie(4).ledger_dir, ledgers[1]["ledgerId"], 7, cluster.bookie(4).journal_dir
        )
        cluster.start_bookie(4)
        print(f"  {changed} copy changed; the bookie still serves it, its digest no longer matches")
        say("bk-auditor scrub checks every copy's digest where it is stored (at each bookie's agent)")
        rc_scrub = run_scrub(cluster, config)
        print(f"exit code {rc_scrub} (1 = damage found)")
        return 0 if rc == 0 and rc_table == 1 and rc_json == 1 and rc_scrub == 1 else 1
    finally:
        say("tearing the cluster down")
        for a in agents:
            stop_agent(a)
        cluster.stop()
        if os.environ.get("KEEP_DEMO"):
            print(f"logs kept in {cluster.logs_dir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
