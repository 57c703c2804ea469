"""BP-34 "metadata scrutiny" verdicts, composed from schedule, coverage and placement. Pure.

One module on purpose (over 600 lines): it is one job, the BP-34 flow below, step by step, on one
verdict vocabulary; cut in parts, the flow would have to be read across files.

The flow BP-34 asks for, and which function decides each step:
1. A ledger already marked under-replicated is skipped, unless marked for too long
   (`underreplicated_too_long`).
2. Its quorum settings are judged (`assess_quorum` -> risky_quorum) and, for a closed ledger, each
   segment's placement (placement.check_ledger -> placement_violation / placement_soft).
3. The bookies' entry lists give the coverage (coverage.analyze_coverage); `durability_findings` turns it
   into the durability-contract verdict for a closed ledger, or the truncation verdict for an open one.
4. `triage` decides whether the ledger is reportable or must wait in the delayed re-check queue because
   an unknown answer could change the verdict.
5. Before reporting, the metadata is read again; `compare_metadata` says whether to report, redo the
   analysis (metadata changed) or drop it (ledger deleted). `confirm` keeps only what a re-check saw
   again. `unreachable_bookie_finding` decides the "bookie availability" part after the re-checks.
`scrutinize_ledger` runs steps 1-4 for one ledger.

Risky quorum settings, derived from seed 003 and the Java client:
* Fencing (ReadLastConfirmedOp with RRQuorumCoverageSet) completes only when every write set has fewer
  than AQ members that did not answer; recovery's reads past the end need WQ - AQ + 1 NoSuchEntry
  answers from the write set. With f unreachable members of a write set both stall once f >= AQ, so
  recovery tolerates AQ - 1 unreachable bookies per write set.
  -> AQ == 1: one unreachable bookie stalls recovery (the topic stays unavailable), and an acknowledged
     entry may exist on a single bookie. WQ == 1 means no replication at all.
* Recovery closes the ledger before an entry once WQ - AQ + 1 members deny having it. An entry stored on
  all WQ members survives WQ - AQ wrong denials (a wiped or reincarnated bookie answers NoSuchLedger).
  -> WQ == AQ: a single lost copy (one reincarnated bookie) is enough to truncate; with E == WQ == AQ
     every member must also acknowledge every entry, so one slow bookie blocks writes until an
     ensemble change.
* Fewer writable bookies than E: no replacement for a failed member, so ensemble changes and recovery's
  write-back stall (only judged when the caller passes the writable count).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from .coverage import ENTRY_CATEGORIES, Answer, Coverage, analyze_coverage
from .findings import DEFAULT_TEXT_LIMIT, Category, Finding, Method, Severity
from .ids import LedgerId
from .model import LedgerMetadata, LedgerState
from .placement import PlacementPolicy, PlacementVerdict, check_ledger
from .striped import StripedSet

__all__ = [
    "QuorumRisk",
    "assess_quorum",
    "risky_quorum_finding",
    "underreplicated_too_long",
    "underreplicated_finding",
    "durability_findings",
    "Disposition",
    "Triage",
    "triage",
    "MetadataChange",
    "compare_metadata",
    "placement_finding",
    "unreachable_bookie_finding",
    "confirm",
    "LedgerScrutiny",
    "scrutinize_ledger",
]


# --------------------------------------------------------------------------------------------------
# (a) risky quorum settings


@dataclass(frozen=True, slots=True)
class QuorumRisk:
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    codes: tuple[str, ...]  # invalid | no_replication | ack_quorum_one | single_lost_copy_truncates |
    #                         all_members_ack | too_few_writable_bookies
    reasons: tuple[str, ...]
    severity: Severity
    tolerated_unreachable: int  # per write set, before fencing / recovery stalls (AQ - 1)
    tolerated_lost_copies: int  # per fully replicated entry, before recovery truncates (WQ - AQ)


@functools.lru_cache(maxsize=1024)  # pure, and asked once per ledger of a scan with a handful of shapes
def assess_quorum(
    ensemble_size: int, write_quorum: int, ack_quorum: int, *, writable_bookies: int | None = None
) -> QuorumRisk | None:
    """None when the settings carry no risk named in the module docstring."""
    e, wq, aq = ensemble_size, write_quorum, ack_quorum
    codes: list[str] = []
    reasons: list[str] = []
    # WQ == AQ alone is informational: it is the Pulsar default (2/2/2) and a deliberate trade-off, so
    # reporting it as a fault would make every default cluster look broken. AQ 1 / WQ 1 are real faults.
    severity = Severity.INFO
    if not 1 <= aq <= wq <= e:
        codes.append("invalid")
        reasons.append(f"settings E={e} WQ={wq} AQ={aq} break 1 <= AQ <= WQ <= E")
        severity = Severity.MAJOR
    else:
        if wq == 1:
            codes.append("no_replication")
            reasons.append("write quorum 1: every entry has a single copy")
            severity = Severity.MAJOR
        if aq == 1:
            codes.append("ack_quorum_one")
            reasons.append(
                "ack quorum 1: an acknowledged entry may exist on one bookie, and recovery stalls "
                "while any bookie of a write set is unreachable"
            )
            severity = Severity.MAJOR
        if wq == aq:
            codes.append("single_lost_copy_truncates")
            reasons.append(
                f"WQ == AQ: recovery needs only {wq - aq + 1} NoSuchEntry answer to close the ledger "
                "before an entry, so one lost copy (e.g. a reincarnated bookie) truncates it"
            )
            if e == wq:
                codes.append("all_members_ack")
                reasons.append(
                    "E == WQ == AQ: every bookie must acknowledge every entry; one slow bookie "
                    "blocks writes until an ensemble change"
                )
    if writable_bookies is not None and writable_bookies < e:
        codes.append("too_few_writable_bookies")
        reasons.append(
            f"{writable_bookies} writable bookies < ensemble size {e}: no replacement for a "
            "failed member, so ensemble changes and recovery write-back stall"
        )
        severity = Severity.MAJOR
    if not codes:
        return None
    return QuorumRisk(e, wq, aq, tuple(codes), tuple(reasons), severity, max(aq - 1, 0), max(wq - aq, 0))


def risky_quorum_finding(metadata: LedgerMetadata, *, writable_bookies: int | None = None) -> Finding | None:
    risk = assess_quorum(
        metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum, writable_bookies=writable_bookies
    )
    if risk is None:
        return None
    return Finding.of(
        Category.RISKY_QUORUM,
        f"ledger {metadata.ledger_id}: {_risk_text(risk)}",
        metadata=metadata,
        severity=risk.severity,
        method=Method.METADATA,
        detail={
            "codes": list(risk.codes),
            "ensemble_size": risk.ensemble_size,
            "write_quorum": risk.write_quorum,
            "ack_quorum": risk.ack_quorum,
            "tolerated_unreachable": risk.tolerated_unreachable,
            "tolerated_lost_copies": risk.tolerated_lost_copies,
        },
    )


@functools.lru_cache(maxsize=1024)  # every ledger with the same settings says the same (a Pulsar default: all)
def _risk_text(risk: QuorumRisk) -> str:
    """A risky quorum finding's message after the ledger id."""
    return (
        f"risky quorum settings E={risk.ensemble_size} WQ={risk.write_quorum} AQ={risk.ack_quorum}: "
        f"{'; '.join(risk.reasons)}"
    )


