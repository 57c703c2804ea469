"""The main job as a demo (`make demo`): a real local cluster, a fault, and bk-auditor finding and repairing it.

1. Start ZooKeeper and five BookKeeper 4.17.3 bookies on loopback, on DbLedgerStorage as Pulsar runs them,
   each with a `bk-auditor agent` beside it (reading the bookie's index read-only, token required).
2. Write four closed ledgers with the real Java client (one a Pulsar topic's, one with an ensemble change).
3. Run `bk-auditor check`: healthy.
4. Start the daemon (`bk-auditor run`) with one repair worker beside it (`repair.workers_beside_auditor: 1`).
5. Break something: bookie 2 loses its disks and comes back empty (alive, registered, but its data is gone).
   The daemon sees the new cookie, scrutinises the bookie's ledgers at once and reports what is missing:
   `bk-auditor status` and `bk-auditor findings` show it.
6. Run `bk-auditor check` too and show what it finds, as a table (what a person reads) and as JSON lines
   (stdout only: the JSON logs on stderr are left out, as a pipe would separate them).
7. `bk-auditor trigger ledger`: the daemon's ledger check reads the entries, confirms the losses and marks
   the ledgers under-replicated in Java's format (`ledger_check.mark_under_replicated`); its repair worker
   takes each marker under Java's lock, copies the lost stripe to another bookie and deletes the marker,
   while `status` and `findings` are polled; the real Java client then reads every entry back, and the
   findings clear once the markers are gone (waited for, with a timeout: the step fails if they stay).
8. Rot one stored copy on another bookie's disk and run `bk-auditor scrub`: the agents check every copy's
   digest where it is stored and name the damaged one.
Everything is torn down at the end (by pid). `KEEP_DEMO=1` keeps the logs (the daemon's included).
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
from typing import Any

from auditor.admin.client import AdminClientError
from devcluster import ports
from devcluster.agent_util import AgentProc, start_agent, stop_agent
from devcluster.checks_util import corrupt_entry_on_disk
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon

BIN = Path(sys.executable).with_name("bk-auditor")
# The demo daemon's admin API, its metrics and its repair worker's metrics: beside the demo agents'
# ports (devcluster/ports.py: DEMO_AGENT_PORT_BASE + 1..15), so they move with BK_TEST_PORT_SLOT too.
DEMO_ADMIN_PORT = ports.DEMO_AGENT_PORT_BASE + 30
DEMO_METRICS_PORT = ports.DEMO_AGENT_PORT_BASE + 31
DEMO_WORKER_METRICS_PORT = ports.DEMO_AGENT_PORT_BASE + 32
FINDINGS_CLEAR_SECONDS = 90.0  # a repaired ledger's findings must clear within this, or the step fails
REPAIR_SECONDS = 180.0  # every marker taken, copied and deleted by the daemon's repair worker


class StepFailed(Exception):
    """A demo step whose outcome was not what it shows (the message names the step)."""


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


def admin(daemon: Daemon, *args: str) -> int:
    """A `bk-auditor` command against the running daemon's admin API, printed with its output."""
    argv = [str(BIN), *args, "--admin", f"127.0.0.1:{daemon.admin_port}"]
    print(f"$ {' '.join([shown(BIN), *argv[1:]])}", flush=True)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    return subprocess.run(argv, timeout=120, env=env).returncode


def markers(cluster: Cluster) -> set[int]:
    """The ledger ids marked under-replicated now (Java's `urL<id>` znodes), read from ZooKeeper."""
    base = f"{cluster.ledgers_root}/underreplication/ledgers"
    found: set[int] = set()
    todo = [base] if cluster.kazoo.exists(base) else []
    while todo:
        path = todo.pop()
        for child in cluster.kazoo.get_children(path):
            if child.startswith("urL"):
                found.add(int(child[3:]))
            else:
                todo.append(f"{path}/{child}")
    return found


def active(daemon: Daemon) -> list[Any]:
    """The daemon's active findings above info (admin API `ListFindings`)."""
    return [f for f in daemon.findings().findings if f.severity != "info" and not f.HasField("resolved_at")]


