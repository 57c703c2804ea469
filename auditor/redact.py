"""Configured secrets that no log line may show, whoever writes the line.

`repr=False` keeps a password out of our own objects' repr, but a library can still print one: kazoo logs
every request it sends at debug level, the ZooKeeper `digest` login (`Auth(..., auth='user:password')`)
included. So every object that takes a configured secret (ZooKeeper logins and key stores, bookie TLS
passwords, the repair role's recovery password) registers it here with `hide`, and the logging handler
(`auditor.logging`) passes every rendered line through `scrub`. A ledger's own password (from its
metadata) is not registered: one per ledger, it is only ever kept out of reprs.

Imports nothing of ours, so every layer may register what it holds.
"""

from __future__ import annotations

import json
import threading

HIDDEN = "<hidden>"
MIN_LENGTH = 3  # shorter values are not scrubbed: they would garble every line (and are no secret)

_lock = threading.Lock()
_forms: tuple[str, ...] = ()  # every hidden text, and its JSON-escaped form, longest first


def hide(value: str | bytes | None) -> None:
    """From now on, `value` is replaced by <hidden> in every log line of this process."""
    global _forms
    if value is None:
        return
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if len(text) < MIN_LENGTH:
        return
    escaped = json.dumps(text)[1:-1]  # as a JSON log line spells it
    with _lock:
        _forms = tuple(sorted({*_forms, text, escaped}, key=len, reverse=True))


def forget() -> None:
    """Nothing hidden any more (tests: one test's secrets must not garble the next one's lines)."""
    global _forms
    with _lock:
        _forms = ()


def scrub(line: str) -> str:
    """`line` with every hidden value replaced."""
    for form in _forms:
        if form in line:
            line = line.replace(form, HIDDEN)
    return line
