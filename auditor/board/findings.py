"""The finding store: confirmed findings, deduplicated by `Finding.dedup_key()`, with first/last seen and a
sighting count; a later full run of the same check that no longer sees a finding resolves it. Informational
findings about a whole ledger are kept compactly (compact.py). No I/O; the clock is injectable.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Container, Hashable, Iterable, Iterator
from dataclasses import dataclass, replace

from auditor.durability.findings import Finding, FindingSummary, parse_whole_ledger_key, whole_ledger_key
from auditor.durability.ids import LedgerId

from . import Clock
from .compact import CompactFindings, LedgerKey, Shape, Sighting, ledger_key, ledger_of


def category_of(finding: Finding) -> str:
    return str(finding.category)  # Category.__str__ is its stable value


def severity_of(finding: Finding) -> str:
    return str(finding.severity)


@dataclass(frozen=True, slots=True)
class FindingRecord:
    """A finding as the store tracks it. `finding` is the latest sighting."""

    key: Hashable
    finding: Finding
    check: str | None
    first_seen: float
    last_seen: float
    times_seen: int
    resolved_at: float | None = None

    @property
    def active(self) -> bool:
        return self.resolved_at is None

    @property
    def category(self) -> str:
        return category_of(self.finding)

    @property
    def severity(self) -> str:
        return severity_of(self.finding)


@dataclass(frozen=True, slots=True)
class FindingPage:
    """The records a query shows and how many matched, and where they come from: `source` "leader" (the
    leader's own store), "persisted" (a standby's copy of what the leader saved, as of `as_of`, saved by
    `saved_by`) or "none" (a standby that has not read them yet); `leader` names who leads now."""

    records: list[FindingRecord]
    total: int
    source: str = "leader"
    as_of: float | None = None
    saved_by: str = ""
    leader: str = ""


class FindingStore:
    """Deduplicating finding store. Active findings are kept until resolved; the newest `keep_resolved`
    resolved ones are kept for the API, the rest dropped. Informational findings about a whole ledger are
    kept compactly (`auditor.board.compact`) and come back as records like the others."""

    def __init__(self, clock: Clock = time.time, keep_resolved: int = 1000) -> None:
        self._clock = clock
        self._keep_resolved = keep_resolved
        self._active: dict[Hashable, FindingRecord] = {}
        self._compact = CompactFindings()
        self._resolved: dict[Hashable, FindingRecord] = {}
        # Kept as findings come and go, so the metrics read them without a pass over every finding: a
        # scan of 100,000 WQ == AQ ledgers makes 100,000 informational findings, and one pass per report
        # made the scan quadratic (a 100k-ledger pass did not end in 5 minutes; bench/daemon_scan.py).
        self._counts: dict[str, int] = {}  # active findings per category
        self._ledgers: dict[str, dict[LedgerId, int]] = {}  # per category: active findings per ledger (not compact)
        self._actionable: dict[Hashable, Finding] = {}  # the active findings above informational
        # What is saved for a failover is written again only when it moved (auditor.daemon.shared_state):
        # `actionable_version` moves when an actionable finding comes or goes (or changes category or
        # severity), `sightings_version` when one is only sighted again (a pass re-sights every finding:
        # those are saved less often).
        self.actionable_version = 0
        self.sightings_version = 0

    def __len__(self) -> int:
        return len(self._active) + len(self._compact)

    def __contains__(self, key: object) -> bool:
        if key in self._active:
            return True
        whole = parse_whole_ledger_key(key)
        return whole is not None and self._compact.get(whole[0], ledger_key(whole[1])) is not None

    def add(self, finding: Finding, check: str | None = None, now: float | None = None) -> FindingRecord:
        """Record a sighting. A new key starts at times_seen 1; a known one keeps first_seen. A finding
        seen again after it was resolved becomes active again (first_seen restarts)."""
        now = self._clock() if now is None else now
        key = finding.dedup_key()
        category = category_of(finding)
        old = self._active.get(key)
        old_compact: Sighting | None = None
        lkey: LedgerKey | None = None
        if old is None and finding.whole_ledger:
            lkey = ledger_key(finding.ledger)  # type: ignore[arg-type]  # whole_ledger: it has one
            old_compact = self._compact.get(category, lkey)
        if lkey is not None:
            shape = self._compact.shape_of(finding, check or (old_compact.shape.check if old_compact else None))
            if shape is not None:
                return self._add_compact(key, category, lkey, finding, shape, old_compact, now)
        if old_compact is not None:  # kept compactly until now (e.g. no longer informational)
            assert lkey is not None
            self._compact.pop(category, lkey)
            self._uncount_category(category)
            rec = FindingRecord(
                key, finding, check or old_compact.shape.check, old_compact.first_seen, now, old_compact.times_seen + 1
            )
        elif old is None:
            self._resolved.pop(key, None)
            rec = FindingRecord(key, finding, check, now, now, 1)
        else:
            rec = replace(old, finding=finding, check=check or old.check, last_seen=now, times_seen=old.times_seen + 1)
            self._uncount(old)
        self._active[key] = rec
        self._count(rec)
        if finding.actionable or (old is not None and old.finding.actionable):
            if old is not None and (old.severity, old.category) == (rec.severity, rec.category):
                self.sightings_version += 1
            else:
                self.actionable_version += 1
        return rec

    def _add_compact(
        self,
        key: Hashable,
        category: str,
        lkey: LedgerKey,
        finding: Finding,
        shape: Shape,
        old: Sighting | None,
        now: float,
    ) -> FindingRecord:
        pulsar = self._compact.shared_pulsar(finding.pulsar)
        if old is not None:
            old.shape, old.pulsar, old.last_seen = shape, pulsar, now
            old.times_seen += 1
            return FindingRecord(key, finding, shape.check, old.first_seen, now, old.times_seen)
        self._resolved.pop(key, None)
        self._compact.put(category, lkey, Sighting(shape, pulsar, now, now, 1))
        self._counts[category] = self._counts.get(category, 0) + 1
        return FindingRecord(key, finding, shape.check, now, now, 1)

    def _count(self, rec: FindingRecord) -> None:
        category, ledger = rec.category, rec.finding.ledger
        self._counts[category] = self._counts.get(category, 0) + 1
        if ledger is not None:
            per = self._ledgers.setdefault(category, {})
            per[ledger] = per.get(ledger, 0) + 1
        if rec.finding.actionable:
            self._actionable[rec.key] = rec.finding

    def _uncount(self, rec: FindingRecord) -> None:
        category, ledger = rec.category, rec.finding.ledger
        self._uncount_category(category)
        if ledger is not None:
            per = self._ledgers[category]
            if per[ledger] > 1:
                per[ledger] -= 1
            else:
                del per[ledger]
                if not per:
                    del self._ledgers[category]
        self._actionable.pop(rec.key, None)

    def _uncount_category(self, category: str) -> None:
        left = self._counts[category] - 1
        if left:
            self._counts[category] = left
        else:
            del self._counts[category]

    @staticmethod
    def _record(category: str, lkey: LedgerKey, sighting: Sighting) -> FindingRecord:
        ledger = ledger_of(lkey)
        return FindingRecord(
            whole_ledger_key(category, ledger),
            sighting.shape.finding(ledger, sighting.pulsar),
            sighting.shape.check,
            sighting.first_seen,
            sighting.last_seen,
            sighting.times_seen,
        )

    def _compact_record(self, key: Hashable) -> FindingRecord | None:
        whole = parse_whole_ledger_key(key)
        if whole is None:
            return None
        lkey = ledger_key(whole[1])
        sighting = self._compact.get(whole[0], lkey)
        return self._record(whole[0], lkey, sighting) if sighting is not None else None

    def get(self, key: Hashable) -> FindingRecord | None:
        return self._active.get(key) or self._compact_record(key) or self._resolved.get(key)

    def resolve(self, key: Hashable, now: float | None = None) -> FindingRecord | None:
        rec = self._active.pop(key, None)
        if rec is not None:
            self._uncount(rec)
            if rec.finding.actionable:
                self.actionable_version += 1
        else:
            rec = self._compact_record(key)
            if rec is None:
                return None
            self._compact.pop(rec.category, ledger_key(rec.finding.ledger))  # type: ignore[arg-type]
            self._uncount_category(rec.category)
        done = replace(rec, resolved_at=self._clock() if now is None else now)
        self._resolved[key] = done
        while len(self._resolved) > self._keep_resolved:
            self._resolved.pop(next(iter(self._resolved)))
        return done

    def resolve_absent(
        self,
        check: str,
        seen: FindingSummary | Iterable[Hashable],
        *,
        ledgers: Container[LedgerId] | None = None,
        categories: Container[str] | None = None,
        seen_before: float | None = None,
        now: float | None = None,
    ) -> list[FindingRecord]:
        """After a complete run of `check`: resolve its active findings whose key was not `seen`.
        `ledgers` / `categories` limit the sweep to what the run covered (a partial run passes the
        ledgers it did check, so nothing outside them is resolved). `seen_before` (the run's start) keeps
        what was sighted since, by another run of the check (a prompt re-check of one ledger during a full
        pass). Returns the resolved records."""
        seen_keys: Container[Hashable] = seen if isinstance(seen, (set, frozenset, FindingSummary)) else set(seen)
        out: list[FindingRecord] = []
        for key, rec in list(self._active.items()):
            if rec.check != check or key in seen_keys:
                continue
            if seen_before is not None and rec.last_seen >= seen_before:
                continue
            if ledgers is not None and (rec.finding.ledger is None or rec.finding.ledger not in ledgers):
                continue
            if categories is not None and rec.category not in categories:
                continue
            done = self.resolve(key, now)
            if done is not None:
                out.append(done)
        for category in self._compact.categories():
            if categories is not None and category not in categories:
                continue
            for lkey, sighting in list(self._compact.ledgers(category).items()):
                if sighting.shape.check != check:
                    continue
                if seen_before is not None and sighting.last_seen >= seen_before:
                    continue
                ledger = ledger_of(lkey)
                if ledgers is not None and ledger not in ledgers:
                    continue
                if isinstance(seen_keys, FindingSummary) and type(lkey) is int:
                    if seen_keys.has_whole_ledger(category, lkey):
                        continue  # asked without building the key: most of a pass's findings are seen again
                key = whole_ledger_key(category, ledger)
                if key in seen_keys:
                    continue
                done = self.resolve(key, now)
                if done is not None:
                    out.append(done)
        return out

    def query(
        self,
        *,
        category: str | None = None,
        ledger: LedgerId | None = None,
        bookie: str | None = None,
        check: str | None = None,
        include_resolved: bool = False,
        limit: int | None = None,
    ) -> list[FindingRecord]:
        """Filtered records, most severe first, then oldest first (stable for paging by eye)."""
        return self.page(
            category=category,
            ledger=ledger,
            bookie=bookie,
            check=check,
            include_resolved=include_resolved,
            limit=limit,
        ).records

    def page(
        self,
        *,
        category: str | None = None,
        ledger: LedgerId | None = None,
        bookie: str | None = None,
        check: str | None = None,
        include_resolved: bool = False,
        limit: int | None = None,
    ) -> FindingPage:
        """The first `limit` (all when None or 0) of the filtered records in `query`'s order, and how many
        matched. Compact findings are made records only when they are among those shown: listing a few of
        a million informational findings must not stall the event loop."""

        def matches(f: Finding, rec_check: str | None) -> bool:
            if bookie is not None and f.bookie != bookie and bookie not in (f.ensemble or ()):
                return False
            return check is None or rec_check == check

        pools: list[Iterable[FindingRecord]] = [self._active.values()]
        if include_resolved:
            pools.append(self._resolved.values())
        out = []
        for pool in pools:
            for rec in pool:
                if category is not None and rec.category != category:
                    continue
                if ledger is not None and rec.finding.ledger != ledger:
                    continue
                if matches(rec.finding, rec.check):
                    out.append(rec)
        total = len(out)
        shown: list[tuple[str, LedgerKey, Sighting]] = []
        for c in [category] if category is not None else self._compact.categories():
            if ledger is not None:
                sighting = self._compact.get(c, ledger_key(ledger))
                found = {ledger_key(ledger): sighting} if sighting is not None else {}
            else:
                found = self._compact.ledgers(c)
            if bookie is None and check is None:
                matching: Iterable[tuple[LedgerKey, Sighting]] = found.items()
                total += len(found)
            else:
                kept = [(k, s) for k, s in found.items() if matches(s.shape.template, s.shape.check)]
                matching = kept
                total += len(kept)
            if limit:
                # All of one severity (info): in query order by first seen, then key (category, then id).
                matching = heapq.nsmallest(limit, matching, key=lambda ks: (ks[1].first_seen, _id_order(ks[0])))
            shown.extend((c, k, s) for k, s in matching)
        out.extend(self._record(c, k, s) for c, k, s in shown)
        out.sort(key=lambda r: (r.resolved_at is not None, _severity_rank(r.finding), r.first_seen, str(r.key)))
        return FindingPage(out[:limit] if limit else out, total)

    def actionable_records(self) -> Iterator[FindingRecord]:
        """The active records above informational (what a failover must not lose)."""
        active = self._active
        return (active[key] for key in self._actionable)

    def flagged_ledgers(self) -> dict[LedgerId, set[str]]:
        """The ledgers with an active actionable finding, and the checks that reported them."""
        out: dict[LedgerId, set[str]] = {}
        for rec in self.actionable_records():
            ledger = rec.finding.ledger
            if ledger is not None and rec.check is not None:
                out.setdefault(ledger, set()).add(rec.check)
        return out

    def replace_all(self, records: Iterable[FindingRecord]) -> None:
        """Forget every finding (resolved ones too) and hold `records` as the active ones: a standby taking
        the findings the leader saved, or a new leader starting from them."""
        self._active.clear()
        self._compact = CompactFindings()
        self._resolved.clear()
        self._counts.clear()
        self._ledgers.clear()
        self._actionable.clear()
        for rec in records:
            rec = replace(rec, resolved_at=None)
            old = self._active.get(rec.key)
            if old is not None:
                self._uncount(old)
            self._active[rec.key] = rec
            self._count(rec)
        self.actionable_version += 1

    def actionable_findings(self) -> Iterator[Finding]:
        """The active findings above informational (kept apart: the metrics read them on every report)."""
        return iter(self._actionable.values())

    def counts(self) -> dict[str, int]:
        """Active findings per category."""
        return dict(self._counts)

    def ledger_counts(self) -> dict[str, int]:
        """Distinct ledgers with an active finding, per category (what the Java gauges count)."""
        out: dict[str, int] = {}
        for c in set(self._ledgers) | set(self._compact.categories()):
            compact = self._compact.ledgers(c)
            out[c] = len(compact) + sum(1 for lid in self._ledgers.get(c, ()) if ledger_key(lid) not in compact)
        return out


def _id_order(key: LedgerKey) -> tuple[int, int]:
    """(scope, ledger) of a compact ledger key: the order of their qualified names."""
    return (0, key) if type(key) is int else (key.scope, key.ledger)  # type: ignore[union-attr]


def _severity_rank(finding: Finding) -> int:
    return finding.severity.rank
