"""The `bk-auditor` command line.

* `run`      - the daemon (auditor.daemon.service.serve)
* `check`    - one-shot checks (auditor.checks.oneshot.main); exit 0 clean, 1 findings, 2 errors
* `sweep`    - the same checks over the whole cluster as a Spark job (auditor.spark.sweep); same exit codes
* `repair`   - the repair worker (auditor.repair.run): until interrupted, or `--once`; exit 0 all repaired,
  1 some ledger blocked or not taken, 2 errors
* `status`, `findings`, `explain`, `trigger`, `pause`, `resume`, `health` - clients of a running daemon's
  admin API (`--admin host:port`, else $BKAUDIT_ADMIN_ADDRESS, else the default admin.bind, 127.0.0.1:7979).

Every error (bad config, daemon unreachable, bad ledger id) is one line on stderr and exit code 2: the
one table `EXIT_CODES` turns an error class into its exit code.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from auditor import __version__
from auditor.checks.names import checks_help
from auditor.clientenv import (
    ENV_CHECK_PROCESSES,
    ENV_CLI_TLS_CA,
    ENV_CLI_TLS_CERT,
    ENV_CLI_TLS_KEY,
    ENV_CLI_TLS_SERVER_NAME,
)
from auditor.durability.findings import Category
from auditor.errors import AdminError, BookieError, ConfigError, DataError, MetadataError, error_line
from auditor.gctune import tune_gc

if TYPE_CHECKING:  # annotations only: the commands import what they need when they run
    from google.protobuf.message import Message

    from auditor._proto import admin_pb2
    from auditor.admin.client import AdminClient
    from auditor.durability.ids import LedgerId
    from auditor.settings import Settings
    from auditor.switches import OperatorOps, SwitchReport

T = TypeVar("T")

EXIT_ERROR = 2
# The one place an error becomes an exit code: the most specific class listed wins. An error not listed
# is a bug and keeps its traceback.
EXIT_CODES: dict[type[BaseException], int] = {
    ConfigError: EXIT_ERROR,  # a setting, config file, environment variable or flag is wrong
    DataError: EXIT_ERROR,  # e.g. a malformed ledger id on the command line
    MetadataError: EXIT_ERROR,
    BookieError: EXIT_ERROR,
    AdminError: EXIT_ERROR,  # the daemon is unreachable or refused the call (AdminClientError)
    ValueError: EXIT_ERROR,  # a malformed value outside the tree (e.g. Spark's --conf KEY=VALUE)
}

app = typer.Typer(
    name="bk-auditor",
    help="Durability auditor for Apache BookKeeper clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    typer.echo(error_line(message), err=True)
    raise typer.Exit(code)


def exit_code(exc: BaseException) -> int | None:
    """The exit code EXIT_CODES gives `exc` (None: not listed, a bug)."""
    for cls in type(exc).__mro__:
        code = EXIT_CODES.get(cls)
        if code is not None:
            return code
    return None


@contextmanager
def _exit_on_error() -> Iterator[None]:
    """Around a step that fails on what the user gave: an error EXIT_CODES lists becomes one line on stderr
    and its exit code."""
    try:
        yield
    except Exception as exc:
        code = exit_code(exc)
        if code is None:
            raise
        _fail(str(exc), code)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"bk-auditor {__version__}")
        raise typer.Exit(0)


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Durability auditor for Apache BookKeeper clusters."""


# ------------------------------------------------------------------------------------------ settings

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        envvar="BKAUDIT_CONFIG_FILE",
        help="YAML or Java .properties/.conf file (bk_server.conf works).",
    ),
]
UriOpt = Annotated[
    str | None, typer.Option("--metadata-service-uri", help="e.g. zk+hierarchical://zk1:2181;zk2:2181/ledgers")
]
LogLevelOpt = Annotated[str | None, typer.Option("--log-level", help="debug|info|warning|error")]
LogFormatOpt = Annotated[str | None, typer.Option("--log-format", help="json|console")]


def _load(config: Path | None, flags: dict[str, tuple[str, object]]) -> Settings:
    """Settings from flags (dotted name -> (flag, value)), env and file; exits 2 with one line on error."""
    from auditor.settings import load_settings

    overrides: dict[str, Any] = {}
    names: dict[str, str] = {}
    for dotted, (flag, value) in flags.items():
        if value is None:
            continue
        node = overrides
        parts = dotted.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
        names[dotted] = flag
    with _exit_on_error():
        return load_settings(config, overrides=overrides, option_names=names)


def _start_logging(settings: Settings) -> None:
    from auditor.logging import configure_logging, get_logger

    configure_logging(settings.log.level, settings.log.format)
    log = get_logger("auditor.config")
    if settings.config_file is not None:
        log.info("config file read", path=str(settings.config_file))
    if settings.ignored_java_keys:
        log.info(
            "BookKeeper settings ignored (not used by bk-auditor)",
            configFile=str(settings.config_file),
            keys=list(settings.ignored_java_keys),
        )


def _run_with_loop(fn: Callable[..., Any], *args: Any, loop: str = "asyncio") -> Any:
    """Call fn; when it is a coroutine function, run it on the chosen event loop."""
    if not inspect.iscoroutinefunction(fn):
        return fn(*args)
    tune_gc()
    if loop == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(fn(*args))
    return asyncio.run(fn(*args))


