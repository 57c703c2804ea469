"""The one reader of Java `.properties` text (bk_server.conf, bookkeeper.conf), as Java's
`Properties.load` reads it.

Kept over jproperties/javaproperties: 4.5-10x faster and the only one naming the line of an error
(bench/bench_properties.py, docs/benchmarks.md)."""

from __future__ import annotations

import re

from auditor.durability.javatext import JAVA_TRIM
from auditor.errors import ConfigError


class PropertiesError(ConfigError):
    """A `.properties` text Java's Properties.load would refuse; the message names the line."""


def parse_properties(text: str) -> dict[str, str]:
    """Java `.properties` / bk_server.conf: `key=value`, `key: value` or `key value`; `#`/`!` comments;
    a trailing backslash continues a line; common escapes. A repeated key keeps its last value.
    PropertiesError (naming the line) for a malformed `\\uXXXX` escape, as Java refuses it."""
    out: dict[str, str] = {}
    logical: list[tuple[int, str]] = []  # (first physical line number, text)
    buf, start = "", 0
    for number, raw in enumerate(_LINES.split(text), 1):
        line = raw.lstrip(JAVA_TRIM)
        if not buf:
            start = number
            if not line or line[0] in "#!":
                continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            buf += line[:-1]
            continue
        logical.append((start, buf + line))
        buf = ""
    if buf:
        logical.append((start, buf))
    for number, line in logical:
        m = re.match(r"((?:\\.|[^=:\s\\])+)\s*(?:[=:]\s*|\s+|$)(.*)$", line, re.DOTALL)
        if not m:
            continue
        try:
            out[_unescape(m.group(1))] = _unescape(m.group(2).rstrip())
        except PropertiesError as exc:
            raise PropertiesError(f"line {number}: {exc}") from None
    return out


# Lines end at \n, \r or \r\n (Java's line reader); leading white space goes as String.trim() removes it.
_LINES = re.compile(r"\r\n|\r|\n")


def _unescape(s: str) -> str:
    def rep(m: re.Match[str]) -> str:
        c = m.group(1)
        if c == "u":
            bad = s[m.start() : m.start() + 6]
            raise PropertiesError(f"malformed \\uxxxx escape {bad!r} (needs four hex digits)")
        if c.startswith("u"):
            return chr(int(c[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", rep, s, flags=re.DOTALL)
