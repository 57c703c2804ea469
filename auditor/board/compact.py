"""Informational whole-ledger findings, kept compactly for the finding store (findings.py).

A WQ == AQ ledger has one informational `risky_quorum` finding, and Pulsar's default E2/WQ2/AQ2 makes every
ledger one, so a daemon over a million ledgers holds a million of them. Kept as a `Finding` and its record
each, they took about 1.1 KB (tracemalloc, before this module): at a million ledgers, more than the helm
chart's 512 MiB. Here what such findings share is kept once, as a `Shape` (the finding without its ledger and
Pulsar context, and the text around the ledger's id in its message), and each ledger keeps a `Sighting`: its
shape, its Pulsar context (one shared copy per distinct context) and its sighting times. A finding comes back
from its shape and ledger field for field, message included (the shape is made from the very text it
rebuilds; `tests/unit/board/test_compact.py`). The keys a run saw are a `FindingSummary`'s, which holds
a scope-0 ledger's whole-ledger key as its id in an `IntSet`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from auditor.durability.findings import Finding
from auditor.durability.ids import LedgerId

# Distinct shapes kept; past this, a new shape's findings are kept in full (messages that differ per ledger
# in more than its id would otherwise make one shape each).
SHAPES_MAX = 10_000
# Distinct Pulsar contexts shared; past this, a finding keeps its own.
PULSAR_MAX = 100_000

# Scope-0 ledgers are keyed by their int (28 bytes), others by their LedgerId.
LedgerKey = int | LedgerId


def ledger_key(ledger: LedgerId) -> LedgerKey:
    return ledger.ledger if ledger.scope == 0 else ledger


def ledger_of(key: LedgerKey) -> LedgerId:
    return LedgerId(0, key) if type(key) is int else key  # type: ignore[return-value]


@dataclass(frozen=True, slots=True, eq=False)
class Shape:
    """What informational findings of many ledgers share: the finding without ledger and Pulsar context,
    its message cut at the ledger's id (`template.message` the text before it), and the check."""

    template: Finding
    suffix: str | None  # the message's text after the ledger's id; None: the message does not name it
    check: str | None

    def finding(self, ledger: LedgerId, pulsar: Mapping[str, str] | None) -> Finding:
        t = self.template
        message = t.message if self.suffix is None else f"{t.message}{ledger}{self.suffix}"
        return t.copy_with(ledger=ledger, message=message, pulsar=pulsar)


@dataclass(slots=True, eq=False)
class Sighting:
    """One ledger's informational finding of one category: its shape, Pulsar context and sighting times."""

    shape: Shape
    pulsar: Mapping[str, str] | None
    first_seen: float
    last_seen: float
    times_seen: int


class CompactFindings:
    """Sightings per category and ledger, with the shapes and Pulsar contexts they share."""

    def __init__(self) -> None:
        self._sightings: dict[str, dict[LedgerKey, Sighting]] = {}
        self._shapes: dict[Hashable, list[Shape]] = {}  # by everything but the detail (not hashable)
        self._shape_count = 0
        self._pulsar: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}

    def __len__(self) -> int:
        return sum(len(per) for per in self._sightings.values())

    def shape_of(self, finding: Finding, check: str | None) -> Shape | None:
        """The shape `finding` takes; None when it is not kept compactly: above informational, not about one
        whole ledger, or a new shape past SHAPES_MAX."""
        if finding.actionable or not finding.whole_ledger:
            return None
        text, message = str(finding.ledger), finding.message
        at = message.find(text)
        prefix, suffix = (message, None) if at < 0 else (message[:at], message[at + len(text) :])
        template = finding.copy_with(ledger=None, message=prefix, pulsar=None)
        key = (template, suffix, check)
        shapes = self._shapes.get(key)
        if shapes is not None:
            for shape in shapes:
                if shape.template.detail == finding.detail:  # the detail is left out of the key's hash
                    return shape
        if self._shape_count >= SHAPES_MAX:
            return None
        shape = Shape(template, suffix, check)
        self._shapes.setdefault(key, []).append(shape)
        self._shape_count += 1
        return shape

    def shared_pulsar(self, pulsar: Mapping[str, str] | None) -> Mapping[str, str] | None:
        """One copy per distinct Pulsar context (a topic's ledgers share theirs)."""
        if not pulsar:
            return None
        key = tuple(pulsar.items())
        shared = self._pulsar.get(key)
        if shared is None:
            if len(self._pulsar) >= PULSAR_MAX:
                return pulsar
            shared = self._pulsar[key] = MappingProxyType(dict(key))
        return shared

    def get(self, category: str, key: LedgerKey) -> Sighting | None:
        per = self._sightings.get(category)
        return per.get(key) if per is not None else None

    def put(self, category: str, key: LedgerKey, sighting: Sighting) -> None:
        self._sightings.setdefault(category, {})[key] = sighting

    def pop(self, category: str, key: LedgerKey) -> Sighting | None:
        per = self._sightings.get(category)
        if per is None:
            return None
        sighting = per.pop(key, None)
        if not per:
            del self._sightings[category]
        return sighting

    def categories(self) -> list[str]:
        return list(self._sightings)

    def ledgers(self, category: str) -> dict[LedgerKey, Sighting]:
        """The category's sightings by ledger (the store's own dict: copy it before changing the store)."""
        return self._sightings.get(category, {})
