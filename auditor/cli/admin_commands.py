"""The clients of a running daemon's admin API: `status`, `findings`, `explain`, `trigger` (and Java's
`triggeraudit`), `pause`, `repair-limits`, `resume` and `health` (`--admin host:port`, else
$BKAUDIT_ADMIN_ADDRESS, else the default admin.bind, 127.0.0.1:7979). `explain` also answers without a
daemon, from ZooKeeper and the bookies (`--metadata-service-uri` or `--config`).

Exit codes (docs/admin-api.md, "Exit codes"): 0 done / nothing actionable, 1 what a script gates on (actionable
findings, nothing triggered, not SERVING), 2 errors, 3 a standby that cannot answer or act."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from auditor.checks.names import CHECK_NAMES
from auditor.cli.admin_client import NO_TLS, ClientTls, TimeoutOpt, check_format, client_call, with_client_tls
from auditor.cli.common import (
    EXIT_FOUND,
    EXIT_STANDBY,
    LogFormatOpt,
    LogLevelOpt,
    UriOpt,
    exit_on_error,
    fail,
    parse_ledger_id,
    prepare_run,
    run_with_loop,
)
from auditor.cli.render import (
    duration,
    echo_json,
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

if TYPE_CHECKING:  # annotations only
    from auditor._proto import admin_pb2
    from auditor.checks.explain import LedgerExplanation
    from auditor.durability.ids import LedgerId

# What `trigger` can run: the per-ledger and whole-run checks, and the daemon's other tasks on its board
# (auditor/daemon/replica.py: the bookie watch, `bookies`, and the digest scrub, `scrub`). Static, so
# `trigger --help` needs no daemon; tests/unit/cli/test_trigger.py holds it to the daemon's registry.
TRIGGER_NAMES: tuple[str, ...] = (*CHECK_NAMES, "bookies", "scrub")

AdminOpt = Annotated[
    str | None,
    typer.Option(
        "--admin",
        help="The daemon's admin API host:port (default: $BKAUDIT_ADMIN_ADDRESS, else 127.0.0.1:7979).",
        show_default=False,
    ),
]

FormatOpt = Annotated[
    str, typer.Option("--format", help="Output format: table or json (one object per line, docs/findings.md).")
]


@with_client_tls
def status(
    admin: AdminOpt = None,
    fmt: FormatOpt = "table",
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Leader, pause state (and who paused), tasks with progress and ETA, re-check queue, finding counts and
    where they come from (this leader, or on a standby the findings the leader saved).

    Exit 0; 2 errors."""
    check_format(fmt)
    resp = client_call(admin, tls, timeout, lambda c: c.status())
    if fmt == "json":
        echo_json("status", message_dict(resp))
        return
    leader = "yes" if resp.leader else f"no (leader: {resp.leader_identity or 'unknown'})"
    by = f"by {resp.paused_by}, " if resp.paused_by else ""
    paused = (
        f"yes: {resp.pause_reason or 'no reason given'} (paused {by}since "
        f"{timestamp(optional_field(resp, 'paused_since'))})"
        if resp.paused
        else "no"
    )
    counts = ", ".join(f"{k}={v}" for k, v in sorted(resp.finding_counts.items()) if v) or "none"
    source = findings_source(
        resp.findings_source, resp.findings_saved_by, optional_field(resp, "findings_as_of"), resp.leader_identity
    )
    typer.echo(
        f"identity        {resp.identity}\nversion         {resp.version}\nleader          {leader}\n"
        f"paused          {paused}\nre-check queue  {resp.recheck_queue_depth}\nfindings        {counts}\n"
        f"findings from   {source}\n"
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


def findings_source(source: str, saved_by: str, as_of: float | None, leader: str) -> str:
    """Where a replica's findings come from, as `status` shows it."""
    if source == "persisted":
        return f"persisted: as saved by leader {saved_by or 'unknown'} at {timestamp(as_of)}"
    if source == "none":
        return f"none: this standby has not read the leader's findings yet (leader: {leader or 'unknown'})"
    return "leader: this replica's own checks"  # "leader", or a daemon older than the field


def _validate_ledger(text: str) -> str:
    parse_ledger_id(text)
    return text.strip()


_BOOKIE_ADDRESS = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):[0-9]{1,5}")


def _validate_filters(category: str, bookie: str) -> None:
    """An unknown category or a malformed bookie id is an error (exit 2), never "no findings"."""
    from auditor.metadata.codecs.formats import is_valid_bookie_id

    known = [c.value for c in Category]
    if category and category not in known:
        fail(f"unknown --category {category!r}; known: {', '.join(known)}")
    if bookie and not (_BOOKIE_ADDRESS.fullmatch(bookie) and is_valid_bookie_id(bookie.strip("[]"))):
        fail(f"--bookie {bookie!r} is not a bookie id (host:port, e.g. 10.0.3.7:3181)")


