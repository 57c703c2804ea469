"""The agent in this process (auditor/agent/main.py) and its client (auditor/bookie/agent.py) over loopback
gRPC: the token is required, answers are three-valued, digests are checked, and options the agent must
refuse are one line naming the flag (exit 2 from the CLI)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from typer.testing import CliRunner

from auditor.agent.bookieconf import from_bookie_conf, layout
from auditor.agent.main import Agent, AgentOptions
from auditor.bookie.agent import AgentClient, AgentClientConfig
from auditor.bookie.results import Outcome
from auditor.cli import app
from auditor.durability.model import DigestType
from auditor.durability.ranges import RangeSet
from auditor.errors import ConfigError

from .conftest import FakeBookieDir

TOKEN = b"s3cret-token"


@pytest.fixture
async def agent(bookie_dir: FakeBookieDir, tmp_path: Path) -> AsyncIterator[Agent]:
    for e in range(50):
        bookie_dir.add(11, e)
    bookie_dir.flush()
    token = tmp_path / "token"
    token.write_bytes(TOKEN + b"\n")
    a = Agent(
        AgentOptions(
            layout(ledger_dirs=(bookie_dir.root,), bookie_id="b1:3181"),
            "127.0.0.1:0",
            token_file=token,
            scratch_dir=tmp_path / "scratch",
            max_index_age=0.0,
        )
    )
    await a.start()
    try:
        yield a
    finally:
        await a.stop()


def _client(agent: Agent, token: bytes | None = TOKEN) -> AgentClient:
    return AgentClient("b1:3181", ("127.0.0.1", agent.port), AgentClientConfig(token, None, 5.0))


async def test_answers_with_the_token(agent: Agent, bookie_dir: FakeBookieDir) -> None:
    c = _client(agent)
    try:
        info = await c.describe()
        assert info.bookie_id == "b1:3181" and info.storage == "db" and info.index_as_of > 0
        present, absent = await c.list_entries([11, 12])
        assert present.outcome is Outcome.PRESENT and present.entries == RangeSet.span(0, 49)
        assert absent.outcome is Outcome.ABSENT and absent.entries == RangeSet() and absent.error is None
        r = await c.verify_entries(11, DigestType.CRC32C, b"", RangeSet.span(0, 1 << 62), max_bytes=0)
        assert (r.outcome, r.verified, r.corrupt, r.next_entry) == (Outcome.PRESENT, 50, [], None)
        assert r.absent == RangeSet.span(50, 1 << 62) and r.unreadable == RangeSet()
        cut = await c.verify_entries(11, DigestType.CRC32C, b"", RangeSet.span(0, 49), max_bytes=200)
        assert cut.next_entry is not None and cut.verified == cut.next_entry and cut.absent == RangeSet()
        wrong = await c.verify_entries(11, DigestType.CRC32, b"", RangeSet.span(0, 2), max_bytes=0)
        assert [e for e, _ in wrong.corrupt] == [0, 1, 2] and wrong.verified == 0
        text = generate_latest(agent.metrics.registry).decode()
        assert 'bk_auditor_agent_ledgers_answered_total{outcome="present"} 1.0' in text
        assert 'bk_auditor_agent_ledgers_answered_total{outcome="absent"} 1.0' in text
        assert 'bk_auditor_agent_verified_entries_total{verdict="corrupt"} 3.0' in text
        assert 'bk_auditor_agent_index_refreshes_total{result="ok"}' in text
        assert 'bk_auditor_agent_requests_total{code="OK",method="VerifyEntries"} 3.0' in text
    finally:
        await c.close()


@pytest.mark.parametrize("token", [None, b"wrong", TOKEN + b"x"])
async def test_without_the_token_nothing_is_answered(agent: Agent, token: bytes | None) -> None:
    c = _client(agent, token)
    try:
        [a] = await c.list_entries([11])
        assert a.outcome is Outcome.UNKNOWN and a.entries is None and "UNAUTHENTICATED" in (a.error or "")
        v = await c.verify_entries(11, DigestType.CRC32C, b"", RangeSet.span(0, 3), max_bytes=0)
        assert v.outcome is Outcome.UNKNOWN and v.unreadable == RangeSet.span(0, 3) and v.verified == 0
    finally:
        await c.close()


async def test_an_unreachable_agent_is_unknown(agent: Agent) -> None:
    port = agent.port
    await agent.stop()
    c = AgentClient("b1:3181", ("127.0.0.1", port), AgentClientConfig(TOKEN, None, 1.0))
    try:
        [a] = await c.list_entries([11])
        assert a.outcome is Outcome.UNKNOWN and a.error
    finally:
        await c.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "--token-file is required"),
        ({"insecure": True, "listen": "0.0.0.0:7980"}, "--insecure refused on 0.0.0.0"),
        ({"insecure": True, "listen": "10.1.2.3:7980"}, "loopback only"),
        ({"token_file": Path("/t"), "tls_cert": Path("/c")}, "--tls-cert and --tls-key go together"),
        ({"token_file": Path("/t"), "tls_client_ca": Path("/ca")}, "--tls-client-ca needs"),
        ({"token_file": Path("/t"), "listen": "nonsense"}, "--listen nonsense"),
    ],
)
def test_options_the_agent_refuses(kwargs: dict[str, object], message: str, tmp_path: Path) -> None:
    options = {"layout": layout((tmp_path,)), "listen": "127.0.0.1:7980", **kwargs}
    with pytest.raises(ConfigError, match=message):
        AgentOptions(**options).check()  # type: ignore[arg-type]


def test_insecure_on_loopback_is_allowed(tmp_path: Path) -> None:
    for host in ("127.0.0.1", "[::1]", "localhost"):
        AgentOptions(layout((tmp_path,)), f"{host}:7980", insecure=True).check()


def test_the_bookie_conf_decides(tmp_path: Path) -> None:
    conf = tmp_path / "bk_server.conf"
    conf.write_text("ledgerStorageClass=org.apache.bookkeeper.bookie.SortedLedgerStorage\nledgerDirectories=/d\n")
    with pytest.raises(ConfigError, match="DbLedgerStorage only"):
        from_bookie_conf(conf)
    db = "ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage\n"
    conf.write_text(db + "ledgerDirectories=/a,/b\nindexDirectories=/x\n")
    with pytest.raises(ConfigError, match="2 ledger directories but 1 index"):
        from_bookie_conf(conf)
    conf.write_text(db + "ledgerDirectories=/a,/b\nindexDirectories=/x,/y\nbookieId=bk-0\n")
    got = from_bookie_conf(conf)
    assert got.ledger_dirs == (Path("/a"), Path("/b")) and got.index_dirs == (Path("/x"), Path("/y"))
    assert got.bookie_id == "bk-0"
    conf.write_text(db + "ledgerDirectories=/a\ndbStorage_directIOEntryLogger=true\n")
    with pytest.raises(ConfigError, match="dbStorage_directIOEntryLogger"):
        from_bookie_conf(conf)


def test_the_cli_says_one_line_and_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["agent", "--ledger-dirs", str(tmp_path), "--listen", "0.0.0.0:7980"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--token-file is required" in lines[0], result.output


def test_the_scratch_directory_must_be_outside_the_bookie(tmp_path: Path) -> None:
    options = AgentOptions(layout((tmp_path,)), "127.0.0.1:7980", token_file=tmp_path / "t", scratch_dir=tmp_path / "s")
    with pytest.raises(ConfigError, match="inside the bookie directory"):
        options.check()
