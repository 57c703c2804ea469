"""Lost-bookie reaction, ours vs Java's Auditor (issue 12, docs/benchmarks.md): the time from a bookie's
registration vanishing to the last of its ledgers' under-replication markers written.

    BK_TEST_PORT_SLOT=0 .venv/bin/python -m bench.lost_bookie                  # 20,000 ledgers, 10,000 lost
    .venv/bin/python -m bench.lost_bookie --ledgers 2000 --runs 1              # a quick smoke

Starts its own ZooKeeper (and one real bookie, so the cluster is a real, formatted one; "second cluster"
ports of devcluster/ports.py) and plants `--ledgers` closed E3/WQ2/AQ2 ledgers (v3 binary
metadata, read by both sides) over six registered bookie ids that no process serves (marking a lost
bookie reads only metadata). Half of the ledgers name the victim. `lostBookieRecoveryDelay` is 0 on
both sides. Each run starts one side alone (a real Java Auditor from the 4.17 jars, its election and
no ReplicationWorker; or one `bk-auditor run` daemon, whose bookie watch marks as Java's does), waits
until it is ready (Java: its vote; ours: leadership and its ledger index), deletes the victim's
registration and waits for every expected marker. The marker tree is removed before each run, so
every run also creates the markers' parent znodes. Sides alternate; the summary gives medians and the
ratio ours/Java. Times come from ZooKeeper's own mtimes of the markers against the deletion, on one
host clock. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from auditor.metadata.codecs.paths import MarkerPaths
from bench.harness import JavaProcessSide, Side, save_results, second_cluster
from devcluster import ports
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon
from devcluster.planted import plant, wait_all

FAKE_PORT = ports.SECOND_PORT_BASE + 60
WAIT_SECONDS = 300.0


def fake_bookies() -> list[str]:
    return [f"127.0.0.{i + 1}:{FAKE_PORT + i}" for i in range(6)]


def walk(zk: KazooClient, top: str) -> tuple[list[str], list[str]]:
    """(leaf znodes, directories below `top`), level by level with pipelined reads."""
    if zk.exists(top) is None:
        return [], []
    level, leaves, dirs = [top], [], []
    while level:
        results = [(p, zk.get_children_async(p)) for p in level]
        nxt = []
        for p, r in results:
            kids = r.get(timeout=60)
            if not kids and p != top:
                leaves.append(p)
            for k in kids:
                nxt.append(f"{p}/{k}")
        dirs.extend(p for p in level if p != top)
        level = nxt
    return leaves, [d for d in dirs if d not in set(leaves)]


def marker_times(zk: KazooClient, markers: MarkerPaths) -> dict[int, tuple[int, int]]:
    """ledger id -> (ctime, mtime) of its marker, ms."""
    leaves, _ = walk(zk, markers.ledgers)
    named = [(markers.parse_marker(p), p) for p in leaves]
    stats = [(lid, zk.exists_async(p)) for lid, p in named if lid is not None]
    out = {}
    for lid, r in stats:
        st = r.get(timeout=60)
        if st is not None:
            out[lid.ledger] = (st.ctime, st.mtime)
    return out


def clear_markers(zk: KazooClient, markers: MarkerPaths) -> None:
    """Remove every marker and its parents below `underreplication/ledgers` (bottom-up, pipelined)."""
    leaves, dirs = walk(zk, markers.ledgers)
    wait_all([zk.delete_async(p) for p in leaves])
    for depth in sorted({d.count("/") for d in dirs}, reverse=True):
        wait_all([zk.delete_async(d) for d in dirs if d.count("/") == depth])


def znode_count(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"mntr")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    for line in data.decode().splitlines():
        if line.startswith("zk_znode_count"):
            return int(line.split()[1])
    raise RuntimeError("ZooKeeper's mntr has no zk_znode_count")


def wait_markers(cluster: Cluster, markers: MarkerPaths, expected: set[int], deadline: float) -> dict[int, Any]:
    """Wait until ZooKeeper's znode count stops growing, then check the markers; again until all are there."""
    last, still = -1, 0
    while time.monotonic() < deadline:
        time.sleep(0.5)
        n = znode_count(cluster.zk_port)
        still = still + 1 if n == last else 0
        last = n
        if still >= 4:
            got = marker_times(cluster.kazoo, markers)
            if expected <= set(got):
                return got
            still = 0
    raise TimeoutError(f"not every marker was written within {WAIT_SECONDS:.0f}s")


