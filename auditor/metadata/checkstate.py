"""bk-auditor's own bookkeeping in ZooKeeper: when each check last succeeded and where a running scan is.

Kept under `<ledgersRoot>/bk-auditor/checks/<check>` (beside our election, never in Java's znodes, so
the Java auditor's own schedule is untouched). JSON: {"lastSuccessMs", "runStartedMs", "cursor"} where
the cursor is the qualified name of the last ledger finished in ascending order, so that a new leader
resumes a long scan where the old one stopped. Every write is guarded by the leader's vote.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from posixpath import join

from auditor.durability.ids import LedgerId

from .errors import CorruptZnodeError
from .interfaces import WriteGuard
from .zkstore import ZooKeeperMetadataStore


@dataclass(frozen=True)
class CheckState:
    last_success_ms: int | None = None
    run_started_ms: int | None = None
    cursor: LedgerId | None = None

    def to_json(self) -> bytes:
        return json.dumps({"lastSuccessMs": self.last_success_ms, "runStartedMs": self.run_started_ms,
                           "cursor": self.cursor.qualified_name if self.cursor else None}).encode()

    @classmethod
    def parse(cls, data: bytes, path: str) -> "CheckState":
        try:
            d = json.loads(data.decode("utf-8"))
            cursor = d.get("cursor")
            return cls(d.get("lastSuccessMs"), d.get("runStartedMs"), LedgerId.parse(cursor) if cursor else None)
        except (ValueError, AttributeError, TypeError) as exc:
            raise CorruptZnodeError(path, f"bk-auditor check state is not valid JSON: {exc}") from None


class CheckStateStore:
    def __init__(self, store: ZooKeeperMetadataStore, base: str | None = None) -> None:
        self.store = store
        self.base = (base or join(store.root, "bk-auditor", "checks")).rstrip("/")

    def path(self, check: str) -> str:
        return join(self.base, check)

    async def read(self, check: str) -> CheckState:
        path = self.path(check)
        got = await self.store._get(path)
        if got is None or not got[0]:
            return CheckState()
        return CheckState.parse(got[0], path)

    async def write(self, check: str, state: CheckState, guard: WriteGuard) -> None:
        await self.store.put(self.path(check), state.to_json(), guard)
