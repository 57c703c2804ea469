"""bk-auditor's own bookkeeping in ZooKeeper: when each check last succeeded and where a running scan is.

Kept under `<ledgersRoot>/bk-auditor/checks/<check>` (beside our election, never in Java's znodes, so
the Java auditor's own schedule is untouched). JSON: {"lastSuccessMs", "runStartedMs", "cursor"} where
the cursor is the qualified name of the last ledger finished in ascending order, so that a new leader
resumes a long scan where the old one stopped. Every write is guarded by the leader's vote.

Parsing is strict (a JSON object; times are non-negative integers of milliseconds; the cursor a ledger
id): anything else is `CorruptZnodeError` naming the znode, which the daemon reports once and replaces
with a fresh state. A read that fails for another reason (e.g. no permission) is a `MetadataError`
naming the znode too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from posixpath import join
from typing import Any

from auditor.durability.ids import LedgerId
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.own.recipe import (
    MAX_MILLIS,
    DocumentSchema,
    OwnDirectory,
    OwnZnodeStore,
    parse_own_cursor,
    parse_own_json,
    short_repr,
)


@dataclass(frozen=True)
class CheckState:
    last_success_ms: int | None = None
    run_started_ms: int | None = None
    cursor: LedgerId | None = None

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "lastSuccessMs": self.last_success_ms,
                "runStartedMs": self.run_started_ms,
                "cursor": self.cursor.qualified_name if self.cursor else None,
            }
        ).encode()

    @classmethod
    def parse(cls, data: bytes, path: str) -> CheckState:
        doc = parse_own_json(data, path, "bk-auditor check state")
        if not isinstance(doc, dict):
            raise CorruptZnodeError(path, f"bk-auditor check state is not a JSON object but {type(doc).__name__}")
        cursor = parse_own_cursor(doc, path, "bk-auditor check state")
        return cls(_millis(doc, "lastSuccessMs", path), _millis(doc, "runStartedMs", path), cursor)


def _millis(doc: dict[str, Any], key: str, path: str) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_MILLIS:
        raise CorruptZnodeError(
            path, f"bk-auditor check state: {key} is not a time in milliseconds: {short_repr(value)}"
        )
    return value


CHECK_STATE: DocumentSchema[CheckState] = DocumentSchema(
    "bk-auditor check state",
    CheckState.parse,
    CheckState.to_json,
    empty_is_absent=True,
    read_failure_is_metadata_error=True,
)


class CheckStateStore(OwnDirectory[str, CheckState]):
    """The check states, one per check (a read failing for ZooKeeper's reasons is a MetadataError)."""

    def __init__(self, store: OwnZnodeStore, base: str | None = None) -> None:
        super().__init__(store, base or join(store.own_subtree, "checks"), CHECK_STATE, str)