def on_ledgers(findings: list[Any], ledgers: set[int]) -> list[Any]:
    return [f for f in findings if f.ledger_id.isdigit() and int(f.ledger_id) in ledgers]


def of_fault(findings: list[Any], ledgers: set[int], bookie: str) -> list[Any]:
    """The findings the fault caused: about its ledgers, or about the bookie itself (its new cookie)."""
    return [*on_ledgers(findings, ledgers), *(f for f in findings if not f.ledger_id and f.bookie_id == bookie)]


def summary(findings: list[Any]) -> str:
    counts: dict[str, int] = {}
    for f in findings:
        key = f"{f.category}" + (f" (ledger {f.ledger_id})" if f.ledger_id else "")
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k}" + (f" x{n}" if n > 1 else "") for k, n in sorted(counts.items())) or "none"


def watch(daemon: Daemon, cluster: Cluster, done: Any, timeout: float, what: str) -> float:
    """Poll the daemon's findings and the markers once a second, printing a line whenever they change,
    until `done(markers, findings)`; the seconds it took, or StepFailed naming `what`."""
    start = time.monotonic()
    last = ""
    while True:
        if not daemon.running:
            raise StepFailed(f"{what}: the daemon exited; its log ends:\n{daemon.tail()}")
        marked = markers(cluster)
        try:
            found = active(daemon)
        except AdminClientError as exc:  # a slow answer on a loaded machine: asked again below
            line = f"markers: {sorted(marked) or 'none'}; admin API: {exc}"
        else:
            line = f"markers: {sorted(marked) or 'none'}; active findings: {summary(found)}"
            if done(marked, found):
                if line != last:
                    print(f"  t+{time.monotonic() - start:4.1f}s  {line}", flush=True)
                return time.monotonic() - start
        if line != last:
            print(f"  t+{time.monotonic() - start:4.1f}s  {line}", flush=True)
            last = line
        if time.monotonic() - start > timeout:
            raise StepFailed(f"{what}: not within {timeout:g}s (last seen: {line})")
        time.sleep(1)


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
    daemon: Daemon | None = None
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

        say("starting the daemon (bk-auditor run) with one repair worker beside it")
        addresses = {cluster.bookie(a.bookie).bookie_id: f"127.0.0.1:{a.port}" for a in agents}
        daemon = demo_daemon(cluster, workdir, token, addresses).start()
        print(
            f"  {shown(daemon.workdir / (daemon.name + '.yaml'))} (pid {daemon.pid}; its log: {shown(daemon.log_path)})"
        )
        daemon.wait(daemon.is_leader, 60, "leadership")
        daemon.wait(
            lambda: any(ln.get("event") == "ledger index built" for ln in daemon.logs()), 60, "the ledger index"
        )
        admin(daemon, "status")

        say("fault: bookie 2 loses its disks and comes back empty (same id, new cookie)")
        cluster.stop_bookie(2)
        cluster.wipe_bookie(2)
        cluster.start_bookie(2)
        print(f"  bookie 2 is registered again (pid {cluster.bookie(2).pid}) but holds nothing; its agent runs on")
        lost = cluster.bookie(2).bookie_id
        hit = {r["ledgerId"] for r in ledgers if any(lost in ens for ens in r["ensembles"].values())}
        print(f"  ledgers with a copy on {lost}: {sorted(hit)}")

        say("the daemon sees the new cookie and scrutinises the bookie's ledgers at once")
        watch(daemon, cluster, lambda m, f: hit <= {int(x.ledger_id) for x in on_ledgers(f, hit)}, 90, "findings")
        admin(daemon, "status")
        admin(daemon, "findings")

        say("bk-auditor check (one run, no daemon) finds the same lost copies")
        rc_table = run_check(cluster, config, "table")
        print(f"exit code {rc_table} (1 = findings)")
        say("the same as JSON lines (one object per finding, then a summary)")
        rc_json = run_check(cluster, config, "json")

        say("the daemon's ledger check confirms the losses by reading, and marks the ledgers for repair")
        rc_trigger = admin(daemon, "trigger", "ledger")
        print(f"exit code {rc_trigger} (0 = triggered)")
        watch(daemon, cluster, lambda m, f: bool(m), 60, "the ledgers marked under-replicated")
        say(f"its repair worker copies what {lost} lost to other bookies and deletes each marker")
        took = watch(daemon, cluster, lambda m, f: not (m & hit), REPAIR_SECONDS, "the repair of every marked ledger")
        print(f"  every marker gone {took:.1f}s after the first was seen")
        say(f"the repaired ledgers' findings clear (waited for up to {FINDINGS_CLEAR_SECONDS:g}s)")
        cleared = True
        try:
            took = watch(daemon, cluster, lambda m, f: not on_ledgers(f, hit), FINDINGS_CLEAR_SECONDS, "clearing")
            print(f"  cleared {took:.1f}s after the last marker was gone")
        except StepFailed as exc:
            cleared = False
            print(f"  FAILED: the repaired ledgers' findings did not clear: {exc}", flush=True)
        admin(daemon, "status")
        say("the real Java client reads every entry back; no ensemble names the lost bookie's copies any more")
        for r in ledgers:
            read = cluster.read_ledger(r["ledgerId"], r["entrySize"])
            info = cluster.ledger_info(r["ledgerId"])
            print(
                f"  ledger {r['ledgerId']}: {read['read']} of {r['lastEntryId'] + 1} entries read, "
                f"{len(read['badContent'])} with wrong content; ensembles {info['ensembles']}"
            )
            if read["read"] != r["lastEntryId"] + 1 or read["badContent"]:
                raise StepFailed(f"ledger {r['ledgerId']} does not read back whole after the repair: {read}")

        say(f"the lost bookie's finding clears too (waited for up to {FINDINGS_CLEAR_SECONDS:g}s)")
        try:
            took = watch(daemon, cluster, lambda m, f: not of_fault(f, hit, lost), FINDINGS_CLEAR_SECONDS, "clearing")
            print(f"  cleared {took:.1f}s after the ledgers were read back")
        except StepFailed as exc:
            cleared = False
            print(f"  FAILED: the fault's findings did not all clear: {exc}", flush=True)
        admin(daemon, "findings")
        daemon.stop()
        print("  the daemon stopped (its repair worker with it)")

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
        ok = rc == 0 and rc_table == 1 and rc_json == 1 and rc_trigger == 0 and rc_scrub == 1
        if not ok:
            say("FAILED: an exit code was not what the demo expects (see above)")
        elif not cleared:
            say("FAILED: the repaired fault's findings did not clear (see above)")
        else:
            say("the demo ran as shown")
        return 0 if ok and cleared else 1
    except StepFailed as exc:
        say(f"FAILED: {exc}")
        return 1
    finally:
        say("tearing the cluster down")
        if daemon is not None and daemon.running:
            daemon.stop()
        for a in agents:
            stop_agent(a)
        cluster.stop()
        if os.environ.get("KEEP_DEMO"):
            print(f"logs kept in {cluster.logs_dir} and {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def demo_daemon(cluster: Any, workdir: Path, token: Path, addresses: dict[str, str]) -> Daemon:
    """`bk-auditor run` on the demo cluster: the agents' addresses and token, one repair worker beside it
    (`repair.workers_beside_auditor: 1`), the ledger check's marking on, and a lost bookie waited for a
    minute before it is marked (Java's lostBookieRecoveryDelay), so the few seconds bookie 2 is away are
    not yet a loss: its new cookie is what the daemon reacts to."""
    return Daemon(
        cluster,
        "bk-auditor-demo",
        workdir,
        admin_port=DEMO_ADMIN_PORT,
        metrics_port=DEMO_METRICS_PORT,
        agent={
            "token_file": str(token),
            "addresses": addresses,
        },
        schedule={
            "scrutiny_seconds": 86400,
            "ledger_check_seconds": 86400,
            "lost_bookie_delay_seconds": 60,
        },
        ledger_check={"mark_under_replicated": True},
        scrub={"enabled": False},  # the demo's scrub is the one-shot command, at the end
        repair={
            "workers_beside_auditor": 1,
            "poll_seconds": 1,
            "worker_metrics_bind": f"127.0.0.1:{DEMO_WORKER_METRICS_PORT}",
        },
    )


if __name__ == "__main__":
    sys.exit(main())
