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


def _commands() -> list[str]:
    """Every command's name, the hidden aliases of Java's shell names included."""
    from typer.main import get_command

    group = get_command(app)
    return sorted(group.commands)  # type: ignore[attr-defined]


def _raw_help(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", _commands())
def test_flags_take_no_value_and_defaults_survive_rich(command: str) -> None:
    text = _raw_help(command)
    assert "<bool>" not in text  # a flag (--yes, --help) takes no value
    if "--format" in text:  # Rich once ate "[default: table]", leaving "table|json ."
        line = next(x for x in text.splitlines() if "--format" in x)
        assert "Output format: table or json" in line and "[default: table]" in line, line


def test_trigger_help_lists_what_it_can_run() -> None:
    from auditor.cli.admin_commands import TRIGGER_NAMES

    text = _help("trigger")
    assert "What to run now: " + ", ".join(TRIGGER_NAMES) in text
    assert "--ledger" in text and "--finding DEDUP_KEY" in text


def test_java_shell_names_are_hidden_aliases_named_in_the_epilog() -> None:
    from auditor.cli import JAVA_ALIASES

    main = _help()
    listed = main.split("Commands", 1)[1]
    for alias, command in JAVA_ALIASES.items():
        assert f" {alias} " not in listed.split("Java shell names:")[0], alias  # hidden from the list
        assert f"{alias} = {command}" in main
    # Each alias is its command: the same options and help.
    for alias, command in (
        ("listunderreplicated", "underreplicated"),
        ("lostbookierecoverydelay", "recovery-delay"),
        ("autorecovery", "replication"),
    ):
        assert _help(alias).replace(alias, command, 1) == _help(command)  # but the usage line
    assert "Java's `triggeraudit`: audit lost bookies now (`trigger bookies`)" in _help("triggeraudit")


@pytest.mark.parametrize(
    "command, codes",
    [
        ("findings", ["Exit 0: nothing actionable", "1: actionable", "2: errors", "3: a standby"]),
        ("trigger", ["Exit 0: triggered", "1: nothing triggered", "2: errors", "3: a standby"]),
        ("health", ["Exit 0: SERVING", "1: anything else", "2: no answer"]),
        ("whoisauditor", ["Exit 0: someone leads", "1: nobody leads", "2: errors"]),
        ("pause", ["Exit 0", "2 errors", "3 a standby"]),
        ("resume", ["Exit 0", "2 errors", "3 a standby"]),
        ("repair-limits", ["Exit 0", "2 errors", "3 a standby"]),
    ],
)
def test_help_names_the_exit_codes(command: str, codes: list[str]) -> None:
    text = _help(command)
    for code in codes:
        assert code in text, (command, code)
