"""The check names and their aliases: plain data, so the CLI can list them in --help without importing
the checks themselves (and everything they import)."""

from __future__ import annotations

# scrutiny: closed ledgers: placement, every entry on its WQ bookies, markers
# ledger: all ledgers: read first/last (+ a sample) of each fragment, verify digests
# open: open ledgers: would a recovery now truncate acknowledged entries?
# references: Pulsar's listed ledgers against BookKeeper's: missing (deleted, still listed) and orphans
CHECK_NAMES: tuple[str, ...] = ("scrutiny", "ledger", "open", "references")

ALIASES: dict[str, str] = {
    "replicas": "scrutiny",
    "placement": "scrutiny",
    "ledgers": "ledger",
    "checkallledgers": "ledger",
    "open-ledgers": "open",
    "truncation": "open",
    "deletion": "references",
    "orphans": "references",
}


def checks_help() -> str:
    """One line for --help: the checks, their aliases, and `all`."""
    aliases = ", ".join(f"{a}={c}" for a, c in ALIASES.items())
    return f"Comma-separated checks: {', '.join(CHECK_NAMES)} (aliases {aliases}); empty or all = every check."