def actionable_count(findings: list[admin_pb2.Finding]) -> int:
    """Findings above informational that are not resolved: what `findings` exits 1 on."""
    return sum(1 for f in findings if f.severity != "info" and not f.HasField("resolved_at"))


def _standby_header(resp: admin_pb2.ListFindingsResponse) -> str | None:
    """The line a standby's answer begins with: whose findings these are and as of when."""
    if resp.source != "persisted":
        return None
    return (
        f"standby: findings as saved by leader {resp.saved_by or 'unknown'} at "
        f"{timestamp(optional_field(resp, 'as_of'))} (leader now: {resp.leader_identity or 'unknown'})"
    )


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
    """List the daemon's findings, most severe first; on a standby, those the leader last saved (said so first).

    Exit 0: nothing actionable listed; 1: actionable (above info, unresolved) findings listed; 2: errors (an
    unknown --category, a malformed --bookie); 3: a standby that has not read the leader's findings yet."""
    check_format(fmt)
    if by not in ("finding", "topic"):
        fail(f"--by must be finding or topic, got {by!r}")
    _validate_filters(category, bookie)
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
    if resp.source == "none":
        fail(
            "standby; it has not read the leader's findings yet (the leader is "
            f"{resp.leader_identity or 'not known'}): ask again shortly, or the leader's admin API",
            EXIT_STANDBY,
        )
    actionable = actionable_count(list(resp.findings))
    code = EXIT_FOUND if actionable else 0
    header = _standby_header(resp)
    if fmt == "table" and header:
        typer.echo(header)
    if by == "topic":
        print_findings_by_topic(resp, fmt)
    elif fmt == "json":
        for f in resp.findings:
            echo_json("finding", finding_json(f))
    elif not resp.findings:
        typer.echo("no findings")
    else:
        typer.echo(findings_table(resp.findings))
        if resp.total_matching > len(resp.findings):
            typer.echo(f"({len(resp.findings)} of {resp.total_matching} shown; use --limit)")
    if fmt == "json":
        summary: dict[str, object] = {
            "findingCount": len(resp.findings),
            "totalMatching": resp.total_matching,
            "actionable": actionable,
            "source": resp.source or "leader",
            "savedBy": resp.saved_by,
            "asOf": timestamp(optional_field(resp, "as_of")) if resp.HasField("as_of") else None,
            "leaderIdentity": resp.leader_identity,
            "exitCode": code,
        }
        echo_json("summary", {"summary": summary})
    raise typer.Exit(code)


# explain's direct form: no environment variable, so that a pod's BKAUDIT_CONFIG_FILE never turns
# `explain` away from the daemon beside it.
ExplainConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Answer here from ZooKeeper and the bookies, with this YAML or Java .conf file (no daemon).",
    ),
]


@with_client_tls
def explain(
    ledger: Annotated[str, typer.Argument(help="Decimal ledger id, scope:ledger, or 32-hex qualified name.")],
    admin: AdminOpt = None,
    config: ExplainConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    fmt: FormatOpt = "table",
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 30.0,
) -> None:
    """Why is a ledger flagged? Metadata, expected vs actual copies per bookie per segment, findings.

    Asks the daemon; with --metadata-service-uri or --config, answers here from ZooKeeper and the bookies
    (read-only, the daemon's own code; no findings store: `check` judges the ledger). Exit 0; 2 errors."""
    check_format(fmt)
    lid = parse_ledger_id(ledger)
    ledger = ledger.strip()
    direct = config is not None or metadata_service_uri is not None
    if direct and admin is not None:
        fail("--admin asks a daemon; --config/--metadata-service-uri answer here: give one of them")
    if direct:
        resp = _explain_here(lid, config, metadata_service_uri, fmt, log_level, log_format)
    else:
        resp = client_call(admin, tls, timeout, lambda c: c.explain(ledger))
    if fmt == "json":
        out = message_dict(resp)
        out["answeredBy"] = "here" if direct else "daemon"
        if direct:
            del out["findings"]  # not known here: no findings store (not "none")
        else:
            out["findings"] = [finding_json(f) for f in resp.findings]
        echo_json("explanation", out)
        return
    typer.echo(explain_text(resp, findings_known=not direct))


