"""ZooKeeper and bookies on loopback: their configurations, ports, and start / stop / pause / wipe.

Bookie N listens on 127.0.0.N so that each bookie can have its own rack. Every process is started by us,
recorded by pid, and stopped by that pid; every wait is bounded; every process's output goes to a log file
under `logs_dir` for post-mortems. The Java tools (writing ledgers with the real client, the shell) come
from `javatools.JavaTools`, Pulsar's managed-ledger library (MlTool) from `mltool.MlTools`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, SessionExpiredError

from devcluster.cluster.errors import HarnessError
from devcluster.cluster.javatools import (
    JVM_COMMON,
    ZK_JARS,
    ZK_NETTY_JARS,
    JavaTools,
    check_prerequisites,
    classpath,
)
from devcluster.cluster.mltool import MlTools
from devcluster.cluster.processes import Proc, tail
from devcluster.cluster.toolserver import ToolServer
from devcluster.cluster.zksecurity import ZkTestSecurity

STORAGE_CLASSES = {
    "sorted": "org.apache.bookkeeper.bookie.SortedLedgerStorage",
    "db": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
}

# A proxied bookie advertises this name. Every client resolves it with the system resolver to
# PROXY_HOST, where the test's TCP proxy listens on the bookie's port; the bookie's own JVM resolves it
# (through its private `jdk.net.hosts.file`) to its own 127.0.0.N, where it binds.
PROXY_NAME = "localhost"
# The bookies' ZooKeeper session timeout: how long a dead bookie stays registered.
BOOKIE_ZK_TIMEOUT_MS = 6000
PROXY_HOST = "127.0.0.1"


@dataclass
class BookieProc:
    index: int
    host: str
    port: int
    http_port: int
    storage: str
    root: Path
    conf_path: Path
    proc: Proc
    paused: bool = False
    # While a pause may have outlived the bookie's ZooKeeper session: when it was paused and the session
    # that owned its registration then (see Cluster.wait_registered).
    paused_at: float | None = None
    paused_owner: int | None = None
    resumed_at: float | None = None
    # Set for a bookie registered behind a proxy: the name it advertises (see Cluster.proxied).
    advertised_host: str | None = None

    @property
    def bookie_id(self) -> str:
        return f"{self.advertised_host or self.host}:{self.port}"

    @property
    def advertised_address(self) -> tuple[str, int]:
        """Where clients that follow the registration connect: the proxy for a proxied bookie."""
        return (PROXY_HOST, self.port) if self.advertised_host else (self.host, self.port)

    @property
    def journal_dir(self) -> Path:
        return self.root / "journal"

    @property
    def ledger_dir(self) -> Path:
        return self.root / "ledgers"

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc.running


@dataclass
class Cluster(JavaTools, MlTools):
    workdir: Path
    num_bookies: int = 3
    storage: dict[int, str] = field(default_factory=dict)
    layout: str = "hierarchical"
    ledgers_root: str = "/ledgers"
    zk_port: int = 21810
    port_base: int = 3180
    http_base: int = 8180
    lost_bookie_recovery_delay: int | None = None
    # Bookies registered behind a proxy. BookKeeper 4.17.3 publishes one bookie-rpc endpoint,
    # advertisedAddress:bookiePort, and binds that same address (or the wildcard) on that same port, so the
    # endpoint cannot name another port. Such a bookie advertises PROXY_NAME instead: clients resolve it
    # to PROXY_HOST (the proxy, same port), its own JVM to 127.0.0.N. Not bookie 1 (it binds PROXY_HOST).
    proxied: tuple[int, ...] = ()
    # Extra bk_server.conf keys per bookie index (e.g. TLS: tlsProviderFactoryClass, tlsKeyStore, ...).
    bookie_conf: dict[int, dict[str, str]] = field(default_factory=dict)
    # Bookies that run another BookKeeper release than BK_VERSION (its jars in ~/.cache/bk-<version>/lib,
    # scripts/fetch_bk_jars.sh), e.g. {2: "4.16.6"}; the shell and the Java client stay on BK_VERSION.
    bookie_versions: dict[int, str] = field(default_factory=dict)
    # Extra Java client keys for the shell and the ledger tool (e.g. TLS to the bookies).
    client_conf: dict[str, str] = field(default_factory=dict)
    # A secured ZooKeeper (TLS on its secure port, SASL): clients then dial the secure port.
    zk_security: ZkTestSecurity | None = None
    # ZooKeeper's heap, and whether it fsyncs its transaction log: benchmarks that plant a million znodes
    # raise the one and turn off the other (bench/memory.py); the test clusters keep these defaults.
    zk_heap_mb: int = 128
    zk_force_sync: bool = True

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        self.logs_dir = self.workdir / "logs"
        self.conf_dir = self.workdir / "conf"
        secure = self.zk_security
        client_port = secure.secure_port if secure and secure.tls and secure.secure_port else self.zk_port
        self.zk_hosts = f"127.0.0.1:{client_port}"
        self.metadata_service_uri = f"zk+{self.layout}://{self.zk_hosts}{self.ledgers_root}"
        self.zk: Proc | None = None
        self.bookies: list[BookieProc] = []
        # Bookies a fixture keeps down on purpose for its block (`checks_util.bookie_lost`): not healed.
        self.held_down: set[int] = set()
        self._kazoo: KazooClient | None = None
        # How many times a bookie of this cluster was wiped: ledgers kept across test modules (the sweep
        # tests' planting) are written again after one, since their copies on it are gone.
        self.wipes = 0
        self._lock = threading.Lock()
        self._tool: Path | None = None
        self._started = False
        self._workers: list[Proc] = []
        self._tool_server: ToolServer | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 180.0) -> Cluster:
        check_prerequisites()
        for d in (self.logs_dir, self.conf_dir):
            d.mkdir(parents=True, exist_ok=True)
        self._write_java_configs()
        atexit.register(self.stop)
        self._started = True
        deadline = time.monotonic() + timeout
        # Compile the tool while ZooKeeper starts: both are slow on two cores.
        compile_thread = threading.Thread(target=self._compile_tool, daemon=True)
        compile_thread.start()
        self._start_zookeeper(deadline)
        self.shell("initnewcluster")
        if self.lost_bookie_recovery_delay is not None:
            self.kazoo.ensure_path(f"{self.ledgers_root}/underreplication")
            self.kazoo.create(
                f"{self.ledgers_root}/underreplication/lostBookieRecoveryDelay",
                str(self.lost_bookie_recovery_delay).encode(),
            )
        for n in range(1, self.num_bookies + 1):
            self.bookies.append(self._make_bookie(n))
        for b in self.bookies:
            b.proc.start()
        for b in self.bookies:
            self.wait_ready(b.index, max(5.0, deadline - time.monotonic()))
        compile_thread.join(max(1.0, deadline - time.monotonic()))
        if self._tool is None:
            raise HarnessError("BkLedgerTool did not compile in time")
        return self

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        if self._kazoo is not None:
            try:
                self._kazoo.stop()
                self._kazoo.close()
            except Exception:
                pass
            self._kazoo = None
        for w in self._workers:
            w.stop()
        self.stop_tool_server()
        for b in self.bookies:
            b.proc.stop()
        if self.zk is not None:
            self.zk.stop()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ ZooKeeper
    def _check_ports_free(self) -> None:
        """Refuse to start over another cluster: a busy port would silently join us to it."""
        wanted = [("127.0.0.1", self.zk_port)] + [
            (f"127.0.0.{n}", self.port_base + n) for n in range(1, self.num_bookies + 1)
        ]
        wanted += [(PROXY_HOST, self.port_base + n) for n in self.proxied]
        if self.zk_security and self.zk_security.secure_port:
            wanted.append(("127.0.0.1", self.zk_security.secure_port))
        for host, port in wanted:
            with socket.socket() as s:
                s.settimeout(0.5)
                if s.connect_ex((host, port)) == 0:
                    raise HarnessError(
                        f"{host}:{port} is already in use (another cluster?): choose other ports, "
                        "e.g. BK_TEST_ZK_PORT / BK_TEST_PORT_BASE / BK_TEST_HTTP_BASE"
                    )

    def _start_zookeeper(self, deadline: float) -> None:
        self._check_ports_free()
        zk_dir = self.workdir / "zk"
        (zk_dir / "data").mkdir(parents=True, exist_ok=True)
        cfg = zk_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    "tickTime=1000",
                    f"dataDir={zk_dir / 'data'}",
                    f"clientPort={self.zk_port}",
                    "clientPortAddress=127.0.0.1",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,mntr,cons",  # cons: chaos/zklog.py maps sessions to pids
                    *(self.zk_security.zoo_cfg() if self.zk_security else []),
                    "",
                ]
            )
        )
        cp = ":".join(j for j in (*ZK_JARS, *ZK_NETTY_JARS) if Path(j).exists())
        self.zk = Proc(
            "zookeeper",
            [
                "java",
                f"-Xmx{self.zk_heap_mb}m",
                "-XX:+UseSerialGC",
                *([] if self.zk_force_sync else ["-Dzookeeper.forceSync=no"]),
                "-cp",
                cp,
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                *(self.zk_security.server_jvm() if self.zk_security else []),
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(cfg),
            ],
            self.logs_dir / "zookeeper.log",
            cds="zookeeper",
        )
        self.zk.start()
        while time.monotonic() < deadline:
            if not self.zk.running:
                raise HarnessError(f"ZooKeeper exited at start; log {self.zk.log}:\n{tail(self.zk.log)}")
            if self._four_letter("ruok") == "imok":
                return
            time.sleep(0.2)
        raise HarnessError(f"ZooKeeper did not answer ruok on {self.zk_hosts}; log {self.zk.log}")

    def restart_zookeeper(self, down_seconds: float = 0.0, settle: bool = True) -> list[str]:
        """Stop ZooKeeper (SIGTERM, by pid), optionally stay down, and start it again on the same data.

        With `settle`, wait out the bookies' session timeout and then heal them (see `heal_bookies`): the
        restarted server expires a session that has not reconnected one timeout after it starts, and a
        4.17 bookie whose re-registration then meets a ZooKeeper error exits (BookieStateManager,
        ExitCode.ZK_REG_FAIL). CI saw one such bookie missing from the next module's tests. Returns what
        the heal did."""
        assert self.zk is not None
        self.zk.stop()
        time.sleep(down_seconds)
        self.zk.start()
        deadline = time.monotonic() + 60
        while self._four_letter("ruok") != "imok":
            if time.monotonic() > deadline:
                raise HarnessError(f"ZooKeeper did not come back; log {self.zk.log}")
            time.sleep(0.2)
        if not settle:
            return []
        time.sleep(BOOKIE_ZK_TIMEOUT_MS / 1000 + 2.0)
        return self.heal_bookies()

    def _four_letter(self, word: str) -> str:
        try:
            with socket.create_connection(("127.0.0.1", self.zk_port), timeout=1.0) as s:
                s.sendall(word.encode())
                return s.recv(64).decode(errors="replace")
        except OSError:
            return ""

    @property
    def kazoo(self) -> KazooClient:
        with self._lock:
            if self._kazoo is None:
                extra = self.zk_security.harness_kazoo_kwargs() if self.zk_security else {}
                client = KazooClient(hosts=self.zk_hosts, timeout=10.0, **extra)
                client.start(timeout=30)
                self._kazoo = client
            return self._kazoo

    # ------------------------------------------------------------------ bookies
    def _make_bookie(self, n: int) -> BookieProc:
        storage = self.storage.get(n, "sorted")
        if storage not in STORAGE_CLASSES:
            raise HarnessError(f"unknown storage {storage!r} for bookie {n}; use one of {sorted(STORAGE_CLASSES)}")
        host = f"127.0.0.{n}"
        port, http_port = self.port_base + n, self.http_base + n
        root = self.workdir / f"bookie{n}"
        conf = self.conf_dir / f"bookie-{n}.conf"
        jvm_hosts: list[str] = []
        advertised = None
        if n in self.proxied:
            if host == PROXY_HOST:
                raise HarnessError(f"bookie {n} binds {PROXY_HOST}, where its proxy would listen: proxy another one")
            advertised = PROXY_NAME
            hosts_file = self.conf_dir / f"hosts-bookie-{n}"
            hosts_file.write_text(f"{host} {PROXY_NAME}\n127.0.0.1 {socket.gethostname()}\n")
            jvm_hosts = [f"-Djdk.net.hosts.file={hosts_file}"]
        lines = [
            f"bookiePort={port}",
            f"advertisedAddress={advertised or host}",
            "listeningInterface=lo",
            "allowLoopback=true",
            "useHostNameAsBookieID=false",
            f"metadataServiceUri={self.metadata_service_uri}",
            f"zkTimeout={BOOKIE_ZK_TIMEOUT_MS}",
            f"journalDirectories={root / 'journal'}",
            f"ledgerDirectories={root / 'ledgers'}",
            f"ledgerStorageClass={STORAGE_CLASSES[storage]}",
            "skipListSizeLimit=8388608",
            "skipListArenaChunkSize=1048576",
            # Index pages cached (8 KiB each). 512 livelocked a SortedLedgerStorage bookie once it held more
            # ledgers than pages (the repair campaign, ledger ids past 730): IndexInMemPageMgr looped on "Could not
            # grab a clean page ... force flushing" and logged 70 GB in an hour, filling the disk.
            "pageLimit=4096",
            "logSizeLimit=16777216",
            "flushInterval=1000",
            "gcWaitTime=60000",
            "journalSyncData=false",
            "journalPreAllocSizeMB=4",
            "journalMaxSizeMB=64",
            "diskUsageThreshold=0.99",
            "diskUsageWarnThreshold=0.98",
            "numAddWorkerThreads=1",
            "numReadWorkerThreads=2",
            "numHighPriorityWorkerThreads=1",
            "serverNumIOThreads=2",
            "numJournalCallbackThreads=1",
            "httpServerEnabled=true",
            "httpServerClass=org.apache.bookkeeper.http.vertx.VertxHttpServer",
            f"httpServerHost={host}",
            f"httpServerPort={http_port}",
            "statsProviderClass=org.apache.bookkeeper.stats.prometheus.PrometheusMetricsProvider",
            "autoRecoveryDaemonEnabled=false",
            *(self.zk_security.client_conf() if self.zk_security else []),
        ]
        lines += [f"{k}={v}" for k, v in self.bookie_conf.get(n, {}).items()]
        if storage == "db":
            lines += [
                "dbStorage_writeCacheMaxSizeMb=16",
                "dbStorage_readAheadCacheMaxSizeMb=16",
                "dbStorage_rocksDB_blockCacheSize=8388608",
                "dbStorage_rocksDB_writeBufferSizeMB=4",
            ]
        conf.write_text("\n".join(lines) + "\n")
        for d in ("journal", "ledgers"):
            (root / d).mkdir(parents=True, exist_ok=True)
        argv = [
            "java",
            *JVM_COMMON,
            *jvm_hosts,
            *self._client_jvm(),
            f"-Dlog4j.configurationFile={self.conf_dir / 'log4j2-server.xml'}",
            "-Xms64m",
            "-Xmx256m",
            "-XX:MaxDirectMemorySize=256m",
            "-XX:+ExitOnOutOfMemoryError",
            "-cp",
            classpath(self.bookie_versions.get(n)),
            "org.apache.bookkeeper.server.Main",
            "--conf",
            str(conf),
        ]
        return BookieProc(
            n,
            host,
            port,
            http_port,
            storage,
            root,
            conf,
            Proc(f"bookie{n}", argv, self.logs_dir / f"bookie{n}.log", cds="bookie"),
            advertised_host=advertised,
        )

    def bookie(self, n: int) -> BookieProc:
        for b in self.bookies:
            if b.index == n:
                return b
        raise HarnessError(f"no bookie {n} in this cluster (have {[b.index for b in self.bookies]})")

    def _bookie_by(self, which: int | str) -> BookieProc:
        if isinstance(which, int):
            return self.bookie(which)
        for b in self.bookies:
            if b.bookie_id == which:
                return b
        raise HarnessError(f"no bookie with id {which}")

    @property
    def sorted_bookie_ids(self) -> list[str]:
        return [b.bookie_id for b in self.bookies if b.storage == "sorted"]

    def registration_path(self, n: int) -> str:
        return f"{self.ledgers_root}/available/{self.bookie(n).bookie_id}"

    def wait_registered(self, n: int, timeout: float = 60.0) -> None:
        """Until bookie n is registered (writable or read-only). After a pause long enough for its ZooKeeper
        session to expire, a registration still owned by the old session is not enough: the server may
        expire it just after we look (make test saw a Java client fail to resolve a bookie that this had
        just seen registered), so wait until the bookie re-registered with a new session, or until it has
        been running a full session timeout with the old one (the session survived)."""
        b = self.bookie(n)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not b.running:
                raise HarnessError(f"bookie {n} exited; log {b.proc.log}:\n{tail(b.proc.log)}")
            try:
                owner = self._registration_owner(b)
            except (ConnectionLoss, SessionExpiredError):
                # Our own client lost its session (a ZooKeeper restart on a loaded machine): kazoo
                # reconnects with a new one; ask again (a chaos campaign died here at round 89).
                owner = None
            if owner is not None and self._registration_settled(b, owner):
                return
            time.sleep(0.2)
        raise HarnessError(f"bookie {n} did not register within {timeout}s; log {b.proc.log}:\n{tail(b.proc.log)}")

    def _registration_owner(self, b: BookieProc) -> int | None:
        """The session owning bookie b's registration (writable or read-only), None when unregistered."""
        for path in (self.registration_path(b.index), f"{self.ledgers_root}/available/readonly/{b.bookie_id}"):
            stat = self.kazoo.exists(path)
            if stat is not None:
                return int(stat.ephemeralOwner)
        return None

    def _registration_settled(self, b: BookieProc, owner: int) -> bool:
        if b.paused or b.paused_at is None:
            return True
        session_s = BOOKIE_ZK_TIMEOUT_MS / 1000
        paused_for = (b.resumed_at or time.monotonic()) - b.paused_at
        if owner != b.paused_owner or paused_for < session_s / 2:
            settled = True  # re-registered, or paused too briefly to lose the session
        else:
            settled = time.monotonic() - (b.resumed_at or 0.0) > session_s + 1.0
        if settled:
            b.paused_at = b.paused_owner = b.resumed_at = None
        return settled

    def wait_ready(self, n: int, timeout: float = 60.0) -> None:
        start = time.monotonic()
        self.wait_registered(n, timeout)
        b = self.bookie(n)
        while time.monotonic() - start < timeout:
            status, _ = self.http_get(n, "/api/v1/bookie/is_ready")
            if status == 200:
                return
            time.sleep(0.2)
        raise HarnessError(f"bookie {n} registered but /is_ready never answered 200; log {b.proc.log}")

    def heal_bookies(self, timeout: float = 60.0) -> list[str]:
        """Bring every bookie of this cluster back to serving: resume a paused one, start one whose process
        has ended, and wait until each is registered; not those in `held_down`. Returns one line per bookie
        it had to act on; the session fixture calls it before each test so that one test's casualty is not
        the next one's failure."""
        healed: list[str] = []
        for b in self.bookies:
            if b.index in self.held_down:
                continue
            if b.paused:
                self.resume_bookie(b.index)
                healed.append(f"bookie {b.index} was paused; resumed")
            if not b.running:
                code = b.proc.popen.returncode if b.proc.popen is not None else None
                self.start_bookie(b.index, timeout)
                healed.append(f"bookie {b.index} had exited (code {code}); restarted; log {b.proc.log}")
            self.wait_registered(b.index, timeout)
        return healed

    def wait_unregistered(self, n: int, timeout: float = 60.0) -> None:
        b = self.bookie(n)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._registration_owner(b) is None:
                return
            time.sleep(0.2)
        raise HarnessError(f"bookie {n} still registered after {timeout}s")

    def stop_bookie(self, n: int) -> None:
        self.bookie(n).proc.stop()

    def kill_bookie(self, n: int) -> None:
        self.bookie(n).proc.kill()

    def pause_bookie(self, n: int) -> None:
        b = self.bookie(n)
        try:
            b.paused_owner = self._registration_owner(b)
        except (ConnectionLoss, SessionExpiredError):
            b.paused_owner = None
        b.paused_at = time.monotonic()
        b.proc.pause()
        b.paused = True

    def resume_bookie(self, n: int) -> None:
        b = self.bookie(n)
        b.proc.signal(signal.SIGCONT)
        b.paused = False
        b.resumed_at = time.monotonic()

    def start_bookie(self, n: int, timeout: float = 90.0) -> None:
        b = self.bookie(n)
        if b.running:
            return
        # A restarted bookie waits for its old registration to expire; wait for that ourselves first so a
        # crash-restart does not race with the old session.
        self.wait_unregistered(n, timeout=30)
        b.proc.start()
        self.wait_ready(n, timeout)

    def restart_bookie(self, n: int) -> None:
        self.stop_bookie(n)
        self.start_bookie(n)

    def wipe_bookie(self, n: int) -> None:
        """Delete a stopped bookie's disks and its cookie, so it comes back empty with the same id."""
        b = self.bookie(n)
        if b.running:
            raise HarnessError(f"bookie {n} must be stopped before it is wiped")
        for d in (b.journal_dir, b.ledger_dir):
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
        self.wipes += 1
        cookie = f"{self.ledgers_root}/cookies/{b.bookie_id}"
        if self.kazoo.exists(cookie):
            self.kazoo.delete(cookie)

    def http_get(self, n: int, path: str, timeout: float = 5.0) -> tuple[int, str]:
        return self.http_call(n, "GET", path, timeout=timeout)

    def http_put(self, n: int, path: str, body: str = "", timeout: float = 30.0) -> tuple[int, str]:
        """PUT to bookie n's admin HTTP API (e.g. `/api/v1/bookie/gc`: a garbage collection and compaction)."""
        return self.http_call(n, "PUT", path, body.encode(), timeout)

    def http_call(
        self, n: int, method: str, path: str, data: bytes | None = None, timeout: float = 5.0
    ) -> tuple[int, str]:
        b = self.bookie(n)
        request = urllib.request.Request(f"http://{b.host}:{b.http_port}{path}", data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except OSError:
            return 0, ""

    # ------------------------------------------------------------------ Java client with bookie faults
    def write_with_ensemble_change(
        self,
        ensemble: int = 3,
        write_quorum: int = 2,
        ack_quorum: int = 2,
        digest: str = "CRC32C",
        password: str = "pw",
        entries: int = 20,
        entry_size: int = 64,
        change_after: int = 10,
        victim: int | str | None = None,
        bookies: list[str] | None = None,
        allowed: list[str] | None = None,
        custom: dict[str, str] | None = None,
        ledger_id: int | None = None,
        close: bool = True,
    ) -> dict[str, Any]:
        """Write `change_after` entries, SIGKILL one first-ensemble member, write the rest, close.

        The client replaces the dead bookie (a new segment). The victim is restarted before returning,
        so the cluster is whole again; the result's "victim" names it.
        """
        pool = allowed if allowed is not None else self.sorted_bookie_ids
        if bookies is None:
            bookies = pool[:ensemble]
        if len(set(pool) - set(bookies)) < 1:
            raise HarnessError(f"an ensemble change needs a spare bookie outside {bookies} in the pool {pool}")
        args = self._create_args(
            ensemble,
            write_quorum,
            ack_quorum,
            digest,
            password,
            entries,
            entry_size,
            ledger_id,
            custom,
            bookies,
            pool,
            close,
        )
        pause_file = self.workdir / f"pause-{time.monotonic_ns()}"
        argv = self._tool_argv("create", [*args, "--pause-after", str(change_after), "--pause-file", str(pause_file)])
        victim_bookie = self._bookie_by(victim if victim is not None else bookies[0])
        if victim_bookie.bookie_id not in bookies:
            raise HarnessError(f"victim {victim_bookie.bookie_id} is not in the first ensemble {bookies}")
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("PAUSED"):
                rest, err = proc.communicate(timeout=60)
                raise HarnessError(f"ledger tool did not pause: {line}{rest}\n{err[-3000:]}")
            victim_bookie.proc.kill()
            pause_file.touch()
            out, err = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        with open(self.logs_dir / "ledger-tool.log", "a") as log:
            log.write(f"=== ensemble-change {' '.join(args)} rc={proc.returncode}\n{line}{out}\n{err[-5000:]}\n")
        result = self._tool_result("create", args, proc.returncode, out, err)
        result["victim"] = victim_bookie.bookie_id
        self.start_bookie(victim_bookie.index)
        return result


@contextmanager
def secured_cluster(prefix: str, zk_port: int, **security: Any) -> Iterator[Cluster]:
    """A one-bookie cluster whose ZooKeeper is secured as `ZkTestSecurity(**security)` says, on the
    secured clusters' ports (devcluster/ports.py); removed afterwards (logs kept with
    KEEP_CLUSTER_LOGS)."""
    from devcluster import ports

    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    c = Cluster(
        workdir,
        num_bookies=1,
        zk_port=zk_port,
        port_base=ports.SECURE_PORT_BASE,
        http_base=ports.SECURE_HTTP_BASE,
        zk_security=ZkTestSecurity(workdir / "security", **security),
    )
    try:
        c.start()
        yield c
    finally:
        c.stop()
        if os.environ.get("KEEP_CLUSTER_LOGS"):
            print(f"\nsecured cluster's logs kept in {c.logs_dir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
