"""Can bookie X go? The verdict for one ledger that still names X, from the other bookies' answers.

Taking X away loses an entry when no other member of that entry's write set holds it. So, over the
entries X should hold (the round-robin schedule up to the ledger's end):

* `lost`: entries no other bookie holds, as far as every other member of their write sets answered:
  removing X now loses them;
* `unsure`: entries no answering bookie holds but a bookie that did not answer might (unknown is never
  missing, and never safe either);
* `thin`: entries that do have another copy, but not on every other member of their write set (the copies
  left after X goes are fewer than WQ - 1; worth knowing, not blocking);
* an open ledger with X in its last segment is still being written (or its writer is gone and it waits
  for recovery): its last segment cannot be judged or moved yet.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from .coverage import Answer
from .model import LedgerMetadata
from .ranges import RangeSet
from .schedule import expected_by_bookie


class Blocker(str, enum.Enum):
    """Why a ledger holds the decommission back, worst first."""

    NO_OTHER_COPY = "no_other_copy"  # some entries exist only on X
    OPEN_LEDGER = "open_ledger"  # X is in the last segment of an open ledger
    UNCONFIRMED = "unconfirmed"  # a bookie that might hold the other copy did not answer


@dataclass(frozen=True, slots=True)
class LedgerDecommission:
    lost: RangeSet
    unsure: RangeSet
    thin: RangeSet
    open_last_segment: bool
    unanswered: tuple[str, ...]

    @property
    def blockers(self) -> tuple[Blocker, ...]:
        out = []
        if self.lost:
            out.append(Blocker.NO_OTHER_COPY)
        if self.open_last_segment:
            out.append(Blocker.OPEN_LEDGER)
        if self.unsure:
            out.append(Blocker.UNCONFIRMED)
        return tuple(out)


def judge_ledger(md: LedgerMetadata, bookie: str, answers: Mapping[str, Answer], end: int) -> LedgerDecommission:
    """`answers`: what the other bookies of the ledger's ensembles hold (X's own answer is ignored)."""
    expected = {b: s.to_rangeset() for b, s in expected_by_bookie(md, end).items()}
    mine = expected.get(bookie, RangeSet())
    held = RangeSet()  # X's entries some other bookie holds
    maybe = RangeSet()  # X's entries a silent bookie should hold
    lacking = RangeSet()  # X's entries some other member of the write set lacks
    unanswered = []
    for other, should in expected.items():
        if other == bookie:
            continue
        shared = mine.intersection(should)
        if not shared:
            continue
        answer = answers.get(other)
        if not isinstance(answer, RangeSet):
            unanswered.append(other)
            maybe = maybe.union(shared)
            continue
        held = held.union(shared.intersection(answer))
        lacking = lacking.union(shared.difference(answer))
    nowhere = mine.difference(held)
    open_last = not md.is_closed and bookie in md.segments[-1].ensemble
    return LedgerDecommission(
        lost=nowhere.difference(maybe),
        unsure=nowhere.intersection(maybe),
        thin=lacking.intersection(held),
        open_last_segment=open_last,
        unanswered=tuple(sorted(unanswered)),
    )
