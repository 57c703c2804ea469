"""Every `bk-auditor ...` command shown in README.md and docs/*.md parses with today's CLI: the subcommand
exists and every flag and argument is accepted (parsed by click without running anything), so the docs
cannot drift from the code. Metavariables (LEDGER, <category>, table|json, [optional]) are filled with
example values first."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer

from auditor.cli import app

ROOT = Path(__file__).resolve().parents[3]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

EXAMPLES = {
    "LEDGER": "1234",
    "CHECK": "scrutiny",
    "NAMES": "scrutiny,ledger",
    "BOOKIE": "127.0.0.1:3181",
    "TEXT": "upgrading",
    "S": "leader",
    "C": "entry_no_replica",
    "L": "1234",
    "B": "127.0.0.1:3181",
    "N": "10",
    "SECONDS": "60",
    "HOST:PORT": "127.0.0.1:7979",
    "FILE": "/etc/bk/auditor.yaml",
    "<ledger>": "1234",
    "<category>": "entry_no_replica",
    "<name>": "leader",
    "<port>": "7979",
    "<command>": "status",
}


def _commands(text: str) -> list[str]:
    """`bk-auditor ...` as written: in inline code spans and in code blocks (one per line)."""
    found = []
    for span in re.findall(r"`([^`\n]*bk-auditor [^`\n]*)`", text):
        found.append(span)
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        found.extend(line for line in block.splitlines() if "bk-auditor " in line)
    out = []
    for line in found:
        line = line.split(" #", 1)[0]
        m = re.search(r"(?:^|[\s/$])bk-auditor ([a-z].*)$", line)
        if m and not m.group(1).startswith(("is ", "pod", "pods", "image", "--version")):
            out.append(m.group(1).strip().rstrip(",.;"))
    return out


def _fill(command: str) -> list[str] | None:
    """Arguments with metavariables replaced by examples; None when the line is not a full command."""
    if "..." in command or "<command>" in command and command.strip() == "<command>":
        return None
    command = command.replace("\\|", "|")
    command = re.sub(r"\[([^\[\]]*)\]", r"\1", command)  # [--format table|json] -> --format table|json
    words = []
    for word in shlex.split(command):
        word = word.split("|")[0] if "|" in word and not word.startswith(("zk", "'")) else word
        words.append(EXAMPLES.get(word, word))
    return words


def _parse(args: list[str]) -> None:
    group = typer.main.get_command(app)  # typer's own (vendored) click: used by duck typing only
    with group.make_context("bk-auditor", list(args), resilient_parsing=False) as ctx:
        protected = getattr(ctx, "protected_args", None) or getattr(ctx, "_protected_args", [])
        name, cmd, rest = group.resolve_command(ctx, [*protected, *ctx.args])
        assert cmd is not None, f"no command {name}"
        with cmd.make_context(name or "", rest, parent=ctx):
            pass


# Lines with "..." elide arguments: not complete commands, so not parsed.
CASES = [(doc.name, c) for doc in DOCS for c in _commands(doc.read_text()) if _fill(c) is not None]


def test_the_docs_show_commands() -> None:
    names = {c.split()[0] for _, c in CASES}
    assert {"check", "run", "status", "explain", "sweep", "findings"} <= names, names


@pytest.mark.parametrize("doc, command", CASES, ids=[f"{d}:{c[:60]}" for d, c in CASES])
def test_every_command_in_the_docs_parses(doc: str, command: str) -> None:
    args = _fill(command)
    assert args is not None
    try:
        _parse(args)
    except Exception as exc:
        if type(exc).__name__ == "Exit":  # e.g. --version
            return
        message = exc.format_message() if hasattr(exc, "format_message") else repr(exc)
        pytest.fail(f"{doc}: `bk-auditor {command}` does not parse: {message}")
