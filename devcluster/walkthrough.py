"""The operator walkthrough of docs/operations.md, on a real local cluster, printing each command and its
real output (`python -m devcluster.walkthrough`; ports follow BK_TEST_PORT_SLOT).

1. Four BookKeeper 4.17.3 bookies, 12 ledgers written by the Java client (E3/WQ2/AQ2), and one ledger
   (E1/WQ1) whose only copy is on bookie 3.
2. Before touching anything: can bookie 3 be decommissioned? (not yet: that ledger exists only there)
3. Bookie 3 dies. The bk-auditor daemon marks its ledgers under-replicated; what is under-replicated, and
   why? A Java ReplicationWorker repairs what can be repaired; the ledger whose only copy was on bookie 3
   stays stuck, and the listing says why.
Everything is torn down at the end (by pid).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from devcluster import ports
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon

BIN = Path(sys.executable).with_name("bk-auditor")


def show(cluster: Cluster, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    env |= {"BKAUDIT_METADATA_SERVICE_URI": cluster.metadata_service_uri, "BKAUDIT_BOOKIE_CLIENT__TIMEOUT_SECONDS": "2"}
    r = subprocess.run([str(BIN), *args], capture_output=True, text=True, env=env, timeout=600)
    print(f"$ bk-auditor {' '.join(args)}\n{r.stdout}{r.stderr}(exit {r.returncode})\n", flush=True)


def markers(cluster: Cluster) -> int:
    base = f"{cluster.ledgers_root}/underreplication/ledgers"
    count = 0
    todo = [base] if cluster.kazoo.exists(base) else []
    while todo:
        path = todo.pop()
        for child in cluster.kazoo.get_children(path):
            if child.startswith("urL"):
                count += 1
            else:
                todo.append(f"{path}/{child}")
    return count


def wait(what: str, predicate, timeout: float = 180.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(1)


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="bk-auditor-walkthrough-"))
    cluster = Cluster(
        workdir,
        zk_port=ports.SECOND_ZK_PORT,
        port_base=ports.SECOND_PORT_BASE,
        http_base=ports.SECOND_HTTP_BASE,
        num_bookies=4,
    )
    daemon = None
    worker = None
    try:
        cluster.start()
        b = [cluster.bookie(i).bookie_id for i in (1, 2, 3, 4)]
        cluster.create_ledgers(12, ensemble=3, write_quorum=2, ack_quorum=2, entries=20)
        only = cluster.create_ledger(ensemble=1, write_quorum=1, ack_quorum=1, entries=5, bookies=[b[2]])["ledgerId"]
        print(f"# 12 ledgers E3/WQ2/AQ2 on 4 bookies; ledger {only} (E1/WQ1) only on {b[2]}\n")
        show(cluster, "can-decommission", b[2])
        daemon = Daemon(cluster, "bk-auditor-0", workdir).start()
        wait("leader", daemon.is_leader)
        cluster.kill_bookie(3)
        print(f"# bookie {b[2]} killed; the daemon marks its ledgers\n")
        wait("markers", lambda: markers(cluster) > 0)
        time.sleep(5)  # let it finish marking
        show(cluster, "underreplicated")
        show(cluster, "can-decommission", b[2])
        worker = cluster.start_replication_worker(seconds=600)
        print("# a Java ReplicationWorker repairs what it can\n")
        wait("repairs", lambda: markers(cluster) <= 1, timeout=300)
        time.sleep(10)
        show(cluster, "underreplicated")
        show(cluster, "can-decommission", b[2])
        return 0
    finally:
        if worker is not None:
            worker.stop()
        if daemon is not None:
            daemon.stop()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
