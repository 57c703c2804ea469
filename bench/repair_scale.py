"""A lost bookie at scale: Java AutoRecovery vs bk-auditor vs a floor client (issue 39 part 2,
docs/benchmarks.md "Repair at scale").

    BK_TEST_PORT_SLOT=3 BK_TEST_DAEMON_PORT_BASE=19100 \
        .venv/bin/python -m bench.repair_scale --storage db --snapshot /tmp/hs/snap-db   # full size
    .venv/bin/python -m bench.repair_scale --ledgers 30 --entries 100 --sides ours,floor  # a quick smoke

Its own real cluster (the "second cluster" ports of devcluster/ports.py): ZooKeeper and six real 4.17
bookies, all on `--storage` (DbLedgerStorage or SortedLedgerStorage), Prometheus stats on. Written once
by the real Java client (BkLedgerTool `create --count`, one JVM per batch, `--writers` at a time):
`--ledgers` closed ledgers in equal thirds E3/WQ3/AQ2, E3/WQ2/AQ2, E5/WQ2/AQ2, every ensemble pinned
to bookie 1 (the victim) and a rotating choice of the others, each ledger `--entries` x a cycle of
entry sizes (`MIX`). Then every bookie and ZooKeeper are stopped and their data directories copied to
`--snapshot` (reused by a later invocation that names the same directory); every run starts by copying
them back and starting the cluster again, so every side meets the identical state.

A run of one side: restore; start a light writer (`RepairScale load`: E3/WQ2 ledgers away from the
victim, `--load-rate` adds/s) and the side; wait until the bookies see no requests but the writer's;
measure the writer's latency and the bookies' own ADD_ENTRY latency for `--baseline-seconds` (no repair);
then SIGKILL bookie 1 (kept away) and start the clock. Sides:

* `java`: `--workers` AutoRecoveryMain processes (Auditor election + ReplicationWorker, the 4.17.3
  defaults; lostBookieRecoveryDelay 0; the periodic full checks off, as `start_autorecovery` has them);
* `ours`: `bk-auditor run` with `repair.workers_beside_auditor` = `--workers`, defaults otherwise
  (lost bookie delay 0, the default);
* `floor`: `RepairScale floor` (bench/java/RepairScale.java), already connected, told to go at the
  kill: reads the ledgers' metadata, then copies every lost copy (read from a survivor, RECOVERY_ADD to a
  bookie outside the ensemble, 256 entries in flight), no checks, no marker, no metadata write.

The clock stops (java, ours) when every ledger's metadata no longer names the victim and no ledger has
a marker; (floor) when its last add is acknowledged. Sampled every second from ZooKeeper: the victim's
registration gone, the first and last marker, and per ledger when its metadata stopped naming the victim;
"no single copy" is when the last WQ2 ledger got there (a WQ2 ledger that lost a copy has one left until
then). Per survivor bookie, from its own /metrics: requests by operation and bytes read / written, and
its JVM's CPU seconds (/proc/<pid>/stat), over the clock's span. After the clock (not counted), Java's
census (`copies`) must find every entry of every ledger whole on its write set (java, ours). Sides
alternate in the order of `--sides`, `--runs` times. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from auditor.metadata.codecs.paths import MarkerPaths
from bench.harness import save_results, second_cluster
from devcluster import ports
from devcluster.checks_util import ledger_path
from devcluster.cli_util import BIN
from devcluster.cluster import Cluster
from devcluster.cluster.javatools import BK_HOME, BK_VERSION, JVM_COMMON, classpath, compile_once
from devcluster.cluster.processes import Proc, descendant_pids

VICTIM = 1
SHAPES = ((3, 3), (3, 2), (5, 2))  # (ensemble, write quorum), ack quorum 2
# (entries, entry size) by batch, alternating: Pulsar-like ledgers of 1,000-1,500 entries of 1-2 KiB.
MIX = ((1500, 1024), (1000, 2048))
SOURCE = Path(__file__).resolve().parent / "java" / "RepairScale.java"
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The bookies' own latency summaries (ms; successful requests): the add request as the server sees it
# (queueing included), its processing, and the storage's share for the recovery adds alone.
LATENCIES = {
    "bookkeeper_server_ADD_ENTRY_REQUEST": "add_request",
    "bookkeeper_server_ADD_ENTRY": "add",
    "bookie_BOOKIE_RECOVERY_ADD_ENTRY": "recovery_add",
}
PORT = ports.DAEMON_PORT_BASE + 60  # ours: admin, metrics, worker metrics from + 2
AUTORECOVERY_PORT = ports.SECOND_PORT_BASE + 50  # Java AutoRecoveryMain i's identity port + i (nothing listens)


# ---------------------------------------------------------------------------------------------- cluster
def boot(cluster: Cluster, timeout: float = 180.0) -> None:
    """Start ZooKeeper and every bookie on the data already in the work directory (a restored
    snapshot): the configurations are the cluster's, no initnewcluster."""
    deadline = time.monotonic() + timeout
    assert cluster.zk is not None
    cluster.zk.start()
    while cluster._four_letter("ruok") != "imok":
        if time.monotonic() > deadline:
            raise RuntimeError("ZooKeeper did not come back")
        time.sleep(0.2)
    for b in cluster.bookies:
        b.proc.start()
    for b in cluster.bookies:
        cluster.wait_ready(b.index, max(5.0, deadline - time.monotonic()))