def _common_flags(
    metadata_service_uri: str | None, log_level: str | None, log_format: str | None
) -> dict[str, tuple[str, object]]:
    """The flags every command that connects to a cluster takes: dotted setting -> (flag, value)."""
    return {
        "metadata_service_uri": ("--metadata-service-uri", metadata_service_uri),
        "log.level": ("--log-level", log_level),
        "log.format": ("--log-format", log_format),
    }


def _load_and_log(
    config: Path | None,
    metadata_service_uri: str | None,
    log_level: str | None,
    log_format: str | None,
    flags: dict[str, tuple[str, object]] | None = None,
) -> Settings:
    """What the long-running commands share: settings with the common flags (and `flags`) applied, a
    metadata location required, logging started."""
    settings = _load(
        config,
        {**_common_flags(metadata_service_uri, log_level, log_format), **(flags or {})},
    )
    _require_metadata(settings)
    _start_logging(settings)
    return settings


@app.command()
def run(
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    identity: Annotated[str | None, typer.Option("--identity", help="Election identity (default: hostname).")] = None,
    admin_bind: Annotated[str | None, typer.Option("--admin-bind", help="Admin API host:port.")] = None,
    metrics_bind: Annotated[str | None, typer.Option("--metrics-bind", help="Metrics host:port.")] = None,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
    loop: Annotated[str | None, typer.Option("--loop", help="asyncio|uvloop")] = None,
) -> None:
    """Run the auditor daemon (leader election, bookie watch, scheduled checks, admin API, metrics)."""
    settings = _load_and_log(
        config,
        metadata_service_uri,
        log_level,
        log_format,
        {
            "election.identity": ("--identity", identity),
            "admin.bind": ("--admin-bind", admin_bind),
            "metrics.bind": ("--metrics-bind", metrics_bind),
            "event_loop": ("--loop", loop),
        },
    )
    try:
        from auditor.daemon.service import serve
    except ImportError as exc:
        _fail(f"the daemon is not available in this build ({exc})")
    from auditor.cpus import available_cpus

    processes = min(settings.schedule.scan_processes, available_cpus())
    sharded = None
    if processes > 1:
        from auditor.spark.processes import check_on_processes

        sharded = functools.partial(
            check_on_processes, settings, processes, max_ledgers=settings.schedule.scan_partition_ledgers
        )
    code = _run_with_loop(
        functools.partial(serve, sharded=sharded, scan_processes=processes), settings, loop=settings.event_loop
    )
    raise typer.Exit(int(code or 0))


FormatRunOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="table|json [default: table]. Logs follow: console lines with table (or on a terminal), JSON "
        "with json (or when stderr is not a terminal), unless --log-format or log.format says otherwise.",
    ),
]


def _prepare_run(
    config: Path | None,
    metadata_service_uri: str | None,
    fmt: str | None,
    log_level: str | None,
    log_format: str | None,
) -> tuple[Settings, str]:
    """What `check` and `sweep` share: the output format, settings with flags applied, logging."""
    if fmt not in (None, "table", "json"):
        _fail(f"--format must be table or json, got {fmt!r}")
    settings = _load(config, _common_flags(metadata_service_uri, log_level, log_format))
    _require_metadata(settings)
    if "format" not in settings.log.model_fields_set:  # not chosen by flag, env or file: follow the output
        human = fmt == "table" or (fmt is None and sys.stderr.isatty())
        settings.log.format = "console" if human else "json"
    _start_logging(settings)
    return settings, fmt or "table"


