"""Pulsar's own managed-ledger library run against a test cluster: `devcluster/java/MlTool.java`.

Tests create Pulsar topics' managed ledgers (MLs) on the real cluster with `org.apache.pulsar:managed-ledger`
(the code a broker runs: its znodes under `/managed-ledgers`, its ledgers with Pulsar's custom metadata,
its trimming, deletion and offloading), then break things behind Pulsar's back.

The library and its dependencies (its own BookKeeper 4.17.2 client and ZooKeeper 3.9.3 client) come from
`scripts/fetch_ml_jars.sh`, which puts them in `$PULSAR_ML_HOME/lib` (default
`~/.cache/pulsar-ml-<version>`); the tool runs on that classpath only, never mixed with the cluster's
BookKeeper 4.17.3 jars. The Pulsar metadata store is the cluster's ZooKeeper, root `/`.

    out = cluster.ml_create("t/ns/persistent/topic", ledgers=3, entries=5, cursors=["sub"], leave_open=True)
    out = cluster.ml_tool("trim", "--name", "t/ns/persistent/topic", "--through-ledger", "12")

Every command returns the ML as the library parses it after the command (see the tool's javadoc):
`{"name", "znode": {"bytes", "wrapped", "version"}, "ledgers": [{"ledgerId", "entries", "size",
"timestamp", "offload": null | {"uuid", "complete", "bookkeeperDeleted", "timestamp", "driver"},
"inBookKeeper"}], "properties", "terminatedPosition", "cursors": {name: {"cursorsLedgerId",
"markDelete": [ledger, entry], "properties", "cursorProperties", "inBookKeeper", "znode"}}}` plus the
command's own keys.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from devcluster.cluster.errors import HarnessError
from devcluster.cluster.javatools import JVM_CLIENT, JVM_COMMON, compile_once, tool_result
from devcluster.cluster.zksecurity import ZkTestSecurity

PULSAR_ML_VERSION = os.environ.get("PULSAR_ML_VERSION", "4.0.7")
PULSAR_ML_HOME = Path(os.environ.get("PULSAR_ML_HOME", Path.home() / ".cache" / f"pulsar-ml-{PULSAR_ML_VERSION}"))
ML_TOOL_SOURCE = Path(__file__).resolve().parent.parent / "java" / "MlTool.java"

# The library logs through slf4j-simple (stderr): warnings, and the managed ledger's own INFO lines
# (rollovers, trims, cursor ledgers), which make the tool's log readable after a failure.
ML_JVM_LOGGING = [
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.log.org.apache.bookkeeper.mledger=info",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
]
# log4j-core is on the classpath too (a Pulsar dependency): anything logged through it goes to stderr,
# so that stdout holds only the tool's JSON line.
LOG4J_MLTOOL = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders><Console name="err" target="SYSTEM_ERR"><PatternLayout pattern="%d{ISO8601} %-5p %c{1} - %m%n"/></Console></Appenders>
  <Loggers><Root level="WARN"><AppenderRef ref="err"/></Root></Loggers>
</Configuration>
"""

_compile_lock = threading.Lock()


def check_ml_jars() -> None:
    """Fail loudly when the managed-ledger jars are not there (no test is skipped for it)."""
    stamp = PULSAR_ML_HOME / "lib" / ".complete"
    if not stamp.exists() or stamp.read_text().strip() != PULSAR_ML_VERSION:
        raise HarnessError(
            f"Pulsar managed-ledger {PULSAR_ML_VERSION} jars not found in {PULSAR_ML_HOME}/lib: run "
            "scripts/fetch_ml_jars.sh (make setup does it)"
        )


def ml_classpath() -> str:
    return str(PULSAR_ML_HOME / "lib" / "*")


def ml_tool_classes() -> Path:
    """Compile MlTool once per source and library version into a cache outside git."""
    check_ml_jars()
    with _compile_lock:
        return compile_once(ML_TOOL_SOURCE, ml_classpath(), PULSAR_ML_HOME, PULSAR_ML_VERSION)


def ml_result(command: str, args: Iterable[str], rc: int, out: str, err: str) -> dict[str, Any]:
    """The tool's last JSON line; a HarnessError (with the tail of its log) when it failed."""
    return tool_result(f"ML tool {command} {' '.join(args)}", rc, out, err)