def _explain_here(
    lid: LedgerId,
    config: Path | None,
    metadata_service_uri: str | None,
    fmt: str,
    log_level: str | None,
    log_format: str | None,
) -> admin_pb2.ExplainLedgerResponse:
    """`explain` without a daemon: auditor.checks.explain on a one-shot audit context, as the daemon runs
    it (auditor/daemon/operator.py), into the same message the admin API answers with."""
    settings, _ = prepare_run(config, metadata_service_uri, fmt, log_level, log_format)

    async def answer() -> LedgerExplanation:
        from auditor.checks.build import audit_context
        from auditor.checks.explain import explain_ledger

        async with audit_context(settings, one_shot=True) as (ctx, _):
            return await explain_ledger(ctx, lid)

    from auditor.admin.convert import explanation_to_pb
    from auditor.metadata.errors import NoSuchLedgerError

    with exit_on_error():
        try:
            explanation: LedgerExplanation = run_with_loop(answer, loop=settings.event_loop)
        except NoSuchLedgerError as exc:  # worded as the daemon words it, the znode named
            fail(f"ledger {lid} does not exist ({exc})")
    return explanation_to_pb(explanation, [])


@with_client_tls
def trigger(
    check_name: Annotated[
        str,
        typer.Argument(
            metavar="CHECK",
            help=f"What to run now: {', '.join(TRIGGER_NAMES)} (bookies: audit lost bookies now, Java's "
            "triggeraudit). With --ledger or --finding: that per-ledger check only (omit: every per-ledger check).",
            show_default=False,
        ),
    ] = "",
    ledger: Annotated[
        str, typer.Option("--ledger", help="Re-check only this ledger now (id, scope:ledger or qualified name).")
    ] = "",
    finding: Annotated[
        str,
        typer.Option(
            "--finding", metavar="DEDUP_KEY", help="Re-check the ledger of this finding (its dedupKey in `findings`)."
        ),
    ] = "",
    admin: AdminOpt = None,
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Run a check now, or re-check one ledger or one finding's ledger (on the leader).

    Exit 0: triggered; 1: nothing triggered (already running or queued); 2: errors (an unknown check); 3: a
    standby (it names the leader)."""
    if not (check_name or ledger or finding):
        fail(f"name a CHECK ({', '.join(TRIGGER_NAMES)}), --ledger LEDGER or --finding DEDUP_KEY")
    if ledger and finding:
        fail("--ledger and --finding both name a ledger: give one")
    if ledger:
        ledger = _validate_ledger(ledger)
    _trigger(admin, tls, timeout, check_name, ledger=ledger, finding=finding)


def _trigger(
    admin: str | None, tls: ClientTls, timeout: float, check: str, *, ledger: str = "", finding: str = ""
) -> None:
    resp = client_call(admin, tls, timeout, lambda c: c.trigger(check, ledger=ledger, finding_key=finding))
    what = " ".join([check or "re-check", *([f"of ledger {ledger}"] if ledger else [])])
    typer.echo(resp.message or f"{what} {'triggered' if resp.accepted else 'not triggered'}")
    raise typer.Exit(0 if resp.accepted else EXIT_FOUND)


@with_client_tls
def triggeraudit(
    admin: AdminOpt = None,
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Java's `triggeraudit`: audit lost bookies now (`trigger bookies`). Exit codes as `trigger`."""
    _trigger(admin, tls, timeout, "bookies")


@with_client_tls
def pause(
    admin: AdminOpt = None,
    reason: Annotated[str, typer.Option("--reason", help="Shown in status and logs.")] = "",
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Pause all checks, cluster-wide (running ones stop at their next unit of work).

    Exit 0; 2 errors; 3 a standby that cannot (it names the leader)."""
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
    set on the leader. Unset limits are each worker's repair.* settings.

    Exit 0; 2 errors; 3 a standby asked to set them (it names the leader)."""
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
        echo_json("repairLimits", message_dict(resp))
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
    """Resume checks after a pause.

    Exit 0; 2 errors; 3 a standby that cannot (it names the leader)."""
    resp = client_call(admin, tls, timeout, lambda c: c.resume())
    typer.echo("resumed" if resp.changed else "was not paused")


@with_client_tls
def health(
    admin: AdminOpt = None,
    service: Annotated[str, typer.Option("--service", help="'', liveness, readiness or leader.")] = "",
    tls: ClientTls = NO_TLS,
    timeout: TimeoutOpt = 5.0,
) -> None:
    """Probe a health status: an exec-probe fallback for old kubelets.

    Exit 0: SERVING; 1: anything else (NOT_SERVING, NOT_FOUND for an unknown --service); 2: no answer
    (unreachable, TLS refused, --timeout)."""
    state = client_call(admin, tls, timeout, lambda c: c.health(service))
    typer.echo(state)
    raise typer.Exit(0 if state == "SERVING" else 1)
