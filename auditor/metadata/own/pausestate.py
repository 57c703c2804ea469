"""The operator's pause, cluster-wide: `<root>/bk-auditor/pause`, so that it survives a restart and a
failover (a new leader reads it before it starts any check). Written by the leader only, when an operator
pauses or resumes through its admin API; every replica follows it.

JSON: {"paused": bool, "reason": text, "by": who paused (the daemon that took the request), "sinceMs"}.
No znode: not paused. Parsing is strict (`CorruptZnodeError` naming the znode).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from posixpath import join

from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.own.recipe import MAX_MILLIS, DocumentSchema, OwnDocument, OwnZnodeStore, parse_own_json

TEXT_MAX = 500


@dataclass(frozen=True, slots=True)
class PauseState:
    paused: bool = False
    reason: str = ""
    by: str = ""
    since_ms: int = 0

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "paused": self.paused,
                "reason": self.reason[:TEXT_MAX],
                "by": self.by[:TEXT_MAX],
                "sinceMs": self.since_ms,
            }
        ).encode()

    @classmethod
    def parse(cls, data: bytes, path: str) -> PauseState:
        what = "bk-auditor pause"
        doc = parse_own_json(data, path, what)
        if not isinstance(doc, dict):
            raise CorruptZnodeError(path, f"{what} is not a JSON object but {type(doc).__name__}")
        paused, reason, by, since = doc.get("paused"), doc.get("reason", ""), doc.get("by", ""), doc.get("sinceMs", 0)
        if not isinstance(paused, bool):
            raise CorruptZnodeError(path, f"{what}: paused is not true or false")
        for key, value in (("reason", reason), ("by", by)):
            if not isinstance(value, str) or len(value) > TEXT_MAX:
                raise CorruptZnodeError(path, f"{what}: {key} is not a short text")
        if isinstance(since, bool) or not isinstance(since, int) or not 0 <= since <= MAX_MILLIS:
            raise CorruptZnodeError(path, f"{what}: sinceMs is not a time in milliseconds")
        return cls(paused, reason, by, since)


PAUSE: DocumentSchema[PauseState] = DocumentSchema(
    "bk-auditor pause", PauseState.parse, PauseState.to_json, empty_is_absent=True
)


class PauseNode(OwnDocument[PauseState]):
    """The pause znode."""

    def __init__(self, store: OwnZnodeStore) -> None:
        super().__init__(store, join(store.own_subtree, "pause"), PAUSE)

    async def get(self) -> PauseState:
        """The pause as set (not paused when there is none); CorruptZnodeError if it is not one."""
        got = await super().get()
        return PauseState() if got is None else got
