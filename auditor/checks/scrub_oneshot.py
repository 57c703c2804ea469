"""`bk-auditor scrub`: one digest scrub pass, here, and exit 0 clean / 1 damage found / 2 errors.

For operators and tests: the same pass as the daemon's (auditor/checks/scrub.py) over every closed
ledger, or the ledgers named, within the same per-bookie byte budget; it writes nothing (no state in
ZooKeeper: a one-shot pass always starts at the first ledger). Findings go to stdout as JSON lines (then
a summary line with the coverage) or as a table; logs to stderr.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from auditor.checks.tables import console
from auditor.checks.tables import print_table as table_out
from auditor.durability.findings import Finding
from auditor.durability.ids import LedgerId
from auditor.durability.scrub import ScrubProgress, coverage_ratio
from auditor.errors import error_line
from auditor.logging import get_logger
from auditor.settings import Settings

from .build import audit_context
from .oneshot import finding_line
from .scrub import ScrubRunner, scrub_pass

log = get_logger("auditor.checks.scrub")


def summary_of(done: ScrubProgress, runner: ScrubRunner, seconds: float) -> dict[str, object]:
    """What a pass covered, as the summary line says it."""
    return {
        "ledgers": done.ledgers,
        "copies": done.copies,
        "entries": done.entries,
        "bytes": done.bytes,
        "unverifiedEntries": done.unverified_entries,
        "plannedEntries": done.planned_entries,
        "corrupt": done.corrupt,
        "coverageRatio": round(coverage_ratio(done), 6),
        "bytesByBookie": dict(sorted(runner.bytes_by_bookie.items())),
        "durationSeconds": round(seconds, 3),
    }


async def main(
    settings: Settings,
    fmt: str,
    *,
    ledgers: Sequence[LedgerId] | None = None,
    bytes_per_second: float | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    s = settings.scrub
    found: list[Finding] = []

    def report(f: Finding) -> None:
        found.append(f)
        if fmt == "json":
            out.write(finding_line(f) + "\n")

    started = time.monotonic()
    try:
        async with audit_context(settings, one_shot=True) as (ctx, _):
            runner = ScrubRunner(
                ctx,
                bytes_per_second=s.bytes_per_second_per_bookie if bytes_per_second is None else bytes_per_second,
                max_concurrent_ledgers=s.max_concurrent_ledgers,
                # the one-shot's delays (a few seconds), not the daemon's minutes: the check's rule
                confirm_delays=ctx.options.recheck_delays[:2],
            )
            done = await scrub_pass(ctx, runner, ScrubProgress(), report=report, ledgers=ledgers)
    except Exception as exc:  # connection refused, bad layout, ...: one clear line, exit 2
        print(error_line(exc), file=err)
        log.debug("scrub failed", exc_info=True)
        return 2
    summary = summary_of(done, runner, time.monotonic() - started)
    if fmt == "json":
        out.write(json.dumps({"kind": "summary", "summary": {"scrub": summary}}) + "\n")
    else:
        if found:
            rows = [(str(f.ledger), f.bookie or "", str(f.entry_id), f.message) for f in found]
            table_out(("ledger", "bookie", "entry", "detail"), rows, title=f"{len(found)} damaged copies", out=out)
        else:
            console(out).print("no damaged copy: every verified copy matches its digest")
        console(out).print(
            f"scrub: {summary['entries']} entry copies ({summary['bytes']} bytes) of {summary['ledgers']} ledgers "
            f"verified, {summary['unverifiedEntries']} not verified, coverage {summary['coverageRatio']:.1%}, "
            f"{summary['durationSeconds']}s"
        )
    out.flush()
    return 1 if found else 0
