"""--help names what the options accept, and the names come from where the checks and categories live."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from auditor.checks.names import ALIASES, CHECK_NAMES
from auditor.checks.per_ledger import CHECKS, resolve_checks
from auditor.cli import app
from auditor.durability.findings import Category


def _help(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return re.sub(r"[\s│]+", " ", result.output)  # rich boxes wrap: compare words


def test_the_check_names_are_the_catalog() -> None:
    assert tuple(CHECKS) == CHECK_NAMES
    for alias, name in ALIASES.items():
        assert resolve_checks([alias]) == [name]


@pytest.mark.parametrize("command", ["check", "sweep"])
def test_checks_help_lists_every_check_and_alias(command: str) -> None:
    text = _help(command)
    for name in (*CHECK_NAMES, *(f"{a}={c}" for a, c in ALIASES.items())):
        assert name in text, (command, name)


def test_findings_help_lists_every_category() -> None:
    text = _help("findings")
    for category in Category:
        assert category.value in text
