"""What one check learnt of one ledger from its bookies (`LedgerAnswers`), and how a share too large to
read whole is sampled (`sample_entries`). Shared by the ways of asking: entry lists and reads
(answers.py) and the bookie-side agent's index (index_answers.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from auditor.bookie.results import ReadEntryResult
from auditor.durability.coverage import UNKNOWN, Answer
from auditor.durability.entry import EntryVerification
from auditor.durability.model import LedgerMetadata
from auditor.durability.striped import StripedSet

READ_SAMPLE = "read-sample"


@dataclass(frozen=True)
class CorruptCopy:
    bookie: str
    entry_id: int
    verification: EntryVerification


@dataclass
class LedgerAnswers:
    answers: dict[str, Answer] = field(default_factory=dict)
    methods: dict[str, str] = field(default_factory=dict)  # bookie -> Method value or READ_SAMPLE
    errors: dict[str, str] = field(default_factory=dict)  # bookie -> why its answer is UNKNOWN
    corrupt: list[CorruptCopy] = field(default_factory=list)
    expected: dict[str, StripedSet] | None = None  # expected_by_bookie of the ledger, when it was asked
    # Bookies whose answer is exactly their share of `expected` (found so as their list was decoded):
    # the verdict need not compare them again.
    exact: set[str] = field(default_factory=set)
    # Bookies that cannot list entries and were not read (`gather_answers(read_unlistable=False)`, the
    # repair's lean evidence): their answer is their expected share, unproven; the copies a repair makes
    # prove what they use by their own verified reads.
    assumed: set[str] = field(default_factory=set)

    @property
    def unknown(self) -> list[str]:
        return sorted(b for b, a in self.answers.items() if a is UNKNOWN)


def sample_entries(expected: StripedSet, budget: int) -> list[int]:
    """At most `budget` expected entries: ends of runs first, then evenly spaced ones."""
    if expected.count() <= budget:
        return [e for a, b in expected.iter_runs() for e in range(a, b + 1)]
    picked: set[int] = set()
    for a, b in expected.iter_runs():
        if len(picked) + 2 > budget // 2:
            break
        picked.update((a, b))
    total = expected.count()
    stride = max(1, total // max(1, budget - len(picked)))
    i = 0
    for a, b in expected.iter_runs():
        for e in range(a, b + 1):
            if i % stride == 0 and len(picked) < budget:
                picked.add(e)
            i += 1
        if len(picked) >= budget:
            break
    return sorted(picked)


def take_copies(
    md: LedgerMetadata, bookie: str, results: Iterable[ReadEntryResult], out: LedgerAnswers
) -> list[ReadEntryResult]:
    """The reads of `results` that found a copy, each one's digest verified: a damaged copy is kept in
    `out.corrupt` (its own finding), and counts as held all the same."""
    present = [r for r in results if r.present]
    for r in present:
        v = r.verify(md.digest_type, md.password)
        if v.corrupt:
            out.corrupt.append(CorruptCopy(bookie, r.entry_id, v))
    return present
