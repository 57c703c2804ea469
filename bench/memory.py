"""Peak memory of a full scrutiny and of the daemon's bookie index at 10k, 100k and 1M ledgers (issue 12,
docs/benchmarks.md "Memory at 10k, 100k and 1M ledgers").

    BK_TEST_PORT_SLOT=5 .venv/bin/python -m bench.memory                        # 10k, 100k, 1M: hours
    BK_TEST_PORT_SLOT=5 .venv/bin/python -m bench.memory --sizes 2000,20000     # a quick smoke

Starts its own ZooKeeper ("second cluster" ports; a 2 GiB heap and no fsync, as a million znodes need on
this machine; no real bookie) and, for each size in turn, plants closed E3/WQ2/AQ2 ledgers of 100
entries up to that size (bench/planted.py, over six bookie ids) and starts simulated bookies for them in
a process of their own (`python -m bench.simbookie planted`: they answer from the write schedule and
register themselves). Then, each in a fresh child process:
* **scan**: `bk-auditor check --checks scrutiny --format json` with the bookie and ZooKeeper rate limits
  off; its peak RSS (ru_maxrss from wait4), wall time, exit status and the findings it printed, which
  must be one `risky_quorum` per ledger (WQ == AQ) and nothing else (exit status 0);
* **index**: bench/memory_index.py, the daemon's `LedgerIndex.rebuild()`: peak RSS, RSS kept after the
  build per ledger, and in a second run the bytes tracemalloc sees the index hold per ledger.
Prints one JSON line per measurement and a summary (growth of the scan's peak RSS from the second size
to the last, the index's bytes per ledger), saved under bench/results/memory/. Not a test: nothing here
asserts a size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.harness import save_results
from bench.planted import plant
from tests.realcluster import ports
from tests.realcluster.cluster import Cluster, Proc

BIN = Path(sys.executable).with_name("bk-auditor")
ZK_HEAP_MB = 2048
BOOKIES = [f"127.0.0.{i}:{ports.BENCH_SIM_PORT_BASE + i}" for i in range(1, 7)]
LIMITS_OFF = {"BKAUDIT_BOOKIE_CLIENT__REQUESTS_PER_SECOND": "0", "BKAUDIT_ZOOKEEPER__READS_PER_SECOND": "0"}


def clean_env() -> dict[str, str]:
    """This environment without BKAUDIT_* (the caller's shell must not change what is measured)."""
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}


def measured(argv: list[str], env: dict[str, str], stderr: Path) -> tuple[int, int, float, list[str]]:
    """Run a child to its end: (exit status, its peak RSS in bytes, wall seconds, stdout's lines)."""
    t0 = time.monotonic()
    with stderr.open("ab") as err:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, env=env)
        assert child.stdout is not None
        lines = [line.decode() for line in child.stdout]
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, usage.ru_maxrss * 1024, time.monotonic() - t0, lines


def scan(uri: str, logs: Path, ledgers: int) -> dict[str, Any]:
    argv = [str(BIN), "check", "--metadata-service-uri", uri, "--checks", "scrutiny", "--format", "json"]
    rc, peak, wall, lines = measured(argv, clean_env() | LIMITS_OFF, logs / "scan.log")
    objects = [json.loads(line) for line in lines if line.strip()]
    summary = objects[-1].get("summary", {}) if objects else {}
    found = Counter(o["category"] for o in objects if "summary" not in o)
    row = {
        "side": "scan",
        "ledgers": ledgers,
        "exit": rc,
        "peak_rss_mb": round(peak / 2**20, 1),
        "seconds": round(wall, 1),
        "findings": dict(found),
        "checked": sum(c.get("ledgersChecked", 0) for c in summary.get("checks", [])),
    }
    if rc != 0 or found != Counter({"risky_quorum": ledgers}):  # info findings alone: exit 0
        raise RuntimeError(f"the scan of {ledgers} ledgers did not find exactly one risky_quorum each: {row}")
    return row