def halt(cluster: Cluster) -> None:
    """Every bookie and ZooKeeper stopped (SIGTERM by pid: the bookies flush), our ZooKeeper client closed."""
    if cluster._kazoo is not None:
        try:
            cluster._kazoo.stop()
            cluster._kazoo.close()
        except Exception:
            pass
        cluster._kazoo = None
    for b in cluster.bookies:
        b.proc.stop(timeout=60)
    assert cluster.zk is not None
    cluster.zk.stop()


def data_dirs(cluster: Cluster) -> list[str]:
    return [f"bookie{b.index}" for b in cluster.bookies] + ["zk/data"]


def snapshot(cluster: Cluster, snap: Path, manifest: dict[str, Any]) -> None:
    halt(cluster)
    snap.mkdir(parents=True, exist_ok=True)
    for d in data_dirs(cluster):
        (snap / d).parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(snap / d, ignore_errors=True)
        subprocess.run(["cp", "-a", str(cluster.workdir / d), str(snap / d)], check=True)
    (snap / "manifest.json").write_text(json.dumps(manifest))


def restore(cluster: Cluster, snap: Path) -> float:
    """Stop everything, put the snapshot's data back, start again; returns the seconds it took."""
    t = time.monotonic()
    halt(cluster)
    for d in data_dirs(cluster):
        shutil.rmtree(cluster.workdir / d, ignore_errors=True)
        subprocess.run(["cp", "-a", str(snap / d), str(cluster.workdir / d)], check=True)
    boot(cluster)
    return time.monotonic() - t


def make_cluster(workdir: Path, storage: str) -> Cluster:
    return second_cluster(
        workdir, num_bookies=6, storage=dict.fromkeys(range(1, 7), storage), lost_bookie_recovery_delay=0
    )


def prepare_unstarted(cluster: Cluster) -> None:
    """The cluster's configurations and process records without starting it (for a restored snapshot)."""
    for d in (cluster.logs_dir, cluster.conf_dir):
        d.mkdir(parents=True, exist_ok=True)
    cluster._write_java_configs()
    cluster._started = True
    cluster._check_ports_free()
    zk_dir = cluster.workdir / "zk"
    (zk_dir / "data").mkdir(parents=True, exist_ok=True)
    # _start_zookeeper writes the configuration and starts; run it once, then stop: the Proc stays.
    cluster._start_zookeeper(time.monotonic() + 60)
    cluster.zk.stop()  # type: ignore[union-attr]
    cluster.bookies = [cluster._make_bookie(n) for n in range(1, cluster.num_bookies + 1)]
    cluster._compile_tool()


