"""docs/architecture.md's "The tree" lists every module of the package, and only those."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tree_rows() -> dict[str, str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## The tree", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(auditor/[^`]+\.py)` \| (.+?) \|$", section, re.M))


def test_the_tree_lists_every_module_once_with_what_it_holds() -> None:
    rows = tree_rows()
    modules = {
        str(p.relative_to(ROOT)) for p in (ROOT / "auditor").rglob("*.py") if "_proto" not in p.relative_to(ROOT).parts
    }
    assert sorted(modules - rows.keys()) == [], "modules missing from docs/architecture.md's tree"
    assert sorted(rows.keys() - modules) == [], "the tree names modules that do not exist"
    assert all(len(what.split()) >= 3 for what in rows.values())
