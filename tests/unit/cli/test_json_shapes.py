"""The JSON shapes docs/findings.md ("JSON output") promises, against what the commands print: JSON lines,
each object with its `kind`, and the keys the table lists for it (status, findings, explain through a real
admin server over a DaemonState; check's summary from the one function that makes it)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from auditor.admin.models import BookieCopies, LedgerExplanation, SegmentCopies
from auditor.admin.server import AdminServer
from auditor.checks.oneshot import finding_line, summary_json
from auditor.cli import app
from auditor.daemon.backend import StateBackend
from auditor.daemon.state import DaemonState
from auditor.durability.findings import Category, Finding, FindingSummary, Severity
from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment

pytestmark = pytest.mark.usefixtures("no_bkaudit_env")

DOC = Path(__file__).resolve().parents[3] / "docs" / "findings.md"


def documented() -> dict[str, str]:
    """kind -> the keys cell of the "JSON output" table."""
    section = DOC.read_text().split("## JSON output", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            for kind in re.findall(r"`(\w+)`", cells[0]):
                rows[kind] = cells[2]
    return rows


def keys(cell: str) -> set[str]:
    return set(re.findall(r"`(\w+)`", cell))


def part(cell: str, after: str, before: str | None = None) -> str:
    """The cell's text after `after` ("" for the start) and before `before`."""
    text = cell.split(after, 1)[1] if after else cell
    return text.split(before, 1)[0] if before else text


def lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


async def cli(*args: str) -> Any:
    return await asyncio.to_thread(lambda: CliRunner().invoke(app, list(args)))


@pytest.fixture
async def addr() -> AsyncIterator[str]:
    state = DaemonState("auditor-0", recheck_depth=lambda: 0)
    state.tasks.register("scrutiny", interval_seconds=86400)
    state.leadership.set(True)
    state.findings.add(
        Finding.of(
            Category.ENTRY_BELOW_ACK_QUORUM,
            "entries 0-9 on one bookie",
            ledger=LedgerId.of(8),
            segment_index=0,
            confirmed=True,
            pulsar={"managedLedger": "acme/billing/persistent/orders", "topic": "persistent://acme/billing/orders"},
        ),
        check="scrutiny",
    )

    async def explain(ledger: LedgerId) -> LedgerExplanation:
        md = LedgerMetadata(
            ledger_id=ledger,
            ensemble_size=1,
            write_quorum=1,
            ack_quorum=1,
            state=LedgerState.CLOSED,
            last_entry_id=0,
            length=10,
            digest_type=DigestType.CRC32C,
            segments=(Segment(0, ("127.0.0.1:3181",)),),
        )
        seg = SegmentCopies(0, 0, 0, md.segments[0].ensemble, [BookieCopies("127.0.0.1:3181", 0, "ok", 1, 1)])
        return LedgerExplanation(md, [seg], notes=["n"])

    server = AdminServer(StateBackend(state, explain=explain), "127.0.0.1:0")
    port = await server.start()
    server.follow_leadership(state.leadership)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


async def test_status_findings_and_explain_print_the_documented_shapes(addr: str) -> None:
    doc = documented()

    (status,) = lines((await cli("status", "--admin", addr, "--format", "json")).stdout)
    assert status["kind"] == "status" and keys(doc["status"]) <= set(status)

    r = await cli("findings", "--admin", addr, "--format", "json")
    assert r.exit_code == 1, r.output
    *found, summary = lines(r.stdout)
    assert [f["kind"] for f in found] == ["finding"] and summary["kind"] == "summary"
    assert keys(part(doc["finding"], "", "when set")) | keys(part(doc["finding"], "from `findings`")) <= set(found[0])
    assert keys(part(doc["summary"], "from `findings`")) <= set(summary["summary"])

    *topics, summary = lines((await cli("findings", "--admin", addr, "--by", "topic", "--format", "json")).stdout)
    assert [t["kind"] for t in topics] == ["topic"] and keys(doc["topic"]) <= set(topics[0])

    (explained,) = lines((await cli("explain", "8", "--admin", addr, "--format", "json")).stdout)
    assert explained["kind"] == "explanation" and keys(part(doc["explanation"], "", "(")) <= set(explained)
    assert "findings" in explained and explained["answeredBy"] == "daemon"


def test_check_summary_and_finding_lines_are_as_documented() -> None:
    doc = documented()
    summary = FindingSummary()
    bad = Finding.of(Category.ENTRY_NO_REPLICA, "no copy", ledger=LedgerId.of(1), segment_index=0, confirmed=True)
    info = Finding.of(Category.RISKY_QUORUM, "WQ == AQ", ledger=LedgerId.of(2), severity=Severity.INFO)
    assert summary.add(bad) and summary.add(info) and not summary.add(bad)  # the second sighting: a repeat
    out = summary_json(summary, [], 1.23456, 1)
    assert keys(part(doc["summary"], "from `check`", "from `findings`")) == set(out)
    assert (out["findingCount"], out["actionable"], out["repeatSightings"], out["exitCode"]) == (2, 1, 1, 1)
    line = json.loads(finding_line(bad))
    assert line["kind"] == "finding" and keys(part(doc["finding"], "", "when set")) <= set(line)
    assert {k: v for k, v in line.items() if k != "kind"} == json.loads(bad.to_json())
