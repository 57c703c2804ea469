"""Why a marked ledger is not being repaired: one record per blocked ledger, shared by every worker.

Kept under `<ledgersRoot>/bk-auditor/repair/blocked/<qualified name>` (our own subtree, never Java's
znodes), written by the worker that held the ledger's repair lock, guarded by that lock, and deleted by
the worker that repairs the ledger. So the backoff of an unrepairable ledger holds for every worker (N
workers do not retry it N times as often), the count of failures survives a worker's restart, and
`explain` and the auditor can say why a marked ledger stays marked.

JSON: {"reason", "detail", "failures", "blockedAtMs", "notBeforeMs", "holder"}. Parsing is strict; a
record that is not one is `CorruptZnodeError` naming the znode (readers skip it, the next write of that
ledger replaces it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from posixpath import join
from typing import Any

from auditor.durability.ids import LedgerId
from auditor.logging import get_logger
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.own.recipe import MAX_MILLIS, DocumentSchema, OwnDirectory, OwnZnodeStore, parse_own_json

log = get_logger("auditor.metadata.repairstate")

TEXT_LIMIT = 2000  # characters of reason/detail kept: a record stays small whatever a failure says


@dataclass(frozen=True, slots=True)
class RepairBlock:
    reason: str  # a BlockReason value or another short name (copy_failed, recheck_not_clean, ...)
    detail: str
    failures: int  # consecutive failed attempts, by any worker
    blocked_at_ms: int
    not_before_ms: int  # no worker takes the ledger again before this time
    holder: str  # the worker that made the last attempt

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "reason": self.reason[:TEXT_LIMIT],
                "detail": self.detail[:TEXT_LIMIT],
                "failures": self.failures,
                "blockedAtMs": self.blocked_at_ms,
                "notBeforeMs": self.not_before_ms,
                "holder": self.holder[:TEXT_LIMIT],
            }
        ).encode()

    @classmethod
    def parse(cls, data: bytes, path: str) -> RepairBlock:
        doc = parse_own_json(data, path, "bk-auditor repair record")
        if not isinstance(doc, dict):
            raise CorruptZnodeError(path, f"bk-auditor repair record is not a JSON object but {type(doc).__name__}")
        return cls(
            _text(doc, "reason", path),
            _text(doc, "detail", path),
            _count(doc, "failures", path),
            _millis(doc, "blockedAtMs", path),
            _millis(doc, "notBeforeMs", path),
            _text(doc, "holder", path),
        )


def _text(doc: dict[str, Any], key: str, path: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or len(value) > TEXT_LIMIT:
        raise CorruptZnodeError(path, f"bk-auditor repair record: {key} is not a text of at most {TEXT_LIMIT}")
    return value


def _count(doc: dict[str, Any], key: str, path: str) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**31 - 1:
        raise CorruptZnodeError(path, f"bk-auditor repair record: {key} is not a positive count")
    return value


def _millis(doc: dict[str, Any], key: str, path: str) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_MILLIS:
        raise CorruptZnodeError(path, f"bk-auditor repair record: {key} is not a time in milliseconds")
    return value


REPAIR_BLOCK: DocumentSchema[RepairBlock] = DocumentSchema(
    "bk-auditor repair record", RepairBlock.parse, RepairBlock.to_json
)


def _qualified_name(ledger_id: LedgerId) -> str:
    return ledger_id.qualified_name


class RepairBlocks(OwnDirectory[LedgerId, RepairBlock]):
    """The blocked-ledger records in ZooKeeper, one per ledger (named by its qualified name)."""

    def __init__(self, store: OwnZnodeStore, base: str | None = None) -> None:
        super().__init__(store, base or join(store.own_subtree, "repair", "blocked"), REPAIR_BLOCK, _qualified_name)
        self._logged: set[str] = set()  # unreadable records already logged by `readable`

    async def all(self) -> tuple[dict[LedgerId, RepairBlock], list[CorruptZnodeError]]:
        """Every readable record, and what was wrong with the others (a child that is not a ledger's
        qualified name, or not a record)."""
        out: dict[LedgerId, RepairBlock] = {}
        bad: list[CorruptZnodeError] = []
        for name in await self.names():
            path = join(self.base, name)
            try:
                lid = LedgerId.parse(name)
            except ValueError:
                bad.append(CorruptZnodeError(path, "bk-auditor repair record: the name is not a ledger id"))
                continue
            try:
                got = await self.get(lid)
            except CorruptZnodeError as exc:
                bad.append(exc)
                continue
            if got is not None:
                out[lid] = got
        return out, bad

    async def readable(self) -> dict[LedgerId, RepairBlock]:
        """`all()`'s readable records; each unreadable one is logged once (per instance), not at every
        look, and ignored: the next block of that ledger replaces it."""
        records, bad = await self.all()
        for exc in bad:
            if exc.path not in self._logged:
                self._logged.add(exc.path)
                log.warning("repair record unreadable: ignored: %s", exc)
        return records
