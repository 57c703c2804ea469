"""Spark is the optional `spark` extra (the daemon image leaves it out): without pyspark the sweep says so
in one line naming the extra and exits 2, before reading any setting; everything else works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


@pytest.fixture
def no_pyspark_env(tmp_path: Path) -> dict[str, str]:
    """An environment in which `import pyspark` fails as if it were not installed (a sitecustomize on
    PYTHONPATH blocks it), for the real console script and `python -m`."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['pyspark'] = None  # ImportError on import\n")
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("BKAUDIT_")}
    env["PYTHONPATH"] = str(tmp_path)
    return env


@pytest.mark.parametrize(
    "cmd",
    [
        [str(BIN / "bk-auditor"), "sweep", "--metadata-service-uri", "zk+hierarchical://127.0.0.1:1/ledgers"],
        [sys.executable, "-m", "auditor.spark.sweep", "--metadata-service-uri", "zk+hierarchical://127.0.0.1:1/x"],
        # even with a config that is wrong too: the missing extra is what to fix first
        [str(BIN / "bk-auditor"), "sweep", "--config", "/nonexistent/bk-auditor.yaml"],
    ],
)
def test_sweep_without_pyspark_names_the_extra_and_exits_2(cmd: list[str], no_pyspark_env: dict[str, str]) -> None:
    proc = subprocess.run(cmd, env=no_pyspark_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "pyspark" in lines[0] and "pip install 'bk-auditor[spark]'" in lines[0], lines[0]
    assert proc.stdout == ""


def test_the_rest_of_the_cli_needs_no_pyspark(no_pyspark_env: dict[str, str]) -> None:
    """The daemon's commands do not import pyspark (import-linter forbids it too): `run --help`, `check
    --help` and the one-shot check's usage error work in the environment without it."""
    for args in (["--version"], ["run", "--help"], ["check", "--help"], ["sweep", "--help"]):
        proc = subprocess.run(
            [str(BIN / "bk-auditor"), *args], env=no_pyspark_env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, (args, proc.stderr)
    # and with pyspark installed, the daemon and the CLI do not load it
    probe = "import sys, auditor.daemon.service, auditor.cli; sys.exit('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], timeout=120).returncode == 0
