"""One logger idiom across auditor/: `from auditor.logging import get_logger` and
`log = get_logger("auditor.<subject>")`, the name a literal (JSON lines carry it as `logger`; a module
moved keeps its name). Found by AST, so a new module gets the same idiom or fails here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "auditor"
LOGGING = PACKAGE / "logging.py"  # where structlog is configured, and `get_logger` made
LOGGER_NAMES = {"log", "logger", "_log", "_logger", "LOG", "LOGGER"}
OTHER_IDIOMS = {"get_logger", "wrap_logger", "getLogger"}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _is_our_name(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("auditor")


def problems_in(text: str, where: str) -> list[str]:
    tree = ast.parse(text, where)
    out: list[str] = []
    imported_get_logger = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "get_logger" for a in node.names):
            imported_get_logger = True
            if node.module != "auditor.logging":
                out.append(f"{where}:{node.lineno}: get_logger imported from {node.module}, not auditor.logging")
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name == "get_logger":
                if len(node.args) != 1 or node.keywords or not _is_our_name(node.args[0]):
                    out.append(f'{where}:{node.lineno}: get_logger takes one literal name, "auditor.<subject>"')
            elif name.rsplit(".", 1)[-1] in OTHER_IDIOMS:
                # Only other libraries' stdlib loggers may be looked up (to set their level) and the root.
                ours = (
                    name == "logging.getLogger"
                    and node.args
                    and (
                        _is_our_name(node.args[0])
                        or (isinstance(node.args[0], ast.Name) and node.args[0].id == "__name__")
                    )
                )
                if name != "logging.getLogger" or ours:
                    out.append(f"{where}:{node.lineno}: {name}(...): use get_logger from auditor.logging")
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in LOGGER_NAMES for t in node.targets):
            value = node.value
            if not (isinstance(value, ast.Call) and _dotted(value.func) == "get_logger"):
                out.append(f'{where}:{node.lineno}: a logger is made as `log = get_logger("auditor.<subject>")`')
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _dotted(n.func) == "get_logger"]
    if uses and not imported_get_logger:
        out.append(f"{where}: get_logger used without `from auditor.logging import get_logger`")
    return out


def test_every_module_gets_its_logger_one_way() -> None:
    modules = [p for p in sorted(PACKAGE.rglob("*.py")) if p != LOGGING and "_proto" not in p.parts]
    assert len(modules) > 50
    problems = [problem for p in modules for problem in problems_in(p.read_text(), str(p.relative_to(ROOT)))]
    assert problems == []


def test_the_check_sees_the_other_idioms() -> None:
    bad = {
        "import logging\nlog = logging.getLogger(__name__)\n": "logging.getLogger",
        'import structlog\nlog = structlog.get_logger("auditor.x")\n': "structlog.get_logger",
        'import structlog\nlog = structlog.stdlib.get_logger("auditor.x")\n': "structlog.stdlib.get_logger",
        "from auditor.logging import get_logger\nlog = get_logger(__name__)\n": "one literal name",
        'from structlog import get_logger\nlog = get_logger("auditor.x")\n': "not auditor.logging",
        'import logging\nlogging.getLogger("auditor.spark").info("x")\n': "logging.getLogger",
        'log = make("auditor.x")\n': "a logger is made as",
    }
    for text, problem in bad.items():
        found = problems_in(text, "probe.py")
        assert any(problem in p for p in found), (text, found)
    good = (
        'import logging\nfrom auditor.logging import get_logger\nlog = get_logger("auditor.x")\n'
        'logging.getLogger("kazoo").setLevel(logging.WARNING)\nlevel = logging.getLogger().level\n'
    )
    assert problems_in(good, "probe.py") == []