@app.command()
def check(
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    checks: Annotated[str, typer.Option("--checks", help=checks_help())] = "",
    fmt: FormatRunOpt = None,
    by: Annotated[
        str, typer.Option("--by", help="finding|topic: one row per finding, or per Pulsar topic at risk.")
    ] = "finding",
    processes: Annotated[
        int | None,
        typer.Option(
            "--processes",
            envvar=ENV_CHECK_PROCESSES,
            min=1,
            help="Worker processes for the checks that judge each ledger alone, each on a share of the id "
            "space and of the bookie and ZooKeeper budgets (default: the CPUs this process may use).",
        ),
    ] = None,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Run checks once and exit: 0 clean, 1 findings, 2 errors."""
    if by not in ("finding", "topic"):
        _fail(f"--by must be finding or topic, got {by!r}")
    settings, fmt = _prepare_run(config, metadata_service_uri, fmt, log_level, log_format)
    names = [c.strip() for c in checks.split(",") if c.strip()]
    try:
        from auditor.checks.oneshot import main as oneshot_main
    except ImportError as exc:
        _fail(f"one-shot checks are not available in this build ({exc})")
    from auditor.cpus import available_cpus

    processes = processes or available_cpus()
    sharded = None
    if processes > 1:
        from auditor.spark.processes import check_on_processes

        sharded = functools.partial(check_on_processes, settings, processes)
    code = _run_with_loop(
        functools.partial(oneshot_main, by=by, sharded=sharded), settings, names, fmt, loop=settings.event_loop
    )
    raise typer.Exit(int(code or 0))


@app.command()
def repair(
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    once: Annotated[bool, typer.Option("--once", help="Repair what is marked now, then exit.")] = False,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
    stop_with_parent: Annotated[
        bool,
        typer.Option("--stop-with-parent", hidden=True, help="Stop when stdin closes (a worker the daemon started)."),
    ] = False,
) -> None:
    """Repair under-replicated ledgers (Java's lock protocol, worst first): until interrupted, or --once
    (exit 0 all repaired, 1 some blocked or not taken, 2 errors)."""
    settings = _load_and_log(config, metadata_service_uri, log_level, log_format)
    from auditor.repair.run import main as repair_main

    try:
        code = _run_with_loop(
            functools.partial(repair_main, once=once, stop_with_parent=stop_with_parent),
            settings,
            loop=settings.event_loop,
        )
    except KeyboardInterrupt:
        code = 0  # interrupted: the worker released its lock on the way out
    raise typer.Exit(int(code or 0))


@app.command()
def sweep(
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    checks: Annotated[str, typer.Option("--checks", help=checks_help())] = "",
    master: Annotated[
        str | None,
        typer.Option(
            "--master",
            help="Spark master; default: spark-submit's, $SPARK_MASTER, spark-defaults, else local[*]. "
            "processes[N] or processes[*]: N local worker processes (one per CPU), no Spark.",
        ),
    ] = None,
    partitions: Annotated[
        int | None, typer.Option("--partitions", min=1, help="Id-range partitions (default: Spark parallelism x 4).")
    ] = None,
    max_concurrent_partitions: Annotated[
        int | None,
        typer.Option(
            "--max-concurrent-partitions",
            min=1,
            help="Partitions in flight; per-bookie load = this x bookie_client.requests_per_second.",
        ),
    ] = None,
    output: Annotated[
        str | None, typer.Option("--output", help="Directory or Hadoop URI for findings.jsonl and summary.json.")
    ] = None,
    conf: Annotated[list[str] | None, typer.Option("--conf", help="Extra Spark conf KEY=VALUE (repeatable).")] = None,
    start: Annotated[str | None, typer.Option("--start", help="First ledger id to sweep.")] = None,
    end: Annotated[str | None, typer.Option("--end", help="Sweep ledger ids below this one.")] = None,
    fmt: FormatRunOpt = None,
    executor_log_level: Annotated[
        str, typer.Option("--executor-log-level", help="Log level on the Spark executors.")
    ] = "warning",
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Sweep the whole cluster as a Spark job (local[*] by default); exit 0 clean, 1 findings, 2 errors."""
    from auditor.spark.session import parse_conf, require_pyspark
    from auditor.spark.sweep import SweepOptions, local_processes, quiet_spark_client_logs, sweep_main

    try:
        processes = local_processes(master)
    except ValueError as exc:
        _fail(str(exc))
    with _exit_on_error():
        if processes is None:
            require_pyspark()  # first: nothing else matters without it (the local process engine needs no Spark)
    settings, fmt = _prepare_run(config, metadata_service_uri, fmt, log_level, log_format)
    with _exit_on_error():
        spark_conf = parse_conf(conf)
    bounds = [_parse_ledger_id(v) if v else None for v in (start, end)]
    options = SweepOptions(
        checks=[c.strip() for c in checks.split(",") if c.strip()],
        partitions=partitions,
        max_concurrent_partitions=max_concurrent_partitions,
        start=bounds[0],
        end=bounds[1],
        executor_log_level=executor_log_level.lower(),
    )
    quiet_spark_client_logs()
    code = sweep_main(settings, options, master=master, conf=spark_conf, output=output, fmt=fmt)
    raise typer.Exit(int(code or 0))


def _parse_ledger_id(text: str) -> LedgerId:
    from auditor.durability.ids import LedgerId

    with _exit_on_error():
        return LedgerId.parse(text)


def _require_metadata(settings: Settings) -> None:
    with _exit_on_error():
        settings.require_metadata()


# ------------------------------------------------------------------------------------------ admin clients

AdminOpt = Annotated[
    str | None,
    typer.Option(
        "--admin",
        help="The daemon's admin API host:port (default: $BKAUDIT_ADMIN_ADDRESS, else 127.0.0.1:7979).",
        show_default=False,
    ),
]
# The admin client's TLS material: flags, else these environment variables (the chart sets them in the
# pod, so `kubectl exec ... bk-auditor status` authenticates like any named client).
TlsCaOpt = Annotated[
    Path | None,
    typer.Option("--tls-ca", envvar=ENV_CLI_TLS_CA, help="CA certificate of the admin API's TLS certificate (PEM)."),
]
TlsCertOpt = Annotated[
    Path | None,
    typer.Option(
        "--tls-cert",
        envvar=ENV_CLI_TLS_CERT,
        help="Client certificate (PEM) when the admin API requires one (admin.tls_client_ca).",
    ),
]
TlsKeyOpt = Annotated[
    Path | None, typer.Option("--tls-key", envvar=ENV_CLI_TLS_KEY, help="The client certificate's key (PEM).")
]
TlsServerNameOpt = Annotated[
    str | None,
    typer.Option(
        "--tls-server-name",
        envvar=ENV_CLI_TLS_SERVER_NAME,
        help="Name to check the server's certificate against, when it differs from the --admin host.",
    ),
]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds to wait for the daemon.")]
FormatOpt = Annotated[str, typer.Option("--format", help="table|json")]


_warned: set[str] = set()  # warnings already shown by this process


def _admin_address(flag: str | None) -> str:
    """--admin, else the environment (warning once about the deprecated name), else the default."""
    from auditor.settings import DEFAULT_ADMIN_ADDRESS, admin_address_from_environment
    from auditor.settings.load import ENV_ADMIN_ADDRESS, ENV_ADMIN_ADDRESS_DEPRECATED

    if flag is not None:
        return _checked_admin(flag, "command line: --admin")
    address, warning = admin_address_from_environment()
    if warning is not None and warning not in _warned:
        _warned.add(warning)
        typer.echo(f"warning: {warning}", err=True)
    if address is None:
        return DEFAULT_ADMIN_ADDRESS
    name = ENV_ADMIN_ADDRESS if (os.environ.get(ENV_ADMIN_ADDRESS) or "").strip() else ENV_ADMIN_ADDRESS_DEPRECATED
    return _checked_admin(address, f"environment: {name}")


def _checked_admin(address: str, source: str) -> str:
    """host:port or [v6]:port with a port 1..65535, else exit 2 naming where it came from (gRPC would
    otherwise take a bare host as port 443, and a typo would show up only as "unreachable")."""
    from auditor.settings import parse_bind
    from auditor.settings.values import grpc_target

    try:
        _, port = parse_bind(address)
    except ValueError as exc:
        _fail(f"{source}: {exc}")
    if port == 0:
        _fail(f"{source}: the port must be 1..65535, got 0")
    return grpc_target(address)  # an IPv6 pod IP without brackets ($(POD_IP):7979) gets them


@dataclass(frozen=True)
class _ClientTls:
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    server_name: str | None = None


_NO_TLS = _ClientTls()
_TLS_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("tls_ca", TlsCaOpt),
    ("tls_cert", TlsCertOpt),
    ("tls_key", TlsKeyOpt),
    ("tls_server_name", TlsServerNameOpt),
)


def _with_client_tls(fn: Callable[..., T]) -> Callable[..., T]:
    """Give an admin-client command the --tls-* options (or their variables, auditor.clientenv), handed to
    it as one `tls` argument: one definition for every command instead of four parameters in each."""
    sig = inspect.signature(fn, eval_str=True)
    params = [p for p in sig.parameters.values() if p.name != "tls"]
    params += [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=a) for n, a in _TLS_OPTIONS
    ]

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> T:
        return fn(*args, tls=_ClientTls(*(kwargs.pop(n) for n, _ in _TLS_OPTIONS)), **kwargs)

    command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params} | {"return": sig.return_annotation}
    return command


