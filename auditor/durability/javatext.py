"""BookKeeper's text formats read the way Java reads them. Pure.

Numbers as Java's Integer.parseInt / Long.parseLong read them: an optional sign and digits, nothing else
(no spaces, no `_`, no `0x`), within the Java type's range. Python's int() is far more lenient
(whitespace, `1_0`, digits of every script, any size), so every number in outside data goes through
`java_int`. Java's parseInt also takes other scripts' decimal digits (`٧`); no BookKeeper writer emits
them and we refuse them (docs/spec-differences.md).
"""

from __future__ import annotations

import re

JAVA_TRIM = "".join(map(chr, range(33)))  # what Java's String.trim() removes: every char <= ' '
_NUMBER = re.compile(r"([+-]?)([0-9]+)")
_RANGES = {32: ("int", -(2**31), 2**31 - 1), 64: ("long", -(2**63), 2**63 - 1)}


def shown(text: str, limit: int = 24) -> str:
    """The input as quoted in an error message: short even for a huge input."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def java_int(text: str, bits: int = 32) -> int:
    """`text` as a Java int (bits=32) or long (bits=64); ValueError saying why not."""
    m = _NUMBER.fullmatch(text)
    if not m:
        raise ValueError(f"{shown(text)} is not a decimal number")
    kind, lo, hi = _RANGES[bits]
    if len(m.group(2).lstrip("0")) > 19:  # decided before int(), which refuses > 4300 digits
        raise ValueError(f"{shown(text)} is out of range for a Java {kind}")
    value = int(text)
    if not lo <= value <= hi:
        raise ValueError(f"{shown(text)} is out of range for a Java {kind}")
    return value


def java_split(text: str, sep: str) -> list[str]:
    """Java's String.split(sep) for a literal one-character separator: trailing empty fields are dropped
    (but "" stays [""])."""
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts
