"""What every `bk-auditor` command shares: the one table from error class to exit code, the options that
name a cluster (config file, metadata service, logging), loading settings from flags, environment and file,
starting logging, and running a command's coroutine on the chosen event loop."""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from auditor.admin.client_errors import StandbyReplyError
from auditor.errors import AdminError, BookieError, ConfigError, DataError, MetadataError, error_line
from auditor.processes.gctune import tune_gc

if TYPE_CHECKING:  # annotations only: the commands import what they need when they run
    from auditor.durability.ids import LedgerId
    from auditor.settings import Settings

EXIT_FOUND = 1  # what the command looks for is there: findings, damage, nothing triggered, no leader
EXIT_ERROR = 2
EXIT_STANDBY = 3  # a standby cannot answer or act: "standby; the leader is X" (docs/admin-api.md)
# The one place an error becomes an exit code: the most specific class listed wins. An error not listed
# is a bug and keeps its traceback.
EXIT_CODES: dict[type[BaseException], int] = {
    ConfigError: EXIT_ERROR,  # a setting, config file, environment variable or flag is wrong
    DataError: EXIT_ERROR,  # e.g. a malformed ledger id on the command line
    MetadataError: EXIT_ERROR,
    BookieError: EXIT_ERROR,
    StandbyReplyError: EXIT_STANDBY,  # a leader-only call (trigger, pause, resume, repair-limits) on a standby
    AdminError: EXIT_ERROR,  # the daemon is unreachable or refused the call (AdminClientError)
    ValueError: EXIT_ERROR,  # a malformed value outside the tree (e.g. Spark's --conf KEY=VALUE)
}


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Exit with `message` as one error line on stderr."""
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
def exit_on_error() -> Iterator[None]:
    """Around a step that fails on what the user gave: an error EXIT_CODES lists becomes one line on stderr
    and its exit code."""
    try:
        yield
    except Exception as exc:
        code = exit_code(exc)
        if code is None:
            raise
        fail(str(exc), code)


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


def load_cli_settings(config: Path | None, flags: dict[str, tuple[str, object]]) -> Settings:
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
    with exit_on_error():
        return load_settings(config, overrides=overrides, option_names=names)


def start_logging(settings: Settings) -> None:
    """Logging as the settings say, and where the settings came from logged."""
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


def run_with_loop(fn: Callable[..., Any], *args: Any, loop: str = "asyncio") -> Any:
    """Call fn; when it is a coroutine function, run it on the chosen event loop."""
    if not inspect.iscoroutinefunction(fn):
        return fn(*args)
    tune_gc()
    if loop == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(fn(*args))
    return asyncio.run(fn(*args))


def common_flags(
    metadata_service_uri: str | None, log_level: str | None, log_format: str | None
) -> dict[str, tuple[str, object]]:
    """The flags every command that connects to a cluster takes: dotted setting -> (flag, value)."""
    return {
        "metadata_service_uri": ("--metadata-service-uri", metadata_service_uri),
        "log.level": ("--log-level", log_level),
        "log.format": ("--log-format", log_format),
    }


def load_and_log(
    config: Path | None,
    metadata_service_uri: str | None,
    log_level: str | None,
    log_format: str | None,
    flags: dict[str, tuple[str, object]] | None = None,
) -> Settings:
    """What the long-running commands share: settings with the common flags (and `flags`) applied, a
    metadata location required, logging started."""
    settings = load_cli_settings(
        config,
        {**common_flags(metadata_service_uri, log_level, log_format), **(flags or {})},
    )
    require_metadata(settings)
    start_logging(settings)
    return settings


FormatRunOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        # Rich reads "[...]" in help as markup: the default is written with its bracket escaped.
        help="Output format: table or json (one object per line, docs/findings.md) \\[default: table]. Logs "
        "follow: console lines with table (or on a terminal), JSON with json (or when stderr is not a "
        "terminal), unless --log-format or log.format says otherwise.",
    ),
]


def prepare_run(
    config: Path | None,
    metadata_service_uri: str | None,
    fmt: str | None,
    log_level: str | None,
    log_format: str | None,
) -> tuple[Settings, str]:
    """What `check` and `sweep` share: the output format, settings with flags applied, logging."""
    if fmt not in (None, "table", "json"):
        fail(f"--format must be table or json, got {fmt!r}")
    settings = load_cli_settings(config, common_flags(metadata_service_uri, log_level, log_format))
    require_metadata(settings)
    if "format" not in settings.log.model_fields_set:  # not chosen by flag, env or file: follow the output
        human = fmt == "table" or (fmt is None and sys.stderr.isatty())
        settings.log.format = "console" if human else "json"
    start_logging(settings)
    return settings, fmt or "table"


def parse_ledger_id(text: str) -> LedgerId:
    """A ledger id from the command line; exits 2 with one line when malformed."""
    from auditor.durability.ids import LedgerId

    with exit_on_error():
        return LedgerId.parse(text)


def require_metadata(settings: Settings) -> None:
    """Exit 2 with one line unless the settings name a metadata service."""
    with exit_on_error():
        settings.require_metadata()
