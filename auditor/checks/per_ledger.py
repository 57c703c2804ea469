"""The per-ledger checks: adapters fetch, `auditor.durability.verdicts` decides.

One flow serves all three checks; they differ in which ledgers they take, where a ledger ends, and how
the bookies are asked:

| check | ledgers | end | how bookies are asked |
|---|---|---|---|
| `scrutiny` (BP-34) | closed | last entry id | entry lists (reads for bookies that cannot list), placement, markers |
| `ledger` (Java's checkAllLedgers) | all | closed: last entry; open: the verified LAC | reads of the first and last entry of each fragment plus a sample, digests verified |
| `open` (beyond Java) | open, in recovery | the verified LAC | entry lists: would a recovery now truncate acknowledged entries? |

"The verified LAC" is the end `auditor.durability.ledgerend` proves from the bookies' READ_LAC answers:
a body that fails verification never moves it (it is reported as a `digest_mismatch` of its bookie,
confirmed by asking that bookie again), an unverifiable one (DUMMY digest) needs a second bookie, and
the metadata's floor holds it up.

Unknown answers send the ledger to the delayed re-check queue. Before anything is reported the marker
and the metadata are read again (a changed ledger is analysed again instead of reported) and the
bookies with gaps are asked again, so only a fault seen twice is reported.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping

from auditor.durability import verdicts
from auditor.durability.findings import Category, Finding, Method
from auditor.durability.ids import LedgerId
from auditor.durability.ledgerend import LedgerEnd, closed_end, lac_findings
from auditor.durability.model import LedgerMetadata, LedgerState
from auditor.durability.placement import PlacementPolicy
from auditor.durability.ranges import RangeSet
from auditor.logging import get_logger
from auditor.metadata.errors import NoSuchLedgerError
from auditor.metadata.interfaces import CorruptLedger, LedgerRecord, MarkerRecord

from .answers import (
    gather_answers,
    gather_answers_many,
    gather_read_answers,
    gather_read_answers_many,
    ledger_end,
)
from .context import AuditContext, RunStats
from .ledger_answers import LedgerAnswers, sample_entries
from .names import ALIASES
from .references import ReferencesCheck
from .runner import LedgerOutcome

# How old the listing of markers may get before a long run lists them again (one listing of the marker tree;
# a marked ledger is then not read).
MARKED_REFRESH_SECONDS = 30.0

log = get_logger("auditor.checks")

_METADATA = Method.METADATA.value

Locations = Callable[[Iterable[str]], Awaitable[Mapping[str, str | None]]]
Marker = Callable[[LedgerMetadata, list[Finding]], Awaitable[None]]


def method_of(answers: LedgerAnswers) -> str:
    used = set(answers.methods.values())
    if len(used) == 1:  # the usual case: every bookie answered the same way
        return next(iter(used))
    return "+".join(sorted(used)) if used else _METADATA


def corrupt_findings(md: LedgerMetadata, answers: LedgerAnswers) -> list[Finding]:
    out = []
    for c in answers.corrupt:
        problems = ", ".join(p.value for p in c.verification.problems)
        out.append(
            Finding.of(
                Category.DIGEST_MISMATCH,
                f"ledger {md.ledger_id}: entry {c.entry_id} on bookie {c.bookie} fails verification ({problems})",
                metadata=md,
                bookie=c.bookie,
                entry_id=c.entry_id,
                method=Method.READ,
                detail={
                    "problems": [p.value for p in c.verification.problems],
                    "why": c.verification.detail,
                    "storedDigest": (c.verification.stored_digest or b"").hex(),
                    "computedDigest": (c.verification.computed_digest or b"").hex(),
                },
            )
        )
    return out


class CoverageCheck:
    """The shared flow; subclasses choose ledgers, end and how to ask (see the module docstring)."""

    name = "coverage"
    use_placement = False
    skip_marked = False  # skip ledgers marked under-replicated (reporting those marked for too long)
    marked_refresh_seconds = MARKED_REFRESH_SECONDS

    def __init__(self, ctx: AuditContext, locations: Locations | None = None, marker: Marker | None = None) -> None:
        self.ctx = ctx
        self._locations = locations
        self._marker = marker  # called with confirmed entry findings (the daemon's optional marking)
        # Ledgers marked when the markers were last listed (skip_marked checks): only those get their marker
        # read; None (no listing) reads every ledger's. A marker made since is met by the confirmation's re-read.
        self._marked: frozenset[LedgerId] | None = None
        self._marked_at = 0.0

    async def prepare(self, stats: RunStats) -> bool:
        """One listing of the markers' names per run instead of one marker read per ledger."""
        if self.skip_marked:
            await self._list_marked()
        return True

    async def refresh(self) -> None:
        """Before each batch of ledgers: the markers listed again once the listing is older than
        `marked_refresh_seconds`. A run that began before a bookie was lost then leaves that bookie's ledgers,
        marked meanwhile, to the repair instead of reading every copy of each (on DbLedgerStorage that is
        every entry) while the repair copies them."""
        if self.skip_marked and time.monotonic() - self._marked_at >= self.marked_refresh_seconds:
            await self._list_marked()

    async def _list_marked(self) -> None:
        self._marked = frozenset(await self.ctx.store.marked_ids())
        self._marked_at = time.monotonic()

    async def _read_marker(self, lid: LedgerId) -> MarkerRecord | None:
        if not self.skip_marked or (self._marked is not None and lid not in self._marked):
            return None
        return await self.ctx.store.read_marker(lid)

    def wants(self, md: LedgerMetadata) -> bool:
        return md.is_closed

    async def end_of(self, md: LedgerMetadata, stats: RunStats) -> LedgerEnd:
        """The last entry to check (`.end`; None when it cannot be known yet: re-check later) and the
        READ_LAC bodies rejected on the way (reported as digest_mismatch once seen twice)."""
        return closed_end(md)

    async def ask(self, md: LedgerMetadata, end: int, stats: RunStats, only: Iterable[str] | None) -> LedgerAnswers:
        return await gather_answers(self.ctx, md, end, stats, only=only)

    def batchable(self, record: LedgerRecord | CorruptLedger) -> bool:
        """Whether `first_answers` can ask for this ledger together with others: a readable, unscoped,
        closed ledger (its end is its last entry, known without asking), not marked when the run began (a
        marked one has its marker read instead)."""
        if not isinstance(record, LedgerRecord):
            return False
        md = record.metadata
        if md.ledger_id.scope != 0 or not self.wants(md) or not md.is_closed:
            return False
        return not self.skip_marked or (self._marked is not None and md.ledger_id not in self._marked)

    async def first_answers(self, records: list[LedgerRecord], stats: RunStats) -> list[LedgerAnswers]:
        """The first round of answers of many `batchable` ledgers, asked together (`ask_many`); each then
        goes through `check` with its answers as `asked`."""
        ledgers = []
        for r in records:
            end = closed_end(r.metadata).end
            assert end is not None
            ledgers.append((r.metadata, end))
        return await self.ask_many(ledgers, stats)

    async def ask_many(self, ledgers: list[tuple[LedgerMetadata, int]], stats: RunStats) -> list[LedgerAnswers]:
        """`ask` of many ledgers at once, one batch per bookie."""
        return await gather_answers_many(self.ctx, ledgers, stats)

    async def _scrutinize(
        self,
        md: LedgerMetadata,
        end: int,
        marker: MarkerRecord | None,
        stats: RunStats,
        only: Iterable[str] | None = None,
        previous: LedgerAnswers | None = None,
        asked: LedgerAnswers | None = None,
    ) -> tuple[verdicts.LedgerScrutiny, LedgerAnswers]:
        answers = LedgerAnswers()
        if marker is None and asked is not None:
            answers = asked
        elif marker is None:
            answers = await self.ask(md, end, stats, only)
            if previous is not None:  # a targeted re-ask: keep the other bookies' first answers
                _keep_others(answers, previous)
        return await self._judge(md, end, marker, answers), answers

    async def _judge(
        self, md: LedgerMetadata, end: int, marker: MarkerRecord | None, answers: LedgerAnswers
    ) -> verdicts.LedgerScrutiny:
        policy, locations = await self._placement(md)
        return self._verdict(md, end, marker, answers, policy, locations)

    def _verdict(
        self,
        md: LedgerMetadata,
        end: int,
        marker: MarkerRecord | None,
        answers: LedgerAnswers,
        policy: PlacementPolicy | None,
        locations: Mapping[str, str | None],
    ) -> verdicts.LedgerScrutiny:
        opts = self.ctx.options
        result = verdicts.scrutinize_ledger(
            md,
            answers.answers if marker is None else None,
            end=end,
            policy=policy,
            locations=locations,
            marked_underreplicated=marker is not None,
            marker_ctime_ms=marker.ctime if marker else None,
            missing_replicas=marker.replicas if marker else (),
            grace_period_s=int(opts.underreplicated_grace_period),
            now_ms=int(time.time() * 1000),
            method=method_of(answers),
            text_limit=opts.text_limit,
            expected=answers.expected,
            exact=answers.exact,
        )
        return result

    async def _read_listed_gaps(
        self,
        md: LedgerMetadata,
        stats: RunStats,
        confirmed: list[Finding],
        result: verdicts.LedgerScrutiny,
        answers: LedgerAnswers,
    ) -> list[Finding]:
        """Entry findings two entry lists agree on, checked by reading a few of the entries the lists lacked
        (`GAP_READS` per bookie, ends of runs first): a bookie whose index lists fewer entries than it
        serves must not make a finding, and asking its list again only repeats it. If a bookie serves one of
        them (its digest verified), its lists are not evidence: the entry findings are dropped, with a
        warning naming the bookie and the entries it served. Reads that find them absent, get no answer
        or a damaged copy leave the two lists standing."""
        if result.coverage is None or not any(f.category in _ENTRY_LEVEL for f in confirmed):
            return confirmed
        served: dict[str, list[int]] = {}
        for g in result.coverage.gaps:
            if answers.methods.get(g.bookie) != Method.ENTRY_LIST.value:
                continue
            entries = sample_entries(g.missing, GAP_READS)
            got = await self.ctx.bookies.client(g.bookie).read_entries(md.ledger_id, entries)
            stats.requests_done(g.bookie, got)
            ok = [r.entry_id for r in got if r.present and r.verify(md.digest_type, md.password).ok]
            if ok:
                served.setdefault(g.bookie, []).extend(ok)
        if not served:
            return confirmed
        log.warning(
            "entry lists omit entries the bookie serves: its entry findings dropped",
            ledgerId=str(md.ledger_id),
            served={b: RangeSet.from_ids(sorted(e)).to_text() for b, e in served.items()},
            dropped=[f.category.value for f in confirmed if f.category in _ENTRY_LEVEL],
        )
        return [f for f in confirmed if f.category not in _ENTRY_LEVEL]

    def _judges_placement(self) -> bool:
        """Whether this check judges placement now (and so looks racks up, which is awaited)."""
        return (
            self.use_placement
            and self.ctx.options.placement is not None
            and self._locations is not None
            and getattr(self._locations, "available", True)
        )

    async def _placement(self, md: LedgerMetadata) -> tuple[PlacementPolicy | None, Mapping[str, str | None]]:
        """The policy to judge (None: this check does not, or there is no rack information) and racks."""
        if not self._judges_placement():
            return None, {}
        assert self._locations is not None
        racks = await self._locations(md.bookies)
        if not getattr(self._locations, "available", True):
            return None, {}  # the rack data just turned out unusable: placement is not judged
        return self.ctx.options.placement, racks

    def _reportable(
        self, result: verdicts.LedgerScrutiny, answers: LedgerAnswers, md: LedgerMetadata, include_pending: bool
    ) -> list[Finding]:
        found = list(result.findings) + (list(result.pending) if include_pending else [])
        found += corrupt_findings(md, answers)
        if not self.ctx.options.report_overreplicated:
            # (Made only from entry lists: the core judges over-replication from nothing else.)
            found = [f for f in found if f.category is not Category.OVERREPLICATED]
        return found

    async def check(
        self,
        record: LedgerRecord,
        stats: RunStats,
        attempt: int,
        last_attempt: bool,
        asked: LedgerAnswers | None = None,
    ) -> LedgerOutcome:
        """One ledger's check. `asked`: its bookies' answers, already asked for with other ledgers'
        (`first_answers`), taken as the first round instead of asking."""
        store = self.ctx.store
        md = record.metadata
        if md.ledger_id.scope != 0:
            return await self._metadata_only(md)
        for _ in range(self.ctx.options.max_reanalysis):
            if not self.wants(md):
                return LedgerOutcome(skipped=md.state.name.lower())
            marker = await self._read_marker(md.ledger_id)
            where = await self.end_of(md, stats) if marker is None else closed_end(md)
            end = where.end
            if end is None:
                if last_attempt:
                    return LedgerOutcome(skipped="lac_unknown")
                return LedgerOutcome(suspect=True, unknown_bookies={"*": "no bookie answered READ_LAC"})
            result, answers = await self._scrutinize(md, end, marker, stats, asked=asked)
            asked = None  # a re-analysis (changed metadata) asks afresh
            if result.disposition is verdicts.Disposition.SKIP:
                return LedgerOutcome(skipped="underreplicated")
            if result.disposition is verdicts.Disposition.RECHECK and not last_attempt:
                # Report nothing yet, not even metadata-only findings: the re-check reports them all.
                return LedgerOutcome(
                    suspect=True,
                    unknown_bookies={b: answers.errors.get(b, "no answer") for b in result.recheck_bookies},
                )
            first = self._reportable(result, answers, md, include_pending=last_attempt) + lac_findings(md, where)
            unreachable = await self._unreachable(result, answers, md, attempt) if last_attempt else []
            if not unreachable and (settled := _settled(first)) is not None:
                if not settled.findings:
                    return settled
                [kept] = await self.confirm_settled([md], [settled])
                if kept is not None:
                    return kept  # else the metadata changed: the full confirmation below
            # Confirmation: the marker and the metadata again, then the bookies with gaps again.
            if self.skip_marked and marker is None and await store.read_marker(md.ledger_id) is not None:
                return LedgerOutcome(skipped="underreplicated")
            try:
                reread = (await store.read_ledger(md.ledger_id)).metadata
            except NoSuchLedgerError:
                return LedgerOutcome(skipped="deleted")
            if verdicts.compare_metadata(md, reread).action == "redo":
                stats.reanalysed += 1
                md = reread
                continue
            second_result, second_answers = result, answers
            gaps = {g.bookie for g in result.coverage.gaps} if result.coverage else set()
            gaps |= {c.bookie for c in answers.corrupt}
            if gaps:
                second_result, second_answers = await self._scrutinize(
                    md, end, marker, stats, only=gaps, previous=answers
                )
            second = self._reportable(second_result, second_answers, md, include_pending=last_attempt)
            if where.rejected:  # ask the bookies whose READ_LAC answer was rejected again
                again = await ledger_end(self.ctx, md, stats, only=where.suspect_bookies)
                second += lac_findings(md, again)
            confirmed = verdicts.confirm(first, second)
            confirmed = await self._read_listed_gaps(md, stats, confirmed, second_result, second_answers)
            if any(f.category is Category.DIGEST_MISMATCH for f in confirmed):
                # Damage needs a third identical read (verdicts.confirm_damage says why).
                third: list[Finding] = []
                damaged = {c.bookie for c in second_answers.corrupt}
                if damaged:
                    _, third_answers = await self._scrutinize(
                        md, end, marker, stats, only=damaged, previous=second_answers
                    )
                    third += corrupt_findings(md, third_answers)
                if where.rejected:
                    third += lac_findings(md, await ledger_end(self.ctx, md, stats, only=where.suspect_bookies))
                confirmed = verdicts.confirm_damage(confirmed, third)
            if self._marker is not None and confirmed:
                await self._marker(md, confirmed)
            return LedgerOutcome(findings=confirmed + unreachable)
        return LedgerOutcome(skipped="metadata_changing")

    def settle(self, record: LedgerRecord, asked: LedgerAnswers) -> LedgerOutcome | None:
        """A `batchable` ledger's outcome decided from its first answers alone, without a coroutine, when
        they settle it: clean, or only informational findings on its metadata, which the caller still
        confirms (`confirm_settled`, many ledgers at once). None: `check` takes it (anything to re-check,
        confirm or read again, or racks to look up). What `check` would decide for the same answers on its
        first attempt."""
        if self._judges_placement():
            return None
        md = record.metadata
        where = closed_end(md)
        assert where.end is not None
        result = self._verdict(md, where.end, None, asked, None, {})
        if result.disposition not in (verdicts.Disposition.CLEAN, verdicts.Disposition.REPORT):
            return None
        return _settled(self._reportable(result, asked, md, include_pending=False) + lac_findings(md, where))

    async def confirm_settled(
        self, mds: list[LedgerMetadata], outcomes: list[LedgerOutcome]
    ) -> list[LedgerOutcome | None]:
        """Informational verdicts on the metadata (`_settled`), confirmed for many ledgers in one bulk read:
        each ledger's metadata must still be there at the version it was judged at (nothing else a
        bookie or marker says could change them). A deleted ledger is skipped; None: its metadata changed
        since, so `check` confirms it the full way."""
        versions = await self.ctx.store.ledger_versions([md.ledger_id for md in mds])
        out: list[LedgerOutcome | None] = []
        for md, outcome, version in zip(mds, outcomes, versions):
            if version is None:
                out.append(LedgerOutcome(skipped="deleted"))
            else:
                out.append(outcome if version == md.version else None)
        return out

    async def _metadata_only(self, md: LedgerMetadata) -> LedgerOutcome:
        """A scoped (128-bit, scope != 0) ledger: the bookie v3 protocol has no scope field, so its
        entries cannot be asked for; quorum settings and placement are still judged."""
        if not self.wants(md):
            return LedgerOutcome(skipped=md.state.name.lower())
        policy, locations = await self._placement(md)
        result = verdicts.scrutinize_ledger(
            md, None, policy=policy, locations=locations, text_limit=self.ctx.options.text_limit
        )
        return LedgerOutcome(
            findings=[f.confirm() for f in result.findings],
            skipped="scoped: entries not checkable over the v3 protocol",
        )

    async def _unreachable(
        self, result: verdicts.LedgerScrutiny, answers: LedgerAnswers, md: LedgerMetadata, attempt: int
    ) -> list[Finding]:
        if not result.recheck_bookies:
            return []
        regs = await self.ctx.store.registrations()
        out = []
        for b in result.recheck_bookies:
            f = verdicts.unreachable_bookie_finding(
                b,
                registered=b in regs.available,
                attempts=attempt + 1,
                ledgers=[md.ledger_id],
                error=answers.errors.get(b, ""),
            )
            if f is not None:
                out.append(f.confirm())
        return out


