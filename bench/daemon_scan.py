"""The daemon's scheduled scrutiny on 1 and N worker processes (issue 12: a bounded number of processes
for the daemon, `schedule.scan_processes`; docs/benchmarks.md "The daemon on 1 and 2 processes").

    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.daemon_scan                          # 100k ledgers, 3 runs
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.daemon_scan --ledgers 5000 --runs 1  # a quick smoke
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.daemon_scan --budgets defaults       # the shipped budgets
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.daemon_scan --baseline ../old-checkout  # before and after

Starts its own ZooKeeper and simulated bookies with `--ledgers` planted ledgers (bench/memory.py's
`planted_and_served`: `--shape`, `--entries`), then, for each budget (`off`: bookie and ZooKeeper rate
limits 0; `defaults`: the shipped adaptive budgets) and each process count of `--processes`, alternating
over `--runs`, starts `bk-auditor run` (a fresh election and state each time) with only the scrutiny
scheduled and `schedule.scan_processes` N, waits for its first `check finished` line, stops it with
SIGTERM and records: the pass's own duration and ledgers (from that line), ledgers/s, the daemon's CPU with
its workers' (a cgroup of the run's own where one can be made, as root; else GNU time's, which misses the
workers: they are a fork server's children), its peak RSS, and the findings, which must be one
`risky_quorum` per ledger when WQ == AQ, none otherwise. Prints one JSON line per run and a summary (medians, speed-up over one
process), saved under bench/results/daemon_scan/. With `--baseline TREE`, every pass also runs with TREE's
`auditor` (PYTHONPATH), the two alternating, on the same ZooKeeper and bookies. Not a test: nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bench.cpuquota import cpu_group, unavailable
from bench.harness import by_count, save_results
from bench.memory import BIN, TIME, Code, planted_and_served
from devcluster import ports
from devcluster.cluster.processes import child_pids
from devcluster.planted import Shape

FIELDS = ("scan_seconds", "ledgers_per_s", "cpu_us_per_ledger", "peak_rss_mb")
ADMIN_PORT = ports.DAEMON_PORT_BASE + 300  # above the tests' daemon and chaos ports
PASS_TIMEOUT = 3600.0
THIS = Code("this")  # this tree's daemon


def _config(uri: str, processes: int, budgets: str, identity: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        "metadata_service_uri": uri,
        "schedule": {
            "scrutiny_seconds": 86400,
            "ledger_check_seconds": 0,
            "open_ledger_check_seconds": 0,
            "references_seconds": 0,
            "bookie_check_seconds": 0,
            "scan_processes": processes,
        },
        "election": {"identity": identity},
        "admin": {"bind": f"127.0.0.1:{ADMIN_PORT}"},
        "metrics": {"enabled": False},
        "log": {"level": "info", "format": "json"},
    }
    if budgets == "off":
        config["bookie_client"] = {"requests_per_second": 0}
        config["zookeeper"] = {"reads_per_second": 0}
    return config


def _finished(log: Path) -> dict[str, Any] | None:
    for line in log.read_text(errors="replace").splitlines():
        if '"check finished"' in line:
            doc = json.loads(line)
            if doc.get("check") == "scrutiny":
                return dict(doc)
    return None


def _fresh_state(uri: str) -> None:
    """No state of an earlier daemon: its finished pass would put this one's off by `scrutiny_seconds`."""
    hosts, root = urlparse(uri).netloc.replace(";", ","), urlparse(uri).path
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=30)
    try:
        zk.delete(f"{root}/bk-auditor", recursive=True)
    except NoNodeError:
        pass
    finally:
        zk.stop()
        zk.close()


@functools.cache
def accounting() -> bool:
    """Whether a cgroup can count a run's CPU here (bench/cpuquota.py); said once when not."""
    why_not = unavailable()
    if why_not is not None:
        print(f"bench.daemon_scan: CPU of the daemon alone (GNU time), not its workers': {why_not}", file=sys.stderr)
    return why_not is None