class MlTools:
    """Pulsar's managed-ledger library on one cluster. Mixed into `Cluster`, which provides these."""

    conf_dir: Path
    logs_dir: Path
    zk_hosts: str
    metadata_service_uri: str
    client_conf: dict[str, str]
    zk_security: ZkTestSecurity | None

    def _ml_argv(self, command: str, args: Sequence[str]) -> list[str]:
        classes = ml_tool_classes()
        log4j = self.conf_dir / "log4j2-mltool.xml"
        if not log4j.exists():
            log4j.write_text(LOG4J_MLTOOL)
        return [
            "java",
            *JVM_COMMON,
            *JVM_CLIENT,
            *(self.zk_security.client_jvm() if self.zk_security else []),
            *ML_JVM_LOGGING,
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            f"{classes}:{ml_classpath()}",
            "MlTool",
            command,
            "--zk",
            self.zk_hosts,
            "--metadata-uri",
            self.metadata_service_uri,
            *(["--client-conf", str(self.conf_dir / "client.conf")] if self.client_conf else []),
            *args,
        ]

    def ml_tool(self, command: str, *args: str, timeout: float = 300.0) -> dict[str, Any]:
        """Run one MlTool command (create, trim, delete, offload, read, info) on this cluster."""
        argv = self._ml_argv(command, args)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"ML tool {command} {' '.join(args)} did not finish within {timeout}s") from exc
        with open(self.logs_dir / "ml-tool.log", "a") as log:
            log.write(f"=== {command} {' '.join(args)} rc={proc.returncode}\n{proc.stdout}\n{proc.stderr[-20000:]}\n")
        return ml_result(command, args, proc.returncode, proc.stdout, proc.stderr)

    @staticmethod
    def _ml_common(
        compression: str | None, offload_dir: Path | str | None, replication: tuple[int, int, int] | None
    ) -> list[str]:
        args: list[str] = []
        if compression:
            args += ["--compression", compression]
        if offload_dir is not None:
            args += ["--offload-dir", str(offload_dir)]
        if replication is not None:
            e, w, a = replication
            args += ["--ensemble", str(e), "--write-quorum", str(w), "--ack-quorum", str(a)]
        return args

    def ml_create(
        self,
        name: str,
        ledgers: int,
        entries: int,
        *,
        cursors: Sequence[str] = (),
        entry_size: int = 100,
        leave_open: bool = False,
        compression: str | None = None,
        replication: tuple[int, int, int] | None = None,
    ) -> dict[str, Any]:
        """A new ML (or more data on an existing one): `ledgers` ledgers of `entries` entries each.

        Each cursor is mark-deleted at the first written entry, which gives it a cursor ledger. A clean
        close (the default) stores cursor positions in their znodes (cursor ledger -1) and deletes the cursor
        ledgers; `leave_open=True` exits like a crashed broker: the current ledger stays OPEN and each cursor
        znode names its cursor ledger. Extra key: "written" {ledger id: entries written there}."""
        args = ["--name", name, "--ledgers", str(ledgers), "--entries", str(entries), "--entry-size", str(entry_size)]
        if cursors:
            args += ["--cursors", ",".join(cursors)]
        if leave_open:
            args.append("--leave-open")
        return self.ml_tool("create", *args, *self._ml_common(compression, None, replication))

    def ml_trim(
        self, name: str, through_ledger: int, *, offload_dir: Path | str | None = None, compression: str | None = None
    ) -> dict[str, Any]:
        """Every cursor mark-deleted through `through_ledger`, then Pulsar's trimming (retention 0); returns
        after the trimmed ledgers are gone from BookKeeper. Extra keys: "removed", "remaining" (ids)."""
        args = ["--name", name, "--through-ledger", str(through_ledger)]
        return self.ml_tool("trim", *args, *self._ml_common(compression, offload_dir, None))

    def ml_delete(
        self, name: str, *, offload_dir: Path | str | None = None, compression: str | None = None
    ) -> dict[str, Any]:
        """Pulsar's deletion of the whole ML. Returns the ledgers and cursors it had when deleted, and
        "znodeExists", "stillInBookKeeper" (those ledgers, and cursor ledgers, that BookKeeper still has)."""
        return self.ml_tool("delete", "--name", name, *self._ml_common(compression, offload_dir, None))

    def ml_offload(
        self, name: str, ledgers: int, offload_dir: Path | str, *, compression: str | None = None
    ) -> dict[str, Any]:
        """The first `ledgers` closed ledgers offloaded into `offload_dir` (one file per ledger), marked
        bookkeeperDeleted by the library's trimming (deletion lag 0) and deleted from BookKeeper.
        Extra keys: "offloaded", "bookkeeperDeleted" (ids), "offloadDir"."""
        args = ["--name", name, "--ledgers", str(ledgers)]
        return self.ml_tool("offload", *args, *self._ml_common(compression, offload_dir, None))

    def ml_read(
        self, name: str, *, offload_dir: Path | str | None = None, compression: str | None = None
    ) -> dict[str, Any]:
        """Every entry read through the library from the start (BookKeeper or the offloaded copy).
        Extra keys: "read" (count), "readPerLedger" {ledger id: count}, "badContent" ["ledger:entry"]."""
        return self.ml_tool("read", "--name", name, *self._ml_common(compression, offload_dir, None))

    def ml_info(self, name: str) -> dict[str, Any]:
        """The ML and cursor znodes as the library parses them; nothing is opened or changed."""
        return self.ml_tool("info", "--name", name)