# --------------------------------------------------------------------------------------------------
# (b) under-replicated for too long


def underreplicated_too_long(ctime_ms: int | None, grace_period_s: int, now_ms: int) -> bool:
    """As Java's placement check: a marker counts when whole seconds since its ctime exceed the grace
    period. No ctime (absent or -1) never counts; a grace period <= 0 disables the check."""
    if ctime_ms is None or ctime_ms < 0 or grace_period_s <= 0:
        return False
    elapsed_ms = now_ms - ctime_ms
    if elapsed_ms < 0:
        return False
    return elapsed_ms // 1000 > grace_period_s


def underreplicated_finding(
    ledger: LedgerId,
    ctime_ms: int | None,
    grace_period_s: int,
    now_ms: int,
    *,
    missing_replicas: Iterable[str] = (),
    metadata: LedgerMetadata | None = None,
) -> Finding | None:
    if not underreplicated_too_long(ctime_ms, grace_period_s, now_ms):
        return None
    assert ctime_ms is not None
    age_s = (now_ms - ctime_ms) // 1000
    replicas = sorted(set(missing_replicas))
    return Finding.of(
        Category.UNDERREPLICATED_TOO_LONG,
        f"ledger {ledger}: marked under-replicated {age_s}s ago, grace period {grace_period_s}s",
        ledger=ledger,
        metadata=metadata,
        method=Method.UNDERREPLICATION,
        detail={
            "marked_at_ms": ctime_ms,
            "age_s": age_s,
            "grace_period_s": grace_period_s,
            "missing_replicas": replicas,
        },
    )


