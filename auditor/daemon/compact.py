"""Informational whole-ledger findings, kept compactly for the daemon's finding store; and the keys a run saw.

A WQ == AQ ledger has one informational `risky_quorum` finding, and Pulsar's default E2/WQ2/AQ2 makes every
ledger one, so a daemon over a million ledgers holds a million of them. Kept as a `Finding` and its record
each, they took about 1.1 KB (tracemalloc, before this module): at a million ledgers, more than the helm
chart's 512 MiB. Here what such findings share is kept once, as a `Shape` (the finding without its ledger and
Pulsar context, and the text around the ledger's id in its message), and each ledger keeps a `Sighting`: its
shape, its Pulsar context (one shared copy per distinct context) and its sighting times. A finding comes back
from its shape and ledger field for field, message included (the shape is made from the very text it
rebuilds; `tests/unit/daemon/test_compact.py`).

`SeenKeys` is the set of finding keys a run reported, with whole-ledger keys of scope-0 ledgers kept as
64-bit ints per category (`IntSet`, about 9 bytes each where a key tuple and its text took about 200).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from auditor.durability.findings import Finding
from auditor.durability.ids import LedgerId, LedgerIdError
from auditor.durability.intset import IntSet

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


def whole_ledger_key(key: Hashable) -> tuple[str, LedgerId] | None:
    """(category, ledger) when `key` is a `Finding.dedup_key()` of a whole-ledger finding; else None."""
    if type(key) is not tuple or len(key) != 5 or type(key[1]) is not str or key[2:] != (None, None, None):
        return None
    try:
        return key[0], LedgerId.parse(key[1])
    except LedgerIdError:
        return None  # not a key the store made


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


class Sighting:
    """One ledger's informational finding of one category: its shape, Pulsar context and sighting times."""

    __slots__ = ("shape", "pulsar", "first_seen", "last_seen", "times_seen")

    def __init__(
        self, shape: Shape, pulsar: Mapping[str, str] | None, first_seen: float, last_seen: float, times_seen: int
    ) -> None:
        self.shape = shape
        self.pulsar = pulsar
        self.first_seen = first_seen
        self.last_seen = last_seen
        self.times_seen = times_seen


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
        ledger = finding.ledger
        if (
            finding.actionable
            or ledger is None
            or finding.segment_index is not None
            or finding.bookie is not None
            or finding.entry_id is not None
        ):
            return None
        text, message = str(ledger), finding.message
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


class SeenKeys:
    """A set of finding keys (`Finding.dedup_key()`), compact for whole-ledger keys of scope-0 ledgers."""

    __slots__ = ("_ledgers", "_other")

    def __init__(self) -> None:
        self._ledgers: dict[str, IntSet] = {}  # per category: scope-0 ledgers with a whole-ledger key
        self._other: set[Hashable] = set()

    def add(self, key: Hashable) -> None:
        whole = whole_ledger_key(key)
        if whole is not None and whole[1].scope == 0:
            category, ledger = whole
            ints = self._ledgers.get(category)
            if ints is None:
                ints = self._ledgers[category] = IntSet()
            ints.add(ledger.ledger)
        else:
            self._other.add(key)

    def has_ledger(self, category: str, key: LedgerKey) -> bool:
        """Whether the whole-ledger key of `category` and ledger `key` was seen."""
        if type(key) is int:
            ints = self._ledgers.get(category)
            return ints is not None and key in ints
        assert isinstance(key, LedgerId)
        return (category, key.qualified_name, None, None, None) in self._other

    def __contains__(self, key: object) -> bool:
        whole = whole_ledger_key(key) if isinstance(key, Hashable) else None
        if whole is not None and whole[1].scope == 0:
            return self.has_ledger(whole[0], whole[1].ledger)
        return key in self._other

    def __len__(self) -> int:
        return len(self._other) + sum(len(ints) for ints in self._ledgers.values())

    def __iter__(self) -> Iterator[Hashable]:
        yield from self._other
        for category, ints in self._ledgers.items():
            for ledger in ints:
                yield (category, LedgerId(0, ledger).qualified_name, None, None, None)

    def counts(self) -> dict[str, int]:
        """Keys per category (a key's first element)."""
        out: dict[str, int] = {c: len(ints) for c, ints in self._ledgers.items()}
        for key in self._other:
            category: Any = key[0] if type(key) is tuple and key else None
            if isinstance(category, str):
                out[category] = out.get(category, 0) + 1
        return out
