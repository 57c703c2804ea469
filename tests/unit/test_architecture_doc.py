"""docs/architecture.md in step with the code: "The tree" lists every module of the package, and only those;
"Layers" shows the layer order and the contracts of .importlinter; "Static checks" the commands of `make lint`."""

from __future__ import annotations

import configparser
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


def _section(title: str) -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _importlinter() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return config


def test_the_layer_order_is_the_one_lint_imports_enforces() -> None:
    layers = _importlinter()["importlinter:contract:layers"]
    assert layers["type"] == "layers"
    enforced = [" | ".join(m.strip() for m in line.split("|")) for line in layers["layers"].split("\n") if line.strip()]
    block = _section("Layers").split("```\n", 2)[1]
    documented = [re.split(r"\s{2,}", line.strip())[0] for line in block.splitlines() if line.strip()]
    assert documented == enforced


def test_every_contract_is_documented_and_every_documented_one_exists() -> None:
    ids = {s.split(":", 2)[2] for s in _importlinter().sections() if s.startswith("importlinter:contract:")}
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", _section("Layers"), re.M))
    assert ids - {"layers"} == documented


def test_the_static_checks_are_the_commands_of_make_lint() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    commands = [line.strip().removeprefix(".venv/bin/") for line in recipe if line.startswith("\t")]
    documented = re.findall(r"^\| `([^`]+)` \|", _section("Static checks (`make lint`)"), re.M)
    assert commands == documented
