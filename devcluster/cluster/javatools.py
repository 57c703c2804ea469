"""The Java side of the test cluster: where the jars are, the JVM flags, and the real Java tools run
against a cluster (BookieShell, our BkLedgerTool on the real Java client, the Java ReplicationWorker and
AutoRecoveryMain).

ZooKeeper comes from Debian's `zookeeper` package; bookies, the shell and the Java client from the
BookKeeper 4.17.x jars that `scripts/fetch_bk_jars.sh` puts in `$BK_HOME/lib` (default
`~/.cache/bk-<version>`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from devcluster import ports
from devcluster.cluster.cds import archive_run
from devcluster.cluster.errors import HarnessError
from devcluster.cluster.processes import Proc, tail
from devcluster.cluster.toolserver import ToolServer
from devcluster.cluster.zksecurity import ZkTestSecurity

BK_VERSION = os.environ.get("BK_VERSION", "4.17.3")
BK_HOME = Path(os.environ.get("BK_HOME", Path.home() / ".cache" / f"bk-{BK_VERSION}"))
ZK_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")
# ZooKeeper's Netty server factory (TLS) needs these beside the jars its manifest names.
ZK_NETTY_JARS = ("/usr/share/java/netty-codec.jar", "/usr/share/java/netty-resolver.jar")
TOOL_SOURCE = Path(__file__).resolve().parent.parent / "java" / "BkLedgerTool.java"

JVM_COMMON = [
    "-Djava.net.preferIPv4Stack=true",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.io=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util.zip=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.leakDetectionLevel=disabled",
    "-XX:+UseSerialGC",
]
# Short-lived JVMs (shell, ledger tool) start faster with C1 only.
JVM_CLIENT = ["-Xmx192m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto"]
# BK_TOOL_SERVER=0: every ledger-tool command in a JVM of its own, as before the server (toolserver.py).
USE_TOOL_SERVER = os.environ.get("BK_TOOL_SERVER", "1") != "0"

LOG4J_SERVER = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders><Console name="out" target="SYSTEM_OUT"><PatternLayout pattern="%d{ISO8601} %-5p [%t] %c{1} - %m%n"/></Console></Appenders>
  <Loggers><Root level="INFO"><AppenderRef ref="out"/></Root></Loggers>
</Configuration>
"""
# The shell prints its results through these loggers at INFO: keep them, message only, on stdout.
LOG4J_SHELL = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT"><PatternLayout pattern="%m%n"/></Console>
    <Console name="err" target="SYSTEM_ERR"><PatternLayout pattern="%d{ISO8601} %-5p %c{1} - %m%n"/></Console>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.bookkeeper.bookie.BookieShell" level="INFO" additivity="false"><AppenderRef ref="out"/></Logger>
    <Logger name="org.apache.bookkeeper.tools.cli.commands" level="INFO" additivity="false"><AppenderRef ref="out"/></Logger>
    <Logger name="org.apache.bookkeeper.client.BookKeeperAdmin" level="INFO" additivity="false"><AppenderRef ref="out"/></Logger>
    <Root level="WARN"><AppenderRef ref="err"/></Root>
  </Loggers>
