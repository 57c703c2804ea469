"""Get a SparkSession without hard-coding where it runs.

The master, first match wins: `--master`; `$SPARK_MASTER`; an active SparkSession; whatever
`spark-submit --master` / `PYSPARK_SUBMIT_ARGS` / `spark-defaults.conf` decided; else `local[*]`.

For a local master we also choose small-machine settings (loopback only, no UI, 1g driver, quiet
log4j, executors on this interpreter). Each applies only where nothing else set it: the user's
`--conf`, spark-submit's settings and spark-defaults.conf win. Remote masters get none of them:
the driver must then be reachable from the executors, which loopback binding would prevent.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pyspark is imported only when a session is really wanted
    from pyspark.sql import SparkSession

SPARK_EXTRA = "bk-auditor[spark]"
APP_NAME = "bk-auditor-sweep"
DEFAULT_MASTER = "local[*]"

LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.memory": "1g",
    "spark.executor.memory": "1g",
    "spark.python.worker.reuse": "true",
}

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.hadoopnative.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoopnative.level = error
"""


def _spark_conf_dir() -> Path | None:
    if os.environ.get("SPARK_CONF_DIR"):
        return Path(os.environ["SPARK_CONF_DIR"])
    home = os.environ.get("SPARK_HOME")
    if not home:
        try:
            from pyspark.find_spark_home import _find_spark_home

            home = _find_spark_home()
        except Exception:  # no pyspark, or no home: no defaults file either
            return None
    return Path(home) / "conf"


def spark_defaults() -> dict[str, str]:
    """spark-defaults.conf as spark-submit reads it (`key value` or `key=value`, `#` comments)."""
    conf_dir = _spark_conf_dir()
    path = conf_dir / "spark-defaults.conf" if conf_dir else None
    out: dict[str, str] = {}
    if path is None or not path.is_file():
        return out
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        # java.util.Properties: the key ends at the first '=', ':' or blank
        m = re.match(r"([^=:\s]+)\s*[=:\s]?\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def require_pyspark() -> None:
    """Raise ConfigError naming the `spark` extra when pyspark cannot be imported: it is an optional
    dependency, left out of the daemon image."""
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        from auditor.errors import ConfigError

        raise ConfigError(
            f"the Spark sweep needs pyspark, which is not installed ({exc}): install the extra "
            f"(pip install '{SPARK_EXTRA}'), or run the sweep from the sweep image or with spark-submit and "
            f"a packed environment (docs/spark.md); the daemon image has no Spark"
        ) from None


def under_spark_submit() -> bool:
    """True when this interpreter was started by spark-submit (the JVM already exists)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _submitted_conf() -> dict[str, str]:
    """The conf spark-submit gave the running JVM (only meaningful under spark-submit)."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's gateway
    return dict(SparkConf().getAll())


def _log4j_file() -> str:
    fd, path = tempfile.mkstemp(prefix="bk-auditor-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(_LOG4J2)
    return path


def resolve_master(master: str | None, *, known: Mapping[str, str]) -> tuple[str | None, str]:
    """(master to set or None to leave it to Spark, the master that will be in effect)."""
    chosen = master or os.environ.get("SPARK_MASTER") or None
    if chosen:
        return chosen, chosen
    if known.get("spark.master"):
        return None, known["spark.master"]
    return DEFAULT_MASTER, DEFAULT_MASTER


def get_session(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    *,
    app_name: str = APP_NAME,
    log_level: str = "WARN",
) -> tuple[SparkSession, bool]:
    """(session, created): the active session if there is one, else a new one (see the module doc)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        want = master or os.environ.get("SPARK_MASTER")
        if want and active.sparkContext.master != want:
            print(
                f"bk-auditor sweep: using the active SparkSession ({active.sparkContext.master}), not {want}",
                file=sys.stderr,
            )
        return active, False
    user = dict(conf or {})
    submitted = under_spark_submit()
    known = {**(_submitted_conf() if submitted else spark_defaults()), **user}
    to_set, effective = resolve_master(user.get("spark.master") or master, known=known)
    builder = SparkSession.builder.appName(app_name)
    if to_set:
        builder = builder.master(to_set)
    if effective.startswith("local"):
        for key, value in LOCAL_DEFAULTS.items():
            if key not in known:
                builder = builder.config(key, value)
        if "spark.pyspark.python" not in known:
            # The RDD API starts executors' Python from $PYSPARK_PYTHON (default: python3 on PATH), which
            # may not be the interpreter that has bk-auditor installed.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf_dir = _spark_conf_dir()
        has_log4j = conf_dir is not None and (conf_dir / "log4j2.properties").is_file()
        if not submitted and not has_log4j and "spark.driver.extraJavaOptions" not in known:
            builder = builder.config(
                "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_log4j_file()}"
            )
    for key, value in user.items():
        if key != "spark.master":
            builder = builder.config(key, value)
    if "spark.pyspark.python" in known and not submitted:
        # In-process, pyspark takes the executors' Python only from $PYSPARK_PYTHON (the conf key is read
        # by spark-submit alone): without this, `--conf spark.pyspark.python=...` would be ignored and
        # executors would start whatever `python3` their PATH has.
        os.environ["PYSPARK_PYTHON"] = known["spark.pyspark.python"]
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    return session, True


def parse_conf(pairs: list[str] | None) -> dict[str, str]:
    """`--conf key=value` options -> dict; ValueError on a malformed pair."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf takes key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def describe(session: Any) -> dict[str, Any]:
    sc = session.sparkContext
    return {
        "master": sc.master,
        "appId": sc.applicationId,
        "defaultParallelism": sc.defaultParallelism,
        "sparkVersion": sc.version,
    }