def write_ledgers(cluster: Cluster, args: argparse.Namespace) -> list[dict[str, Any]]:
    """`--ledgers` ledgers, thirds of SHAPES, each ensemble bookie 1 + a rotating choice of the others."""
    ids = {n: cluster.bookie(n).bookie_id for n in range(1, 7)}
    others = [ids[n] for n in range(2, 7)]
    per_shape = math.ceil(args.ledgers / len(SHAPES))
    batches: list[tuple[int, int, list[str], int, int, int]] = []
    for e, wq in SHAPES:
        choices = list(itertools.combinations(others, e - 1))
        per_batch = max(1, math.ceil(per_shape / len(choices)))
        made = 0
        for i, choice in enumerate(itertools.cycle(choices)):
            if made >= per_shape:
                break
            count = min(per_batch, per_shape - made)
            entries, size = (
                MIX[(len(batches) + i) // 2 % len(MIX)] if args.entries is None else (args.entries, args.entry_size)
            )
            batches.append((e, wq, [ids[VICTIM], *choice], count, entries, size))
            made += count

    def one(batch: tuple[int, int, list[str], int, int, int]) -> list[dict[str, Any]]:
        e, wq, ensemble, count, entries, size = batch
        rows = cluster.create_ledgers(
            count,
            ensemble=e,
            write_quorum=wq,
            ack_quorum=2,
            entries=entries,
            entry_size=size,
            bookies=ensemble,
            allowed=list(ids.values()),
        )
        for r in rows:
            r["entrySize"] = size
        return rows

    out: list[dict[str, Any]] = []
    with ThreadPoolExecutor(args.writers) as pool:
        for rows in pool.map(one, batches):
            out += rows
    return out


def lost_of(r: dict[str, Any]) -> tuple[int, int]:
    """(copies, payload bytes) of ledger row r that were on the victim (every ensemble names it, index 0)."""
    e, wq, n = r["ensembleSize"], r["writeQuorum"], r["lastEntryId"] + 1
    copies = sum(1 for x in range(n) if (0 - x) % e < wq)  # entry x's write set: x .. x+wq-1 (mod e)
    return copies, copies * r["entrySize"]


# ---------------------------------------------------------------------------------------------- measures
def scrape(cluster: Cluster, n: int) -> dict[str, float]:
    """Bookie n's request counts, bytes, and ADD_ENTRY latency sums and quantiles (successful adds)."""
    status, text = cluster.http_get(n, "/metrics", timeout=10)
    if status != 200:
        raise RuntimeError(f"bookie {n}: /metrics answered {status}")
    out: dict[str, float] = {f"{k}_{x}": 0.0 for k in LATENCIES.values() for x in ("count", "sum_ms")}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name = s.name
            if name.startswith("bookkeeper_server_") and name.endswith("_REQUEST_count"):
                key = "req_" + name[len("bookkeeper_server_") : -len("_REQUEST_count")]
                out[key] = out.get(key, 0.0) + s.value
            elif family.name in ("bookie_WRITE_BYTES", "bookie_READ_BYTES"):
                out[family.name] = out.get(family.name, 0.0) + s.value
            if s.labels.get("success") == "true" and family.name in LATENCIES:
                short = LATENCIES[family.name]
                if name.endswith("_count"):
                    out[f"{short}_count"] = out.get(f"{short}_count", 0.0) + s.value
                elif name.endswith("_sum"):
                    out[f"{short}_sum_ms"] = out.get(f"{short}_sum_ms", 0.0) + s.value
                elif s.labels.get("quantile") in ("0.5", "0.99", "0.999") and not math.isnan(s.value):
                    out[f"{short}_q{s.labels['quantile']}_ms"] = s.value
    return out


def scrape_all(cluster: Cluster, bookies: list[int]) -> dict[int, dict[str, float]]:
    return {n: scrape(cluster, n) for n in bookies}


def cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def tree_cpu(pid: int | None) -> float:
    """CPU seconds of a process and its live descendants (children that exited are not counted)."""
    if pid is None:
        return 0.0
    return cpu_seconds(pid) + sum(cpu_seconds(p) for p in descendant_pids(pid))


def latency(before: dict[int, dict[str, float]], after: dict[int, dict[str, float]]) -> dict[str, Any]:
    """The bookies' own add latencies over a window: the mean from the sums and counts, and the worst
    bookie's quantiles at its end when it has any (the summaries roll over every 60 s: NaN before)."""
    out: dict[str, Any] = {}
    for short in LATENCIES.values():
        count = sum(after[n][f"{short}_count"] - before[n][f"{short}_count"] for n in after)
        total = sum(after[n][f"{short}_sum_ms"] - before[n][f"{short}_sum_ms"] for n in after)
        out[short] = {"count": int(count), "mean_ms": round(total / count, 3) if count else None}
        for q in ("0.5", "0.99", "0.999"):
            got = [after[n][f"{short}_q{q}_ms"] for n in after if f"{short}_q{q}_ms" in after[n]]
            if got:
                out[short][f"max_bookie_p{q[2:] or '0'}_ms"] = round(max(got), 3)
    return out


def deltas(before: dict[int, dict[str, float]], after: dict[int, dict[str, float]]) -> dict[str, Any]:
    per: dict[str, dict[str, int]] = {}
    total: Counter[str] = Counter()
    for n in after:
        wanted = [k for k in after[n] if k.startswith("req_") or "BYTES" in k or k == "recovery_add_count"]
        d = {k: int(after[n].get(k, 0) - before[n].get(k, 0)) for k in wanted}
        per[str(n)] = {k: v for k, v in sorted(d.items()) if v}
        total.update(d)
    return {"per_bookie": per, "total": {k: v for k, v in sorted(total.items()) if v}}


class Load:
    """The light writer (RepairScale load): MARK returns its adds and latency since the last MARK."""

    def __init__(self, cluster: Cluster, classes: Path, rate: float, log: Path) -> None:
        argv = java_argv(
            cluster,
            classes,
            "load",
            "--exclude",
            cluster.bookie(VICTIM).bookie_id,
            "--rate",
            str(rate),
            "--entry-size",
            "1024",
            "--roll",
            "5000",
        )
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True
        )
        ready = self._line()
        if ready.strip() != "READY":
            raise RuntimeError(f"load writer: {ready!r}")

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("load writer ended")
        return line

    def mark(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("MARK\n")
        self.proc.stdin.flush()
        while True:
            line = self._line()
            if line.startswith("{"):
                got: dict[str, Any] = json.loads(line)
                if "error" in got:
                    raise RuntimeError(f"load writer: {got['error']}")
                return got

    def stop(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write("STOP\n")
            self.proc.stdin.close()
            self.proc.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


def java_argv(cluster: Cluster, classes: Path, *args: str, heap: str = "256m") -> list[str]:
    return [
        "java",
        *JVM_COMMON,
        f"-Xmx{heap}",
        f"-Dlog4j.configurationFile={cluster.conf_dir / 'log4j2-shell.xml'}",
        "-cp",
        f"{classes}:{classpath()}",
        "RepairScale",
        args[0],
        "--metadata-uri",
        cluster.metadata_service_uri,
        *args[1:],
    ]


# ---------------------------------------------------------------------------------------------- sides
class JavaAutoRecovery:
    name = "java"

    def __init__(self, cluster: Cluster, workers: int) -> None:
        self.cluster, self.workers = cluster, workers
        self.procs: list[Proc] = []

    def start(self) -> None:
        self.procs = []
        for i in range(self.workers):
            conf = self.cluster.conf_dir / f"autorecovery-{i}.conf"
            conf.write_text(
                "\n".join(
                    [
                        f"metadataServiceUri={self.cluster.metadata_service_uri}",
                        "zkTimeout=6000",
                        "allowLoopback=true",
                        f"bookiePort={AUTORECOVERY_PORT + i}",
                        "advertisedAddress=127.0.0.1",
                        "httpServerEnabled=false",
                        "auditorPeriodicCheckInterval=0",
                        "auditorPeriodicBookieCheckInterval=0",
                        "",
                    ]
                )
            )
            argv = [
                "java",
                *JVM_COMMON,
                f"-Dlog4j.configurationFile={self.cluster.conf_dir / 'log4j2-server.xml'}",
                "-Xmx256m",
                "-XX:MaxDirectMemorySize=128m",
                "-cp",
                classpath(),
                "org.apache.bookkeeper.replication.AutoRecoveryMain",
                "--conf",
                str(conf),
            ]
            p = Proc(f"autorecovery-{i}", argv, self.cluster.logs_dir / f"autorecovery-{i}.log")
            p.start()
            self.procs.append(p)

    def go(self) -> None: ...

    def done(self) -> dict[str, Any] | None:
        return None

    def cpu(self) -> float:
        return sum(tree_cpu(p.pid) for p in self.procs)

    def stop(self) -> dict[str, Any]:
        for p in self.procs:
            p.stop()
        return {}


class Ours:
    name = "ours"

    def __init__(self, cluster: Cluster, workers: int, workdir: Path) -> None:
        self.cluster, self.workers, self.workdir = cluster, workers, workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        config = {
            "metadata_service_uri": self.cluster.metadata_service_uri,
            "admin": {"bind": f"127.0.0.1:{PORT}"},
            "metrics": {"bind": f"127.0.0.1:{PORT + 1}"},
            "repair": {"workers_beside_auditor": self.workers, "worker_metrics_bind": f"127.0.0.1:{PORT + 2}"},
            "schedule": {"lost_bookie_delay_seconds": 0},
            "log": {"format": "json", "level": "info"},
        }
        cfg = self.workdir / "ours.yaml"
        cfg.write_text(yaml.safe_dump(config))
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
        with (self.workdir / f"ours-{self.runs}.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [str(BIN), "run", "--config", str(cfg), "--identity", "bench-ours"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def go(self) -> None: ...

    def done(self) -> dict[str, Any] | None:
        return None

    def cpu(self) -> float:
        return tree_cpu(self.proc.pid if self.proc else None)

    def repair_metrics(self) -> dict[str, float]:
        """The workers' own bk_auditor_repair_* samples (summed over workers; histograms' sums and counts)."""
        out: dict[str, float] = {}
        for i in range(self.workers):
            import urllib.request

            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{PORT + 2 + i}/metrics", timeout=5) as r:
                    text = r.read().decode()
            except OSError:
                continue
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    if (
                        s.name.startswith("bk_auditor_repair")
                        and not s.name.endswith("_bucket")
                        and not s.name.endswith("_created")
                    ):
                        labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k != "cluster")
                        key = f"{s.name}{{{labels}}}"
                        out[key] = out.get(key, 0.0) + s.value
        return dict(out)

    def stop(self) -> dict[str, Any]:
        metrics = self.repair_metrics()
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        return {"repair_metrics": metrics}


class Floor:
    name = "floor"

    def __init__(self, cluster: Cluster, classes: Path, lids_file: Path, log: Path) -> None:
        self.cluster, self.classes, self.lids_file, self.log_path = cluster, classes, lids_file, log
        self.proc: subprocess.Popen[str] | None = None
        self.result: dict[str, Any] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        self.result = None
        bookies = ",".join(b.bookie_id for b in self.cluster.bookies)
        argv = java_argv(
            self.cluster,
            self.classes,
            "floor",
            "--victim",
            self.cluster.bookie(VICTIM).bookie_id,
            "--bookies",
            bookies,
            "--ledgers-file",
            str(self.lids_file),
            "--in-flight",
            "256",
            heap="768m",
        )
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, start_new_session=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "READY":
            raise RuntimeError(f"floor: {line!r}")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.result = json.loads(line)

    def go(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write("GO\n")
        self.proc.stdin.flush()

    def done(self) -> dict[str, Any] | None:
        if self.result is None and self.proc is not None and self.proc.poll() is not None:
            self._reader.join(5)
            if self.result is None:
                raise RuntimeError(f"floor exited rc={self.proc.returncode} without a result; log {self.log_path}")
        return self.result

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid if self.proc else None)

    def stop(self) -> dict[str, Any]:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self._log:
            self._log.close()
        return {"floor": self.result}


# ---------------------------------------------------------------------------------------------- a run
def settle(cluster: Cluster, bookies: list[int], minimum: float, maximum: float) -> float:
    """Until the bookies served no request but adds (the writer's) for 4 s: the side's start-up work done."""
    t0 = time.monotonic()
    quiet_since = t0
    last = scrape_all(cluster, bookies)
    while time.monotonic() - t0 < maximum:
        time.sleep(2)
        now = scrape_all(cluster, bookies)
        busy = any(
            now[n].get(k, 0) != last[n].get(k, 0)
            for n in bookies
            for k in now[n]
            if k.startswith("req_") and k != "req_ADD_ENTRY"
        )
        last = now
        if busy:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= 4 and time.monotonic() - t0 >= minimum:
            break
    return time.monotonic() - t0


def sample(cluster: Cluster, paths: list[tuple[str, str]], victim: bytes) -> tuple[list[bool], list[bool]]:
    """For each ledger (marker path, ledger path): whether it is marked, and whether its metadata still
    names the victim (a deleted ledger counts as not naming it). All reads pipelined."""
    kz = cluster.kazoo
    marks = [kz.exists_async(m) for m, _ in paths]
    metas = [kz.get_async(p) for _, p in paths]
    marked = [a.get(timeout=30) is not None for a in marks]
    names = []
    for a in metas:
        try:
            data, _ = a.get(timeout=30)
            names.append(victim in data)
        except Exception:
            names.append(False)
    return marked, names


def one_run(
    cluster: Cluster,
    side: Any,
    ledgers: list[dict[str, Any]],
    snap: Path,
    classes: Path,
    args: argparse.Namespace,
    workdir: Path,
) -> dict[str, Any]:
    restore_s = restore(cluster, snap)
    lids = [r["ledgerId"] for r in ledgers]
    wq2 = [i for i, r in enumerate(ledgers) if r["writeQuorum"] == 2]
    markers = MarkerPaths(cluster.ledgers_root)
    paths = [(markers.marker(lid), ledger_path(cluster, lid)) for lid in lids]
    victim_id = cluster.bookie(VICTIM).bookie_id
    live = [n for n in range(1, 7) if n != VICTIM]
    load = Load(cluster, classes, args.load_rate, workdir / "load.log")
    try:
        side.start()
        settled = settle(cluster, list(range(1, 7)), args.settle_min, args.settle_max)
        # Baseline: the writer alone, no repair.
        load.mark()
        b0 = scrape_all(cluster, live)
        time.sleep(args.baseline_seconds)
        b1 = scrape_all(cluster, live)
        base_client = load.mark()
        base_bookie = latency(b0, b1)
        before = scrape_all(cluster, live)
        cpu0 = {n: cpu_seconds(cluster.bookie(n).pid) for n in live}
        side_cpu0 = side.cpu()
        t0 = time.monotonic()
        cluster.kill_bookie(VICTIM)
        side.go()
        unregistered = first_marker = None
        repaired_at: list[float | None] = [None] * len(lids)
        ever_marked = [False] * len(lids)
        last_marker_seen = None
        floor_result = None
        trace: list[tuple[float, int, int]] = []
        deadline = t0 + args.timeout
        while True:
            now = time.monotonic() - t0
            if unregistered is None and not cluster.kazoo.exists(cluster.registration_path(VICTIM)):
                unregistered = now
            if side.name == "floor":
                floor_result = side.done()
                if floor_result is not None:
                    break
            else:
                marked, names = sample(cluster, paths, victim_id.encode())
                now = time.monotonic() - t0
                n_marked = sum(marked)
                if n_marked:
                    last_marker_seen = now
                    if first_marker is None:
                        first_marker = now
                for i in range(len(lids)):
                    ever_marked[i] |= marked[i]
                    if repaired_at[i] is None and not names[i]:
                        repaired_at[i] = now
                left = sum(1 for x in repaired_at if x is None)
                if not trace or now - trace[-1][0] >= 10:
                    trace.append((round(now, 1), n_marked, left))
                if n_marked == 0 and left == 0:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{side.name}: not done after {args.timeout:.0f}s")
            time.sleep(1.0)
        seconds = time.monotonic() - t0
        after = scrape_all(cluster, live)
        cpu1 = {n: cpu_seconds(cluster.bookie(n).pid) for n in live}
        side_cpu = side.cpu() - side_cpu0
        run_client = load.mark()
    finally:
        extra = side.stop()
        load.stop()
    census: dict[str, Any] = {}
    if side.name != "floor":
        census = run_census(cluster, lids)
        if census["not_whole"] or census["ledgers"] != len(lids):
            print(json.dumps({"census_failed": census}), flush=True)
    d = deltas(before, after)
    tot = d["total"]
    wq2_times = [repaired_at[i] for i in wq2]
    row: dict[str, Any] = {
        "side": side.name,
        "storage": args.storage,
        "workers": args.workers if side.name != "floor" else 1,
        "restore_seconds": round(restore_s, 1),
        "settle_seconds": round(settled, 1),
        "seconds": round(seconds, 2),
        "victim_unregistered_seconds": unregistered,
        "first_marker_seconds": first_marker,
        "last_marker_seen_seconds": last_marker_seen,
        "no_single_copy_seconds": (
            max(x for x in wq2_times if x is not None) if wq2_times and all(x is not None for x in wq2_times) else None
        ),
        "ledgers_never_seen_marked": sum(1 for x in ever_marked if not x) if side.name != "floor" else None,
        "adds": tot.get("req_ADD_ENTRY", 0),
        "recovery_adds": tot.get("recovery_add_count", 0),
        "reads": tot.get("req_READ_ENTRY", 0),
        "write_bytes": tot.get("bookie_WRITE_BYTES", 0),
        "read_bytes": tot.get("bookie_READ_BYTES", 0),
        "requests_by_op": {k[4:]: v for k, v in tot.items() if k.startswith("req_")},
        "per_bookie": d["per_bookie"],
        "bookie_cpu_seconds": {str(n): round(cpu1[n] - cpu0[n], 1) for n in live},
        "bookie_cpu_seconds_total": round(sum(cpu1[n] - cpu0[n] for n in live), 1),
        "side_cpu_seconds": round(side_cpu, 1),
        "load": {
            "baseline_client": base_client,
            "baseline_bookie_add_entry": base_bookie,
            "during_client": run_client,
            "during_bookie_add_entry": latency(before, after),
        },
        "trace_s_marked_left": trace,
        "census": census,
        **extra,
    }
    if side.name == "floor" and floor_result:
        row["no_single_copy_seconds"] = floor_result.get("wq2_done_seconds")
    return row


def run_census(cluster: Cluster, lids: list[int]) -> dict[str, Any]:
    """Java's census of every ledger (two JVMs). A read that failed otherwise than "no such entry" (a
    timeout on the loaded machine) proves nothing either way: such ledgers are counted apart and read
    again, up to twice; missing and corrupt copies are final."""
    t = time.monotonic()

    def census(ids: list[int]) -> list[dict[str, Any]]:
        half = (len(ids) + 1) // 2
        with ThreadPoolExecutor(2) as pool:
            parts = pool.map(
                lambda chunk: cluster.copies([str(x) for x in chunk], timeout=3600) if chunk else [],
                [ids[:half], ids[half:]],
            )
            return [r for p in parts for r in p]

    rows = census(lids)
    lost = [r for r in rows if r["missing"] or r["corrupt"]]
    unsure = [r["ledgerId"] for r in rows if r not in lost and (r["unreadable"] or r.get("belowWriteQuorum"))]
    first_unsure = len(unsure)
    for _ in range(2):
        if not unsure:
            break
        again = census(unsure)
        lost += [r for r in again if r["missing"] or r["corrupt"]]
        unsure = [
            r["ledgerId"]
            for r in again
            if not (r["missing"] or r["corrupt"]) and (r["unreadable"] or r.get("belowWriteQuorum"))
        ]
    return {
        "ledgers": len(rows),
        "not_whole": len(lost) + len(unsure),
        "missing_or_corrupt": len(lost),
        "unreadable_first_pass": first_unsure,
        "unreadable_after_retries": len(unsure),
        "seconds": round(time.monotonic() - t, 1),
        "first_bad": lost[:2],
    }


def summarize(rows: list[dict[str, Any]], lost_copies: int, lost_bytes: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("java", "ours", "floor"):
        mine = [r for r in rows if r["side"] == name]
        if not mine:
            continue
        best = min(mine, key=lambda r: r["seconds"])
        out[name] = {
            "runs": len(mine),
            "seconds": [r["seconds"] for r in mine],
            "no_single_copy_seconds": [r["no_single_copy_seconds"] for r in mine],
            "lost_mb_per_s": [round(lost_bytes / 1e6 / r["seconds"], 2) for r in mine],
            "recovery_adds": [r["recovery_adds"] for r in mine],
            "write_gb": [round(r["write_bytes"] / 1e9, 3) for r in mine],
            "read_gb": [round(r["read_bytes"] / 1e9, 3) for r in mine],
            "bookie_cpu_seconds": [r["bookie_cpu_seconds_total"] for r in mine],
            "client_p99_ms_during": [r["load"]["during_client"]["p99_ms"] for r in mine],
            "client_p99_ms_baseline": [r["load"]["baseline_client"]["p99_ms"] for r in mine],
            "census_not_whole": [r["census"].get("not_whole") for r in mine],
            "best_seconds": best["seconds"],
        }
    if "java" in out and "ours" in out:
        j, o = out["java"], out["ours"]
        out["ours_over_java_time"] = round(min(o["seconds"]) / min(j["seconds"]), 3)
        js, os_ = j["no_single_copy_seconds"], o["no_single_copy_seconds"]
        if all(js) and all(os_):
            out["ours_over_java_no_single_copy"] = round(min(os_) / min(js), 3)
        for key in ("write_bytes", "read_bytes"):
            jb, ob = min(r[key] for r in rows if r["side"] == "java"), min(r[key] for r in rows if r["side"] == "ours")
            out[f"ours_over_java_{key}"] = round(ob / jb, 3) if jb else None
    if "floor" in out and "ours" in out:
        out["ours_speed_over_floor"] = round(min(out["floor"]["seconds"]) / min(out["ours"]["seconds"]), 3)
    out["lost_copies"], out["lost_bytes"] = lost_copies, lost_bytes
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--storage", choices=("db", "sorted"), default="db")
    ap.add_argument("--ledgers", type=int, default=2010, help="ledgers (equal thirds of the 3 shapes)")
    ap.add_argument("--entries", type=int, default=None, help="entries per ledger (default: the MIX cycle)")
    ap.add_argument("--entry-size", type=int, default=1024, help="with --entries")
    ap.add_argument("--writers", type=int, default=3, help="writer JVMs at a time while building")
    ap.add_argument("--sides", default="java,ours,floor")
    ap.add_argument("--runs", type=int, default=1, help="runs per side (alternating)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes of java and ours")
    ap.add_argument("--load-rate", type=float, default=100.0, help="the light writer's adds/s")
    ap.add_argument("--baseline-seconds", type=float, default=20.0)
    ap.add_argument("--settle-min", type=float, default=10.0)
    ap.add_argument("--settle-max", type=float, default=180.0)
    ap.add_argument("--timeout", type=float, default=3600.0, help="per run")
    ap.add_argument("--snapshot", type=Path, default=None, help="snapshot directory (reused if it has one)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory and the snapshot")
    ap.add_argument("--tag", default="", help="suffix of the results file name")
    ap.add_argument("--results-dir", type=Path, default=None, help="instead of bench/results/repair/")
    args = ap.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-repair-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    snap = args.snapshot or workdir.parent / (workdir.name + "-snap")
    # The bookies' cookies name their directories: a snapshot only comes back to the same path.
    cluster_dir = snap.parent / f"{snap.name}-cluster"
    cluster = make_cluster(cluster_dir, args.storage)
    classes = compile_once(SOURCE, classpath(), BK_HOME, BK_VERSION)
    rows: list[dict[str, Any]] = []
    try:
        if (snap / "manifest.json").exists():
            manifest = json.loads((snap / "manifest.json").read_text())
            if manifest["storage"] != args.storage:
                raise SystemExit(f"snapshot {snap} is of storage {manifest['storage']}")
            prepare_unstarted(cluster)
            print(f"reusing snapshot {snap} ({len(manifest['ledgers'])} ledgers)", flush=True)
        else:
            cluster.start()
            t = time.monotonic()
            ledgers = write_ledgers(cluster, args)
            write_s = time.monotonic() - t
            manifest = {"storage": args.storage, "ledgers": ledgers, "write_seconds": round(write_s, 1)}
            snapshot(cluster, snap, manifest)
            print(f"wrote {len(ledgers)} ledgers in {write_s:.0f}s; snapshot {snap}", flush=True)
        ledgers = manifest["ledgers"]
        lost = [lost_of(r) for r in ledgers]
        lost_copies, lost_bytes = sum(c for c, _ in lost), sum(b for _, b in lost)
        lids_file = workdir / "ledgers.txt"
        lids_file.write_text("".join(f"{r['ledgerId']}\n" for r in ledgers))
        sides = {
            "java": JavaAutoRecovery(cluster, args.workers),
            "ours": Ours(cluster, args.workers, workdir),
            "floor": Floor(cluster, classes, lids_file, workdir / "floor.log"),
        }
        order = [sides[s] for s in args.sides.split(",")]
        for i in range(args.runs):
            for side in order if i % 2 == 0 else order[::-1]:
                row = one_run(cluster, side, ledgers, snap, classes, args, workdir)
                rows.append(row)
                print(
                    json.dumps({k: v for k, v in row.items() if k not in ("per_bookie", "repair_metrics")}), flush=True
                )
        summary = {
            "storage": args.storage,
            "ledgers": len(ledgers),
            "ledgers_by_shape": dict(Counter(f"E{r['ensembleSize']}/WQ{r['writeQuorum']}" for r in ledgers)),
            "entries": sum(r["lastEntryId"] + 1 for r in ledgers),
            "payload_bytes": sum((r["lastEntryId"] + 1) * r["entrySize"] for r in ledgers),
            "write_seconds": manifest.get("write_seconds"),
            "workers": args.workers,
            "load_rate": args.load_rate,
            **summarize(rows, lost_copies, lost_bytes),
        }
        print(json.dumps(summary, indent=2))
        print(f"results: {save(summary, rows, args)}")
    finally:
        try:
            halt(cluster)
        except Exception:
            pass
        cluster.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
            shutil.rmtree(cluster_dir, ignore_errors=True)
            if args.snapshot is None:
                shutil.rmtree(snap, ignore_errors=True)


def save(summary: dict[str, Any], rows: list[dict[str, Any]], args: argparse.Namespace) -> Path:
    """bench/results/repair/<UTC time>[-<tag>].json, or the same name in --results-dir."""
    path = save_results("repair", summary, rows)
    name = f"{path.stem}-{args.tag}.json" if args.tag else path.name
    target = (args.results_dir or path.parent) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    path.rename(target)
    return target


if __name__ == "__main__":
    main()
