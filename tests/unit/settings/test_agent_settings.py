"""The `agent:` settings (the bookie-side index agents): what they accept, each mistake one line naming the
key, and what the pool makes of them (auditor/checks/build.py `agents_config`, `BookiePool.agent`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.bookie.pool import BookiePool
from auditor.checks.build import agents_config
from auditor.settings import ConfigError, load_settings

pytestmark = pytest.mark.usefixtures("no_bkaudit_env")


def _load(tmp_path: Path, agent: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "c.yaml"
    f.write_text(f"metadata_service_uri: zk+hierarchical://127.0.0.1:2181/ledgers\nagent:\n{agent}")
    return load_settings(f)


def _problems(tmp_path: Path, agent: str) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        _load(tmp_path, agent)
    return [str(p) for p in exc.value.problems]


def test_defaults_mean_no_agents(tmp_path: Path) -> None:
    s = _load(tmp_path, "  timeout_seconds: 3\n")
    assert s.agent.port is None and agents_config(s) is None
    assert BookiePool(agents=agents_config(s)).agent("b1:3181") is None


async def test_port_and_addresses(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("tok\n")
    s = _load(tmp_path, f"  port: 7980\n  token_file: {token}\n  addresses:\n    bk-2: '10.0.0.9:7990'\n")
    cfg = agents_config(s)
    assert cfg is not None and cfg.port == 7980 and cfg.client.token == b"tok"
    assert cfg.addresses == {"bk-2": ("10.0.0.9", 7990)}
    pool = BookiePool(lambda b: ("10.0.0.1", 3181), agents=cfg)
    try:
        one = pool.agent("bk-1")
        assert one is not None and pool.agent("bk-1") is one
        assert await one._resolve() == ("10.0.0.1", 7980)  # the bookie's resolved host, the agent's port
        two = pool.agent("bk-2")
        assert two is not None and await two._resolve() == ("10.0.0.9", 7990)
    finally:
        await pool.close()


@pytest.mark.parametrize(
    ("agent", "key", "words"),
    [
        ("  port: 0\n", "agent.port", "must be >= 1, got 0"),
        ("  port: 70000\n", "agent.port", "must be <= 65535"),
        ("  addresses:\n    bk-1: nonsense\n", "agent.addresses", "bookie bk-1"),
        ("  tls:\n    ca_file: /ca.pem\n", "agent.tls", "enabled is false"),
        ("  tls:\n    enabled: true\n    cert_file: /c.pem\n", "agent.tls", "cert_file and key_file go together"),
        ("  tls:\n    truststore: /t.jks\n", "agent.tls.truststore", "unknown setting"),
        ("  timeout_seconds: 0\n", "agent.timeout_seconds", "must be > 0"),
    ],
)
def test_mistakes_name_the_key(tmp_path: Path, agent: str, key: str, words: str) -> None:
    [problem] = _problems(tmp_path, agent)
    assert key in problem and words in problem and "\n" not in problem, problem


def test_an_unreadable_token_file_names_the_key(tmp_path: Path) -> None:
    s = _load(tmp_path, f"  port: 7980\n  token_file: {tmp_path / 'missing'}\n")
    with pytest.raises(ConfigError, match="agent.token_file .*missing"):
        agents_config(s)
    pem = tmp_path / "ca.pem"
    pem.write_text("not pem")
    s = _load(tmp_path, f"  port: 7980\n  tls:\n    enabled: true\n    ca_file: {pem}\n")
    with pytest.raises(ConfigError, match="agent.tls.ca_file .* is not PEM"):
        agents_config(s)
