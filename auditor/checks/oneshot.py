"""`bk-auditor check`: run the checks once against a cluster, print findings, exit 0 / 1 / 2.

Findings go to stdout (a table, or JSON lines: one object per finding, `"kind": "finding"`, then
`{"kind": "summary", "summary": {...}}`, docs/findings.md "JSON output"); logs go to stderr. A progress bar
is shown on a terminal and nothing on a pipe.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, TextIO

from auditor.checks.tables import console
from auditor.checks.tables import print_table as table_out
from auditor.durability.findings import Category, Finding, FindingSummary
from auditor.durability.topics import at_risk_by_topic
from auditor.errors import error_line
from auditor.logging import get_logger, log_new_finding
from auditor.settings import Settings

from .build import audit_context
from .per_ledger import CHECKS, judges_each_ledger_alone, resolve_checks
from .runner import CheckRun, Progress
from .sharded import RunHere, ShardedChecks

log = get_logger("auditor.check")

PROGRESS_LOG_SECONDS = 10.0


class ProgressDisplay:
    """A rich progress bar on a terminal; otherwise (Kubernetes Jobs, pipes) one progress log line per
    check every `log_every` seconds: ledgers done/total, rate and ETA."""

    def __init__(self, stream: TextIO, log_every: float = PROGRESS_LOG_SECONDS) -> None:
        self.enabled = stream.isatty()
        self._log_every = log_every
        self._logged: dict[str, float] = {}
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self._progress = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed} ledgers"),
                TimeElapsedColumn(),
                console=Console(file=stream),
                transient=True,
            )

    def __enter__(self) -> ProgressDisplay:
        if self._progress:
            self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress:
            self._progress.stop()

    def update(self, p: Progress) -> None:
        if not self._progress:
            self._log(p)
            return
        if p.check not in self._tasks:
            self._tasks[p.check] = self._progress.add_task(p.check, total=p.ledgers_total)
        self._progress.update(self._tasks[p.check], completed=p.ledgers_done, total=p.ledgers_total)

    def _log(self, p: Progress) -> None:
        now = time.monotonic()
        last = self._logged.setdefault(p.check, now)  # the first line after one interval, not at once
        if now - last < self._log_every:
            return
        self._logged[p.check] = now
        eta = p.eta_seconds
        log.info(
            "check progress",
            check=p.check,
            ledgersDone=p.ledgers_done,
            ledgersTotal=p.ledgers_total,
            ledgersPerSecond=round(p.rate, 1),
            etaSeconds=None if eta is None else round(eta),
        )


TABLE_RUNS = 4  # entry runs shown per finding in the table (JSON has them all)


def _few_runs(ranges: str, limit: int = TABLE_RUNS) -> str:
    """`0-1,3-4,6-7,...(+47 runs)` cut to `limit` runs: a table cell should not wrap over ten lines."""
    runs = [r for r in ranges.split(",") if r and not r.startswith("...")]
    return ",".join(runs[:limit]) + (",..." if len(runs) > limit or "..." in ranges else "")


def _bookies(f: Finding) -> str:
    """The finding's bookie, else the bookies its detail says lack copies (coverage findings name them
    there): the operator's first question is which bookie."""
    if f.bookie:
        return f.bookie
    missing = f.detail.get("missing") or ()
    names = {m.get("bookie") for m in missing if isinstance(m, Mapping)}
    return ", ".join(sorted(n for n in names if n))


