"""Scrutiny vs the Java Auditor's replicas check and placement policy check, on one real cluster (issue 12).

    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.replicas_check                    # 3,000 ledgers, 3 runs a side
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.replicas_check --ledgers 300 --runs 1   # a quick smoke

Starts its own real cluster (bench/profile_scan.py's: ZooKeeper and `--bookies` real 4.17.3 bookies with
production-sized index caches and their Prometheus stats on), writes `--ledgers` closed ledgers with the
real Java client (equal thirds E3/WQ3/AQ2, E3/WQ2/AQ2, E5/WQ2/AQ2, 10 to 200 entries), then, `--runs` times,
in rotating order:
* **Java replicas**: `AuditorReplicasCheckTask.runTask()` of the 4.17.3 jars, once, in a fresh JVM with
  default JIT (bench/java/JavaAuditorChecks.java; the task's own time, client start-up excluded);
* **Java placement**: `AuditorPlacementPolicyCheckTask.runTask()` the same way;
* **ours**: `bk-auditor check --checks scrutiny` (placement, every entry on its write set, stale markers:
  both of Java's checks in one pass) with bookie and ZooKeeper rate limits off, in a child process
  (bench/scan_child.py; the scan's own wall time, process start-up excluded);
* with `--floor`: **floor**, bench/floor_scan.py: the same ZooKeeper reads and GET_LISTs with answers
  discarded, what no scan on this client stack can beat;
* with `--ledger-check`: **Java checkall**, `AuditorCheckAllLedgersTask.runTask()` (checkAllLedgers,
  verification percentage 0 as shipped) the same way, and **ours-ledger**, `check --checks ledger`;
* with `--metadata-reads`: once per round, the parts of our scan's metadata phase timed alone (connect,
  list, one bulk get of every ledger znode, the scan's reads with parsing: `profile_scan.metadata_reads`);
  every run of ours also reports its phases (bench/scan_child.py `phases`: the time to its first ledger
  done, the rate after it, and the event-loop thread on a CPU, waiting for one, and blocked);
* **ours-processes** (with `--processes N`, default 2): the same scrutiny as `bk-auditor sweep --master
  processes[N] --checks scrutiny`, N local worker processes over the planner's id ranges (the wall time
  from planning to the aggregated result, the workers' start-up included).
Every run's bookie requests are the bookies' own counters (`bookkeeper_server_*_REQUEST`), read before and
after it; its CPU per ledger is measured for the whole machine (/proc/stat), the bookies together and
ZooKeeper (/proc/<pid>/stat), around the same window. Prints one JSON line: the runs, per side the
medians (ledgers/s, seconds, bookie requests and CPU per ledger) and the ratios ours / Java. Not a test:
nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.harness import save_results
from bench.profile_scan import PHASES, SHAPES, metadata_reads, one_run, run_child, scan_cluster, write_ledgers
from bench.repair import counters
from devcluster.cluster.javatools import BK_HOME, BK_VERSION, JVM_COMMON, classpath, compile_once

RUNNER = Path(__file__).resolve().parent / "java" / "JavaAuditorChecks.java"
ROOT = Path(__file__).resolve().parent.parent


def java_run(cluster: Any, which: str, classes: Path, keep_stderr: bool = False) -> dict[str, Any]:
    """One Java check's JSON line; with `keep_stderr`, its log (WARN and above) as `stderr` too."""
    argv = [
        "java",
        *JVM_COMMON,
        "-Xmx512m",  # a server-sized JVM with the default tiered JIT, as the Auditor runs in production
        f"-Dlog4j.configurationFile={cluster.conf_dir / 'log4j2-shell.xml'}",
        "-cp",
        f"{classes}:{classpath()}",
        "JavaAuditorChecks",
        which,
        cluster.metadata_service_uri,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600, stdin=subprocess.DEVNULL)
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"Java {which} check failed (exit {done.returncode}): {done.stderr[-2000:]}")
    got: dict[str, Any] = json.loads(lines[-1])
    return {**got, "stderr": done.stderr} if keep_stderr else got


