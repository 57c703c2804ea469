"""128-bit ledger ids: (scope id, ledger id).

Scope 0 is today's BookKeeper: a 63-bit ledger id. Both halves stay within 0 .. 2**63-1 so that each is a
valid Java long. The qualified name is 32 lower-case hex digits: 16 for the scope, 16 for the ledger id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from auditor.errors import DataError

from .javatext import shown

MAX_ID = 2**63 - 1
# ASCII digits only, matched over the whole text (Python's \d and int() also take other scripts' digits).
_HEX32 = re.compile(r"(?:0x)?([0-9a-fA-F]{32})")
_DEC = re.compile(r"[0-9]+")
_PAIR = re.compile(r"([0-9]+)[:/]([0-9]+)")
_MAX_DIGITS = len(str(MAX_ID))


class LedgerIdError(DataError):
    """A ledger id that is out of range or cannot be parsed."""


@dataclass(frozen=True, order=True, slots=True)
class LedgerId:
    scope: int
    ledger: int

    def __post_init__(self) -> None:
        scope, ledger = self.scope, self.ledger
        if type(scope) is int and type(ledger) is int and 0 <= scope <= MAX_ID and 0 <= ledger <= MAX_ID:
            return  # the usual case, decided without the loop below (ids are built for every entry read)
        for name, value in (("scope id", scope), ("ledger id", ledger)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise LedgerIdError(f"{name} must be an int, got {value!r}")
            if not 0 <= value <= MAX_ID:
                raise LedgerIdError(f"{name} {value} is outside 0..2^63-1")

    @classmethod
    def of(cls, ledger: int, scope: int = 0) -> LedgerId:
        return cls(scope, ledger)

    @property
    def qualified_name(self) -> str:
        """32 hex digits: scope (16) then ledger id (16)."""
        return f"{self.scope:016x}{self.ledger:016x}"

    @property
    def is_legacy(self) -> bool:
        """True for scope 0, the ledgers every BookKeeper release knows."""
        return self.scope == 0

    @classmethod
    def parse(cls, text: str | int) -> LedgerId:
        """Accept a decimal ledger id (scope 0), `scope:ledger` in decimal, or a 32-hex qualified name."""
        if isinstance(text, int):
            return cls(0, text)
        try:
            return cls._parse_text(text)
        except LedgerIdError as exc:
            if shown(text) in str(exc):
                raise
            raise LedgerIdError(f"ledger id {shown(text)}: {exc}") from None

    @classmethod
    def _parse_text(cls, text: str) -> LedgerId:
        s = text.strip()
        if m := _HEX32.fullmatch(s):
            value = int(m.group(1), 16)
            return cls(value >> 64, value & (2**64 - 1))
        if _DEC.fullmatch(s):
            return cls(0, _decimal(s, "ledger id", text))
        if m := _PAIR.fullmatch(s):
            return cls(_decimal(m.group(1), "scope id", text), _decimal(m.group(2), "ledger id", text))
        raise LedgerIdError(
            f"cannot parse ledger id {shown(text)}: expected a decimal id, 'scope:ledger', or 32 hex digits"
        )

    def __str__(self) -> str:
        return str(self.ledger) if self.scope == 0 else self.qualified_name


def next_id(lid: LedgerId) -> LedgerId | None:
    """The id right after `lid` in id order (scope 0's ledgers first, then scope 1's, ...); None after the
    very last id. Where a scan resumes after a cursor."""
    if lid.ledger < MAX_ID:
        return LedgerId(lid.scope, lid.ledger + 1)
    return LedgerId(lid.scope + 1, 0) if lid.scope < MAX_ID else None


def _decimal(digits: str, name: str, text: str) -> int:
    # Too many digits is out of range, said before int() runs (it refuses > 4300 digits with a ValueError).
    if len(digits.lstrip("0")) > _MAX_DIGITS:
        raise LedgerIdError(f"{name} in {shown(text)} is outside 0..2^63-1")
    return int(digits)