# --------------------------------------------------------------------------------------------------
# (c) the durability contract from coverage


# The methods whose answers show everything a bookie holds (a Method or its value; `.value` is an Enum
# property lookup, once per ledger here).
_LISTS_ONLY = (Method.ENTRY_LIST.value, Method.METADATA.value)

_DESCRIBE = {
    Category.ENTRY_NO_REPLICA: "have no replica",
    Category.ENTRY_BELOW_ACK_QUORUM: "have fewer copies than the ack quorum",
    Category.ENTRY_BELOW_WRITE_QUORUM: "have fewer copies than the write quorum",
}


def durability_findings(
    metadata: LedgerMetadata,
    coverage: Coverage,
    *,
    method: str | Method = Method.ENTRY_LIST,
    text_limit: int = DEFAULT_TEXT_LIMIT,
) -> list[Finding]:
    """Findings of the confirmed view (unknown copies counted as present).

    Closed ledger: the worst-entry category, one finding per ledger as the Java replicas check buckets
    it. Open / in-recovery ledger (coverage up to the LAC): truncation_risk, plus entries below the ack
    quorum or without replica (acknowledged entries); below-write-quorum is not reported there because
    the writes to the remaining WQ - AQ members may still be in flight.
    Over-replication (a bookie holding entries it should not) is an info finding either way.
    """
    out: list[Finding] = []
    closed = coverage.state is LedgerState.CLOSED
    worst = coverage.worst
    if worst is not None and (closed or worst is not Category.ENTRY_BELOW_WRITE_QUORUM):
        bucket = coverage.buckets[worst]
        n = bucket.confirmed.count()
        detail = coverage.summary(text_limit)
        out.append(
            Finding.of(
                worst,
                f"ledger {metadata.ledger_id}: {n} entr{'y' if n == 1 else 'ies'} {_DESCRIBE[worst]} "
                f"(least copies {coverage.least_copies_at_most} of WQ {coverage.write_quorum}, "
                f"AQ {coverage.ack_quorum})",
                metadata=metadata,
                affected=bucket.confirmed,
                text_limit=text_limit,
                method=method,
                unknown_bookies=coverage.unknown_bookies,
                detail=detail,
                first_entry_id=bucket.confirmed.first,
                last_entry_id=bucket.confirmed.last,
            )
        )
    if not closed and coverage.truncation.confirmed:
        risk = coverage.truncation
        point = risk.point
        assert point is not None
        lost = coverage.end - point + 1
        out.append(
            Finding.of(
                Category.TRUNCATION_RISK,
                f"ledger {metadata.ledger_id} ({coverage.state.name}): entry {point} is absent on "
                f">= {risk.threshold} bookies of its write set; a recovery reading it would close the ledger at "
                f"{point - 1} and lose {lost} acknowledged entries up to LAC {coverage.end}",
                metadata=metadata,
                affected=risk.confirmed,
                text_limit=text_limit,
                method=method,
                unknown_bookies=coverage.unknown_bookies,
                entry_id=point,
                detail={
                    "threshold": risk.threshold,
                    "truncation_point": point,
                    "lac": coverage.end,
                    "entries_lost_if_recovered": lost,
                    "possible_point": risk.possible_point,
                },
            )
        )
    # Only entry lists show what a bookie holds beyond its schedule: reads (a sample above all) ask only
    # for scheduled entries, so with any read-based answer there is nothing to say (nor to build).
    lists_only = method in _LISTS_ONLY  # a Method is a str: equal to its value
    over = dict(coverage.overreplicated) if lists_only else {}
    beyond = coverage.beyond_end if closed and lists_only else {}
    if over or beyond:
        bookies = sorted(set(over) | set(beyond))
        total = sum(s.count() for s in over.values()) + sum(len(r) for r in beyond.values())
        out.append(
            Finding.of(
                Category.OVERREPLICATED,
                f"ledger {metadata.ledger_id}: {len(bookies)} bookie(s) hold {total} entr{'y' if total == 1 else 'ies'} "
                "the schedule does not place on them",
                metadata=metadata,
                method=method,
                detail={
                    "bookies": {
                        b: {
                            "unexpected": over[b].count() if b in over else 0,
                            "unexpected_ranges": over[b].to_text(text_limit) if b in over else "",
                            "beyond_last_entry": len(beyond[b]) if b in beyond else 0,
                            "beyond_ranges": beyond[b].to_text(text_limit) if b in beyond else "",
                        }
                        for b in bookies
                    }
                },
            )
        )
    return out