GAP_READS = 8  # entries read per gap bookie to check a confirmed entry-list gap (step 6, _read_listed_gaps)

# Findings about entries' copies: what a bookie's entry list can get wrong.
_ENTRY_LEVEL = frozenset(
    {
        Category.ENTRY_NO_REPLICA,
        Category.ENTRY_BELOW_ACK_QUORUM,
        Category.ENTRY_BELOW_WRITE_QUORUM,
        Category.TRUNCATION_RISK,
    }
)


_METADATA = Method.METADATA.value


def _settled(first: list[Finding]) -> LedgerOutcome | None:
    """The outcome when a first analysis needs no second look: nothing found, or only informational
    verdicts on the metadata as read (quorum settings: nothing a bookie or marker says can change them).
    None: the findings need confirming."""
    if not first:
        return LedgerOutcome()
    if all(f.method == _METADATA and not f.actionable for f in first):
        return LedgerOutcome(findings=[f.confirm() for f in first])
    return None


def _keep_others(answers: LedgerAnswers, previous: LedgerAnswers) -> None:
    """A targeted re-ask: the bookies not asked again keep their earlier answers."""
    for b, a in previous.answers.items():
        answers.answers.setdefault(b, a)
        answers.methods.setdefault(b, previous.methods.get(b, ""))


