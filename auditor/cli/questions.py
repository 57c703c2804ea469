"""The operator's questions about the cluster, answered from ZooKeeper and the bookies directly, or with
--admin by a running daemon (its bookie pool and rate limits; the same answer): `underreplicated` and
`can-decommission`."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from auditor.cli.admin_client import NO_TLS, ClientTls, check_format, client_call, with_client_tls
from auditor.cli.common import (
    ConfigOpt,
    FormatRunOpt,
    LogFormatOpt,
    LogLevelOpt,
    UriOpt,
    exit_on_error,
    fail,
    prepare_run,
    run_with_loop,
)
from auditor.cli.render import print_decommission, print_underreplicated

if TYPE_CHECKING:  # annotations only: the commands import what they need when they run
    from auditor.admin.client import AdminClient

T = TypeVar("T")

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
    admin: str, tls: ClientTls, timeout: float, fmt: str | None, call: Callable[[AdminClient], Awaitable[T]]
) -> tuple[T, str]:
    """The --admin form of an operator command: the daemon's answer, and the output format."""
    fmt = fmt or "table"
    check_format(fmt)
    return client_call(admin, tls, timeout, call), fmt


@with_client_tls
def underreplicated(
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    fmt: FormatRunOpt = None,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
    admin: AskAdminOpt = None,
    tls: ClientTls = NO_TLS,
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
        settings, fmt = prepare_run(config, metadata_service_uri, fmt, log_level, log_format)

        async def collect() -> list[MarkedLedger]:
            from auditor.checks.build import audit_context

            async with audit_context(settings, one_shot=True) as (ctx, _):
                return [m async for m in marked_ledgers(ctx)]

        with exit_on_error():
            rows = run_with_loop(collect, loop=settings.event_loop)
    if fmt == "json":
        for m in rows:
            typer.echo(json.dumps({"kind": "ledger", **m.to_dict()}, sort_keys=True))
    else:
        print_underreplicated(rows)
    raise typer.Exit(1 if any(m.verdict == "broken" for m in rows) else 0)


@with_client_tls
def can_decommission(
    bookie: Annotated[str, typer.Argument(help="The bookie id, e.g. 10.0.3.7:3181.")],
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    fmt: FormatRunOpt = None,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
    admin: AskAdminOpt = None,
    tls: ClientTls = NO_TLS,
    timeout: AskTimeoutOpt = 150.0,
) -> None:
    """Can BOOKIE be decommissioned now? Every ledger still on it, whether the other copies are complete,
    its marker and worker lock, and what holds it back. Exit 0: safe; 1: not yet; 2: errors."""
    from auditor.checks.decommission import DecommissionReport, decommission_report
    from auditor.metadata.codecs.formats import is_valid_bookie_id

    if not is_valid_bookie_id(bookie):
        fail(f"{bookie!r} is not a bookie id (host:port or a custom id)")
    report: DecommissionReport
    if admin is not None:
        from auditor.admin.questions import decommission_from_pb

        resp, fmt = _ask_daemon(admin, tls, timeout, fmt, lambda c: c.can_decommission(bookie))
        with exit_on_error():
            report = decommission_from_pb(resp)
    else:
        settings, fmt = prepare_run(config, metadata_service_uri, fmt, log_level, log_format)

        async def collect() -> DecommissionReport:
            from auditor.checks.build import audit_context

            async with audit_context(settings, one_shot=True) as (ctx, _):
                return await decommission_report(ctx, bookie)

        with exit_on_error():
            report = run_with_loop(collect, loop=settings.event_loop)
    if fmt == "json":
        typer.echo(json.dumps({"kind": "decommission", **report.to_dict()}, sort_keys=True))
    else:
        print_decommission(report)
    raise typer.Exit(0 if report.safe else 1)