def print_table(findings: list[Finding], summary: FindingSummary, runs: list[dict[str, Any]], out: TextIO) -> None:
    """`findings`: the actionable ones and the orphan ledgers (the cleanup plan); the informational ones are
    counted from `summary`."""
    con = console(out)
    info = [f for f in findings if not f.actionable]
    findings = [f for f in findings if f.actionable]
    if findings:
        rows = []
        for f in sorted(
            findings, key=lambda f: (f.severity.rank, f.category.value, f.ledger.qualified_name if f.ledger else "")
        ):
            entries = (
                f"{f.affected_count} [{_few_runs(f.affected_ranges)}]"
                if f.affected_count
                else (str(f.entry_id) if f.entry_id is not None else "")
            )
            rows.append(
                (
                    f.severity.value,
                    f.category.value,
                    str(f.ledger) if f.ledger else "",
                    _bookies(f),
                    entries,
                    f.message,
                )
            )
        columns = ("severity", "category", "ledger", "bookie", "entries", "detail")
        table_out(columns, rows, title=f"{len(findings)} finding(s)", out=out)
    else:
        con.print("no findings: every checked ledger is healthy")
    informational = {c.value: n for c, n in summary.informational.items() if n}
    if informational:
        kinds = ", ".join(f"{c}: {n}" for c, n in sorted(informational.items()))
        con.print(
            f"{sum(informational.values())} informational finding(s) not shown ({kinds}); --format json lists them"
        )
    print_cleanup_plan(info, out)
    for r in runs:
        if r.get("note"):
            con.print(f"{r['check']}: {r['note']}, {r['durationSeconds']}s")
            continue
        con.print(f"{r['check']}: {run_counts(r)}, {r['durationSeconds']}s")


def run_counts(r: Mapping[str, Any]) -> str:
    """A check run's counts as a person reads them, named so that they add up: a ledger seen once can be
    judged more than once (its re-checks), so judgements may outnumber the ledgers."""
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(r["ledgersSkipped"].items())) or "none"
    return (
        f"{r['ledgersChecked']} judgements of {r['ledgersSeen']} ledgers ({r['ledgersRechecked']} re-checks, "
        f"skipped {skipped}), {r['bookieRequests']} bookie requests"
    )


def print_cleanup_plan(findings: list[Finding], out: TextIO) -> None:
    """Orphan ledgers, with their size and the command that would reclaim each: a dry run (bk-auditor
    deletes nothing; check the evidence first)."""
    orphans = [f for f in findings if f.category is Category.ORPHAN_LEDGER]
    if not orphans:
        return
    rows = [
        (
            str(f.ledger),
            str(f.detail.get("entries", "")),
            str(f.detail.get("bytes", "")),
            str(f.detail.get("owner", "")),
            str(f.detail.get("reason", "")),
            str(f.detail.get("cleanup", "")),
        )
        for f in sorted(orphans, key=lambda f: f.ledger.qualified_name if f.ledger else "")
    ]
    total = sum(int(f.detail.get("bytes") or 0) for f in orphans)
    table_out(
        ("ledger", "entries", "bytes", "owner", "why unowned", "cleanup (dry run: not executed)"),
        rows,
        title=f"{len(orphans)} orphan ledger(s), {total} bytes: cleanup plan (dry run)",
        out=out,
    )


def print_topics(findings: list[Finding], out: TextIO) -> None:
    """Actionable findings by Pulsar topic, most severe first (`check --by topic`)."""
    rows = at_risk_by_topic(findings)
    if not rows:
        console(out).print("no topic at risk: no actionable finding")
        return
    table_out(
        ("severity", "worst", "topic", "namespace", "ledgers", "findings"),
        (
            (
                r.severity.value,
                r.worst.value,
                r.topic,
                r.namespace or "",
                ", ".join(str(lid) for lid in r.ledgers[:10]) + (" ..." if len(r.ledgers) > 10 else ""),
                str(r.findings),
            )
            for r in rows
        ),
        title=f"{len(rows)} topic(s) at risk",
        out=out,
    )


def finding_line(f: Finding) -> str:
    """A finding as its JSON line: `"kind": "finding"` first, then its wire form (Finding.to_json's one
    encoder; a finding's wire form is never empty)."""
    return '{"kind": "finding", ' + f.to_json()[1:]


def summary_json(summary: FindingSummary, runs: list[dict[str, Any]], seconds: float, code: int) -> dict[str, Any]:
    """The run's summary as `check --format json` ends with it. `findingCount`: distinct findings (each
    fault once); `actionable`: those above info (exit 1 when any); `repeatSightings`: sightings of a fault
    already reported (a re-check or another check seeing it again), dropped, not more data at risk."""
    return {
        **summary.as_dict(),
        "checks": runs,
        "durationSeconds": round(seconds, 3),
        "exitCode": code,
    }


