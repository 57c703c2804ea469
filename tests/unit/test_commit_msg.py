"""The commit-msg hook (scripts/check_commit_msg.py): a subject of at most 72 characters, a blank line,
a body; anything else refused with a one-line reason."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_commit_msg.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_commit_msg", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = _load()

GOOD = "make lint: only the virtualenv\n\nThe full set-up installs a JDK and ZooKeeper, which lint never uses.\n"


def test_a_subject_a_blank_line_and_a_body_pass() -> None:
    assert hook.problem(GOOD) is None
    assert hook.problem("x" * 72 + "\n\nwhy\n") is None


def test_a_subject_over_72_characters_is_refused() -> None:
    reason = hook.problem("x" * 73 + "\n\nwhy\n")
    assert reason is not None and "73 characters" in reason and "\n" not in reason


def test_a_commit_without_body_is_refused() -> None:
    for text in ("subject only", "subject only\n", "subject only\n\n\n", "subject\n\n# a comment\n"):
        reason = hook.problem(text)
        assert reason is not None and "no body" in reason, text


def test_a_body_right_under_the_subject_is_refused() -> None:
    reason = hook.problem("subject\nbody at once\n")
    assert reason is not None and "blank line" in reason


def test_an_empty_message_is_refused() -> None:
    assert hook.problem("\n# Please enter the commit message\n") == "the commit message is empty"


def test_comments_and_the_verbose_diff_are_not_judged() -> None:
    verbose = GOOD + "# Changes to be committed:\n" + hook.SCISSORS + "\n" + "diff --git a/x b/x\n" + "+" * 100 + "\n"
    assert hook.problem("# a comment line, over seventy-two characters long, that git drops anyway\n" + verbose) is None


@pytest.mark.parametrize(("text", "code"), [(GOOD, 0), ("subject only\n", 1)], ids=["good", "no-body"])
def test_the_hook_exits_non_zero_with_one_line_on_a_bad_message(tmp_path: Path, text: str, code: int) -> None:
    msg = tmp_path / "COMMIT_EDITMSG"
    msg.write_text(text)
    r = subprocess.run([sys.executable, str(SCRIPT), str(msg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == code, r.stderr
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == (0 if code == 0 else 1)
