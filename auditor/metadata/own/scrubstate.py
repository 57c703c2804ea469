"""Where the digest scrub is, kept so that a new leader (or a restarted daemon) resumes its pass.

Kept at `<ledgersRoot>/bk-auditor/scrub/state` (our own subtree, never Java's znodes), written by the
leader only, each write guarded by its vote, every few ledgers or seconds of a pass. JSON: the fields of
`auditor.durability.scrub.ScrubProgress` in camelCase, times in epoch milliseconds, the cursor a ledger
id's qualified name. Parsing is strict: anything else is `CorruptZnodeError` naming the znode, which the
daemon reports once and replaces with a fresh state (the scrub then starts a new pass).
"""

from __future__ import annotations

import json
from posixpath import join
from typing import Any

from auditor.durability.scrub import ScrubProgress
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.own.recipe import (
    MAX_MILLIS,
    DocumentSchema,
    OwnDocument,
    OwnZnodeStore,
    parse_own_cursor,
    parse_own_json,
)

WHAT = "bk-auditor scrub state"

_COUNTS = ("ledgers", "copies", "entries", "bytes", "unverifiedEntries", "corrupt", "passes")
_TIMES = ("passStartedMs", "previousStartedMs", "previousFinishedMs", "firstStartedMs")
_LIMIT = 2**63 - 1


def scrub_to_json(p: ScrubProgress) -> bytes:
    return json.dumps(
        {
            "passStartedMs": p.pass_started_ms,
            "cursor": p.cursor.qualified_name if p.cursor is not None else None,
            "ledgers": p.ledgers,
            "copies": p.copies,
            "entries": p.entries,
            "bytes": p.bytes,
            "unverifiedEntries": p.unverified_entries,
            "corrupt": p.corrupt,
            "plannedEntries": p.planned_entries,
            "previousStartedMs": p.previous_started_ms,
            "previousFinishedMs": p.previous_finished_ms,
            "firstStartedMs": p.first_started_ms,
            "passes": p.passes,
        },
        sort_keys=True,
    ).encode()


def parse_scrub(data: bytes, path: str) -> ScrubProgress:
    doc = parse_own_json(data, path, WHAT)
    if not isinstance(doc, dict):
        raise CorruptZnodeError(path, f"{WHAT} is not a JSON object but {type(doc).__name__}")
    counts = {k: _number(doc, k, path, _LIMIT, required=True) for k in _COUNTS}
    planned = _number(doc, "plannedEntries", path, _LIMIT, required=False)
    times = {k: _number(doc, k, path, MAX_MILLIS, required=False) for k in _TIMES}
    cursor = parse_own_cursor(doc, path, WHAT)
    return ScrubProgress(
        pass_started_ms=times["passStartedMs"],
        cursor=cursor,
        ledgers=_required(counts["ledgers"]),
        copies=_required(counts["copies"]),
        entries=_required(counts["entries"]),
        bytes=_required(counts["bytes"]),
        unverified_entries=_required(counts["unverifiedEntries"]),
        corrupt=_required(counts["corrupt"]),
        planned_entries=planned,
        previous_started_ms=times["previousStartedMs"],
        previous_finished_ms=times["previousFinishedMs"],
        first_started_ms=times["firstStartedMs"],
        passes=_required(counts["passes"]),
    )


def _required(value: int | None) -> int:
    assert value is not None  # `_number(..., required=True)` never returns None
    return value


def _number(doc: dict[str, Any], key: str, path: str, limit: int, *, required: bool) -> int | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise CorruptZnodeError(path, f"{WHAT}: {key} is not a non-negative integer")
    return value


SCRUB_STATE: DocumentSchema[ScrubProgress] = DocumentSchema(
    WHAT, parse_scrub, scrub_to_json, empty_is_absent=True, read_failure_is_metadata_error=True
)


class ScrubStateStore(OwnDocument[ScrubProgress]):
    """The scrub's progress document (a read failing for ZooKeeper's reasons is a MetadataError)."""

    def __init__(self, store: OwnZnodeStore, path: str | None = None) -> None:
        super().__init__(store, path or join(store.own_subtree, "scrub", "state"), SCRUB_STATE)
