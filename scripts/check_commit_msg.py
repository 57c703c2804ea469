#!/usr/bin/env python3
"""The commit-msg hook (.pre-commit-config.yaml): a commit message is a subject of at most 72 characters,
a blank line, then a body saying why. Refuses any other message with a one-line reason (exit 1).

Git hands the hook the message as the editor left it: comment lines (`#`) and everything below the
scissors line of `git commit -v` are not part of the commit, so they are not judged.
"""

from __future__ import annotations

import sys
from pathlib import Path

MAX_SUBJECT = 72
SCISSORS = "# ------------------------ >8 ------------------------"


def message_lines(text: str) -> list[str]:
    """The lines git will commit: no comment lines, nothing below the scissors, no trailing blank lines."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith(SCISSORS):
            break
        if not line.startswith("#"):
            lines.append(line.rstrip())
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def problem(text: str) -> str | None:
    """Why the commit message `text` is refused, in one line; None when it is fine."""
    lines = message_lines(text)
    if not lines:
        return "the commit message is empty"
    subject = lines[0]
    if len(subject) > MAX_SUBJECT:
        return f"the subject is {len(subject)} characters long, more than {MAX_SUBJECT}: say the rest in the body"
    if len(lines) > 1 and lines[1]:
        return "the subject must be followed by a blank line, then the body"
    if len(lines) < 3:
        return "the commit has no body: add a blank line after the subject, then say why"
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} COMMIT_MSG_FILE", file=sys.stderr)
        return 2
    reason = problem(Path(argv[1]).read_text(encoding="utf-8", errors="replace"))
    if reason is not None:
        print(f"commit message refused: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
