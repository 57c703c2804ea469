"""The references check's memory: which ledgers Pulsar listed that the leader's last complete pass found
present, and when that pass started. A ledger found missing later is reported with that time as when
it was last seen (also by a one-shot `check`, and after a leader change).

Kept in `<ledgersRoot>/bk-auditor/references/seen` (our own subtree; written by the leader, guarded):
JSON {"passMs": <ms>, "ledgers": "<id ranges>"} with the ids as ascending ranges (`5-9,12`). When the
ranges would not fit a znode (`MAX_TEXT`), "ledgers" is null: the pass time is kept, no ledger is
claimed. Parsing is strict; anything else is `CorruptZnodeError` naming the znode (the reader then
knows nothing, and the next pass replaces it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from posixpath import join

from auditor.durability.ranges import RangeSet
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.own.recipe import MAX_MILLIS, DocumentSchema, OwnDocument, OwnZnodeStore, parse_own_json

MAX_TEXT = 900_000  # below ZooKeeper's default 1 MiB znode limit, with room for the rest
_RANGES = re.compile(r"(?:[0-9]{1,19}(?:-[0-9]{1,19})?(?:,[0-9]{1,19}(?:-[0-9]{1,19})?)*)?\Z")


@dataclass(frozen=True)
class SeenLedgers:
    pass_ms: int
    ledgers: RangeSet | None  # None: too many ranges to keep

    def last_seen(self, ledger_id: int) -> int | None:
        return self.pass_ms if self.ledgers is not None and ledger_id in self.ledgers else None

    def to_json(self) -> bytes:
        text = self.ledgers.to_text() if self.ledgers is not None else None
        if text is not None and len(text) > MAX_TEXT:
            text = None
        return json.dumps({"passMs": self.pass_ms, "ledgers": text}).encode()

    @classmethod
    def parse(cls, data: bytes, path: str) -> SeenLedgers:
        what = "bk-auditor references state"
        if len(data) > MAX_TEXT + 1000:
            raise CorruptZnodeError(path, f"{what} is {len(data)} bytes, more than written")
        doc = parse_own_json(data, path, what)
        if not isinstance(doc, dict) or set(doc) != {"passMs", "ledgers"}:
            raise CorruptZnodeError(path, f"{what} is not an object with passMs and ledgers")
        ms, text = doc["passMs"], doc["ledgers"]
        if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= MAX_MILLIS:
            raise CorruptZnodeError(path, f"{what}: passMs is not a time in milliseconds")
        if text is None:
            return cls(ms, None)
        if not isinstance(text, str) or not _RANGES.match(text):
            raise CorruptZnodeError(path, f"{what}: ledgers is not a list of id ranges")
        ranges = []
        for part in text.split(",") if text else ():
            lo, _, hi = part.partition("-")
            first, last = int(lo), int(hi or lo)
            if first > last or last >= 2**63:
                raise CorruptZnodeError(path, f"{what}: ledgers has a range out of order or beyond a ledger id")
            ranges.append((first, last))
        return cls(ms, RangeSet.of(ranges))


SEEN_LEDGERS: DocumentSchema[SeenLedgers] = DocumentSchema(
    "bk-auditor references state", SeenLedgers.parse, SeenLedgers.to_json, empty_is_absent=True
)


class SeenStore(OwnDocument[SeenLedgers]):
    """The seen-ledgers znode."""

    def __init__(self, store: OwnZnodeStore) -> None:
        super().__init__(store, join(store.own_subtree, "references", "seen"), SEEN_LEDGERS)