def _client_call(admin: str | None, tls: _ClientTls, timeout: float, call: Callable[[AdminClient], Awaitable[T]]) -> T:
    from auditor.admin.client import AdminClient

    admin = _admin_address(admin)

    async def go() -> T:
        async with AdminClient(
            admin,
            timeout=timeout,
            tls_ca=tls.ca,
            tls_cert=tls.cert,
            tls_key=tls.key,
            tls_server_name=tls.server_name,
        ) as client:
            return await call(client)

    for flag, path in (("--tls-ca", tls.ca), ("--tls-cert", tls.cert), ("--tls-key", tls.key)):
        if path is not None and not path.is_file():
            _fail(f"{flag} {path}: no such file")
    with _exit_on_error():
        return asyncio.run(go())


def _check_format(fmt: str) -> None:
    if fmt not in ("table", "json"):
        _fail(f"--format must be table or json, got {fmt!r}")


AskAdminOpt = Annotated[
    str | None,
    typer.Option(
        "--admin",
        help="Ask a running daemon's admin API at HOST:PORT (its bookie pool and rate limits) instead of "
        "ZooKeeper and the bookies directly; the same answer.",
        show_default=False,
    ),
]
AskTimeoutOpt = Annotated[float, typer.Option("--timeout", help="With --admin: seconds to wait for the daemon.")]


def _ask_daemon(
    admin: str, tls: _ClientTls, timeout: float, fmt: str | None, call: Callable[[AdminClient], Awaitable[T]]
) -> tuple[T, str]:
    """The --admin form of an operator command: the daemon's answer, and the output format."""
    fmt = fmt or "table"
    _check_format(fmt)
    return _client_call(admin, tls, timeout, call), fmt


