"""Running the installed `bk-auditor` command against a test cluster, as an operator would: a clean
environment (no `BKAUDIT_*` variables of the test run), and its stderr without the JSON log lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).with_name("bk-auditor")


def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    return subprocess.run(
        [str(BIN), *args], capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )


def error_lines(stderr: str) -> list[str]:
    """stderr without the JSON log lines (and Spark's own chatter, which is not ours)."""
    return [line for line in stderr.splitlines() if line.startswith(("bk-auditor", "error:"))]


def json_findings(stdout: str) -> list[dict[str, Any]]:
    """The findings `check --format json` printed (one object per line; the summary line left out)."""
    lines = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    return [f for f in lines if "summary" not in f]


def log_lines(stderr: str) -> list[dict[str, Any]]:
    """The JSON log lines of a command's stderr, parsed."""
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def ledger_log_lines(stderr: str, ledger_id: int) -> list[dict[str, Any]]:
    """The log lines about one ledger (scope 0): repair lines name it as text, findings as a number."""
    return [ln for ln in log_lines(stderr) if ln.get("ledgerId") in (str(ledger_id), ledger_id)]
