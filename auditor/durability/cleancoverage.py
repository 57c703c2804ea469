"""The usual coverage recognised without the sweep: every bookie answered with (at least) its share.

`coverage.analyze_coverage` classifies every entry by a sweep over the gaps of the bookies' answers. Most
ledgers of a healthy cluster need none of it: every bookie answered, and each one that should hold
entries holds every one of them. This recognises that case cheaply, so the sweep runs only for the rest:

* `exact_shares`: the bookies whose answer is exactly their share, found once by comparing runs at C
  speed (`StripedSet.equals_rangeset`), or already known to the caller (`known_exact`); the gap walks
  skip them.
* `all_held_entries`: when every answering bookie holds its whole share, the number of entries (all
  then on their whole write sets), which is all the clean `Coverage` needs; None for anything else (an
  unknown answer, a missing entry, a bookie listed twice in an ensemble, a malformed ensemble), which
  the sweep classifies.

An optimisation only, never a judgement: `analyze_coverage(shortcut=False)` takes the sweep for every
ledger and gives the same coverage (the tests compare the two).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .model import LedgerMetadata
from .ranges import RangeSet
from .striped import StripedSet, clip_rangeset

__all__ = ["exact_shares", "all_held_entries"]


def exact_shares(
    answers: Mapping[str, object], expected: Mapping[str, StripedSet], stop: int, known_exact: Collection[str]
) -> tuple[dict[str, RangeSet], set[str]]:
    """Every answer that is a `RangeSet`, clipped to [0, stop] (`within`), and the bookies whose answer is
    exactly their share of `expected` (`exact`): recognised here once, or named in `known_exact` (exactly
    their share, all within [0, stop]: nothing to clip)."""
    within: dict[str, RangeSet] = {}
    exact: set[str] = set()
    for b, a in answers.items():
        if not isinstance(a, RangeSet):
            continue
        if b in known_exact and b in expected:  # exactly its share, all within [0, stop]: nothing to clip
            within[b] = a
            exact.add(b)
            continue
        within[b] = clip_rangeset(a, 0, stop)
        if b in expected and expected[b].equals_rangeset(within[b]):
            exact.add(b)
    return within, exact


def all_held_entries(
    metadata: LedgerMetadata,
    answers: Mapping[str, object],
    stop: int,
    expected: Mapping[str, StripedSet],
    within: Mapping[str, RangeSet],
    exact: set[str],
) -> int | None:
    """The entries in [0, stop] when every bookie answered and each one that should hold entries holds
    every one of them: every entry on its whole write set, nothing unknown, no bucket to fill, so no
    sweep. The usual answers: a healthy bookie's entry list (`exact`, nothing to compute) and a read
    sample that found nothing absent (its answer is the whole span it was asked about, unscheduled
    entries included). None for anything else, which the sweep classifies."""
    if len(within) != len(answers):
        return None  # some answer is unknown
    for b, share in expected.items():
        if share and b not in exact and (b not in within or share.difference(within[b])):
            return None
    e = metadata.ensemble_size
    entries = 0
    for seg, l in metadata.segment_ends(stop):
        f = seg.first_entry_id
        if f > l:
            continue
        if len(seg.ensemble) != e or len(set(seg.ensemble)) != e:
            return None
        entries += l - f + 1
    return entries