def index(uri: str, logs: Path, ledgers: int, trace: bool) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.memory_index", uri, *(["--trace"] if trace else [])]
    rc, peak, wall, lines = measured(argv, clean_env(), logs / "index.log")
    if rc != 0 or not lines:
        raise RuntimeError(f"the index build failed (exit {rc}); see {logs / 'index.log'}")
    row = {"side": "index-traced" if trace else "index", **json.loads(lines[-1])}
    if row["ledgers"] != ledgers:
        raise RuntimeError(f"the index holds {row['ledgers']} ledgers of {ledgers}")
    return row


def start_simulated_bookies(count: int, uri: str, logs: Path) -> Proc:
    """The simulated bookies for ledgers 1..count, registered, in a process of their own."""
    log = logs / f"simbookie-{count}.log"
    argv = [sys.executable, "-m", "bench.simbookie", "--register", uri]
    sim = Proc("simbookie", [*argv, "planted", "--ledgers", str(count), "--bookies", ",".join(BOOKIES)], log)
    sim.start()
    deadline = time.monotonic() + 60
    while '"ready": true' not in log.read_text(errors="replace"):
        if not sim.running or time.monotonic() > deadline:
            sim.stop()
            raise RuntimeError(f"the simulated bookies did not start; see {log}")
        time.sleep(0.2)
    return sim


def summarize(rows: list[dict[str, Any]], sizes: list[int]) -> dict[str, Any]:
    def one(side: str, size: int) -> dict[str, Any]:
        return next(r for r in rows if r["side"] == side and r["ledgers"] == size)

    out: dict[str, Any] = {"sizes": sizes}
    for size in sizes:
        s, i, t = one("scan", size), one("index", size), one("index-traced", size)
        out[str(size)] = {
            "scan_peak_rss_mb": s["peak_rss_mb"],
            "scan_seconds": s["seconds"],
            "index_peak_rss_mb": i["peak_rss_mb"],
            "index_rss_bytes_per_ledger": i["rss_bytes_per_ledger"],
            "index_traced_bytes_per_ledger": t["traced_bytes_per_ledger"],
        }
    if len(sizes) >= 2:
        a, b = one("scan", sizes[-2])["peak_rss_mb"], one("scan", sizes[-1])["peak_rss_mb"]
        out[f"scan_growth_{sizes[-2]}_to_{sizes[-1]}_pct"] = round((b - a) / a * 100, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000", help="ledger counts, ascending (comma list)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    cluster = Cluster(
        workdir,
        num_bookies=0,
        zk_port=ports.SECOND_ZK_PORT,
        port_base=ports.SECOND_PORT_BASE,
        http_base=ports.SECOND_HTTP_BASE,
        zk_heap_mb=ZK_HEAP_MB,
        zk_force_sync=False,
    )
    logs = workdir / "logs"
    rows: list[dict[str, Any]] = []
    try:
        cluster.start()
        uri = cluster.metadata_service_uri
        planted_so_far = 0
        for size in sizes:
            started = time.monotonic()
            plant(cluster.kazoo, cluster.ledgers_root, size, BOOKIES, first=planted_so_far + 1)
            print(f"planted {size} ledgers ({time.monotonic() - started:.0f}s)", flush=True)
            planted_so_far = size
            sim = start_simulated_bookies(size, uri, logs)
            try:
                rows.append(scan(uri, logs, size))
                print(json.dumps(rows[-1]), flush=True)
            finally:
                sim.stop()  # SIGTERM, by pid: it prints what it served into its log
            for trace in (False, True):
                rows.append(index(uri, logs, size, trace))
                print(json.dumps(rows[-1]), flush=True)
        summary = summarize(rows, sizes)
        print(json.dumps(summary, indent=2))
        print(f"results: {save_results('memory', summary, rows)}")
    finally:
        cluster.stop()
        if args.keep:
            print(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