# --------------------------------------------------------------------------------------------------
# (d) reportable or suspect


class Disposition(str, enum.Enum):
    CLEAN = "clean"  # nothing wrong, nothing unknown
    REPORT = "report"  # findings that no pending answer can change
    RECHECK = "recheck"  # an unknown answer could change the verdict: delayed re-check queue
    SKIP = "skip"  # already marked under-replicated (and not for too long)


@dataclass(frozen=True, slots=True)
class Triage:
    disposition: Disposition
    reasons: tuple[str, ...]
    unknown_bookies: tuple[str, ...]  # to re-ask (and to judge with unreachable_bookie_finding)


def triage(coverage: Coverage) -> Triage:
    closed = coverage.state is LedgerState.CLOSED
    reasons = []
    if coverage.unknown_bookies:
        if coverage.verdict_may_change:
            reasons.append(
                f"worst category {_name(coverage.worst)} could become "
                f"{_name(coverage.worst_possible)} once {', '.join(coverage.unknown_bookies)} answer"
            )
        if not closed and coverage.truncation_may_change:
            reasons.append("truncation risk depends on unknown bookies")
        if reasons:
            return Triage(Disposition.RECHECK, tuple(reasons), coverage.unknown_bookies)
    reportable = (
        coverage.worst is not None and (closed or coverage.worst is not Category.ENTRY_BELOW_WRITE_QUORUM)
    ) or (not closed and bool(coverage.truncation.confirmed))
    if reportable:
        return Triage(Disposition.REPORT, (f"worst category {_name(coverage.worst)}",), coverage.unknown_bookies)
    return Triage(Disposition.CLEAN, (), coverage.unknown_bookies)


def _name(c: Category | None) -> str:
    return c.value if c else "none"


# --------------------------------------------------------------------------------------------------
# (e) metadata re-read before reporting


@dataclass(frozen=True, slots=True)
class MetadataChange:
    changed: bool
    deleted: bool
    reasons: tuple[str, ...]

    @property
    def action(self) -> str:
        """ "drop" (ledger gone), "redo" (analyse again), or "report"."""
        return "drop" if self.deleted else "redo" if self.changed else "report"


def compare_metadata(first: LedgerMetadata, reread: LedgerMetadata | None) -> MetadataChange:
    """Did the metadata change between the analysis and the report (BP-34)? `reread` None = deleted."""
    if reread is None:
        return MetadataChange(True, True, ("ledger deleted",))
    reasons = []
    if first.version is not None and reread.version is not None and first.version != reread.version:
        reasons.append(f"znode version {first.version} -> {reread.version}")
    if first.state is not reread.state:
        reasons.append(f"state {first.state.name} -> {reread.state.name}")
    if first.last_entry_id != reread.last_entry_id:
        reasons.append(f"last entry {first.last_entry_id} -> {reread.last_entry_id}")
    if first.length != reread.length:
        reasons.append(f"length {first.length} -> {reread.length}")
    if first.segments != reread.segments:
        reasons.append(f"segments changed ({len(first.segments)} -> {len(reread.segments)})")
    if (first.ensemble_size, first.write_quorum, first.ack_quorum) != (
        reread.ensemble_size,
        reread.write_quorum,
        reread.ack_quorum,
    ):
        reasons.append("quorum sizes changed")
    if first.ledger_id != reread.ledger_id:
        reasons.append("different ledger")
    return MetadataChange(bool(reasons), False, tuple(reasons))


# --------------------------------------------------------------------------------------------------
# Placement and bookie availability findings


def placement_finding(metadata: LedgerMetadata, verdict: PlacementVerdict) -> Finding | None:
    category = verdict.category
    if category is None:
        return None
    seg = verdict.offending[0]
    quorum = seg.verdict.quorums[0] if seg.verdict.quorums else None
    where = (
        f"write quorum at index {quorum.start_index} {list(quorum.members)} in "
        f"{list(quorum.locations)}: {'; '.join(quorum.reasons)}"
        if quorum
        else "; ".join(seg.verdict.reasons)
    )
    return Finding.of(
        category,
        f"ledger {metadata.ledger_id}: {len(verdict.offending)} segment(s) "
        f"{'break' if category is Category.PLACEMENT_VIOLATION else 'only softly meet'} the placement policy; "
        f"segment {seg.segment_index}: {where}",
        metadata=metadata,
        method=Method.METADATA,
        segment_index=seg.segment_index,
        first_entry_id=seg.first_entry_id,
        last_entry_id=seg.last_entry_id,
        ensemble=seg.ensemble,
        detail=verdict.detail(),
    )


