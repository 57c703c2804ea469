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

from kazoo.exceptions import KazooException

from auditor.durability.ids import LedgerId

from .errors import CorruptZnodeError, MetadataError
from .interfaces import WriteGuard
from .zkownstate import OwnZnodes


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
        cursor = doc.get("cursor")
        if cursor is not None:
            if not isinstance(cursor, str):
                raise CorruptZnodeError(path, f"bk-auditor check state: cursor is not a ledger id: {_short(cursor)}")
            try:
                cursor = LedgerId.parse(cursor)
            except ValueError as exc:  # LedgerIdError, or a number too long for int()
                raise CorruptZnodeError(path, f"bk-auditor check state: cursor is not a ledger id: {exc}") from None
        return cls(_millis(doc, "lastSuccessMs", path), _millis(doc, "runStartedMs", path), cursor)


MAX_MILLIS = 2**63 - 1  # a Java long, as System.currentTimeMillis() gives


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _millis(doc: dict[str, Any], key: str, path: str) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_MILLIS:
        raise CorruptZnodeError(path, f"bk-auditor check state: {key} is not a time in milliseconds: {_short(value)}")
    return value


def parse_own_json(data: bytes, path: str, what: str) -> Any:
    """The JSON document in one of our own znodes; CorruptZnodeError naming `path` for anything that is
    not UTF-8 JSON (including nesting too deep to parse)."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise CorruptZnodeError(path, f"{what} is not UTF-8 text") from None
    except ValueError as exc:
        raise CorruptZnodeError(path, f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise CorruptZnodeError(path, f"{what} is not valid JSON: nested too deeply") from None


class CheckStateStore:
    def __init__(self, store: OwnZnodes, base: str | None = None) -> None:
        self.store = store
        self.base = (base or join(store.own_subtree, "checks")).rstrip("/")

    def path(self, check: str) -> str:
        return join(self.base, check)

    async def read(self, check: str) -> CheckState:
        path = self.path(check)
        try:
            data = await self.store.read_own(path)
        except KazooException as exc:
            raise MetadataError(f"{path}: cannot read bk-auditor check state ({type(exc).__name__})") from exc
        if not data:
            return CheckState()
        return CheckState.parse(data, path)

    async def write(self, check: str, state: CheckState, guard: WriteGuard) -> None:
        await self.store.put(self.path(check), state.to_json(), guard)