@app.command()
@_with_client_tls
def underreplicated(
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    fmt: FormatRunOpt = None,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
    admin: AskAdminOpt = None,
    tls: _ClientTls = _NO_TLS,
    timeout: AskTimeoutOpt = 150.0,
) -> None:
    """What is marked under-replicated now, and why: marker age, lost replicas, lock holder, and our verdict
    from the bookies now (broken, stale marker, unknown). Exit 0: nothing still broken; 1: some is."""
    from auditor.checks.underreplicated import MarkedLedger, marked_ledgers

    rows: list[MarkedLedger]
    if admin is not None:
        from auditor.admin.questions import marked_from_pb

        resp, fmt = _ask_daemon(admin, tls, timeout, fmt, lambda c: c.underreplicated())
        rows = marked_from_pb(resp)
    else:
        settings, fmt = _prepare_run(config, metadata_service_uri, fmt, log_level, log_format)

        async def collect() -> list[MarkedLedger]:
            from auditor.checks.build import audit_context

            async with audit_context(settings, one_shot=True) as (ctx, _):
                return [m async for m in marked_ledgers(ctx)]

        with _exit_on_error():
            rows = _run_with_loop(collect, loop=settings.event_loop)
    if fmt == "json":
        for m in rows:
            typer.echo(json.dumps(m.to_dict(), sort_keys=True))
    else:
        _underreplicated_table(rows)
    raise typer.Exit(1 if any(m.verdict == "broken" for m in rows) else 0)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _underreplicated_table(rows: list[Any]) -> None:
    from auditor.tables import print_table

    if not rows:
        typer.echo("no ledger is marked under-replicated")
        return
    print_table(
        ("ledger", "marked", "lost replicas", "lock", "verdict", "worst"),
        (
            (
                str(m.ledger.ledger),
                _age(m.marked_seconds),
                ", ".join(m.replicas),
                f"{m.lock_holder} ({_age(m.locked_seconds)})" if m.lock_holder else "-",
                m.verdict,
                f"{m.worst} ({m.entries} entries)" if m.worst else "-",
            )
            for m in rows
        ),
        title=f"{len(rows)} ledger(s) marked under-replicated",
    )


@app.command("can-decommission")
@_with_client_tls
def can_decommission(
    bookie: Annotated[str, typer.Argument(help="The bookie id, e.g. 10.0.3.7:3181.")],
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    fmt: FormatRunOpt = None,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
    admin: AskAdminOpt = None,
    tls: _ClientTls = _NO_TLS,
    timeout: AskTimeoutOpt = 150.0,
) -> None:
    """Can BOOKIE be decommissioned now? Every ledger still on it, whether the other copies are complete,
    its marker and worker lock, and what holds it back. Exit 0: safe; 1: not yet; 2: errors."""
    from auditor.checks.decommission import DecommissionReport, decommission_report
    from auditor.metadata.formats import is_valid_bookie_id

    if not is_valid_bookie_id(bookie):
        _fail(f"{bookie!r} is not a bookie id (host:port or a custom id)")
    report: DecommissionReport
    if admin is not None:
        from auditor.admin.questions import decommission_from_pb

        resp, fmt = _ask_daemon(admin, tls, timeout, fmt, lambda c: c.can_decommission(bookie))
        with _exit_on_error():
            report = decommission_from_pb(resp)
    else:
        settings, fmt = _prepare_run(config, metadata_service_uri, fmt, log_level, log_format)

        async def collect() -> DecommissionReport:
            from auditor.checks.build import audit_context

            async with audit_context(settings, one_shot=True) as (ctx, _):
                return await decommission_report(ctx, bookie)

        with _exit_on_error():
            report = _run_with_loop(collect, loop=settings.event_loop)
    if fmt == "json":
        typer.echo(json.dumps(report.to_dict(), sort_keys=True))
    else:
        _decommission_table(report)
    raise typer.Exit(0 if report.safe else 1)


def _decommission_table(report: Any) -> None:
    from auditor.tables import print_table

    state = "registered" if report.registered else "not registered"
    verdict = "safe to decommission" if report.safe else "NOT YET"
    typer.echo(f"{report.bookie} ({state}): {verdict}; {len(report.ledgers)} ledger(s) still name it")
    if report.replication_disabled:
        typer.echo("replication is disabled: no worker moves marked ledgers")
    for path in report.unreadable:
        typer.echo(f"unreadable ledger metadata (it may name the bookie): {path}")
    if not report.ledgers:
        return
    print_table(
        ("ledger", "state", "blocking", "reason"),
        (
            (
                str(x.ledger.ledger),
                "closed" if x.closed else "open",
                ", ".join(b.value for b in x.blockers) or "-",
                x.reason,
            )
            for x in sorted(report.ledgers, key=lambda x: (not x.blockers, x.ledger.ledger))
        ),
    )


# ------------------------------------------------------------------------------------------ switches

YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Make the change without asking (needed off a terminal).")]
SwitchFormatOpt = Annotated[str, typer.Option("--format", help="table|json")]


def _switch_settings(config: Path | None, metadata_service_uri: str | None, fmt: str) -> Settings:
    if fmt not in ("table", "json"):
        _fail(f"--format must be table or json, got {fmt!r}")
    settings = _load(config, {"metadata_service_uri": ("--metadata-service-uri", metadata_service_uri)})
    _require_metadata(settings)
    if "format" not in settings.log.model_fields_set:
        settings.log.format = "console" if fmt == "table" else "json"
    _start_logging(settings)
    return settings


def _confirmer(yes: bool) -> Callable[[str], bool]:
    def confirm(change: str) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            _fail(f"refusing to {change} without --yes (no terminal to confirm on)")
        return typer.confirm(f"{change}?", default=False, err=True)

    return confirm