def unreachable_bookie_finding(
    bookie: str, *, registered: bool, attempts: int, ledgers: Iterable[LedgerId] = (), error: str = ""
) -> Finding | None:
    """After the delayed re-checks: a bookie that still does not answer is a finding only while it is
    registered (BP-34: the auditor must know about an unavailable bookie; an unregistered one is the
    bookie check's lost bookie, not a silent failure)."""
    if not registered:
        return None
    ids = sorted({lid.qualified_name for lid in ledgers})
    return Finding.of(
        Category.BOOKIE_UNREACHABLE,
        f"bookie {bookie} is registered but did not answer {attempts} attempt(s)" + (f": {error}" if error else ""),
        bookie=bookie,
        method=Method.REGISTRATION,
        detail={"attempts": attempts, "error": error, "ledgers": len(ids), "sample_ledgers": ids[:20]},
    )


def confirm(first_pass: Iterable[Finding], second_pass: Iterable[Finding]) -> list[Finding]:
    """Findings of the re-check that the first pass also saw, marked confirmed (others are dropped).

    A copy that fails verification is confirmed only when the re-read returned the same bytes (same
    stored and computed digest, same problems; for a READ_LAC body, the same bytes): a stored copy reads
    back identically, whereas a copy damaged on the way (a corrupting link, a bad NIC) fails differently
    each time, or not at all."""
    seen = {f.dedup_key(): f for f in first_pass}
    return [f.confirm() for f in second_pass if f.dedup_key() in seen and _same_copy(seen[f.dedup_key()], f)]


def confirm_damage(confirmed: Iterable[Finding], third_pass: Iterable[Finding]) -> list[Finding]:
    """Keep a confirmed digest mismatch only when a third read returned the same bytes again.

    One flipped bit on the way lands on the same bit of a small answer (a READ_ENTRY reply of a 64-byte
    entry is about a thousand bits) on two reads about once in a thousand pairs: the chaos campaign saw
    it once in 12 corrupting-link rounds. A third identical read makes such a coincidence about a
    thousand times rarer again, while a copy the bookie really holds reads back the same every time.
    Findings of other categories pass unchanged."""
    again = {f.dedup_key(): f for f in third_pass}
    return [
        f
        for f in confirmed
        if f.category is not Category.DIGEST_MISMATCH
        or (f.dedup_key() in again and _same_copy(f, again[f.dedup_key()]))
    ]


def _same_copy(first: Finding, second: Finding) -> bool:
    if first.category is not Category.DIGEST_MISMATCH:
        return True
    keys = ("storedDigest", "computedDigest", "problems", "bodyFingerprint")
    return all(first.detail.get(k) == second.detail.get(k) for k in keys)


# --------------------------------------------------------------------------------------------------
# One ledger, steps 1-4


@dataclass(frozen=True)
class LedgerScrutiny:
    ledger_id: LedgerId
    disposition: Disposition
    findings: tuple[Finding, ...]  # reportable (after the metadata re-read)
    pending: tuple[Finding, ...]  # coverage findings held for the re-check
    reasons: tuple[str, ...] = ()
    recheck_bookies: tuple[str, ...] = ()
    coverage: Coverage | None = field(default=None, repr=False)
    placement: PlacementVerdict | None = field(default=None, repr=False)


