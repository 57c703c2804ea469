"""The clients of a running daemon's admin API: `status`, `findings`, `explain`, `trigger`, `pause`,
`repair-limits`, `resume` and `health` (`--admin host:port`, else $BKAUDIT_ADMIN_ADDRESS, else the default
admin.bind, 127.0.0.1:7979)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from auditor.cli.admin_client import NO_TLS, ClientTls, TimeoutOpt, check_format, client_call, with_client_tls
from auditor.cli.common import fail, parse_ledger_id
from auditor.cli.render import (
    duration,
    explain_text,
    finding_json,
    findings_table,
    message_dict,
    optional_field,
    print_findings_by_topic,
    repair_limit,
    text_table,
    timestamp,
)
from auditor.durability.findings import Category

AdminOpt = Annotated[
    str | None,
    typer.Option(
        "--admin",
        help="The daemon's admin API host:port (default: $BKAUDIT_ADMIN_ADDRESS, else 127.0.0.1:7979).",
        show_default=False,
    ),
]

FormatOpt = Annotated[str, typer.Option("--format", help="table|json")]


@with_client_tls
def status(
    admin: AdminOpt = None,
    fmt: FormatOpt = "table",
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Leader, pause state, tasks with progress and ETA, re-check queue, finding counts."""
    check_format(fmt)
    resp = client_call(admin, tls, timeout, lambda c: c.status())
    if fmt == "json":
        typer.echo(json.dumps(message_dict(resp), indent=2, sort_keys=True))
        return
    leader = "yes" if resp.leader else f"no (leader: {resp.leader_identity or 'unknown'})"
    paused = (
        f"yes: {resp.pause_reason or 'no reason given'} (since {timestamp(optional_field(resp, 'paused_since'))})"
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
        total = optional_field(t, "total")
        progress = f"{t.done}/{total}" if total is not None else (str(t.done) if t.done else "-")
        rows.append(
            [
                t.name,
                t.state,
                timestamp(optional_field(t, "last_success")),
                progress,
                duration(optional_field(t, "eta_seconds")),
                timestamp(optional_field(t, "next_run")),
                t.last_error or "",
            ]
        )
    typer.echo(text_table(rows, ["TASK", "STATE", "LAST SUCCESS", "PROGRESS", "ETA", "NEXT RUN", "LAST ERROR"]))


def _validate_ledger(text: str) -> str:
    parse_ledger_id(text)
    return text.strip()


@with_client_tls
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
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """List the daemon's findings, most severe first."""
    check_format(fmt)
    if by not in ("finding", "topic"):
        fail(f"--by must be finding or topic, got {by!r}")
    if ledger:
        ledger = _validate_ledger(ledger)
    resp = client_call(
        admin,
        tls,
        timeout,
        lambda c: c.findings(
            category=category, ledger=ledger, bookie=bookie, limit=limit, include_resolved=include_resolved
        ),
    )
    if by == "topic":
        print_findings_by_topic(resp, fmt)
        return
    if fmt == "json":
        typer.echo(
            json.dumps(
                {"findings": [finding_json(f) for f in resp.findings], "totalMatching": resp.total_matching},
                indent=2,
                sort_keys=True,
            )
        )
        return
    if not resp.findings:
        typer.echo("no findings")
        return
    typer.echo(findings_table(resp.findings))
    if resp.total_matching > len(resp.findings):
        typer.echo(f"({len(resp.findings)} of {resp.total_matching} shown; use --limit)")


@with_client_tls
def explain(
    ledger: Annotated[str, typer.Argument(help="Decimal ledger id, scope:ledger, or 32-hex qualified name.")],
    admin: AdminOpt = None,
    fmt: FormatOpt = "table",
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 30.0,
) -> None:
    """Why is a ledger flagged? Metadata, expected vs actual copies per bookie per segment, findings."""
    check_format(fmt)
    ledger = _validate_ledger(ledger)
    resp = client_call(admin, tls, timeout, lambda c: c.explain(ledger))
    if fmt == "json":
        out = message_dict(resp)
        out["findings"] = [finding_json(f) for f in resp.findings]
        typer.echo(json.dumps(out, indent=2, sort_keys=True))
        return
    typer.echo(explain_text(resp))


@with_client_tls
def trigger(
    check_name: Annotated[str, typer.Argument(metavar="CHECK", help="A task name from `status`.")],
    admin: AdminOpt = None,
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Run a check now (on the leader)."""
    resp = client_call(admin, tls, timeout, lambda c: c.trigger(check_name))
    typer.echo(resp.message or (f"{check_name} triggered" if resp.accepted else f"{check_name} not triggered"))


@with_client_tls
def pause(
    admin: AdminOpt = None,
    reason: Annotated[str, typer.Option("--reason", help="Shown in status and logs.")] = "",
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Pause all checks (running ones stop at their next unit of work)."""
    resp = client_call(admin, tls, timeout, lambda c: c.pause(reason))
    typer.echo("paused" if resp.changed else "already paused (reason updated)")


@with_client_tls
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
    fmt: FormatOpt = "table",
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Show or set the repair workers' run-time limits (each worker applies them before its next ledger);
    set on the leader. Unset limits are each worker's repair.* settings."""
    if fmt not in ("table", "json"):
        fail(f"--format must be table or json, got {fmt!r}")
    change = (bytes_per_second, entries_in_flight, entries_in_flight_per_bookie)
    if clear or any(v is not None for v in change):
        resp = client_call(
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
        resp = client_call(admin, tls, timeout, lambda c: c.repair_limits())
    if fmt == "json":
        typer.echo(json.dumps(message_dict(resp)))
        return
    rows = [
        ["bytes per second", repair_limit(resp, "bytes_per_second", "repair.bytes_per_second")],
        ["entries in flight", repair_limit(resp, "entries_in_flight", "repair.entries_in_flight")],
        [
            "entries in flight per bookie",
            repair_limit(resp, "entries_in_flight_per_bookie", "repair.entries_in_flight_per_bookie"),
        ],
        ["set by", f"{resp.set_by or '-'} at {timestamp(resp.set_at)}"],
    ]
    typer.echo(f"repair limits of {resp.ledgers_root}\n" + text_table(rows, ["limit", "value"]))


@with_client_tls
def resume(
    admin: AdminOpt = None,
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Resume checks after a pause."""
    resp = client_call(admin, tls, timeout, lambda c: c.resume())
    typer.echo("resumed" if resp.changed else "was not paused")


@with_client_tls
def health(
    admin: AdminOpt = None,
    service: Annotated[str, typer.Option("--service", help="'', liveness, readiness or leader.")] = "",
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 5.0,
) -> None:
    """Probe a health status (exit 0 when SERVING, 1 otherwise): an exec-probe fallback for old kubelets."""
    state = client_call(admin, tls, timeout, lambda c: c.health(service))
    typer.echo(state)
    raise typer.Exit(0 if state == "SERVING" else 1)
