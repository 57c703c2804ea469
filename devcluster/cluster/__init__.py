"""A real BookKeeper cluster on loopback, for the tests, the demo (`make demo`) and the benchmarks
(`python -m bench.<name>` from the repository root). A development package: not in the wheel.

    from devcluster.cluster import Cluster, HarnessError

    with Cluster(workdir, num_bookies=3, zk_port=..., port_base=..., http_base=...) as cluster:
        cluster.create_ledger(entries=10)        # the real Java client

Modules, by subject:
* `processes`: processes we start, stopped by pid, each with its own log (`Proc`);
* `servers`: ZooKeeper and bookies, their configurations and ports, start / stop / pause / wipe
  (`Cluster`, `BookieProc`);
* `javatools`: the JVM and jars, and the Java tools run against a cluster (BookieShell, BkLedgerTool on
  the real Java client, the Java ReplicationWorker and AutoRecoveryMain);
* `mltool`: Pulsar's own managed-ledger library (MlTool, jars from `scripts/fetch_ml_jars.sh`) writing,
  trimming, offloading and deleting Pulsar topics' managed ledgers on a cluster (`Cluster.ml_*`);
* `zksecurity`: a secured ZooKeeper (TLS, SASL), its test certificates and its clients' JVM flags
  (`secured_cluster` starts a one-bookie cluster on it);
* `errors`: `HarnessError`.
Ports for tests come from `devcluster/ports.py` (`BK_TEST_PORT_SLOT`).
"""

from devcluster.cluster.errors import HarnessError
from devcluster.cluster.javatools import BK_HOME, BK_VERSION, check_prerequisites, payload
from devcluster.cluster.mltool import PULSAR_ML_HOME, PULSAR_ML_VERSION, check_ml_jars
from devcluster.cluster.processes import Proc
from devcluster.cluster.servers import PROXY_HOST, PROXY_NAME, BookieProc, Cluster, secured_cluster

__all__ = [
    "BK_HOME",
    "BK_VERSION",
    "PROXY_HOST",
    "PROXY_NAME",
    "PULSAR_ML_HOME",
    "PULSAR_ML_VERSION",
    "BookieProc",
    "Cluster",
    "HarnessError",
    "Proc",
    "check_ml_jars",
    "check_prerequisites",
    "payload",
    "secured_cluster",
]