def scrutinize_ledger(
    metadata: LedgerMetadata,
    answers: Mapping[str, Answer] | None,
    *,
    end: int | None = None,
    policy: PlacementPolicy | None = None,
    locations: Mapping[str, str | None] | None = None,
    marked_underreplicated: bool = False,
    marker_ctime_ms: int | None = None,
    missing_replicas: Iterable[str] = (),
    grace_period_s: int = 0,
    now_ms: int = 0,
    writable_bookies: int | None = None,
    method: str | Method = Method.ENTRY_LIST,
    text_limit: int = DEFAULT_TEXT_LIMIT,
    expected: Mapping[str, StripedSet] | None = None,
    exact: Collection[str] = (),
) -> LedgerScrutiny:
    """Steps 1-4 for one ledger. `answers` None: no entry lists were gathered (metadata checks only).
    An open ledger needs `end` (the LAC `ledgerend.decide_end` proves) for its coverage; placement is judged for closed
    ledgers only, as the Java auditor does (an open ledger's last ensemble may still change)."""
    lid = metadata.ledger_id
    if marked_underreplicated:
        f = underreplicated_finding(
            lid, marker_ctime_ms, grace_period_s, now_ms, missing_replicas=missing_replicas, metadata=metadata
        )
        if f is None:
            return LedgerScrutiny(lid, Disposition.SKIP, (), (), ("already marked under-replicated",))
        return LedgerScrutiny(lid, Disposition.REPORT, (f,), (), ("under-replicated for too long",))

    findings: list[Finding] = []
    risky = risky_quorum_finding(metadata, writable_bookies=writable_bookies)
    if risky is not None:
        findings.append(risky)
    if risky is not None and "invalid" in risky.detail["codes"]:
        return LedgerScrutiny(lid, Disposition.REPORT, tuple(findings), (), ("invalid quorum settings",))

    placement = None
    if policy is not None and metadata.is_closed:
        try:
            placement = check_ledger(metadata, policy, locations or {})
        except ValueError as exc:
            return _unreadable(metadata, findings, exc)
        pf = placement_finding(metadata, placement)
        if pf is not None:
            findings.append(pf)

    coverage = None
    pending: list[Finding] = []
    reasons: list[str] = []
    recheck: tuple[str, ...] = ()
    needs_recheck = False
    if answers is not None and (metadata.is_closed or end is not None):
        try:
            # What a bookie holds beyond its share is judged from entry lists only (`durability_findings`).
            coverage = analyze_coverage(
                metadata,
                answers,
                end,
                expected,
                beyond_share=method in _LISTS_ONLY,
                known_exact=exact if expected else (),
            )
        except ValueError as exc:
            return _unreadable(metadata, findings, exc)
        t = triage(coverage)
        recheck = t.unknown_bookies
        reasons.extend(t.reasons)
        found = durability_findings(metadata, coverage, method=method, text_limit=text_limit)
        # Metadata-only findings stay reportable; what the entry lists say waits when an unknown answer
        # could still change it.
        needs_recheck = t.disposition is Disposition.RECHECK
        (pending if needs_recheck else findings).extend(found)
    disposition = Disposition.RECHECK if needs_recheck else Disposition.REPORT if findings else Disposition.CLEAN
    return LedgerScrutiny(
        lid, disposition, tuple(findings), tuple(pending), tuple(reasons), recheck, coverage, placement
    )


def _unreadable(metadata: LedgerMetadata, findings: list[Finding], exc: Exception) -> LedgerScrutiny:
    f = Finding.of(
        Category.METADATA_UNREADABLE,
        f"ledger {metadata.ledger_id}: inconsistent metadata: {exc}",
        metadata=metadata,
        method=Method.METADATA,
        detail={"error": str(exc)},
    )
    return LedgerScrutiny(metadata.ledger_id, Disposition.REPORT, tuple(findings) + (f,), (), (str(exc),))


class MarkedState(str, enum.Enum):
    """What the bookies say now about a ledger that carries an under-replication marker."""

    BROKEN = "broken"  # entries are still below their write quorum (or worse)
    STALE = "stale"  # every entry is on its whole write quorum: the marker outlived the problem
    UNKNOWN = "unknown"  # some bookie did not answer, and its answer could decide it


@dataclass(frozen=True, slots=True)
class MarkedVerdict:
    state: MarkedState
    worst: Category | None  # the worst entry category while BROKEN (or already certain while UNKNOWN)
    entries: int  # entries in that worst category
    reasons: tuple[str, ...] = ()


def marked_verdict(scrutiny: LedgerScrutiny) -> MarkedVerdict:
    """The verdict on a marked ledger from a scrutiny of its bookies' answers made as if it were not
    marked. Unknown is never missing: pending findings (held for a re-check) only say what is certain
    so far, and the state stays UNKNOWN."""
    entry = [f for f in (*scrutiny.findings, *scrutiny.pending) if f.category in ENTRY_CATEGORIES]
    worst = min(entry, key=lambda f: ENTRY_CATEGORIES.index(f.category), default=None)
    n = worst.affected_count if worst is not None else 0
    if scrutiny.disposition is Disposition.RECHECK:
        return MarkedVerdict(MarkedState.UNKNOWN, worst.category if worst else None, n, scrutiny.reasons)
    if worst is not None:
        return MarkedVerdict(MarkedState.BROKEN, worst.category, n, scrutiny.reasons)
    return MarkedVerdict(MarkedState.STALE, None, 0, scrutiny.reasons)
