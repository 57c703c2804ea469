"""The agent over mutual TLS (the admin server's credentials code): a client with a certificate from the
agent's client CA and the token is answered; without a certificate, or trusting another CA, it gets
UNKNOWN, never an answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from auditor.agent.bookieconf import layout
from auditor.agent.main import Agent, AgentOptions
from auditor.bookie.agent import AgentClient, AgentClientConfig, AgentTls
from auditor.bookie.results import Outcome
from auditor.durability.ranges import RangeSet
from devcluster.certs import CertAuthority

from .conftest import FakeBookieDir

TOKEN = b"tls-token"


@pytest.fixture
async def tls_agent(bookie_dir: FakeBookieDir, tmp_path: Path) -> AsyncIterator[tuple[Agent, CertAuthority]]:
    for e in range(5):
        bookie_dir.add(4, e)
    bookie_dir.flush()
    ca = CertAuthority(tmp_path / "pki", "agent-ca")
    server = ca.issue("agent", ["127.0.0.1"])
    token = tmp_path / "token"
    token.write_bytes(TOKEN)
    options = AgentOptions(
        layout((bookie_dir.root,)),
        "127.0.0.1:0",
        token_file=token,
        tls_cert=server.cert_file,
        tls_key=server.key_file,
        tls_client_ca=ca.cert_file,
        scratch_dir=tmp_path / "scratch",
    )
    agent = Agent(options)
    await agent.start()
    try:
        yield agent, ca
    finally:
        await agent.stop()


async def _ask(agent: Agent, tls: AgentTls) -> tuple[Outcome, RangeSet | None, str | None]:
    c = AgentClient("b", ("127.0.0.1", agent.port), AgentClientConfig(TOKEN, tls, 5.0))
    try:
        [a] = await c.list_entries([4])
        return a.outcome, a.entries, a.error
    finally:
        await c.close()


async def test_mutual_tls(tls_agent: tuple[Agent, CertAuthority], tmp_path: Path) -> None:
    agent, ca = tls_agent
    me = ca.issue("auditor", ["auditor"])
    good = AgentTls.from_files(ca.cert_file, me.cert_file, me.key_file)
    assert (await _ask(agent, good))[:2] == (Outcome.PRESENT, RangeSet.span(0, 4))
    no_cert = AgentTls.from_files(ca.cert_file, None, None)
    outcome, entries, error = await _ask(agent, no_cert)
    assert outcome is Outcome.UNKNOWN and entries is None and error
    rogue = CertAuthority(tmp_path / "rogue", "rogue-ca")
    outcome, _, _ = await _ask(agent, AgentTls.from_files(rogue.cert_file, me.cert_file, me.key_file))
    assert outcome is Outcome.UNKNOWN
