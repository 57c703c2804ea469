"""Test-session fixtures. The real cluster is started once per session, on first use, and reused."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import kazoo.protocol.connection
import kazoo.retry
import pytest

from auditor import redact
from devcluster import ports
from devcluster.cluster import Cluster

# kazoo's connection thread draws its ping jitter from the global `random` (kazoo/protocol/connection.py,
# every wake-up of a connected client), and its retries their backoff jitter. A client of a worker's shared
# cluster then changes the global random state while Hypothesis generates a property test's data in the
# same process, which Hypothesis reports as a strategy using `random` (HypothesisDeprecationWarning, a
# varying number of them per `make test`). Generators of their own keep the two apart; kazoo behaves the
# same.
kazoo.protocol.connection.random = random.Random()  # type: ignore[attr-defined]
kazoo.retry.random = random.Random()  # type: ignore[attr-defined]

SESSION_BOOKIES = 6
SESSION_STORAGE = {6: "db"}  # bookies 1-5 SortedLedgerStorage, bookie 6 DbLedgerStorage


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    workdir = Path(tempfile.mkdtemp(prefix="bk-auditor-cluster-"))
    # Ports can be moved so that several suites can run side by side on one machine.
    c = Cluster(
        workdir,
        num_bookies=SESSION_BOOKIES,
        storage=SESSION_STORAGE,
        zk_port=ports.ZK_PORT,
        port_base=ports.BOOKIE_PORT_BASE,
        http_base=ports.HTTP_BASE,
    )
    try:
        c.start()
        yield c
    finally:
        c.stop()
        failed = request.session.testsfailed
        if failed or os.environ.get("KEEP_CLUSTER_LOGS"):
            print(f"\nreal-cluster logs kept in {c.logs_dir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(autouse=True)
def _session_cluster_whole(request: pytest.FixtureRequest) -> None:
    """Each test that uses the session cluster gets all its bookies up and registered, whatever the test
    before it left behind (a bookie can exit on its own after a ZooKeeper restart). What had to be healed
    is a warning, so it shows in the summary instead of as the next test's failure."""
    if "cluster" not in request.fixturenames:
        return
    c: Cluster = request.getfixturevalue("cluster")
    for line in c.heal_bookies():
        warnings.warn(f"session cluster healed before {request.node.nodeid}: {line}", stacklevel=1)


@pytest.fixture(autouse=True)
def _secrets_forgotten() -> Iterator[None]:
    """The secrets a test's objects registered for log scrubbing (auditor.redact) do not garble the log
    lines a later test of the same process checks."""
    yield
    redact.forget()


@pytest.fixture
def no_bkaudit_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No BKAUDIT_* variable of the calling shell leaks into the test (settings, the CLI's admin address and
    TLS material). Modules use it with `pytestmark = pytest.mark.usefixtures("no_bkaudit_env")`."""
    for key in list(os.environ):
        if key.upper().startswith("BKAUDIT_"):
            monkeypatch.delenv(key)