def one_pass(
    uri: str,
    processes: int,
    budgets: str,
    logs: Path,
    ledgers: int,
    shape: Shape,
    run: int,
    code: Code = THIS,
) -> dict[str, Any]:
    """One daemon (`code`'s), one scheduled scrutiny pass, then SIGTERM."""
    _fresh_state(uri)
    identity = f"bench-{code.label}-{budgets}-{processes}-{run}"
    logs.mkdir(parents=True, exist_ok=True)
    cfg = logs / f"{identity}.yaml"
    cfg.write_text(yaml.safe_dump(_config(uri, processes, budgets, identity)))
    log = logs / f"{identity}.log"
    t0 = time.monotonic()
    with contextlib.ExitStack() as stack:
        timing = stack.enter_context(tempfile.NamedTemporaryFile("r", suffix=".time"))
        out = stack.enter_context(log.open("ab"))
        # The daemon's scan workers are its fork server's children, not its own: GNU time's rusage misses
        # them, a cgroup of the run's own (where one can be made, as root) counts them.
        group = stack.enter_context(cpu_group(f"bk-auditor-bench-{os.getpid()}")) if accounting() else None
        child = subprocess.Popen(
            [TIME, "-f", "%U %S %M", "-o", timing.name, str(BIN), "run", "--config", str(cfg)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=code.env(),
            preexec_fn=group.joiner() if group is not None else None,
        )
        finished = None
        while finished is None and child.poll() is None and time.monotonic() - t0 < PASS_TIMEOUT:
            time.sleep(0.5)
            finished = _finished(log)
        for daemon in child_pids(child.pid):  # the daemon, started just above under GNU time
            os.kill(daemon, signal.SIGTERM)
        rc = child.wait(60)
        user, system, kib = timing.read().split()[-3:]
        cpu = float(user) + float(system)
        if group is not None:
            cpu = group.final_cpu_seconds()
    row: dict[str, Any] = {
        "code": code.label,
        "budgets": budgets,
        "processes": processes,
        "ledgers": ledgers,
        "exit": rc,
        "seconds": round(time.monotonic() - t0, 1),
    }
    if finished is None:
        return row | {"failed": log.read_text(errors="replace").splitlines()[-5:]}
    seconds = float(finished["durationSeconds"])
    found = dict(finished.get("findingsByCategory") or {})
    row |= {
        "processes_used": finished.get("processes"),
        "scan_seconds": seconds,
        "ledgers_seen": finished["ledgersSeen"],
        "ledgers_per_s": round(finished["ledgersSeen"] / seconds, 1) if seconds else None,
        "cpu_s": round(cpu, 1),  # the daemon's and its workers', start-up and shut-down included
        "cpu_from": "cgroup" if group is not None else "rusage",
        "cpu_us_per_ledger": round(cpu / ledgers * 1e6, 1),
        "peak_rss_mb": round(int(kib) / 1024, 1),
        "findings": found,
    }
    expected = shape.expected_findings(ledgers)
    if rc != 0 or finished["ledgersSeen"] != ledgers or found != expected or finished.get("processes") != processes:
        row["failed"] = "wrong pass: " + json.dumps({k: row[k] for k in ("exit", "ledgers_seen", "findings")})
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledgers", type=int, default=100_000)
    ap.add_argument("--processes", default="1,2", help="process counts (comma list)")
    ap.add_argument("--runs", type=int, default=3, help="runs per process count (counts alternate)")
    ap.add_argument("--budgets", default="off,defaults", help="off, defaults or both (comma list)")
    Shape.add_arguments(ap)
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    ap.add_argument("--baseline", type=Path, help="also run the daemon of this checkout (e.g. before a change)")
    args = ap.parse_args()
    shape = Shape.from_arguments(ap, args)
    counts = [int(k) for k in args.processes.split(",")]
    budgets = [b.strip() for b in args.budgets.split(",") if b.strip()]
    if not counts or min(counts) < 1 or max(counts) > len(os.sched_getaffinity(0)):
        ap.error("--processes: counts from 1 to the CPUs this process may use (the daemon caps it there)")
    if not budgets or set(budgets) - {"off", "defaults"}:
        ap.error("--budgets: off, defaults or both")
    codes = [THIS] + ([Code("baseline", args.baseline.resolve())] if args.baseline else [])
    rows: list[dict[str, Any]] = []
    with planted_and_served("bench-daemon-scan-", args.ledgers, args.keep, shape) as (uri, workdir):
        for i in range(args.runs):
            for budget in budgets:
                for k in counts if i % 2 == 0 else counts[::-1]:
                    for code in codes if i % 2 == 0 else codes[::-1]:
                        row = one_pass(uri, k, budget, workdir / "logs", args.ledgers, shape, i, code)
                        rows.append(row)
                        print(json.dumps(row), flush=True)
        summary = {
            "ledgers": args.ledgers,
            "shape": shape.label,
            "cpus": len(os.sched_getaffinity(0)),
            "failed": sum(1 for r in rows if "failed" in r),
            **{
                f"budgets_{b}" + ("" if code.tree is None else f"_{code.label}"): by_count(
                    [r for r in rows if r["budgets"] == b and r["code"] == code.label], "processes", counts, FIELDS
                )
                for b in budgets
                for code in codes
            },
        }
        print(json.dumps(summary, indent=2))
        print(f"results: {save_results('daemon_scan', summary, rows)}")


if __name__ == "__main__":
    main()
