"""What the benchmarks that start their own real cluster share: the cluster on the "second cluster"
ports (devcluster/ports.py, so a test session can run beside them) and the results file."""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from devcluster import ports
from devcluster.cluster import Cluster

RESULTS = Path(__file__).parent / "results"


def second_cluster(workdir: Path, num_bookies: int = 1, **options: Any) -> Cluster:
    """A real ZooKeeper and `num_bookies` real bookies on the second-cluster ports (not started); `options`
    are the other `Cluster` arguments."""
    return Cluster(
        workdir,
        num_bookies=num_bookies,
        zk_port=ports.SECOND_ZK_PORT,
        port_base=ports.SECOND_PORT_BASE,
        http_base=ports.SECOND_HTTP_BASE,
        **options,
    )


@contextmanager
def started(cluster: Cluster, workdir: Path, keep: bool) -> Iterator[Cluster]:
    """`cluster` started; at the end (on error too) stopped, and its work directory removed unless `keep`."""
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        if keep:
            print(f"work directory kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def by_count(rows: list[dict[str, Any]], key: str, counts: list[int], fields: tuple[str, ...]) -> dict[str, Any]:
    """A scaling run's summary: per count of `key` (processes, executors), the medians of `fields` over
    its runs that did not fail, how many those were, and the speed-up in ledgers/s over a count of 1."""
    out: dict[str, Any] = {}
    for k in counts:
        ok = [r for r in rows if r[key] == k and "failed" not in r]
        if ok:
            out[str(k)] = {f: statistics.median(r[f] for r in ok) for f in fields} | {"runs": len(ok)}
    one = out.get("1")
    if one:
        for v in out.values():
            v["speedup_over_1"] = round(v["ledgers_per_s"] / one["ledgers_per_s"], 2)
    return out


def save_results(bench: str, summary: dict[str, Any], runs: list[dict[str, Any]]) -> Path:
    """bench/results/<bench>/<UTC time>.json with the summary and every run."""
    folder = RESULTS / bench
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}.json"
    path.write_text(json.dumps({"summary": summary, "runs": runs}, indent=2) + "\n")
    return path


class Side:
    """One side of a comparison: started before each measured run, stopped after it."""

    name = ""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class JavaProcessSide(Side):
    """A side that is one Java process of the test harness (started by `start`, stopped by pid)."""

    name = "java"

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.proc: Any = None

    def stop(self) -> None:
        self.proc.stop()
