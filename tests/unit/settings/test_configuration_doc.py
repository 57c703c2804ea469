"""docs/configuration.md names every setting by its dotted name; the TLS and authentication sections are
documented in docs/security.md instead (its own test checks their keys), so there each one is named too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from auditor.settings import Settings

DOCS = Path(__file__).resolve().parents[3] / "docs"
SECURITY_SECTIONS = ("zookeeper.tls.", "zookeeper.auth.", "bookie_client.tls.")


def leaves(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from leaves(kind, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def documented(name: str, lines: list[str], security: str) -> bool:
    """Named in full on some line, or by its last part on a line that names a sibling in full (a row
    grouping several settings); a TLS or authentication setting may be named by its last part in
    docs/security.md (its tables are per section)."""
    section, short = name.rsplit(".", 1) if "." in name else ("", name)
    if any(f"`{name}`" in line or (section and f"`{short}`" in line and f"`{section}." in line) for line in lines):
        return True
    return name.startswith(SECURITY_SECTIONS) and f"`{short}`" in security


def test_every_setting_is_documented() -> None:
    security = (DOCS / "security.md").read_text()
    lines = [*(DOCS / "configuration.md").read_text().splitlines(), *security.splitlines()]
    names = list(leaves(Settings))
    assert len(names) > 100  # the walk reaches the nested sections
    missing = [n for n in names if not documented(n, lines, security)]
    assert missing == [], f"settings missing from docs/configuration.md (or docs/security.md): {missing}"
