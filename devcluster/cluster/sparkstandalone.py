"""A real Spark standalone cluster on loopback: one master and N workers, started from the pyspark
distribution's own `bin/spark-class` (pyspark's pip package has no `sbin/start-master.sh`), each a
`Proc` stopped by its pid. Used by tests/realcluster/spark/test_spark_standalone.py (issue 12: the sweep on a
real engine, not only `local[*]`).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from devcluster.cluster.errors import HarnessError
from devcluster.cluster.processes import Proc, tail


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class SparkStandalone:
    workdir: Path
    master_port: int
    ui_port: int
    worker_ports: tuple[int, ...]  # one per worker; its web UI is the next port
    worker_cores: int = 1
    worker_memory: str = "1g"
    procs: list[Proc] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.workdir / "logs"),
            SPARK_WORKER_DIR=str(self.workdir / "work"),
            PYSPARK_PYTHON=sys.executable,  # executors run our interpreter, which has bk-auditor
        )
        return env

    def _spark_class(self, name: str, main: str, args: list[str]) -> Proc:
        proc = Proc(name, [str(spark_home() / "bin" / "spark-class"), main, *args], self.workdir / f"{name}.log")
        proc.start(self._env())
        self.procs.append(proc)
        return proc

    def status(self) -> dict[str, object]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            doc: dict[str, object] = json.load(r)
            return doc

    def start(self, timeout: float = 120.0) -> SparkStandalone:
        try:
            return self._launch(timeout)
        except BaseException:
            self.stop()  # whatever went wrong, no master or worker of ours outlives the failed start
            raise

    def _launch(self, timeout: float) -> SparkStandalone:
        self.workdir.mkdir(parents=True, exist_ok=True)
        master = self._spark_class(
            "spark-master",
            "org.apache.spark.deploy.master.Master",
            ["--host", "127.0.0.1", "--port", str(self.master_port), "--webui-port", str(self.ui_port)],
        )
        for i, port in enumerate(self.worker_ports):
            self._spark_class(
                f"spark-worker-{i + 1}",
                "org.apache.spark.deploy.worker.Worker",
                [
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(port + 1),
                    "--cores",
                    str(self.worker_cores),
                    "--memory",
                    self.worker_memory,
                    self.master_url,
                ],
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if not p.running:
                    raise HarnessError(f"{p.name} exited while starting:\n{tail(p.log)}")
            try:
                if self.status().get("aliveworkers") == len(self.worker_ports):
                    return self
            except (OSError, ValueError):
                # Not up yet: refused, or (seen once in make test, while the master was starting) its
                # HTML page served for /json/.
                pass
            time.sleep(1)
        raise HarnessError(
            f"the Spark master did not see {len(self.worker_ports)} workers within {timeout:.0f}s:\n{tail(master.log)}"
        )

    def stop(self) -> None:
        for p in reversed(self.procs):  # workers first: they stop their executors
            p.stop()
