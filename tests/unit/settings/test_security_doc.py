"""docs/security.md lists every ZooKeeper security setting and key bk-auditor supports or refuses."""

from __future__ import annotations

from pathlib import Path

from auditor.settings.javakeys import CHECKED_JAVA_KEYS, JAVA_KEYS
from auditor.settings.model import our_names

DOC = (Path(__file__).resolve().parents[3] / "docs" / "security.md").read_text()


def section(title: str) -> str:
    start = DOC.index(f"## {title}")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end != -1 else None]


def test_every_zookeeper_security_setting_is_documented() -> None:
    zk = section("ZooKeeper: TLS and authentication")
    for name in our_names():
        if name.startswith(("zookeeper.tls.", "zookeeper.auth.")):
            leaf = name.rsplit(".", 1)[1]
            assert f"`{name}`" in zk or f"{leaf}`" in zk, name
    for key in JAVA_KEYS.values():
        if key.path.startswith(("zookeeper.tls.", "zookeeper.auth.")):
            java = key.java.rsplit(".", 1)[-1] if key.java.startswith("zookeeper.ssl.") else key.java
            assert java in zk, key.java


def test_every_refused_zookeeper_key_is_documented() -> None:
    documented = section("ZooKeeper: TLS and authentication") + section("Settings we refuse")
    for key in CHECKED_JAVA_KEYS:
        assert f"`{key}" in documented, key
