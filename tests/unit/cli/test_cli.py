"""The CLI through typer's CliRunner, against a real admin server (grpc.aio on 127.0.0.1, ephemeral port).

The server runs on the test's event loop; each CLI call runs in a worker thread (it starts its own loop),
so both sides really talk gRPC."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditor import __version__
from auditor.admin.models import BookieCopies, LedgerExplanation, SegmentCopies
from auditor.admin.server import AdminServer
from auditor.cli import app
from auditor.cli.common import run_with_loop as _run_with_loop
from auditor.daemon.backend import StateBackend
from auditor.daemon.state import DaemonState
from auditor.durability.findings import Category, Finding
from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment

BIG = LedgerId(1, 42)


pytestmark = pytest.mark.usefixtures("no_bkaudit_env")


@dataclass
class Daemon:
    state: DaemonState
    server: AdminServer
    addr: str
    triggered: list[str]


def run_cli(*args: str):
    return CliRunner().invoke(app, list(args))


async def cli(*args: str):
    return await asyncio.to_thread(run_cli, *args)


@pytest.fixture
async def daemon() -> AsyncIterator[Daemon]:
    state = DaemonState("auditor-0", recheck_depth=lambda: 4)
    state.tasks.register("scrutiny", interval_seconds=86400)
    state.tasks.register("ledger_check", interval_seconds=604800)
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
    state.findings.add(
        Finding.of(Category.PLACEMENT_VIOLATION, "write set in one rack", ledger=BIG, segment_index=0, confirmed=True),
        check="scrutiny",
    )
    triggered: list[str] = []

    async def trigger(check: str) -> bool:
        triggered.append(check)
        return True

    async def explain(ledger: LedgerId) -> LedgerExplanation:
        md = LedgerMetadata(
            ledger_id=ledger,
            ensemble_size=2,
            write_quorum=2,
            ack_quorum=2,
            state=LedgerState.CLOSED,
            last_entry_id=4,
            length=320,
            digest_type=DigestType.CRC32,
            segments=(Segment(0, ("127.0.0.1:3181", "127.0.0.2:3182")),),
        )
        seg = SegmentCopies(
            0,
            0,
            4,
            md.segments[0].ensemble,
            [
                BookieCopies("127.0.0.1:3181", 0, "ok", 5, 5),
                BookieCopies("127.0.0.2:3182", 1, "missing", 5, 3, missing=[(3, 4)]),
            ],
            min_copies=1,
        )
        return LedgerExplanation(md, [seg], under_replicated=False, notes=["checked just now"])

    server = AdminServer(StateBackend(state, trigger=trigger, explain=explain), "127.0.0.1:0")
    port = await server.start()
    server.follow_leadership(state.leadership)
    try:
        yield Daemon(state, server, f"127.0.0.1:{port}", triggered)
    finally:
        await server.stop(0)


def one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


# ------------------------------------------------------------------------------------------ basics


def test_version() -> None:
    r = run_cli("--version")
    assert r.exit_code == 0 and r.stdout.strip() == f"bk-auditor {__version__}"


def test_help_lists_commands() -> None:
    r = run_cli("--help")
    assert r.exit_code == 0
    for cmd in ("run", "check", "status", "findings", "explain", "trigger", "pause", "resume", "health"):
        assert cmd in r.stdout


# ------------------------------------------------------------------------------------------ admin clients


async def test_status_table_and_json(daemon: Daemon) -> None:
    daemon.state.tasks.start("scrutiny", total=200)
    daemon.state.tasks.progress("scrutiny", 50)
    r = await cli("status", "--admin", daemon.addr)
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "auditor-0" in out and "leader          no (leader: unknown)" in out
    assert "re-check queue  4" in out
    assert "entry_no_replica=1" in out and "placement_violation=1" in out
    row = next(line for line in out.splitlines() if line.startswith("scrutiny"))
    assert "running" in row and "50/200" in row

    daemon.state.leadership.set(True)
    r = await cli("status", "--admin", daemon.addr, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["identity"] == "auditor-0" and doc["leader"] is True
    assert doc["findingCounts"] == {"entry_no_replica": "1", "placement_violation": "1"}
    assert [t["name"] for t in doc["tasks"]] == ["scrutiny", "ledger_check"]


def json_lines(stdout: str) -> list[dict]:
    """JSON output: one object per line, each with its kind (docs/findings.md, "JSON output")."""
    docs = [json.loads(line) for line in stdout.splitlines()]
    assert all("kind" in d for d in docs), docs
    return docs


async def test_findings_filters_and_formats(daemon: Daemon) -> None:
    daemon.state.leadership.set(True)
    r = await cli("findings", "--admin", daemon.addr)
    assert r.exit_code == 1, r.output  # actionable findings listed
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["SEVERITY", "CATEGORY", "LEDGER", "BOOKIE"]
    assert lines[1].split()[:4] == ["critical", "entry_no_replica", "7", "127.0.0.2:3182"]
    assert BIG.qualified_name in lines[2]

    r = await cli("findings", "--admin", daemon.addr, "--ledger", BIG.qualified_name, "--format", "json")
    assert r.exit_code == 1, r.output
    f, summary = json_lines(r.stdout)
    assert summary["kind"] == "summary" and summary["summary"]["totalMatching"] == 1
    assert summary["summary"]["source"] == "leader" and summary["summary"]["exitCode"] == 1
    assert f["kind"] == "finding"
    assert f["category"] == "placement_violation" and f["qualifiedName"] == BIG.qualified_name
    assert f["check"] == "scrutiny" and f["timesSeen"] == 1 and f["confirmed"] is True

    r = await cli(
        "findings",
        "--admin",
        daemon.addr,
        "--category",
        "entry_no_replica",
        "--bookie",
        "127.0.0.2:3182",
        "--format",
        "json",
    )
    assert [f["ledgerId"] for f in json_lines(r.stdout) if f["kind"] == "finding"] == [7]
    r = await cli("findings", "--admin", daemon.addr, "--limit", "1")
    assert "(1 of 2 shown; use --limit)" in r.stdout
    r = await cli("findings", "--admin", daemon.addr, "--category", "digest_mismatch")
    assert r.exit_code == 0 and r.stdout.strip() == "no findings"


async def test_findings_by_topic(daemon: Daemon) -> None:
    daemon.state.findings.add(
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
    daemon.state.leadership.set(True)
    r = await cli("findings", "--admin", daemon.addr, "--by", "topic", "--format", "json")
    assert r.exit_code == 1, r.output
    rows = [d for d in json_lines(r.stdout) if d["kind"] == "topic"]
    assert [(t["topic"], t["namespace"], t["worstCategory"]) for t in rows] == [
        ("(not a Pulsar topic)", None, "entry_no_replica"),
        ("persistent://acme/billing/orders", "acme/billing", "entry_below_ack_quorum"),
    ]
    r = await cli("findings", "--admin", daemon.addr, "--by", "topic")
    assert r.exit_code == 1 and "2 topic(s) at risk" in r.stdout and "acme/billing" in r.stdout
    r = await cli("findings", "--admin", daemon.addr, "--by", "ledger")
    assert r.exit_code == 2


async def test_explain(daemon: Daemon) -> None:
    r = await cli("explain", "7", "--admin", daemon.addr)
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "ledger 7 (00000000000000000000000000000007)  state CLOSED  E/WQ/AQ 2/2/2" in out
    assert "segment 0: entries 0..4  ensemble 127.0.0.1:3181, 127.0.0.2:3182  min copies 1" in out
    missing_row = next(line for line in out.splitlines() if "127.0.0.2:3182" in line and "missing" in line)
    assert missing_row.split()[2:6] == ["missing", "5", "3", "3-4"]
    assert "entry_no_replica" in out and "note: checked just now" in out

    r = await cli("explain", BIG.qualified_name, "--admin", daemon.addr, "--format", "json")
    assert r.exit_code == 0, r.output
    (doc,) = json_lines(r.stdout)
    assert doc["kind"] == "explanation" and doc["answeredBy"] == "daemon"
    assert doc["metadata"]["qualifiedName"] == BIG.qualified_name
    assert doc["segments"][0]["bookies"][1]["missing"] == [{"first": "3", "last": "4"}]
    assert [f["category"] for f in doc["findings"]] == ["placement_violation"]


async def test_bad_ledger_id_fails_before_calling(daemon: Daemon) -> None:
    for cmd in (["explain", "seven"], ["findings", "--ledger", "0xnope"]):
        r = await cli(*cmd, "--admin", daemon.addr)
        assert r.exit_code == 2
        assert "cannot parse ledger id" in one_error_line(r)


async def test_trigger_pause_resume(daemon: Daemon) -> None:
    r = await cli("trigger", "scrutiny", "--admin", daemon.addr)
    assert r.exit_code == 3  # a standby: distinct from an error
    assert one_error_line(r).startswith("error: standby; the leader is not known: trigger scrutiny refused")
    assert daemon.triggered == []
    daemon.state.leadership.set(True)
    r = await cli("trigger", "scrutiny", "--admin", daemon.addr)
    assert r.exit_code == 0 and r.stdout.strip() == "scrutiny triggered"
    assert daemon.triggered == ["scrutiny"]
    r = await cli("trigger", "nope", "--admin", daemon.addr)
    assert r.exit_code == 2 and "unknown check 'nope'" in one_error_line(r)

    r = await cli("pause", "--admin", daemon.addr, "--reason", "upgrading bookies")
    assert r.exit_code == 0 and r.stdout.strip() == "paused"
    assert daemon.state.pause.paused and daemon.state.pause.reason == "upgrading bookies"
    r = await cli("status", "--admin", daemon.addr)
    assert "paused          yes: upgrading bookies" in r.stdout
    r = await cli("resume", "--admin", daemon.addr)
    assert r.exit_code == 0 and r.stdout.strip() == "resumed" and not daemon.state.pause.paused
    r = await cli("resume", "--admin", daemon.addr)
    assert r.stdout.strip() == "was not paused"


async def test_health_probe_exit_codes(daemon: Daemon) -> None:
    r = await cli("health", "--admin", daemon.addr, "--service", "leader")
    assert (r.exit_code, r.stdout.strip()) == (1, "NOT_SERVING")
    daemon.state.leadership.set(True)
    for _ in range(100):
        r = await cli("health", "--admin", daemon.addr, "--service", "leader")
        if r.exit_code == 0:
            break
    assert (r.exit_code, r.stdout.strip()) == (0, "SERVING")
    r = await cli("health", "--admin", daemon.addr, "--service", "liveness")
    assert r.exit_code == 0
    await daemon.server.stop(1)
    r = await cli("health", "--admin", daemon.addr, "--service", "liveness", "--timeout", "2")
    assert r.exit_code == 2 and "cannot reach the bk-auditor admin API" in one_error_line(r)


async def test_unreachable_daemon(daemon: Daemon) -> None:
    await daemon.server.stop(0)
    for cmd in (["status"], ["findings"], ["explain", "7"], ["trigger", "scrutiny"], ["pause"], ["resume"]):
        r = await cli(*cmd, "--admin", daemon.addr, "--timeout", "2")
        assert r.exit_code == 2, (cmd, r.output)
        assert one_error_line(r).startswith(f"error: cannot reach the bk-auditor admin API at {daemon.addr}")


async def test_admin_address_from_environment(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BK_AUDITOR_ADMIN", daemon.addr)
    r = await cli("status", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["identity"] == "auditor-0"


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget which warnings this process already showed (the CLI shows each once per process)."""
    import auditor.cli.admin_client

    monkeypatch.setattr(auditor.cli.admin_client, "_warned", set())
    monkeypatch.delenv("BK_AUDITOR_ADMIN", raising=False)


