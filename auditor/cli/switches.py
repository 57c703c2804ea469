"""The operator's switches, read and set on ZooKeeper directly or with --admin through a running daemon,
each change confirmed: `whoisauditor`, `recovery-delay` and `replication` (auditor.cli.switch_flows has the flows)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from auditor.cli.admin_client import NO_TLS, ClientTls, TimeoutOpt, check_format, client_call, with_client_tls
from auditor.cli.common import (
    EXIT_FOUND,
    ConfigOpt,
    UriOpt,
    exit_on_error,
    fail,
    load_cli_settings,
    require_metadata,
    start_logging,
)

if TYPE_CHECKING:  # annotations only: the commands import what they need when they run
    from auditor.cli.switch_flows import OperatorOps, SwitchReport
    from auditor.settings import Settings

YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Make the change without asking (needed off a terminal).")]
SwitchFormatOpt = Annotated[
    str, typer.Option("--format", help="Output format: table or json (one object, docs/findings.md).")
]


def _switch_settings(config: Path | None, metadata_service_uri: str | None, fmt: str) -> Settings:
    if fmt not in ("table", "json"):
        fail(f"--format must be table or json, got {fmt!r}")
    settings = load_cli_settings(config, {"metadata_service_uri": ("--metadata-service-uri", metadata_service_uri)})
    require_metadata(settings)
    if "format" not in settings.log.model_fields_set:
        settings.log.format = "console" if fmt == "table" else "json"
    start_logging(settings)
    return settings


def _confirmer(yes: bool) -> Callable[[str], bool]:
    def confirm(change: str) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            fail(f"refusing to {change} without --yes (no terminal to confirm on)")
        return typer.confirm(f"{change}?", default=False, err=True)

    return confirm


def _switch(
    config: Path | None,
    metadata_service_uri: str | None,
    fmt: str,
    flow: Callable[[OperatorOps], Coroutine[Any, Any, SwitchReport]],
    admin: str | None = None,
    tls: ClientTls = NO_TLS,
    timeout: float = 10.0,
    kind: str = "switch",
) -> SwitchReport:
    """The flow run on ZooKeeper directly, or with --admin through the daemon; its report shown (JSON: one
    object of `kind`) and returned; errors as one line and exit 2 (3: a standby refused the change)."""
    from auditor.cli.switch_flows import AdminOps, zookeeper_ops

    if admin is not None:
        check_format(fmt)
        report = client_call(admin, tls, timeout, lambda client: flow(AdminOps(client)))
        _show(report, fmt, kind)
        return report
    settings = _switch_settings(config, metadata_service_uri, fmt)

    async def direct() -> SwitchReport:
        async with zookeeper_ops(settings) as ops:
            return await flow(ops)

    with exit_on_error():
        report = asyncio.run(direct())
    _show(report, fmt, kind)
    return report


def _show(report: SwitchReport, fmt: str, kind: str) -> None:
    if fmt == "json":
        typer.echo(json.dumps({"kind": kind, **report.data}, sort_keys=True))
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


@with_client_tls
def whoisauditor(
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    fmt: SwitchFormatOpt = "table",
    admin: SwitchAdminOpt = None,
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Who is the auditor? The leader of Java's election and of bk-auditor's, read from ZooKeeper.

    Exit 0: someone leads; 1: nobody leads (no vote in either election); 2: errors."""
    from auditor.cli.switch_flows import who_is_auditor

    report = _switch(config, metadata_service_uri, fmt, who_is_auditor, admin, tls, timeout, kind="auditors")
    raise typer.Exit(0 if report.data["leaders"] else EXIT_FOUND)


@with_client_tls
def recovery_delay(
    seconds: Annotated[
        int | None, typer.Argument(help="New lostBookieRecoveryDelay in seconds; omit to show it.")
    ] = None,
    yes: YesOpt = False,
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    fmt: SwitchFormatOpt = "table",
    admin: SwitchAdminOpt = None,
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Show or set lostBookieRecoveryDelay (as `bookkeeper shell lostbookierecoverydelay`), confirmed.

    Exit 0; 2 errors (not confirmed, changed meanwhile); 3 with --admin, a standby (it names the leader)."""
    from auditor.cli.switch_flows import recovery_delay as flow

    confirm = _confirmer(yes)
    _switch(
        config, metadata_service_uri, fmt, lambda ops: flow(ops, seconds, confirm), admin, tls, timeout, "recoveryDelay"
    )


@with_client_tls
def replication(
    action: Annotated[str, typer.Argument(help="status|enable|disable")] = "status",
    yes: YesOpt = False,
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    fmt: SwitchFormatOpt = "table",
    admin: SwitchAdminOpt = None,
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Show, enable or disable auto-recovery's replication (as `bookkeeper shell autorecovery`), confirmed.

    Exit 0; 2 errors (not confirmed, changed meanwhile); 3 with --admin, a standby (it names the leader)."""
    from auditor.cli.switch_flows import replication as flow

    confirm = _confirmer(yes)
    _switch(
        config, metadata_service_uri, fmt, lambda ops: flow(ops, action, confirm), admin, tls, timeout, "replication"
    )
