"""What the agent learns from the bookie itself: its directories from bk_server.conf, its id from the cookie
(`<ledgerDir>/current/VERSION`, the text form of BookKeeper's Cookie: `bookieHost: "<id>"`).

Only DbLedgerStorage with the default entry logger is served: SortedLedgerStorage answers
GET_LIST_OF_ENTRIES_OF_LEDGER itself (the auditor asks the bookie), and the direct-I/O entry logger writes
another file format. Anything else is refused at start, with the key named (fail closed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from auditor.errors import ConfigError
from auditor.settings.properties import parse_properties

DB_STORAGE = "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage"
_COOKIE_HOST = re.compile(r'^bookieHost:\s*"([^"]+)"', re.M)


@dataclass(frozen=True, slots=True)
class BookieLayout:
    ledger_dirs: tuple[Path, ...]
    index_dirs: tuple[Path, ...]  # one per ledger directory, paired by position
    bookie_id: str = ""


def _dirs(text: str) -> tuple[Path, ...]:
    return tuple(Path(p.strip()) for p in text.split(",") if p.strip())


def layout(ledger_dirs: tuple[Path, ...], index_dirs: tuple[Path, ...] = (), bookie_id: str = "") -> BookieLayout:
    """Pair the directories as DbLedgerStorage does (index directories default to the ledger directories;
    both lists must be as long), and read the bookie id from a cookie when none is given."""
    if not ledger_dirs:
        raise ConfigError("agent: no ledger directory (--ledger-dirs, or ledgerDirectories in --bookie-conf)")
    index = index_dirs or ledger_dirs
    if len(index) != len(ledger_dirs):
        raise ConfigError(
            f"agent: {len(ledger_dirs)} ledger directories but {len(index)} index directories "
            "(DbLedgerStorage pairs them one to one)"
        )
    return BookieLayout(ledger_dirs, index, bookie_id or cookie_bookie_id(ledger_dirs))


def cookie_bookie_id(ledger_dirs: tuple[Path, ...]) -> str:
    """The bookie id the bookie's cookie states, "" when no cookie can be read."""
    for d in ledger_dirs:
        try:
            text = (d / "current" / "VERSION").read_text("utf-8", "replace")
        except OSError:
            continue
        m = _COOKIE_HOST.search(text)
        if m:
            return m.group(1)
    return ""


def from_bookie_conf(path: Path) -> BookieLayout:
    """The layout of the bookie whose configuration is `path`; ConfigError naming the file and key."""
    try:
        props = parse_properties(path.read_text("utf-8"))
    except OSError as exc:
        raise ConfigError(f"agent: --bookie-conf {path}: {exc.strerror or exc}") from None
    storage = props.get("ledgerStorageClass", "org.apache.bookkeeper.bookie.SortedLedgerStorage").strip()
    if storage != DB_STORAGE:
        raise ConfigError(
            f"agent: {path}: ledgerStorageClass={storage}: the agent serves DbLedgerStorage only "
            "(SortedLedgerStorage answers entry lists itself)"
        )
    if props.get("dbStorage_directIOEntryLogger", "false").strip().lower() == "true":
        raise ConfigError(
            f"agent: {path}: dbStorage_directIOEntryLogger=true: the direct-I/O entry log format is not read"
        )
    ledgers = _dirs(props.get("ledgerDirectories", ""))
    if not ledgers:
        raise ConfigError(f"agent: {path}: ledgerDirectories is not set")
    explicit = props.get("bookieId", "").strip()
    return layout(ledgers, _dirs(props.get("indexDirectories", "")), explicit)