def warning_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("warning: ")]


async def test_admin_address_variable_has_the_settings_prefix(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch, fresh_warnings: None
) -> None:
    monkeypatch.setenv("BKAUDIT_ADMIN_ADDRESS", daemon.addr)
    r = await cli("status", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["identity"] == "auditor-0"
    assert warning_lines(r) == []


async def test_old_admin_variable_still_works_and_warns_once(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch, fresh_warnings: None
) -> None:
    monkeypatch.setenv("BK_AUDITOR_ADMIN", daemon.addr)
    first = await cli("status", "--format", "json")
    assert first.exit_code == 0 and json.loads(first.stdout)["identity"] == "auditor-0"
    assert warning_lines(first) == ["warning: BK_AUDITOR_ADMIN is deprecated; set BKAUDIT_ADMIN_ADDRESS instead"]
    second = await cli("status", "--format", "json")
    assert second.exit_code == 0 and warning_lines(second) == []


async def test_new_admin_variable_wins_over_the_old_one_with_a_warning(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch, fresh_warnings: None
) -> None:
    monkeypatch.setenv("BKAUDIT_ADMIN_ADDRESS", daemon.addr)
    monkeypatch.setenv("BK_AUDITOR_ADMIN", "127.0.0.1:1")  # nothing listens there: it must not be used
    r = await cli("status", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["identity"] == "auditor-0"
    (line,) = warning_lines(r)
    assert "BK_AUDITOR_ADMIN=127.0.0.1:1" in line and f"BKAUDIT_ADMIN_ADDRESS={daemon.addr} is used" in line


async def test_admin_flag_beats_both_variables(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch, fresh_warnings: None
) -> None:
    monkeypatch.setenv("BKAUDIT_ADMIN_ADDRESS", "127.0.0.1:1")
    monkeypatch.setenv("BK_AUDITOR_ADMIN", "127.0.0.1:2")
    r = await cli("status", "--format", "json", "--admin", daemon.addr)
    assert r.exit_code == 0 and json.loads(r.stdout)["identity"] == "auditor-0"
    assert warning_lines(r) == []


def test_admin_help_names_the_default_address_and_variable() -> None:
    from auditor.settings import DEFAULT_ADMIN_ADDRESS, ENV_ADMIN_ADDRESS

    r = run_cli("status", "--help")
    assert r.exit_code == 0
    text = " ".join(r.stdout.split())
    assert DEFAULT_ADMIN_ADDRESS in text and ENV_ADMIN_ADDRESS in text


# ------------------------------------------------------------------------------------------ run / check


def test_run_and_check_reject_bad_config(tmp_path: Path) -> None:
    conf = tmp_path / "bk_server.conf"
    conf.write_text("metadataServiceUri=zk+hierarchical://127.0.0.1:2181/ledgers\nauditorPeriodicCheckInterval=-5\n")
    for cmd in ("run", "check"):
        r = run_cli(cmd, "--config", str(conf))
        assert r.exit_code == 2
        assert one_error_line(r) == f"error: config file {conf}: auditorPeriodicCheckInterval: must be >= 0, got -5"


def test_run_needs_a_metadata_location(tmp_path: Path) -> None:
    r = run_cli("run")
    assert r.exit_code == 2 and "metadata_service_uri: not set" in one_error_line(r)
    r = run_cli("check", "--metadata-service-uri", "etcd://h:2379/ledgers")
    assert r.exit_code == 2
    line = one_error_line(r)
    assert line.startswith("error: command line: --metadata-service-uri: ") and "not ZooKeeper" in line


def test_flag_errors_name_the_flag() -> None:
    r = run_cli(
        "run",
        "--metadata-service-uri",
        "zk+hierarchical://127.0.0.1:2181/ledgers",
        "--admin-bind",
        "x",
        "--loop",
        "trio",
    )
    assert r.exit_code == 2
    line = one_error_line(r)
    assert "command line: --admin-bind: must be host:port" in line
    assert "command line: --loop: must be one of 'asyncio' or 'uvloop', got 'trio'" in line
    r = run_cli("check", "--metadata-service-uri", "zk+hierarchical://127.0.0.1:2181/ledgers", "--format", "xml")
    assert r.exit_code == 2 and "--format must be table or json" in one_error_line(r)


def test_event_loop_choice() -> None:
    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert _run_with_loop(loop_module, loop="uvloop").startswith("uvloop")
    assert _run_with_loop(loop_module, loop="asyncio").startswith("asyncio")
    assert _run_with_loop(lambda x: x + 1, 41) == 42  # plain functions are just called


def test_the_collector_is_tuned_before_a_commands_loop_runs() -> None:
    """Every command's event loop runs with the set-up heap frozen and rarer gen-0 collections
    (auditor/processes/gctune.py); the thresholds are put back for the other tests."""
    import gc

    from auditor.processes.gctune import GEN0_THRESHOLD

    async def seen() -> tuple[tuple[int, int, int], int]:
        return gc.get_threshold(), gc.get_freeze_count()

    before = gc.get_threshold()
    gc.unfreeze()
    try:
        (gen0, gen1, gen2), frozen = _run_with_loop(seen, loop="uvloop")
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
    assert gen0 == GEN0_THRESHOLD and (gen1, gen2) == before[1:]
    assert frozen > 1000  # the modules, settings and everything else the process had built