</Configuration>
"""


def payload(ledger_id: int, entry_id: int, size: int) -> bytes:
    """The deterministic payload BkLedgerTool writes for an entry (see the tool's javadoc)."""
    unit = f"L{ledger_id}E{entry_id}-"
    return (unit * (size // len(unit) + 1))[:size].encode("ascii")


def check_prerequisites() -> None:
    """Fail loudly, naming what is missing, when the cluster cannot be started here."""
    missing = [j for j in ZK_JARS[:1] if not Path(j).exists()]
    if missing:
        raise HarnessError(
            f"ZooKeeper jar {missing[0]} not found: install Debian's 'zookeeper' package (make setup does it)"
        )
    if not (BK_HOME / "lib" / ".complete").exists():
        raise HarnessError(
            f"BookKeeper {BK_VERSION} jars not found in {BK_HOME}/lib: run "
            "scripts/fetch_bk_jars.sh (make setup does it)"
        )
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            raise HarnessError(f"'{tool}' not on PATH: a JDK 17 is required for the real cluster")


def classpath(version: str | None = None) -> str:
    """The jars of BK_VERSION, or of another release fetched beside it (a bookie of another version)."""
    if version is None or version == BK_VERSION:
        return str(BK_HOME / "lib" / "*")
    home = BK_HOME.parent / f"bk-{version}"
    if not (home / "lib" / ".complete").exists():
        raise HarnessError(
            f"BookKeeper {version} jars not found in {home}/lib: run BK_VERSION={version} scripts/fetch_bk_jars.sh"
        )
    return str(home / "lib" / "*")


def compile_once(source: Path, cp: str, cache: Path, version: str) -> Path:
    """Compile one Java tool once per source and library version into `cache/tool/<hash>` (outside git);
    a concurrent compile of the same source keeps the first result."""
    digest = hashlib.sha256(source.read_bytes() + version.encode()).hexdigest()[:16]
    out = cache / "tool" / digest
    if not (out / f"{source.stem}.class").exists():
        tmp = Path(tempfile.mkdtemp(dir=cache))
        proc = subprocess.run(
            ["javac", "-nowarn", "-cp", cp, "-d", str(tmp), str(source)], capture_output=True, text=True, timeout=300
        )
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise HarnessError(f"javac failed for {source}:\n{proc.stderr[-3000:]}")
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            shutil.rmtree(tmp)
        else:
            tmp.rename(out)
    return out


def tool_classes() -> Path:
    """Compile BkLedgerTool once per source version."""
    return compile_once(TOOL_SOURCE, classpath(), BK_HOME, BK_VERSION)


WRITER_SOURCE = Path(__file__).resolve().parent.parent / "java" / "ChaosWriter.java"


def writer_classes() -> Path:
    """Compile ChaosWriter (the chaos campaign's live writers, devcluster/chaos/writers.py) once per source
    version."""
    return compile_once(WRITER_SOURCE, classpath(), BK_HOME, BK_VERSION)


def tool_result(what: str, rc: int, out: str, err: str) -> dict[str, Any]:
    """A Java tool's last JSON line on stdout; HarnessError (with the tail of its log) when it failed."""
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise HarnessError(f"{what} printed no JSON (rc={rc}):\n{out[-2000:]}\n{err[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    if "error" in result or rc != 0:
        raise HarnessError(f"{what} failed (rc={rc}): {result.get('error')}\n{err[-3000:]}")
    return result


class JavaTools:
    """The Java tools run against one cluster. Mixed into `Cluster`, which provides these attributes."""

    conf_dir: Path
    logs_dir: Path
    metadata_service_uri: str
    sorted_bookie_ids: list[str]  # the default placement pool
    client_conf: dict[str, str]  # extra Java client keys (e.g. TLS), for the shell and the ledger tool
    _tool: Path | None
    _workers: list[Proc]
    _tool_server: ToolServer | None
    zk: Proc | None
    zk_security: ZkTestSecurity | None

    def _client_jvm(self) -> list[str]:
        """JVM flags a Java client needs for this cluster's ZooKeeper (TLS, SASL): none when plain."""
        return self.zk_security.client_jvm() if self.zk_security else []

    def _client_conf(self) -> str:
        return "".join(f"{line}\n" for line in (self.zk_security.client_conf() if self.zk_security else []))

    def _write_java_configs(self) -> None:
        """log4j configurations for servers and tools, and the client configuration the shell reads."""
        (self.conf_dir / "log4j2-server.xml").write_text(LOG4J_SERVER)
        (self.conf_dir / "log4j2-shell.xml").write_text(LOG4J_SHELL)
        extra = "".join(f"{k}={v}\n" for k, v in self.client_conf.items())
        (self.conf_dir / "client.conf").write_text(
            f"metadataServiceUri={self.metadata_service_uri}\nzkTimeout=6000\n{extra}" + self._client_conf()
        )

    def _compile_tool(self) -> None:
        self._tool = tool_classes()

    def shell(
        self, *args: str, check: bool = True, timeout: float = 120.0, conf: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the real BookieShell; its results come back on stdout."""
        archive = archive_run("shell", classpath())
        argv = [
            "java",
            *archive.flags,
            *JVM_COMMON,
            *JVM_CLIENT,
            *self._client_jvm(),
            f"-Dlog4j.configurationFile={self.conf_dir / 'log4j2-shell.xml'}",
            "-cp",
            classpath(),
            "org.apache.bookkeeper.bookie.BookieShell",
            "-conf",
            str(conf or self.conf_dir / "client.conf"),
            *args,
        ]
        clean = False
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
            clean = proc.returncode == 0
        finally:
            archive.publish(clean)
        with open(self.logs_dir / "shell.log", "a") as log:
            log.write(f"=== shell {' '.join(args)} rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}\n")
        if check and proc.returncode != 0:
            raise HarnessError(
                f"BookieShell {' '.join(args)} failed rc={proc.returncode}:\n"
                f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
            )
        return proc

    def _tool_jvm(self) -> list[str]:
        """The ledger tool's JVM up to its main class."""
        if self._tool is None:
            self._tool = tool_classes()
        return [
            "java",
            *JVM_COMMON,
            *JVM_CLIENT,
            *self._client_jvm(),
            f"-Dlog4j.configurationFile={self.conf_dir / 'log4j2-shell.xml'}",
            "-cp",
            f"{self._tool}:{classpath()}",
            "BkLedgerTool",
        ]

    def _tool_command(self, command: str, args: Iterable[str]) -> list[str]:
        return [
            command,
            "--metadata-uri",
            self.metadata_service_uri,
            *(["--client-conf", str(self.conf_dir / "client.conf")] if self.client_conf else []),
            *args,
        ]

    def _tool_argv(self, command: str, args: Iterable[str]) -> list[str]:
        """A JVM of its own for one command (a process a test controls: paused writers, workers)."""
        return [*self._tool_jvm(), *self._tool_command(command, args)]

    def _run_tool(self, command: str, args: list[str], timeout: float) -> tuple[int, str, str]:
        """One command of the ledger tool: (exit code, stdout, log tail), also appended to ledger-tool.log."""
        rc, out, err = self._run_tool_once(command, args, timeout)
        with open(self.logs_dir / "ledger-tool.log", "a") as log:
            log.write(f"=== {command} {' '.join(args)[:2000]} rc={rc}\n{out[-20000:]}\n{err[-5000:]}\n")
        return rc, out, err

    def _run_tool_once(self, command: str, args: list[str], timeout: float) -> tuple[int, str, str]:
        """On the cluster's tool server (toolserver.py) when it is free; a second caller at the same time
        gets a JVM of its own."""
        server = self._tool_server
        if USE_TOOL_SERVER and server is None:
            server = self._tool_server = ToolServer([*self._tool_jvm(), "serve"], self.logs_dir / "tool-server.log")
        if server is not None and server.lock.acquire(blocking=False):
            try:
                rc, out = server.run(self._tool_command(command, args), timeout, self.zk.pid if self.zk else None)
                if rc != 0:
                    server.stop()  # the next command starts from a fresh JVM and client
            finally:
                server.lock.release()
            return rc, out, (tail(server.log) if rc != 0 or '{"error"' in out else "")
        proc = subprocess.run(
            self._tool_argv(command, args), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
        return proc.returncode, proc.stdout, proc.stderr

    def stop_tool_server(self) -> None:
        """Stop the tool server (by pid) if one runs; the next command starts another."""
        server = self._tool_server
        if server is not None:
            with server.lock:
                server.stop()

    def ledger_tool(self, command: str, *args: str, timeout: float = 180.0) -> dict[str, Any]:
        rc, out, err = self._run_tool(command, list(args), timeout)
        return self._tool_result(command, args, rc, out, err)

    @staticmethod
    def _tool_result(command: str, args: Iterable[str], rc: int, out: str, err: str) -> dict[str, Any]:
        return tool_result(f"ledger tool {command} {' '.join(args)}", rc, out, err)

    def _create_args(
        self,
        ensemble: int,
        write_quorum: int,
        ack_quorum: int,
        digest: str,
        password: str,
        entries: int,
        entry_size: int,
        ledger_id: int | None,
        custom: dict[str, str] | None,
        bookies: list[str] | None,
        allowed: list[str] | None,
        close: bool,
        one_at_a_time: bool = False,
    ) -> list[str]:
        args = [
            "--ensemble",
            str(ensemble),
            "--write-quorum",
            str(write_quorum),
            "--ack-quorum",
            str(ack_quorum),
            "--digest",
            digest,
            "--password",
            password,
            "--entries",
            str(entries),
            "--entry-size",
            str(entry_size),
        ]
        if ledger_id is not None:
            args += ["--ledger-id", str(ledger_id)]
        for k, v in (custom or {}).items():
            args += ["--custom", f"{k}={v}"]
        if bookies:
            args += ["--bookies", ",".join(bookies)]
        args += ["--allowed", ",".join(allowed if allowed is not None else self.sorted_bookie_ids)]
        if not close:
            args.append("--leave-open")
        if one_at_a_time:
            args.append("--one-at-a-time")
        return args

    def create_ledger(
        self,
        ensemble: int = 3,
        write_quorum: int = 2,
        ack_quorum: int = 2,
        digest: str = "CRC32C",
        password: str = "pw",
        entries: int = 10,
        entry_size: int = 64,
        ledger_id: int | None = None,
        custom: dict[str, str] | None = None,
        bookies: list[str] | None = None,
        allowed: list[str] | None = None,
        close: bool = True,
        one_at_a_time: bool = False,
    ) -> dict[str, Any]:
        """Write a ledger with the real Java client; returns what the tool reports (see docs/contributing.md).
        `one_at_a_time`: each entry is added after the previous one was acknowledged (entry e then carries
        LAC e-1, so its stored bytes are known in advance); by default 200 adds are in flight."""
        return self.ledger_tool(
            "create",
            *self._create_args(
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
                allowed,
                close,
                one_at_a_time,
            ),
        )

    def create_ledgers(self, count: int, **kw: Any) -> list[dict[str, Any]]:
        """`count` closed ledgers with the same options, written by one JVM (much faster than one each)."""
        if kw.get("close") is False or kw.get("ledger_id") is not None:
            raise HarnessError("create_ledgers makes closed ledgers with generated ids")
        args = self._create_args(
            kw.pop("ensemble", 3),
            kw.pop("write_quorum", 2),
            kw.pop("ack_quorum", 2),
            kw.pop("digest", "CRC32C"),
            kw.pop("password", "pw"),
            kw.pop("entries", 10),
            kw.pop("entry_size", 64),
            None,
            kw.pop("custom", None),
            kw.pop("bookies", None),
            kw.pop("allowed", None),
            True,
            kw.pop("one_at_a_time", False),
        )
        if kw:
            raise HarnessError(f"unknown options {sorted(kw)}")
        return self._tool_rows("create", [*args, "--count", str(count)], count, timeout=600)

    def _tool_rows(self, command: str, args: list[str], count: int, timeout: float) -> list[dict[str, Any]]:
        """One command of the tool that prints one JSON line per ledger: exactly `count` rows, none an error."""
        rc, out, err = self._run_tool(command, args, timeout)
        results = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        errors = [r["error"] for r in results if "error" in r]
        if rc != 0 or errors or len(results) != count:
            raise HarnessError(
                f"ledger tool {command} x{count} failed (rc={rc}): {errors or out[-2000:]}\n{err[-3000:]}"
            )
        return results

    def plant_ledgers(
        self,
        *,
        ensemble: int,
        write_quorum: int,
        ack_quorum: int,
        bookies: list[str],
        layout: str,
        entry_size: int = 64,
        count: int = 1,
        password: str = "pw",
        digest: str = "CRC32C",
        ensembles: dict[int, list[str]] | None = None,
    ) -> list[dict[str, Any]]:
        """`count` OPEN ledgers as a writer that died mid-write leaves them, each entry stored exactly where
        `layout` says (the tool's `plant`, one JVM): created by the Java client on `bookies` (pinned), never
        closed, entries added straight to the chosen bookies with a real digest and the client's master key.

        `layout` is `ENTRIES=WHERE[@LAC];...`: ENTRIES `k` or `a-b`; WHERE `ws` (the round-robin write set),
        `none` or ensemble indexes `i,j`; `@LAC` overrides the piggybacked LAC (default e-1). Entries not named
        are written nowhere. `ensembles` ({first entry: bookie ids}) adds segments to the OPEN metadata first.
        Returns one row per ledger: `create_ledger`'s fields plus `layout` and `planted` (entry -> bookies).
        """
        args = [
            "--ensemble",
            str(ensemble),
            "--write-quorum",
            str(write_quorum),
            "--ack-quorum",
            str(ack_quorum),
            "--digest",
            digest,
            "--password",
            password,
            "--bookies",
            ",".join(bookies),
            "--entry-size",
            str(entry_size),
            "--layout",
            layout,
            "--count",
            str(count),
        ]
        if ensembles:
            args += ["--ensembles", ";".join(f"{k}:{','.join(v)}" for k, v in sorted(ensembles.items()))]
        return self._tool_rows("plant", args, count, timeout=300)

    def recover_ledger(self, ledger_id: int, password: str = "pw") -> dict[str, Any]:
        return self.ledger_tool("recover", "--ledger-id", str(ledger_id), "--password", password)

    def ledger_info(self, ledger_id: int, password: str = "pw") -> dict[str, Any]:
        return self.ledger_tool("info", "--ledger-id", str(ledger_id), "--password", password)

    def read_ledger(self, ledger_id: int, entry_size: int, password: str = "pw") -> dict[str, Any]:
        """Every entry read by the real Java client (no recovery); `badContent` lists wrong payloads."""
        return self.ledger_tool(
            "read", "--ledger-id", str(ledger_id), "--entry-size", str(entry_size), "--password", password
        )

    def copies(self, specs: Iterable[str], password: str = "pw", timeout: float = 600.0) -> list[dict[str, Any]]:
        """The tool's `copies` census (one JVM) of ledgers `ID[:END]`: one row per ledger, listing per bookie
        of each write set the entries missing, corrupt (digest checked by Java) or unreadable there."""
        spec = ",".join(specs)
        rc, out, err = self._run_tool("copies", ["--ledgers", spec, "--password", password], timeout)
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        for row in rows:
            if "error" in row:
                raise HarnessError(f"ledger tool copies failed: {row['error']}\n{err[-3000:]}")
        if rc != 0:
            raise HarnessError(f"ledger tool copies: rc={rc}:\n{out[-2000:]}\n{err[-3000:]}")
        return rows

    def delete_ledger(self, ledger_id: int) -> dict[str, Any]:
        return self.ledger_tool("delete", "--ledger-id", str(ledger_id))

    def start_replication_worker(self, seconds: int = 600) -> Proc:
        """A real Java ReplicationWorker alone (no Java auditor, no election), as a background process.

        Stop it with `.stop()` on the returned Proc (by pid). Its log is `logs_dir/replication-worker.log`.
        """
        proc = Proc(
            "replication-worker",
            self._tool_argv("replication-worker", ["--seconds", str(seconds)]),
            self.logs_dir / "replication-worker.log",
        )
        proc.start()
        self._workers.append(proc)
        return proc

    def start_java_auditor(self, seconds: int = 600, port: int = ports.JAVA_AUDITOR_PORT) -> Proc:
        """A real Java Auditor alone (its election, no ReplicationWorker), lostBookieRecoveryDelay 0 and
        periodic checks off, as a background process; its identity is 127.0.0.1:<port>. Stop it with
        `.stop()` (by pid). Its log is `logs_dir/java-auditor.log`."""
        proc = Proc(
            "java-auditor",
            self._tool_argv("auditor", ["--seconds", str(seconds), "--id", f"127.0.0.1:{port}"]),
            self.logs_dir / "java-auditor.log",
        )
        proc.start()
        self._workers.append(proc)
        return proc

    def start_autorecovery(self, port: int = ports.JAVA_AUDITOR_PORT) -> Proc:
        """A real Java AutoRecoveryMain (Java auditor election + ReplicationWorker), stopped by pid.

        Its auditor identity is 127.0.0.1:<port> (nothing listens there). Its log is
        `logs_dir/autorecovery.log`.
        """
        conf = self.conf_dir / "autorecovery.conf"
        conf.write_text(
            "\n".join(
                [
                    f"metadataServiceUri={self.metadata_service_uri}",
                    "zkTimeout=6000",
                    "allowLoopback=true",
                    f"bookiePort={port}",
                    "advertisedAddress=127.0.0.1",
                    "httpServerEnabled=false",
                    "auditorPeriodicCheckInterval=0",
                    "auditorPeriodicBookieCheckInterval=0",
                    "",
                ]
            )
            + self._client_conf()
        )
        argv = [
            "java",
            *JVM_COMMON,
            *self._client_jvm(),
            f"-Dlog4j.configurationFile={self.conf_dir / 'log4j2-server.xml'}",
            "-Xmx256m",
            "-XX:MaxDirectMemorySize=128m",
            "-cp",
            classpath(),
            "org.apache.bookkeeper.replication.AutoRecoveryMain",
            "--conf",
            str(conf),
        ]
        proc = Proc("autorecovery", argv, self.logs_dir / "autorecovery.log", cds="autorecovery")
        proc.start()
        self._workers.append(proc)
        return proc

    payload = staticmethod(payload)