def _switch(
    config: Path | None,
    metadata_service_uri: str | None,
    fmt: str,
    flow: Callable[[OperatorOps], Coroutine[Any, Any, SwitchReport]],
    admin: str | None = None,
    tls: _ClientTls = _NO_TLS,
    timeout: float = 10.0,
) -> None:
    """The flow run on ZooKeeper directly, or with --admin through the daemon; its report shown; errors as
    one line and exit 2."""
    from auditor.switches import AdminOps, zookeeper_ops

    if admin is not None:
        _check_format(fmt)
        _show(_client_call(admin, tls, timeout, lambda client: flow(AdminOps(client))), fmt)
        return
    settings = _switch_settings(config, metadata_service_uri, fmt)

    async def direct() -> SwitchReport:
        async with zookeeper_ops(settings) as ops:
            return await flow(ops)

    with _exit_on_error():
        _show(asyncio.run(direct()), fmt)


def _show(report: SwitchReport, fmt: str) -> None:
    if fmt == "json":
        typer.echo(json.dumps(report.data, sort_keys=True))
    else:
        for line in report.lines:
            typer.echo(line)


SwitchAdminOpt = Annotated[
    str | None,
    typer.Option(
        "--admin",
        help="Through a running daemon's admin API at HOST:PORT instead of ZooKeeper directly (changes need "
        "its mutation rights: a client certificate when it uses TLS).",
        show_default=False,
    ),
]


