"""What the repair worker knows about one ledger before it plans: read-only, the checks' own code.

The entry lists come from `auditor.checks.answers.gather_answers` (GET_LIST_OF_ENTRIES_OF_LEDGER, or
reads for bookies that cannot list, digests verified on the reads), the end of an open ledger from
`ledger_end` (the verified LAC), the bookies' states from their registrations. A bookie that did not
answer stays UNKNOWN (never "holds nothing"), so the planner waits instead of replacing it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from auditor.checks.answers import gather_answers, ledger_end
from auditor.checks.context import AuditContext, RunStats
from auditor.durability.coverage import UNKNOWN, Answer
from auditor.durability.model import LedgerMetadata
from auditor.durability.ranges import RangeSet
from auditor.durability.repairplan import BookieState, Evidence, RepairPlan, bookie_state, plan_repair
from auditor.metadata.interfaces import Registrations


class BookieStates:
    """Registered bookies now, and since when the worker has seen each one unregistered (Java's
    `lostBookieRecoveryDelay` applied once more, `repairplan.bookie_state`). A bookie already
    unregistered when the worker started has no such time: it is judged gone, as the auditor that
    marked the ledger already waited the delay."""

    def __init__(self, recovery_delay_s: int) -> None:
        self.recovery_delay_s = recovery_delay_s
        self._seen: set[str] = set()
        self._absent_since: dict[str, int] = {}
        self.registrations: Registrations | None = None

    def update(self, regs: Registrations, now_ms: int | None = None) -> None:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        available = regs.available
        for b in self._seen - available:
            self._absent_since.setdefault(b, now)
        for b in available:
            self._absent_since.pop(b, None)
        self._seen |= available
        self.registrations = regs

    @property
    def writable(self) -> list[str]:
        """Writable bookies in a stable order (the replacement choice's order of preference)."""
        return sorted(self.registrations.writable) if self.registrations else []

    def state(self, bookie: str, now_ms: int | None = None) -> BookieState:
        regs = self.registrations
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return bookie_state(
            regs is not None and bookie in regs.writable,
            regs is not None and bookie in regs.read_only,
            self._absent_since.get(bookie),
            now,
            self.recovery_delay_s,
        )


@dataclass(frozen=True, slots=True)
class Assessment:
    """A ledger's plan and what it was made from."""

    metadata: LedgerMetadata
    end: int | None  # None: an open ledger whose end the bookies could not prove yet
    evidence: Evidence
    plan: RepairPlan | None  # None when `end` is None
    read_unlistable: bool = True  # how it was gathered (`assess`); a re-check reusing it gathers the same way
    # Bookies that cannot list entries, not read (lean evidence, `assess(read_unlistable=False)`).
    assumed: frozenset[str] = frozenset()


async def assess(
    ctx: AuditContext,
    md: LedgerMetadata,
    states: BookieStates,
    earlier: Assessment | None = None,
    ask_again: Collection[str] = (),
    read_unlistable: bool = True,
) -> Assessment:
    """Ask the ledger's bookies (not the gone ones: nothing of theirs is reachable) and plan.

    `earlier`, for the re-check after a repair: the answers it holds are taken again, unasked, for the
    bookies that are registered now, were not written and met no corrupt copy in between (all others
    are in `ask_again`), with the same end. Nothing of ours changed what such a bookie stores, and on a
    bookie that cannot list entries asking again means reading its whole copy once more: the re-check
    then costs what was written, not the whole ledger again.

    `read_unlistable=False`: the lean evidence (`RepairOptions.read_unlistable_copies`) — a bookie that
    cannot list entries is not read, its answer is its expected share (`Assessment.assumed`): the copy
    reads, verified, every entry it puts on a new bookie and names an entry with no verified copy
    anywhere as lost, so nothing is copied on trust, but what such a bookie lacks outside the copies is
    left to the auditor's checks (which mark the ledger again)."""
    stats = RunStats(check="repair")
    bookie_states = {b: states.state(b) for b in md.bookies}
    if md.is_closed:
        end: int | None = md.last_entry_id
    else:
        end = (await ledger_end(ctx, md, stats)).end
    if end is None:
        return Assessment(md, None, Evidence(bookie_states, {}, {}), None, read_unlistable)
    reachable = [b for b, s in bookie_states.items() if s is not BookieState.GONE]
    kept = _kept(earlier, end, bookie_states, set(ask_again))
    ask = [b for b in reachable if b not in kept]
    got = await gather_answers(ctx, md, end, stats, only=ask, read_unlistable=read_unlistable)
    answers: dict[str, Answer] = dict(got.answers)
    bad: dict[str, list[int]] = defaultdict(list)
    for c in got.corrupt:  # copies read (bookies that cannot list) that failed digest verification
        bad[c.bookie].append(c.entry_id)
    corrupt = {b: RangeSet.from_ids(ids) for b, ids in bad.items()}
    assumed = set(got.assumed)
    if earlier is not None:  # the kept bookies' earlier answers, corrupt copies and assumptions
        old = earlier.evidence
        for b in kept:
            answers[b] = old.answers[b]
            if b in old.corrupt:
                corrupt[b] = old.corrupt[b]
        assumed |= kept & earlier.assumed
    evidence = Evidence(bookie_states, answers, corrupt)
    plan = plan_repair(md, evidence, end)
    return Assessment(md, end, evidence, plan, read_unlistable, frozenset(assumed))


def _kept(earlier: Assessment | None, end: int, states: Mapping[str, BookieState], ask_again: set[str]) -> set[str]:
    """The bookies whose earlier answers stand (see `assess`): known, answered (not unknown), registered
    now, untouched, and for the same end of the ledger."""
    if earlier is None or earlier.end != end:
        return set()
    registered = (BookieState.WRITABLE, BookieState.READ_ONLY)
    return {
        b
        for b, answer in earlier.evidence.answers.items()
        if b not in ask_again and states.get(b) in registered and answer is not UNKNOWN
    }
