"""Faults planted in a stopped DbLedgerStorage bookie's own index, for the tests of the exact audit there.

`remove_index_entries` deletes entries of one ledger from the bookie's `locations` RocksDB with the
bookie's own RocksDB library (devcluster/java/IndexSurgeon.java on the BookKeeper classpath), so the
files stay in the format that bookie reads. Only the test harness writes a bookie's files, and only while
that bookie is stopped; the agent never does.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from devcluster.cluster import Cluster
from devcluster.cluster.errors import HarnessError
from devcluster.cluster.javatools import BK_HOME, BK_VERSION, JVM_COMMON, classpath, compile_once

SURGEON = Path(__file__).resolve().parent / "java" / "IndexSurgeon.java"


def locations_db(cluster: Cluster, n: int) -> Path:
    """Bookie n's `locations` index (the harness sets no indexDirectories: it lives in the ledger dir)."""
    return cluster.bookie(n).ledger_dir / "current" / "locations"


def remove_index_entries(cluster: Cluster, n: int, ledger_id: int, first: int, last: int) -> int:
    """Delete (ledger_id, first..last) from stopped bookie n's location index; returns how many existed."""
    b = cluster.bookie(n)
    if b.storage != "db":
        raise HarnessError(f"bookie {n} runs {b.storage} storage, not DbLedgerStorage")
    if b.running:
        raise HarnessError(f"bookie {n} is running: stop it before changing its index")
    classes = compile_once(SURGEON, classpath(), BK_HOME, BK_VERSION)
    argv = [
        "java",
        *JVM_COMMON,
        "-cp",
        f"{classes}:{classpath()}",
        "IndexSurgeon",
        str(locations_db(cluster, n)),
        str(ledger_id),
        str(first),
        str(last),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise HarnessError(f"IndexSurgeon failed on bookie {n} (rc {proc.returncode}): {proc.stderr[-2000:]}")
    # On restart the bookie replays its journal past its last checkpoint mark and would index the entries
    # again: its journal files and that mark go too (their entries are all in the entry logs: it was
    # stopped cleanly), so it starts with nothing to replay.
    for stale in [*(b.journal_dir / "current").glob("*.txn"), b.ledger_dir / "current" / "lastMark"]:
        stale.unlink(missing_ok=True)
    return int(json.loads(proc.stdout.strip().splitlines()[-1])["deleted"])