@app.command()
@_with_client_tls
def whoisauditor(
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    fmt: SwitchFormatOpt = "table",
    admin: SwitchAdminOpt = None,
    tls: _ClientTls = _NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Who is the auditor? The leader of Java's election and of bk-auditor's, read from ZooKeeper."""
    from auditor.switches import who_is_auditor

    _switch(config, metadata_service_uri, fmt, who_is_auditor, admin, tls, timeout)


@app.command("recovery-delay")
@_with_client_tls
def recovery_delay(
    seconds: Annotated[
        int | None, typer.Argument(help="New lostBookieRecoveryDelay in seconds; omit to show it.")
    ] = None,
    yes: YesOpt = False,
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    fmt: SwitchFormatOpt = "table",
    admin: SwitchAdminOpt = None,
    tls: _ClientTls = _NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Show or set lostBookieRecoveryDelay (as `bookkeeper shell lostbookierecoverydelay`), confirmed."""
    from auditor.switches import recovery_delay as flow

    _switch(config, metadata_service_uri, fmt, lambda ops: flow(ops, seconds, _confirmer(yes)), admin, tls, timeout)


@app.command()
@_with_client_tls
def replication(
    action: Annotated[str, typer.Argument(help="status|enable|disable")] = "status",
    yes: YesOpt = False,
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    fmt: SwitchFormatOpt = "table",
    admin: SwitchAdminOpt = None,
    tls: _ClientTls = _NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Show, enable or disable auto-recovery's replication (as `bookkeeper shell autorecovery`), confirmed."""
    from auditor.switches import replication as flow

    _switch(config, metadata_service_uri, fmt, lambda ops: flow(ops, action, _confirmer(yes)), admin, tls, timeout)


def _ts(value: float | None) -> str:
    if not value:
        return "-"
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    return "\n".join(lines)


def _msg_dict(msg: Message) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(msg, preserving_proto_field_name=False, always_print_fields_with_no_presence=True)


def _opt(msg: Message, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


@app.command()
@_with_client_tls
def status(
    admin: AdminOpt = None,
    fmt: FormatOpt = "table",
    tls: _ClientTls = _NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Leader, pause state, tasks with progress and ETA, re-check queue, finding counts."""
    _check_format(fmt)
    resp = _client_call(admin, tls, timeout, lambda c: c.status())
    if fmt == "json":
        typer.echo(json.dumps(_msg_dict(resp), indent=2, sort_keys=True))
        return
    leader = "yes" if resp.leader else f"no (leader: {resp.leader_identity or 'unknown'})"
    paused = (
        f"yes: {resp.pause_reason or 'no reason given'} (since {_ts(_opt(resp, 'paused_since'))})"
        if resp.paused
        else "no"
    )
    counts = ", ".join(f"{k}={v}" for k, v in sorted(resp.finding_counts.items()) if v) or "none"
    typer.echo(
        f"identity        {resp.identity}\nversion         {resp.version}\nleader          {leader}\n"
        f"paused          {paused}\nre-check queue  {resp.recheck_queue_depth}\nfindings        {counts}\n"
    )
    rows = []
    for t in resp.tasks:
        total = _opt(t, "total")
        progress = f"{t.done}/{total}" if total is not None else (str(t.done) if t.done else "-")
        rows.append(
            [
                t.name,
                t.state,
                _ts(_opt(t, "last_success")),
                progress,
                _duration(_opt(t, "eta_seconds")),
                _ts(_opt(t, "next_run")),
                t.last_error or "",
            ]
        )
    typer.echo(_table(rows, ["TASK", "STATE", "LAST SUCCESS", "PROGRESS", "ETA", "NEXT RUN", "LAST ERROR"]))


def _validate_ledger(text: str) -> str:
    _parse_ledger_id(text)
    return text.strip()


def _finding_json(f: admin_pb2.Finding) -> dict[str, Any]:
    out = json.loads(f.fields_json) if f.fields_json else {}
    out.update(
        {
            "check": f.check,
            "firstSeen": _ts(f.first_seen),
            "lastSeen": _ts(f.last_seen),
            "timesSeen": f.times_seen,
            "dedupKey": f.dedup_key,
        }
    )
    if f.HasField("resolved_at"):
        out["resolvedAt"] = _ts(f.resolved_at)
    return out


def _findings_table(findings: Iterable[admin_pb2.Finding]) -> str:
    rows = [
        [
            f.severity,
            f.category,
            f.ledger_id or "-",
            f.bookie_id or "-",
            str(f.times_seen),
            _ts(f.first_seen),
            f.message,
        ]
        for f in findings
    ]
    return _table(rows, ["SEVERITY", "CATEGORY", "LEDGER", "BOOKIE", "SEEN", "FIRST SEEN", "MESSAGE"])


@app.command()
@_with_client_tls
def findings(
    admin: AdminOpt = None,
    category: Annotated[
        str, typer.Option("--category", help=f"Only this category: {', '.join(c.value for c in Category)}.")
    ] = "",
    ledger: Annotated[str, typer.Option("--ledger", help="Only this ledger (id or qualified name).")] = "",
    bookie: Annotated[str, typer.Option("--bookie", help="Only findings about this bookie.")] = "",
    limit: Annotated[int, typer.Option("--limit", min=0, help="At most this many (0 = server default).")] = 0,
    include_resolved: Annotated[bool, typer.Option("--include-resolved")] = False,
    fmt: FormatOpt = "table",
    by: Annotated[
        str, typer.Option("--by", help="finding|topic: one row per finding, or per Pulsar topic at risk.")
    ] = "finding",
    tls: _ClientTls = _NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """List the daemon's findings, most severe first."""
    _check_format(fmt)
    if by not in ("finding", "topic"):
        _fail(f"--by must be finding or topic, got {by!r}")
    if ledger:
        ledger = _validate_ledger(ledger)
    resp = _client_call(
        admin,
        tls,
        timeout,
        lambda c: c.findings(
            category=category, ledger=ledger, bookie=bookie, limit=limit, include_resolved=include_resolved
        ),
    )
    if by == "topic":
        _findings_by_topic(resp, fmt)
        return
    if fmt == "json":
        typer.echo(
            json.dumps(
                {"findings": [_finding_json(f) for f in resp.findings], "totalMatching": resp.total_matching},
                indent=2,
                sort_keys=True,
            )
        )
        return
    if not resp.findings:
        typer.echo("no findings")
        return
    typer.echo(_findings_table(resp.findings))
    if resp.total_matching > len(resp.findings):
        typer.echo(f"({len(resp.findings)} of {resp.total_matching} shown; use --limit)")


def _findings_by_topic(resp: Any, fmt: str) -> None:
    """The daemon's active findings grouped by Pulsar topic (what `check --by topic` shows for one run)."""
    from auditor.checks.oneshot import print_topics
    from auditor.durability.findings import Finding
    from auditor.durability.topics import at_risk_by_topic

    active = [Finding.from_wire(json.loads(f.fields_json)) for f in resp.findings if not f.HasField("resolved_at")]
    if fmt == "json":
        typer.echo(json.dumps({"topics": [r.to_dict() for r in at_risk_by_topic(active)]}, indent=2, sort_keys=True))
    else:
        print_topics(active, sys.stdout)
    if resp.total_matching > len(resp.findings):
        typer.echo(f"(from {len(resp.findings)} of {resp.total_matching} findings; use --limit)", err=True)


@app.command()
@_with_client_tls
def explain(
    ledger: Annotated[str, typer.Argument(help="Decimal ledger id, scope:ledger, or 32-hex qualified name.")],
    admin: AdminOpt = None,
    fmt: FormatOpt = "table",
    tls: _ClientTls = _NO_TLS,
    timeout: TimeoutOpt = 30.0,
) -> None:
    """Why is a ledger flagged? Metadata, expected vs actual copies per bookie per segment, findings."""
    _check_format(fmt)
    ledger = _validate_ledger(ledger)
    resp = _client_call(admin, tls, timeout, lambda c: c.explain(ledger))
    if fmt == "json":
        out = _msg_dict(resp)
        out["findings"] = [_finding_json(f) for f in resp.findings]
        typer.echo(json.dumps(out, indent=2, sort_keys=True))
        return
    typer.echo(_explain_text(resp))


def _explain_text(resp: admin_pb2.ExplainLedgerResponse) -> str:
    lines: list[str] = []
    if resp.HasField("metadata"):
        m = resp.metadata
        lines.append(
            f"ledger {m.ledger_id} ({m.qualified_name})  state {m.state}  E/WQ/AQ "
            f"{m.ensemble_size}/{m.write_quorum}/{m.ack_quorum}  last entry {m.last_entry_id}  "
            f"length {m.length}  digest {m.digest_type or '-'}"
        )
        if m.custom_metadata:
            lines.append("custom metadata: " + ", ".join(f"{k}={v}" for k, v in sorted(m.custom_metadata.items())))
    lines.append(f"under-replication marker: {'yes' if resp.under_replicated else 'no'}")
    for s in resp.segments:
        copies = f"  min copies {s.min_copies}" if s.HasField("min_copies") else ""
        lines.append(
            f"segment {s.index}: entries {s.first_entry_id}..{s.last_entry_id}  "
            f"ensemble {', '.join(s.ensemble)}{copies}"
        )
        rows = []
        for b in s.bookies:
            present = str(b.present_entries) if b.HasField("present_entries") else "?"
            missing = ",".join(str(r.first) if r.first == r.last else f"{r.first}-{r.last}" for r in b.missing)
            rows.append(
                [
                    f"  [{b.ensemble_index}] {b.bookie_id}",
                    b.status,
                    str(b.expected_entries),
                    present,
                    missing or "-",
                    ("" if b.registered else "NOT REGISTERED ") + b.error,
                ]
            )
        if rows:
            lines.append(_table(rows, ["  BOOKIE", "STATUS", "EXPECTED", "PRESENT", "MISSING", "NOTE"]))
    if resp.findings:
        lines.append("findings:")
        lines.append(_findings_table(resp.findings))
    else:
        lines.append("findings: none")
    lines.extend(f"note: {n}" for n in resp.notes)
    return "\n".join(lines)


@app.command()
@_with_client_tls
def trigger(
    check_name: Annotated[str, typer.Argument(metavar="CHECK", help="A task name from `status`.")],
    admin: AdminOpt = None,
    tls: _ClientTls = _NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Run a check now (on the leader)."""
    resp = _client_call(admin, tls, timeout, lambda c: c.trigger(check_name))
    typer.echo(resp.message or (f"{check_name} triggered" if resp.accepted else f"{check_name} not triggered"))


@app.command()
@_with_client_tls
def pause(
    admin: AdminOpt = None,
    reason: Annotated[str, typer.Option("--reason", help="Shown in status and logs.")] = "",
    tls: _ClientTls = _NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Pause all checks (running ones stop at their next unit of work)."""
    resp = _client_call(admin, tls, timeout, lambda c: c.pause(reason))
    typer.echo("paused" if resp.changed else "already paused (reason updated)")


@app.command("repair-limits")
@_with_client_tls
def repair_limits(
    admin: AdminOpt = None,
    bytes_per_second: Annotated[
        float | None, typer.Option("--bytes-per-second", help="Entry bytes each worker sends per second.")
    ] = None,
    entries_in_flight: Annotated[
        int | None, typer.Option("--entries-in-flight", help="Entries between read and add, per copy.")
    ] = None,
    entries_in_flight_per_bookie: Annotated[
        int | None,
        typer.Option("--entries-in-flight-per-bookie", help="Adds outstanding to one bookie, over a worker's lanes."),
    ] = None,
    clear: Annotated[
        bool, typer.Option("--clear", help="Remove every limit first (the workers' own settings).")
    ] = False,
    fmt: SwitchFormatOpt = "table",
    tls: _ClientTls = _NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Show or set the repair workers' run-time limits (each worker applies them before its next ledger);
    set on the leader. Unset limits are each worker's repair.* settings."""
    if fmt not in ("table", "json"):
        _fail(f"--format must be table or json, got {fmt!r}")
    change = (bytes_per_second, entries_in_flight, entries_in_flight_per_bookie)
    if clear or any(v is not None for v in change):
        resp = _client_call(
            admin,
            tls,
            timeout,
            lambda c: c.set_repair_limits(
                bytes_per_second=bytes_per_second,
                entries_in_flight=entries_in_flight,
                entries_in_flight_per_bookie=entries_in_flight_per_bookie,
                clear=clear,
            ),
        )
    else:
        resp = _client_call(admin, tls, timeout, lambda c: c.repair_limits())
    if fmt == "json":
        typer.echo(json.dumps(_msg_dict(resp)))
        return
    rows = [
        ["bytes per second", _limit(resp, "bytes_per_second", "repair.bytes_per_second")],
        ["entries in flight", _limit(resp, "entries_in_flight", "repair.entries_in_flight")],
        [
            "entries in flight per bookie",
            _limit(resp, "entries_in_flight_per_bookie", "repair.entries_in_flight_per_bookie"),
        ],
        ["set by", f"{resp.set_by or '-'} at {_ts(resp.set_at)}"],
    ]
    typer.echo(f"repair limits of {resp.ledgers_root}\n" + _table(rows, ["limit", "value"]))


def _limit(msg: Message, name: str, setting: str) -> str:
    value = _opt(msg, name)
    return f"{value:g}" if value is not None else f"unset ({setting} of each worker)"


@app.command()
@_with_client_tls
def resume(
    admin: AdminOpt = None,
    tls: _ClientTls = _NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Resume checks after a pause."""
    resp = _client_call(admin, tls, timeout, lambda c: c.resume())
    typer.echo("resumed" if resp.changed else "was not paused")


@app.command()
@_with_client_tls
def health(
    admin: AdminOpt = None,
    service: Annotated[str, typer.Option("--service", help="'', liveness, readiness or leader.")] = "",
    tls: _ClientTls = _NO_TLS,
    timeout: TimeoutOpt = 5.0,
) -> None:
    """Probe a health status (exit 0 when SERVING, 1 otherwise): an exec-probe fallback for old kubelets."""
    state = _client_call(admin, tls, timeout, lambda c: c.health(service))
    typer.echo(state)
    raise typer.Exit(0 if state == "SERVING" else 1)


if __name__ == "__main__":  # pragma: no cover
    app()
    sys.exit(0)