class ScrutinyCheck(CoverageCheck):
    """BP-34: closed ledgers; placement; every entry on its write-quorum bookies; stale markers."""

    name = "scrutiny"
    use_placement = True
    skip_marked = True


class LedgerReadCheck(CoverageCheck):
    """Java's periodic checkAllLedgers, with digests: read fragment ends (and a sample) from each bookie."""

    name = "ledger"

    def wants(self, md: LedgerMetadata) -> bool:
        return True

    async def end_of(self, md: LedgerMetadata, stats: RunStats) -> LedgerEnd:
        return await ledger_end(self.ctx, md, stats)

    async def ask(self, md: LedgerMetadata, end: int, stats: RunStats, only: Iterable[str] | None) -> LedgerAnswers:
        return await gather_read_answers(
            self.ctx, md, end, stats, only=only, percentage=self.ctx.options.verification_percentage
        )

    async def ask_many(self, ledgers: list[tuple[LedgerMetadata, int]], stats: RunStats) -> list[LedgerAnswers]:
        return await gather_read_answers_many(
            self.ctx, ledgers, stats, percentage=self.ctx.options.verification_percentage
        )


class OpenLedgerCheck(CoverageCheck):
    """Open ledgers: entries up to the verified LAC that a recovery now would cut off (truncation_risk)."""

    name = "open"

    def wants(self, md: LedgerMetadata) -> bool:
        return md.state in (LedgerState.OPEN, LedgerState.IN_RECOVERY)

    async def end_of(self, md: LedgerMetadata, stats: RunStats) -> LedgerEnd:
        return await ledger_end(self.ctx, md, stats)