def floor_run(cluster: Any, args: argparse.Namespace) -> dict[str, Any]:
    script = ROOT / "bench" / "floor_scan.py"
    argv = [cluster.zk_hosts, cluster.ledgers_root, str(args.max_in_flight), args.loop]
    return run_child(script, argv, str(ROOT), "the floor client")


def processes_run(uri: str, args: argparse.Namespace) -> dict[str, Any]:
    argv = ["--processes", str(args.processes), uri, str(args.max_in_flight), str(args.max_concurrent_ledgers)]
    return run_child(ROOT / "bench" / "scan_child.py", [*argv, args.loop], str(ROOT), "the sweep on processes")


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, every CPU (/proc/stat): how busy the run kept it."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system, every thread) a process has used so far (/proc/<pid>/stat); 0 when gone."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def servers_cpu_s(cluster: Any, bookies: list[int]) -> tuple[float, float]:
    """(bookies together, ZooKeeper): the CPU seconds the cluster's own processes have used so far."""
    assert cluster.zk is not None
    return sum(process_cpu_s(cluster.bookie(b).pid) for b in bookies), process_cpu_s(cluster.zk.pid)


def requests_of(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after if k.isupper() and after[k] - before[k] > 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledgers", type=int, default=3000)
    ap.add_argument("--bookies", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3, help="runs per side (sides rotate)")
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop", help="our event loop (as shipped)")
    ap.add_argument("--max-in-flight", type=int, default=8, help="bookie_client.max_in_flight (default as shipped)")
    ap.add_argument("--max-concurrent-ledgers", type=int, default=100, help="as shipped")
    ap.add_argument("--processes", type=int, default=2, help="worker processes of the ours-processes side (0: none)")
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also the floor: the same ZooKeeper reads and GET_LISTs, answers discarded (bench/floor_scan.py)",
    )
    ap.add_argument(
        "--ledger-check",
        action="store_true",
        help="also Java's checkAllLedgers (percentage 0) against our `--checks ledger`",
    )
    ap.add_argument(
        "--metadata-reads",
        action="store_true",
        help="also time the metadata phase's parts alone once per round (bench/profile_scan.py)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory (cluster and logs)")
    args = ap.parse_args()
    classes = compile_once(RUNNER, classpath(), BK_HOME, BK_VERSION)
    shapes = [(int(e), int(w)) for e, w in (x.split("/") for x in SHAPES.split(","))]
    bookies = list(range(1, args.bookies + 1))
    rows: list[dict[str, Any]] = []
    metadata: list[dict[str, Any]] = []
    with scan_cluster(args.bookies, "bench-replicas-check-", args.keep) as (cluster, workdir):
        made = write_ledgers(cluster, args.ledgers, shapes, [10, 50, 100, 200], 100)
        n = len(made)
        sides = ["java-replicas", "ours", "java-placement"] + (["ours-processes"] if args.processes else [])
        if args.ledger_check:
            sides += ["java-checkall", "ours-ledger"]
        if args.floor:
            sides.append("floor")
        for i in range(args.runs):
            for side in sides[i % len(sides) :] + sides[: i % len(sides)]:
                before = counters(cluster, bookies)
                busy0, total0 = cpu_times()
                bookies0, zk0 = servers_cpu_s(cluster, bookies)
                if side in ("ours", "ours-ledger"):
                    check = "scrutiny" if side == "ours" else "ledger"
                    logs = workdir / "ours.jsonl"
                    got = one_run(cluster.metadata_service_uri, args.loop, args, logs, tree=str(ROOT), check=check)
                    seconds, detail = got["wall_s"], got
                elif side == "floor":
                    got = floor_run(cluster, args)
                    seconds, detail = got["seconds"], got
                elif side == "ours-processes":
                    got = processes_run(cluster.metadata_service_uri, args)
                    seconds, detail = got["wall_s"], got
                else:
                    got = java_run(cluster, side.removeprefix("java-"), classes)
                    seconds, detail = got["seconds"], got
                busy1, total1 = cpu_times()
                bookies1, zk1 = servers_cpu_s(cluster, bookies)
                asked = requests_of(before, counters(cluster, bookies))
                row = {
                    "side": side,
                    "seconds": round(seconds, 3),
                    "ledgers_per_s": round(n / seconds, 1),
                    "bookie_requests": asked,
                    "bookie_requests_per_ledger": round(sum(asked.values()) / n, 2),
                    # Share of the machine's CPUs busy during the run (the bookies, ZooKeeper and the JVM
                    # or Python side together; start-up and the counters' reads included).
                    "machine_busy": round((busy1 - busy0) / max(1, total1 - total0), 2),
                    # What the run cost the whole machine and the cluster's own processes, per ledger: on
                    # CPUs the servers share with the client, a client's rate is bounded by the sum.
                    "machine_cpu_us_per_ledger": round((busy1 - busy0) / TICKS / n * 1e6, 1),
                    "bookies_cpu_us_per_ledger": round((bookies1 - bookies0) / n * 1e6, 1),
                    "zookeeper_cpu_us_per_ledger": round((zk1 - zk0) / n * 1e6, 1),
                    "detail": detail,
                }
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
            if args.metadata_reads:
                metadata.append(metadata_reads(cluster.metadata_service_uri, args))
                print(json.dumps(metadata[-1]), file=sys.stderr, flush=True)
        medians = {
            side: {
                key: statistics.median(r[key] for r in rows if r["side"] == side)
                for key in (
                    "seconds",
                    "ledgers_per_s",
                    "bookie_requests_per_ledger",
                    "machine_busy",
                    "machine_cpu_us_per_ledger",
                    "bookies_cpu_us_per_ledger",
                    "zookeeper_cpu_us_per_ledger",
                )
            }
            for side in sides
        }
        ours = medians["ours"]["ledgers_per_s"]
        ours_runs = [r["detail"] for r in rows if r["side"] == "ours"]
        ours_phases = {
            key: statistics.median(d[key] for d in ours_runs) for key in PHASES if all(key in d for d in ours_runs)
        }
        summary = {
            "ledgers": n,
            "bookies": args.bookies,
            "loop": args.loop,
            "cpus": os.cpu_count(),
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
            "medians": medians,
            "ours_over_java_replicas": round(ours / medians["java-replicas"]["ledgers_per_s"], 2),
            "ours_over_java_placement": round(ours / medians["java-placement"]["ledgers_per_s"], 2),
            **(
                {
                    "ours_processes_over_java_replicas": round(
                        medians["ours-processes"]["ledgers_per_s"] / medians["java-replicas"]["ledgers_per_s"], 2
                    )
                }
                if args.processes
                else {}
            ),
            **(
                {
                    "ours_ledger_over_java_checkall": round(
                        medians["ours-ledger"]["ledgers_per_s"] / medians["java-checkall"]["ledgers_per_s"], 2
                    )
                }
                if args.ledger_check
                else {}
            ),
            **({"ours_over_floor": round(ours / medians["floor"]["ledgers_per_s"], 2)} if args.floor else {}),
            "ours_phases_medians": ours_phases,
            **({"metadata_reads": metadata} if metadata else {}),
            # Java needs both passes for what one scrutiny pass judges: their times add up.
            "ours_over_java_both": round(
                (medians["java-replicas"]["seconds"] + medians["java-placement"]["seconds"])
                / medians["ours"]["seconds"],
                2,
            ),
        }
        saved = save_results("replicas_check", summary, rows)
        print(json.dumps({**summary, "runs": rows, "results_file": str(saved), "time": time.strftime("%F %T")}))


if __name__ == "__main__":
    main()
