"""The commands that run until stopped: `run` (the auditor daemon) and `repair` (the repair worker, or
`--once`)."""

from __future__ import annotations

import functools
from typing import Annotated

import typer

from auditor.cli.common import ConfigOpt, LogFormatOpt, LogLevelOpt, UriOpt, fail, load_and_log, run_with_loop


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
    settings = load_and_log(
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
        fail(f"the daemon is not available in this build ({exc})")
    code = run_with_loop(serve, settings, loop=settings.event_loop)  # it makes its scan engine itself
    raise typer.Exit(int(code or 0))


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
    settings = load_and_log(config, metadata_service_uri, log_level, log_format)
    from auditor.repair.run import main as repair_main

    try:
        code = run_with_loop(
            functools.partial(repair_main, once=once, stop_with_parent=stop_with_parent),
            settings,
            loop=settings.event_loop,
        )
    except KeyboardInterrupt:
        code = 0  # interrupted: the worker released its lock on the way out
    raise typer.Exit(int(code or 0))