# The checks by the names the CLI, the admin API's trigger and the metrics use.
CHECKS: dict[str, type[CoverageCheck] | type[ReferencesCheck]] = {
    c.name: c for c in (ScrutinyCheck, LedgerReadCheck, OpenLedgerCheck, ReferencesCheck)
}


def judges_each_ledger_alone(name: str) -> bool:
    """Whether the check (by registry name) can run on any slice of the id space (a sweep's partition, a
    `check --processes` worker); the others cross-check the whole cluster in one run."""
    return not getattr(CHECKS[name], "whole_run", False)


def resolve_checks(names: list[str], *, per_ledger_only: bool = False) -> list[str]:
    """Check names (aliases, any case, `all`) -> registry names, in order, once each; ValueError naming an
    unknown one. Shared by the one-shot command and the sweep; the sweep (`per_ledger_only`) runs only
    the checks that judge each ledger alone: `all` leaves the whole-run cross-checks out, naming one is
    an error."""
    if not names or names == ["all"]:
        return [n for n in CHECKS if not per_ledger_only or judges_each_ledger_alone(n)]
    out = []
    for n in names:
        key = ALIASES.get(n.lower(), n.lower())
        if key not in CHECKS:
            raise ValueError(f"unknown check {n!r}; choose from {', '.join(CHECKS)} (or all)")
        if per_ledger_only and not judges_each_ledger_alone(key):
            raise ValueError(f"check {key!r} cross-checks the whole cluster: run it with `check` or the daemon")
        if key not in out:
            out.append(key)
    return out
