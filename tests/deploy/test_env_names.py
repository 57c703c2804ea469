"""Every BKAUDIT_* variable the chart, the manifests and the docs set is one the daemon accepts: an unknown
one stops the daemon at start (auditor.settings.origins.unknown_variables)."""

from __future__ import annotations

import re

from auditor.settings.clientenv import CLI_VARIABLES
from auditor.settings.load import ENV_ADMIN_ADDRESS, ENV_CONFIG_FILE
from auditor.settings.origins import unknown_variables
from tests.deploy.artifacts import ROOT

_VARIABLE = re.compile(r"\bBKAUDIT_[A-Z0-9_]*[A-Z0-9]")


def test_every_variable_the_deployment_and_docs_set_is_accepted() -> None:
    files = [
        *(ROOT / "helm").rglob("*"),
        *(ROOT / "deploy").rglob("*"),
        *(ROOT / "docs").glob("*.md"),
        ROOT / "README.md",
    ]
    named = {m.group(0) for f in files if f.is_file() for m in _VARIABLE.finditer(f.read_text(errors="replace"))}
    assert "BKAUDIT_SCHEDULE__WINDOWS" in named  # the scan sees the chart
    # Deliberately wrong names shown in the docs' error examples.
    examples = {"BKAUDIT_RECHECK__ATTEMPT"}
    bad = unknown_variables((ENV_CONFIG_FILE, ENV_ADMIN_ADDRESS, *CLI_VARIABLES), {n: "x" for n in named - examples})
    assert bad == []