async def main(
    settings: Settings,
    checks: list[str],
    fmt: str,
    *,
    by: str = "finding",
    out: TextIO | None = None,
    err: TextIO | None = None,
    sharded: ShardedChecks | None = None,
) -> int:
    """`sharded`: how to run the checks that judge each ledger alone (default: here, one after the other);
    the whole-run checks (references) run here either way."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        names = resolve_checks(checks)
    except ValueError as exc:
        print(error_line(str(exc)), file=err)
        return 2
    # JSON lines go out as the findings are found; only what the exit status, a table or the topic view
    # needs is held (a million ledgers with WQ == AQ are a million informational findings: held, they were
    # most of the command's memory, docs/benchmarks.md "Memory at 10k, 100k and 1M ledgers").
    stream = fmt == "json" and by == "finding"
    summary = FindingSummary(keep=lambda f: f.actionable or (not stream and f.category is Category.ORPHAN_LEDGER))

    def first_sighting(f: Finding, check: str | None) -> bool:
        if not summary.add(f, check):
            return False
        if stream:
            out.write(finding_line(f) + "\n")
        return True

    runs: list[dict[str, Any]] = []
    started = time.time()
    # Console logs are for a person reading the report on stdout: each finding and run summary is in it
    # already, so saying them again on stderr would double every line (they stay at debug). JSON logs
    # (the default off a terminal) keep them for log pipelines.
    human_logs = settings.log.format == "console"

    def report(f: Finding, check: str) -> None:
        if first_sighting(f, check):
            if human_logs:
                log.debug("finding", check=check, message=f.message)
            else:
                log_new_finding(f, logger=log, check=check)

    def finished(stats: dict[str, Any]) -> None:
        runs.append(stats)
        (log.debug if human_logs else log.info)("check finished", **stats)

    elsewhere = [n for n in names if judges_each_ledger_alone(n)] if sharded else []
    try:
        judges_placement = any(CHECKS[n].use_placement for n in names)
        async with audit_context(settings, one_shot=True, judges_placement=judges_placement) as (ctx, locations):
            with ProgressDisplay(err) as bar:
                if elsewhere:
                    assert sharded is not None
                    stop = threading.Event()
                    try:
                        for stats in await asyncio.to_thread(sharded, elsewhere, report, bar.update, stop):
                            finished(stats)
                    except RunHere as small:
                        log.debug("checks run in this process", ledgers=small.ledgers)
                        elsewhere = []  # nothing was started: every check runs below
                    except asyncio.CancelledError:
                        stop.set()  # the thread stops the worker processes and returns
                        raise
                for name in names:
                    if name in elsewhere:
                        continue
                    check = CHECKS[name](ctx, locations)
                    run = CheckRun(ctx, check, functools.partial(report, check=name), progress=bar.update)
                    finished((await run.run()).as_dict())
            rack_problem = locations.finding()  # unusable rack data: placement was not judged
            if rack_problem is not None and judges_placement and first_sighting(rack_problem, None):
                if not human_logs:
                    log_new_finding(rack_problem, logger=log, check="scrutiny")
    except Exception as exc:  # connection refused, bad layout, ...: one clear line, exit 2
        print(error_line(exc), file=err)
        log.debug("check failed", exc_info=True)
        return 2
    findings = summary.findings
    code = 1 if summary.actionable else 0
    if fmt == "json":
        if by == "topic":
            for row in at_risk_by_topic(findings):
                out.write(json.dumps({"kind": "topic", **row.to_dict()}) + "\n")
        doc = summary_json(summary, runs, time.time() - started, code)
        out.write(json.dumps({"kind": "summary", "summary": doc}) + "\n")
    elif by == "topic":
        print_topics(findings, out)
    else:
        print_table(findings, summary, runs, out)
    out.flush()
    return code
