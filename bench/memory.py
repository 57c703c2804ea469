"""Peak memory of a full scrutiny and of the daemon's bookie index at 10k, 100k and 1M ledgers (issue 12,
docs/benchmarks.md "Memory at 10k, 100k and 1M ledgers").

    BK_TEST_PORT_SLOT=5 .venv/bin/python -m bench.memory                        # 10k, 100k, 1M: hours
    BK_TEST_PORT_SLOT=5 .venv/bin/python -m bench.memory --sizes 2000,20000     # a quick smoke
    BK_TEST_PORT_SLOT=5 .venv/bin/python -m bench.memory --baseline ../old-checkout # before and after

Starts its own ZooKeeper ("second cluster" ports; a 2 GiB heap and no fsync, as a million znodes need on
this machine; no real bookie) and, for each size in turn, plants closed E3/WQ2/AQ2 ledgers of 100
entries up to that size (devcluster/planted.py, over six bookie ids) and starts simulated bookies for them in
a process of their own (`python -m devcluster.simbookie planted`: they answer from the write schedule and
register themselves). Then, each in a fresh child process:
* **scan**: `bk-auditor check --checks scrutiny --format json` with the bookie and ZooKeeper rate limits
  off; its peak RSS (GNU time's, see `measured`), wall time, exit status and the findings it printed, which
  must be one `risky_quorum` per ledger (WQ == AQ) and nothing else (exit status 0);
* **index**: bench/memory_index.py, the daemon's `LedgerIndex.rebuild()`: peak RSS, RSS kept after the
  build per ledger, and in a second run the bytes tracemalloc sees the index hold per ledger.
With `--baseline TREE`, the same children also run with TREE's `auditor` (PYTHONPATH; `--baseline-sides`
limits them to the scan or the index), on the same ZooKeeper and bookies. A scan that fails or finds
anything else is recorded with its last stderr lines, not retried. Prints one JSON line per measurement
and a summary (growth of the scan's peak RSS from the second size
to the last, the index's bytes per ledger), saved under bench/results/memory/. Not a test: nothing here
asserts a size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import save_results, second_cluster, started
from devcluster import ports
from devcluster.cluster import Cluster, Proc
from devcluster.planted import DEFAULT_SHAPE, Shape, plant

BIN = Path(sys.executable).with_name("bk-auditor")
TIME = "/usr/bin/time"  # GNU time: the child's own peak RSS (see `measured`)
ZK_HEAP_MB = 2048
BOOKIES = [f"127.0.0.{i}:{ports.BENCH_SIM_PORT_BASE + i}" for i in range(1, 7)]
LIMITS_OFF = {"BKAUDIT_BOOKIE_CLIENT__REQUESTS_PER_SECOND": "0", "BKAUDIT_ZOOKEEPER__READS_PER_SECOND": "0"}


@dataclass(frozen=True)
class Peak:
    exit: int
    peak: int  # bytes
    seconds: float
    cpu_seconds: float = 0.0  # user + system, the child's and its waited-for children's (worker processes)


class JsonLines:
    """A `check`/`sweep --format json` child's stdout, line by line: findings counted per category (a
    million are counted, never held) and the summary kept."""

    def __init__(self) -> None:
        self.found: Counter[str] = Counter()
        self.summary: dict[str, Any] = {}

    def line(self, text: str) -> None:
        if not text.strip():
            return
        obj = json.loads(text)
        if "summary" in obj:
            self.summary.update(obj["summary"])
        else:
            self.found[obj["category"]] += 1

    @property
    def checked(self) -> int:
        return sum(c.get("ledgersChecked", 0) for c in self.summary.get("checks", []))


@dataclass(frozen=True)
class Code:
    """Whose `auditor` a child runs: this tree's, or another checkout's (`--baseline`: before and after a
    change, on the same ZooKeeper and bookies in one run)."""

    label: str
    tree: Path | None = None

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """This environment without BKAUDIT_* (the caller's shell must not change what is measured)."""
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
        if self.tree is not None:
            env["PYTHONPATH"] = str(self.tree)
        return env | (extra or {})


def measured(
    code: Code,
    argv: list[str],
    env: dict[str, str],
    stderr: Path,
    line: Callable[[str], None],
    preexec: Callable[[], None] | None = None,
) -> Peak:
    """Run a child to its end, each line of its stdout to `line` as it comes (a million findings are
    counted, never held): its exit status, peak RSS, wall time and CPU time. `preexec` runs in the forked
    child before it execs (bench/cpuquota.py: joining a cgroup).

    The peak comes from /usr/bin/time (its wait4 of the child), not from our own wait4: Linux carries the
    spawning process's resident set into a child's ru_maxrss (fork copies it, exec records it, and Python
    spawns with vfork), so a child of this process, grown by planting, would report at least its size.
    """
    t0 = time.monotonic()
    with tempfile.NamedTemporaryFile("r", suffix=".maxrss") as peak, stderr.open("ab") as err:
        child = subprocess.Popen(
            [TIME, "-f", "%U %S %M", "-o", peak.name, *argv],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=code.tree,
            preexec_fn=preexec,
        )
        assert child.stdout is not None
        for raw in child.stdout:
            line(raw.decode())
        rc = child.wait()
        # after "Command exited with non-zero status N", if it did
        user, system, kib = peak.read().split()[-3:]
    return Peak(rc, int(kib) * 1024, time.monotonic() - t0, float(user) + float(system))


def last_words(log: Path, lines: int = 5) -> list[str]:
    """A child's last stderr lines that are not progress reports: why it failed."""
    text = log.read_text(errors="replace").splitlines()
    return [line[:500] for line in text if '"check progress"' not in line][-lines:]


def scan(code: Code, uri: str, logs: Path, ledgers: int) -> dict[str, Any]:
    argv = [str(BIN), "check", "--metadata-service-uri", uri, "--checks", "scrutiny", "--format", "json"]
    # The command's own streaming scan, in one process (`check` runs one process per CPU by default; a
    # baseline tree from before `--processes` runs one anyway).
    argv += ["--processes", "1"] if code.tree is None else []
    log = logs / f"scan-{code.label}-{ledgers}.log"
    out = JsonLines()
    run = measured(code, argv, code.env(LIMITS_OFF), log, out.line)
    row: dict[str, Any] = {
        "side": "scan",
        "code": code.label,
        "ledgers": ledgers,
        "exit": run.exit,
        "peak_rss_mb": round(run.peak / 2**20, 1),
        "seconds": round(run.seconds, 1),
        "findings": dict(out.found),
        "checked": out.checked,
    }
    # Every ledger is healthy and WQ == AQ: one informational risky_quorum each, exit 0. Anything else is
    # kept in the row (with the child's last words) rather than stopping the other measurements.
    if run.exit != 0 or out.found != Counter({"risky_quorum": ledgers}):
        row["failed"] = last_words(log)
    return row


def index(code: Code, uri: str, logs: Path, ledgers: int, trace: bool) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.memory_index", uri, *(["--trace"] if trace else [])]
    log = logs / f"index-{code.label}-{ledgers}.log"
    out: list[str] = []
    run = measured(code, argv, code.env(), log, out.append)
    if run.exit != 0 or not out:
        raise RuntimeError(f"the index build failed (exit {run.exit}): {last_words(log)}")
    row = {"side": "index-traced" if trace else "index", "code": code.label, **json.loads(out[-1])}
    row["peak_rss_mb"] = round(run.peak / 2**20, 1)
    if row["ledgers"] != ledgers:
        raise RuntimeError(f"the index holds {row['ledgers']} ledgers of {ledgers}")
    return row


def start_simulated_bookies(count: int, uri: str, logs: Path, shape: Shape = DEFAULT_SHAPE) -> Proc:
    """The simulated bookies for ledgers 1..count, registered, in a process of their own."""
    log = logs / f"simbookie-{count}.log"
    argv = [sys.executable, "-m", "devcluster.simbookie", "--register", uri, "planted", "--ledgers", str(count)]
    sim = Proc("simbookie", [*argv, "--bookies", ",".join(BOOKIES), *shape.argv], log)
    sim.start()
    deadline = time.monotonic() + 60
    while '"ready": true' not in log.read_text(errors="replace"):
        if not sim.running or time.monotonic() > deadline:
            sim.stop()
            raise RuntimeError(f"the simulated bookies did not start; see {log}")
        time.sleep(0.2)
    return sim


@contextmanager
def planted_zookeeper(prefix: str, keep: bool) -> Iterator[tuple[Cluster, Path]]:
    """A started ZooKeeper and a formatted ledgers root for up to a million planted ledgers, and no real
    bookie (the "second cluster" ports; a 2 GiB heap and no fsync, as a million znodes need on this
    machine), in a new work directory; stopped at the end, and the directory removed unless `keep`."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    cluster = second_cluster(workdir, num_bookies=0, zk_heap_mb=ZK_HEAP_MB, zk_force_sync=False)
    with started(cluster, workdir, keep):
        yield cluster, workdir


@contextmanager
def planted_and_served(
    prefix: str, ledgers: int, keep: bool, shape: Shape = DEFAULT_SHAPE
) -> Iterator[tuple[str, Path]]:
    """`planted_zookeeper` with ledgers 1..`ledgers` of `shape` planted and their simulated bookies serving
    them: (metadata service URI, work directory; logs go to its `logs`); the bookies stopped at the end."""
    with planted_zookeeper(prefix, keep) as (cluster, workdir):
        logs = workdir / "logs"
        uri = cluster.metadata_service_uri
        started_at = time.monotonic()
        plant(cluster.kazoo, cluster.ledgers_root, ledgers, BOOKIES, first=1, shape=shape)
        print(f"planted {ledgers} ledgers {shape.label} ({time.monotonic() - started_at:.0f}s)", flush=True)
        sim = start_simulated_bookies(ledgers, uri, logs, shape)
        try:
            yield uri, workdir
        finally:
            sim.stop()


def summarize(rows: list[dict[str, Any]], sizes: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"sizes": sizes}
    for code in dict.fromkeys(r["code"] for r in rows):

        def one(side: str, size: int) -> dict[str, Any]:
            return next((r for r in rows if r["side"] == side and r["ledgers"] == size and r["code"] == code), {})

        mine: dict[str, Any] = {}
        for size in sizes:
            s, i, t = one("scan", size), one("index", size), one("index-traced", size)
            mine[str(size)] = {
                "scan_peak_rss_mb": s.get("peak_rss_mb"),
                "scan_seconds": s.get("seconds"),
                "scan_failed": "failed" in s,
                "index_peak_rss_mb": i.get("peak_rss_mb"),
                "index_rss_bytes_per_ledger": i.get("rss_bytes_per_ledger"),
                "index_traced_bytes_per_ledger": t.get("traced_bytes_per_ledger"),
            }
        if len(sizes) >= 2 and one("scan", sizes[-2]) and one("scan", sizes[-1]):
            a, b = one("scan", sizes[-2])["peak_rss_mb"], one("scan", sizes[-1])["peak_rss_mb"]
            mine[f"scan_growth_{sizes[-2]}_to_{sizes[-1]}_pct"] = round((b - a) / a * 100, 1)
        out[code] = mine
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000", help="ledger counts, ascending (comma list)")
    ap.add_argument("--baseline", type=Path, help="also measure the code of this checkout (e.g. before a change)")
    ap.add_argument(
        "--baseline-sides", default="scan,index", help="what to measure with --baseline's code (scan, index)"
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    codes = [Code("this")]
    if args.baseline is not None:
        codes.append(Code("baseline", args.baseline.resolve()))
    baseline_sides = set(args.baseline_sides.split(","))
    rows: list[dict[str, Any]] = []

    def record(row: dict[str, Any]) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    with planted_zookeeper("bench-memory-", args.keep) as (cluster, workdir):
        logs = workdir / "logs"
        uri = cluster.metadata_service_uri
        planted_so_far = 0
        for size in sizes:
            started = time.monotonic()
            plant(cluster.kazoo, cluster.ledgers_root, size, BOOKIES, first=planted_so_far + 1)
            print(f"planted {size} ledgers ({time.monotonic() - started:.0f}s)", flush=True)
            planted_so_far = size
            sim = start_simulated_bookies(size, uri, logs)
            try:
                for code in codes:
                    if code.tree is None or "scan" in baseline_sides:
                        record(scan(code, uri, logs, size))
            finally:
                sim.stop()  # SIGTERM, by pid: it prints what it served into its log
            for code in codes:
                if code.tree is None or "index" in baseline_sides:
                    for trace in (False, True):
                        record(index(code, uri, logs, size, trace))
        summary = summarize(rows, sizes)
        print(json.dumps(summary, indent=2))
        print(f"results: {save_results('memory', summary, rows)}")


if __name__ == "__main__":
    main()