class JavaSide(JavaProcessSide):
    def start(self) -> None:
        election = f"{self.cluster.ledgers_root}/underreplication/auditorelection"
        self.proc = self.cluster.start_java_auditor(seconds=3600)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            kids = self.cluster.kazoo.get_children(election) if self.cluster.kazoo.exists(election) else []
            if any(k.startswith("V_") or "_" in k for k in kids):
                break
            time.sleep(0.5)
        else:
            raise TimeoutError("the Java Auditor did not vote")
        time.sleep(5)  # it becomes the auditor and sets its bookie watch right after voting


class OurSide(Side):
    name = "ours"

    def __init__(self, cluster: Cluster, workdir: Path) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.daemon: Daemon | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        self.daemon = Daemon(
            self.cluster,
            f"ours-{self.runs}",
            self.workdir,
            schedule={
                "scrutiny_seconds": 0,
                "ledger_check_seconds": 0,
                "open_ledger_check_seconds": 0,
                "bookie_check_seconds": 0,
                "lost_bookie_delay_seconds": 0,
            },
        ).start()
        d = self.daemon
        d.wait(d.is_leader, 120, "leadership")
        d.wait(lambda: any(line.get("event") == "ledger index built" for line in d.logs()), 300, "its ledger index")

    def stop(self) -> None:
        assert self.daemon is not None
        self.daemon.stop()


def one_run(cluster: Cluster, side: Side, fake: KazooClient, victim: str, expected: set[int]) -> dict[str, Any]:
    markers = MarkerPaths(cluster.ledgers_root)
    clear_markers(cluster.kazoo, markers)
    registration = f"{cluster.ledgers_root}/available/{victim}"
    if fake.exists(registration) is None:
        fake.create(registration, b"", ephemeral=True)
    side.start()
    try:
        t0_ms = int(time.time() * 1000)
        fake.delete(registration)
        got = wait_markers(cluster, markers, expected, time.monotonic() + WAIT_SECONDS)
    finally:
        side.stop()
    mine = {lid: got[lid] for lid in expected}
    extra = sorted(set(got) - expected)
    return {
        "side": side.name,
        "markers": len(mine),
        "unexpected_markers": len(extra),
        "first_marker_s": (min(c for c, _ in mine.values()) - t0_ms) / 1000,
        "last_marker_s": (max(m for _, m in mine.values()) - t0_ms) / 1000,
    }


def summarize(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    rows = list(rows)
    out: dict[str, Any] = {}
    for side in ("java", "ours"):
        mine = [r for r in rows if r["side"] == side]
        if mine:
            out[side] = {
                "runs": len(mine),
                "last_marker_s_median": statistics.median(r["last_marker_s"] for r in mine),
                "first_marker_s_median": statistics.median(r["first_marker_s"] for r in mine),
                "markers_per_s_median": statistics.median(r["markers"] / r["last_marker_s"] for r in mine),
            }
    if "java" in out and "ours" in out:
        out["ours_time_over_java"] = out["ours"]["last_marker_s_median"] / out["java"]["last_marker_s_median"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledgers", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3, help="runs per side (alternating)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-lost-bookie-"))
    cluster = second_cluster(workdir)
    fake = KazooClient(hosts=cluster.zk_hosts)
    rows: list[dict[str, Any]] = []
    try:
        cluster.start()
        root = cluster.ledgers_root
        cluster.kazoo.ensure_path(f"{root}/underreplication")
        delay = f"{root}/underreplication/lostBookieRecoveryDelay"
        if cluster.kazoo.exists(delay) is None:
            cluster.kazoo.create(delay, b"0")
        else:
            cluster.kazoo.set(delay, b"0")
        bookies = fake_bookies()
        started = time.monotonic()
        expected = plant(cluster.kazoo, root, args.ledgers, bookies)
        print(f"planted {args.ledgers} ledgers in {time.monotonic() - started:.1f}s; {len(expected)} on the victim")
        fake.start(timeout=15)
        for b in bookies[1:]:
            fake.create(f"{root}/available/{b}", b"", ephemeral=True)
        sides: list[Side] = [JavaSide(cluster), OurSide(cluster, workdir)]
        for i in range(args.runs):
            for side in sides if i % 2 == 0 else sides[::-1]:
                row = one_run(cluster, side, fake, bookies[0], expected)
                rows.append(row)
                print(json.dumps(row), flush=True)
        summary = {"ledgers": args.ledgers, "lost": len(expected), **summarize(rows)}
        print(json.dumps(summary, indent=2))
        save_results("lost_bookie", summary, rows)
    finally:
        fake.stop()
        fake.close()
        cluster.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
