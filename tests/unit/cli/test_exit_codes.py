"""Exit codes a script can gate on (docs/admin-api.md, "Exit codes"), through typer's CliRunner against a real
admin server (grpc.aio on 127.0.0.1, ephemeral port) over a real DaemonState: 1 for actionable findings and
for nothing triggered, 2 for errors (an unknown --category, a malformed --bookie), 3 for a standby."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from typer.testing import CliRunner

from auditor.admin.client_errors import AdminClientError, StandbyReplyError, standby_leader
from auditor.admin.errors import StandbyError
from auditor.admin.server import AdminServer
from auditor.cli import app
from auditor.cli.common import EXIT_CODES, EXIT_ERROR, EXIT_STANDBY, exit_code
from auditor.daemon.backend import StateBackend
from auditor.daemon.state import DaemonState, FindingsSource
from auditor.durability.findings import Category, Finding, Severity
from auditor.durability.ids import LedgerId

pytestmark = pytest.mark.usefixtures("no_bkaudit_env")

SAVED_AT = 1_780_000_000.0  # 2026-05-28T20:26:40Z


@dataclass
class Daemon:
    state: DaemonState
    addr: str
    accept: list[bool] = field(default_factory=lambda: [True])


async def cli(*args: str):
    return await asyncio.to_thread(lambda: CliRunner().invoke(app, list(args)))


def error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
async def daemon() -> AsyncIterator[Daemon]:
    state = DaemonState("auditor-1", recheck_depth=lambda: 0)
    state.tasks.register("scrutiny", interval_seconds=86400)
    state.tasks.register("bookies", interval_seconds=60)
    state.findings.add(
        Finding.of(Category.RISKY_QUORUM, "WQ == AQ", ledger=LedgerId.of(3), severity=Severity.INFO, confirmed=True),
        check="scrutiny",
    )
    d = Daemon(state, "")

    async def trigger(check: str) -> bool:
        return d.accept[0]

    server = AdminServer(StateBackend(state, trigger=trigger), "127.0.0.1:0")
    port = await server.start()
    server.follow_leadership(state.leadership)
    d.addr = f"127.0.0.1:{port}"
    try:
        yield d
    finally:
        await server.stop(0)


def add_actionable(state: DaemonState) -> None:
    state.findings.add(
        Finding.of(
            Category.ENTRY_NO_REPLICA,
            "entries 3-4 have no copy",
            ledger=LedgerId.of(7),
            bookie="127.0.0.2:3182",
            segment_index=0,
            confirmed=True,
        ),
        check="scrutiny",
    )


# ------------------------------------------------------------------------------------------ the table


def test_a_standby_refusal_has_its_own_exit_code() -> None:
    assert EXIT_CODES[StandbyReplyError] == EXIT_STANDBY == 3
    assert exit_code(StandbyReplyError("pause", "auditor-0")) == 3
    assert exit_code(AdminClientError("status failed")) == EXIT_ERROR
    # The daemon's own wording of the refusal (auditor/admin/errors.py) is what the client recognises.
    assert standby_leader(str(StandbyError("auditor-0"))) == (True, "auditor-0")
    assert standby_leader(str(StandbyError(None))) == (True, None)
    assert standby_leader("not connected to ZooKeeper") == (False, None)


# ------------------------------------------------------------------------------------------ findings


async def test_findings_exit_1_only_when_actionable_findings_are_listed(daemon: Daemon) -> None:
    daemon.state.leadership.set(True)
    r = await cli("findings", "--admin", daemon.addr)
    assert r.exit_code == 0, r.output  # only an informational finding
    assert "risky_quorum" in r.stdout
    add_actionable(daemon.state)
    r = await cli("findings", "--admin", daemon.addr)
    assert r.exit_code == 1, r.output
    r = await cli("findings", "--admin", daemon.addr, "--category", "risky_quorum", "--format", "json")
    assert r.exit_code == 0, r.output
    *_, summary = [json.loads(line) for line in r.stdout.splitlines()]
    assert summary["summary"]["actionable"] == 0 and summary["summary"]["exitCode"] == 0


async def test_unknown_category_and_malformed_bookie_are_errors(daemon: Daemon) -> None:
    daemon.state.leadership.set(True)
    r = await cli("findings", "--admin", daemon.addr, "--category", "entry_missing")
    assert r.exit_code == 2
    line = error_line(r)
    assert line.startswith("error: unknown --category 'entry_missing'; known: entry_no_replica, ")
    assert all(c.value in line for c in Category)
    for bad in ("127.0.0.2", "127.0.0.2:", "bookie 2:3181", "127.0.0.2:318x"):
        r = await cli("findings", "--admin", daemon.addr, "--bookie", bad)
        assert r.exit_code == 2, bad
        assert error_line(r) == f"error: --bookie {bad!r} is not a bookie id (host:port, e.g. 10.0.3.7:3181)"
    r = await cli("findings", "--admin", daemon.addr, "--bookie", "127.0.0.9:3189")  # well formed, not mentioned
    assert (r.exit_code, r.stdout.strip()) == (0, "no findings")


async def test_a_standby_says_whose_findings_it_shows(daemon: Daemon) -> None:
    daemon.state.leadership.set(False, leader="auditor-0")
    r = await cli("findings", "--admin", daemon.addr)
    assert r.exit_code == 3
    assert error_line(r) == (
        "error: standby; it has not read the leader's findings yet (the leader is auditor-0): ask again "
        "shortly, or the leader's admin API"
    )
    assert r.stdout == ""

    add_actionable(daemon.state)
    daemon.state.findings_source = FindingsSource("persisted", saved_by="auditor-0", as_of=SAVED_AT)
    r = await cli("findings", "--admin", daemon.addr)
    assert r.exit_code == 1, r.output
    first = r.stdout.splitlines()[0]
    assert first == ("standby: findings as saved by leader auditor-0 at 2026-05-28T20:26:40Z (leader now: auditor-0)")
    r = await cli("findings", "--admin", daemon.addr, "--format", "json")
    *_, summary = [json.loads(line) for line in r.stdout.splitlines()]
    assert {k: summary["summary"][k] for k in ("source", "savedBy", "asOf", "leaderIdentity")} == {
        "source": "persisted",
        "savedBy": "auditor-0",
        "asOf": "2026-05-28T20:26:40Z",
        "leaderIdentity": "auditor-0",
    }

    r = await cli("status", "--admin", daemon.addr)
    assert "findings from   persisted: as saved by leader auditor-0 at 2026-05-28T20:26:40Z" in r.stdout
    r = await cli("status", "--admin", daemon.addr, "--format", "json")
    doc = json.loads(r.stdout)
    assert doc["kind"] == "status" and doc["findingsSource"] == "persisted" and doc["findingsSavedBy"] == "auditor-0"


async def test_status_says_who_paused(daemon: Daemon) -> None:
    daemon.state.pause.pause("upgrading bookies", by="ops@bastion")
    r = await cli("status", "--admin", daemon.addr)
    assert r.exit_code == 0, r.output
    assert "paused          yes: upgrading bookies (paused by ops@bastion, since " in r.stdout
    assert json.loads((await cli("status", "--admin", daemon.addr, "--format", "json")).stdout)["pausedBy"] == (
        "ops@bastion"
    )


# ------------------------------------------------------------------------------------------ trigger


async def test_trigger_exit_codes(daemon: Daemon) -> None:
    daemon.state.leadership.set(False, leader="auditor-0")
    for args in (["trigger", "scrutiny"], ["triggeraudit"], ["trigger", "--ledger", "7"]):
        r = await cli(*args, "--admin", daemon.addr)
        assert r.exit_code == 3, (args, r.output)
        assert error_line(r).startswith("error: standby; the leader is auditor-0: trigger "), args
    daemon.state.leadership.set(True)
    r = await cli("trigger", "scrutiny", "--admin", daemon.addr)
    assert (r.exit_code, r.stdout.strip()) == (0, "scrutiny triggered")
    daemon.accept[0] = False
    r = await cli("trigger", "scrutiny", "--admin", daemon.addr)
    assert (r.exit_code, r.stdout.strip()) == (1, "scrutiny is already running or queued")
    r = await cli("trigger", "--admin", daemon.addr)
    assert r.exit_code == 2
    assert error_line(r) == (
        "error: name a CHECK (scrutiny, ledger, open, references, bookies, scrub), --ledger LEDGER or "
        "--finding DEDUP_KEY"
    )
    r = await cli("trigger", "--ledger", "7", "--finding", "k", "--admin", daemon.addr)
    assert r.exit_code == 2 and "give one" in error_line(r)
    r = await cli("trigger", "--ledger", "seven", "--admin", daemon.addr)
    assert r.exit_code == 2 and "cannot parse ledger id" in error_line(r)


async def test_trigger_names_are_the_daemons_tasks() -> None:
    from auditor.cli.admin_commands import TRIGGER_NAMES
    from auditor.daemon.metrics import AuditorMetrics
    from auditor.daemon.replica import Auditor
    from auditor.settings import Settings

    state = DaemonState("pod-0")
    Auditor(Settings(), state, AuditorMetrics(cluster="zk-0:2181/ledgers"))
    assert sorted(TRIGGER_NAMES) == sorted(state.tasks.names())
