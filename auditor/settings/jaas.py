"""JAAS login configuration files (`java.security.auth.login.config`), read as Java's ConfigFile reads
them: sections `Name { module flag key=value ...; ... };`, `//` and `/* */` comments, quoted or bare
values. Only what a ZooKeeper client needs is interpreted (`zksecurity`); this module just parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from auditor.errors import ConfigError

FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_TOKEN = re.compile(
    r"""\s+|//[^\n]*|/\*.*?\*/|(?P<str>"(?:[^"\\]|\\.)*")|(?P<sym>[{};=])|(?P<word>[^\s{};="/]+)""", re.S
)


class JaasError(ConfigError):
    """A JAAS file that cannot be read or parsed; names the file and line."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    name: str  # the login module class
    flag: str
    options: dict[str, str] = field(default_factory=dict, repr=False)  # holds the password: never printed


def parse_jaas(text: str, where: str) -> dict[str, list[LoginModule]]:
    """{section name: its login modules}. JaasError (naming `where` and the line) when malformed."""
    tokens: list[tuple[str, str, int]] = []  # (kind, text, line)
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise JaasError(f"{where}: line {line}: unexpected {text[pos]!r}")
        if m.lastgroup == "str":
            tokens.append(("value", re.sub(r"\\(.)", r"\1", m.group("str")[1:-1], flags=re.S), line))
        elif m.lastgroup in ("sym", "word"):
            tokens.append((m.lastgroup, m.group(m.lastgroup), line))
        line += m.group(0).count("\n")
        pos = m.end()
    sections: dict[str, list[LoginModule]] = {}
    i = 0

    def take(kind: str, what: str) -> str:
        """The next token, which must be of `kind` ("word", "value", or a symbol's own text)."""
        nonlocal i
        if i >= len(tokens):
            raise JaasError(f"{where}: unexpected end of file (expected {what})")
        k, t, line = tokens[i]
        ok = k in ("value", "word") if kind == "value" else (k == kind if kind == "word" else t == kind)
        if not ok:
            raise JaasError(f"{where}: line {line}: expected {what}, got {t!r}")
        i += 1
        return t

    while i < len(tokens):
        name = take("word", "a section name")
        take("{", "'{'")
        modules: list[LoginModule] = []
        while i < len(tokens) and tokens[i][1] != "}":
            module = take("word", "a login module class")
            flag_line = tokens[i][2] if i < len(tokens) else 0
            flag = take("word", "a control flag").lower()
            if flag not in FLAGS:
                raise JaasError(f"{where}: line {flag_line}: control flag {flag!r} is not one of {sorted(FLAGS)}")
            options: dict[str, str] = {}
            while i < len(tokens) and tokens[i][1] != ";":
                key = take("word", "an option name")
                take("=", "'='")
                options[key] = take("value", "an option value")
            take(";", "';'")
            modules.append(LoginModule(module, flag, options))
        take("}", "'}'")
        take(";", "';'")
        if name in sections:
            raise JaasError(f"{where}: section {name} is defined twice")
        sections[name] = modules
    return sections


def read_jaas(path: Path, setting: str) -> dict[str, list[LoginModule]]:
    where = f"{setting}: {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise JaasError(f"{where}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_jaas(text, where)
