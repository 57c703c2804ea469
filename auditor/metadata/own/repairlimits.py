"""The repair role's run-time limits, set by an operator through the auditor daemon's admin API
(`bk-auditor repair-limits`) and read by every repair worker before each ledger, so load can be turned
down (or up) without restarting anything. A value left unset is the worker's own setting.

Kept at `<ledgersRoot>/bk-auditor/repair/limits` (our own subtree), written by the daemon's leader only
(the write is guarded by its election). JSON: {"bytesPerSecond", "entriesInFlight",
"entriesInFlightPerBookie", "setBy", "setAtMs"}; each limit a positive number or null. Parsing is strict:
a node that is not one is `CorruptZnodeError` naming it, and workers then keep their own settings.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from posixpath import join
from typing import Any

from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.own.recipe import MAX_MILLIS, DocumentSchema, OwnDocument, OwnZnodeStore, parse_own_json

COUNT_LIMIT = 1_000_000  # entries in flight: anything larger is not a limit anyone means


@dataclass(frozen=True, slots=True)
class RepairLimits:
    bytes_per_second: float | None = None  # entry bytes one worker sends per second
    entries_in_flight: int | None = None  # per copy
    entries_in_flight_per_bookie: int | None = None  # per target bookie, over a worker's lanes
    set_by: str = ""
    set_at_ms: int = 0

    @property
    def empty(self) -> bool:
        return (
            self.bytes_per_second is None
            and self.entries_in_flight is None
            and self.entries_in_flight_per_bookie is None
        )

    def check(self) -> None:
        """ValueError naming the limit that is not positive (or not finite)."""
        if self.bytes_per_second is not None and not (
            math.isfinite(self.bytes_per_second) and self.bytes_per_second > 0
        ):
            raise ValueError(f"bytes per second must be a positive number, got {self.bytes_per_second}")
        for name, value in (
            ("entries in flight", self.entries_in_flight),
            ("entries in flight per bookie", self.entries_in_flight_per_bookie),
        ):
            if value is not None and not 1 <= value <= COUNT_LIMIT:
                raise ValueError(f"{name} must be between 1 and {COUNT_LIMIT}, got {value}")

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "bytesPerSecond": self.bytes_per_second,
                "entriesInFlight": self.entries_in_flight,
                "entriesInFlightPerBookie": self.entries_in_flight_per_bookie,
                "setBy": self.set_by[:200],
                "setAtMs": self.set_at_ms,
            }
        ).encode()

    @classmethod
    def parse(cls, data: bytes, path: str) -> RepairLimits:
        doc = parse_own_json(data, path, "bk-auditor repair limits")
        if not isinstance(doc, dict):
            raise CorruptZnodeError(path, f"bk-auditor repair limits are not a JSON object but {type(doc).__name__}")
        rate = doc.get("bytesPerSecond")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float)):
            raise CorruptZnodeError(path, "bk-auditor repair limits: bytesPerSecond is not a number or null")
        set_by, set_at = doc.get("setBy", ""), doc.get("setAtMs", 0)
        if not isinstance(set_by, str) or len(set_by) > 200:
            raise CorruptZnodeError(path, "bk-auditor repair limits: setBy is not a short text")
        if isinstance(set_at, bool) or not isinstance(set_at, int) or not 0 <= set_at <= MAX_MILLIS:
            raise CorruptZnodeError(path, "bk-auditor repair limits: setAtMs is not a time in milliseconds")
        limits = cls(
            None if rate is None else float(rate),
            _count(doc, "entriesInFlight", path),
            _count(doc, "entriesInFlightPerBookie", path),
            set_by,
            set_at,
        )
        try:
            limits.check()
        except ValueError as exc:
            raise CorruptZnodeError(path, f"bk-auditor repair limits: {exc}") from None
        return limits


def _count(doc: dict[str, Any], key: str, path: str) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptZnodeError(path, f"bk-auditor repair limits: {key} is not a whole number or null")
    return value


def _serialise(limits: RepairLimits) -> bytes:
    limits.check()  # ValueError before anything is written: only limits a worker can apply are kept
    return limits.to_json()


REPAIR_LIMITS: DocumentSchema[RepairLimits] = DocumentSchema("bk-auditor repair limits", RepairLimits.parse, _serialise)


class RepairLimitsNode(OwnDocument[RepairLimits]):
    """The limits znode."""

    def __init__(self, store: OwnZnodeStore) -> None:
        super().__init__(store, join(store.own_subtree, "repair", "limits"), REPAIR_LIMITS)

    async def get(self) -> RepairLimits:
        """The limits set, or none set (an empty `RepairLimits`); CorruptZnodeError if it is not one."""
        got = await super().get()
        return RepairLimits() if got is None else got
