"""Where a ledger ends, for the checks: the pure decision from metadata and the bookies' READ_LAC answers.

A closed ledger ends at its metadata's last entry id. An open (or in-recovery) ledger has no end in
its metadata; the checks take the highest last-add-confirmed (LAC) the bookies know, and every entry up
to that end is treated as acknowledged: missing copies there become gaps and `truncation_risk`. So the
end decides what can be reported, and a wrong, too high end invents losses. The rule here keeps the
end at or below what the evidence proves:

1. **The floor is what the metadata proves.** The end is never below it: for an open ledger the entry
   before the start of its last segment (a writer starts a new ensemble at LAC + 1, so everything before
   it was acknowledged) or the metadata's last entry id, whichever is higher.
2. **Each body of each answer is judged on its own** (`judge_lac_body`, `judge_last_entry_body`):
   the ledger id must be this ledger's, the digest must match, a LAC must be >= -1, and a stored last
   entry must have an entry id >= 0 and a piggybacked LAC below its own id (a writer only ever
   piggybacks the LAC it had before sending the entry). An empty body counts as absent, as in Java.
   * fails any check -> CORRUPT: evidence about that bookie (a `digest_mismatch` finding, confirmed
     by asking it again like every other finding), never an input to the end. The bookie's other body
     is not used either (Java's READ_LAC drops the whole answer on a digest failure).
   * passes with a real digest (CRC32, CRC32C, HMAC) -> VERIFIED: a writer's own statement.
   * passes, but the digest cannot be checked (DUMMY, no digest type known, HMAC without the
     password) -> UNVERIFIED: one flipped bit is undetectable.
3. **A candidate counts only as far as something held corroborates it:**
   * a VERIFIED LAC up to the highest entry id held in a VERIFIED stored last entry of any bookie (for
     a last entry's own LAC that is automatic: it is below the entry's id). This is what a recovery
     would learn (Java takes the maximum of verified answers), but an explicit LAC body that no stored
     entry backs cannot invent losses of entries no bookie holds;
   * an UNVERIFIED LAC only up to the highest LAC that some *other* bookie's usable answer states, and
     never above the highest entry id held in any usable stored last entry. One bookie's unverifiable
     bytes can therefore never raise the end above what the other bookies say: it takes two
     independent corruptions agreeing. (With one bookie in the last ensemble nothing corroborates an
     unverified LAC, and the end stays at the floor.)
4. **The end** is the highest corroborated candidate, and at least the floor. It is None (unknown:
   re-check later) only when no bookie answered at all.

A lower end is always safe: entries past it are simply not judged in this pass (never reported as
missing); the next pass, with more bookies answering, sees further.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from .entry import Verdict, verify_entry, verify_lac_body
from .findings import Category, Finding, Method
from .model import DigestType, LedgerMetadata

__all__ = [
    "Trust",
    "LacSource",
    "LacEvidence",
    "LedgerEnd",
    "judge_lac_body",
    "judge_last_entry_body",
    "judge_read_lac",
    "metadata_floor",
    "closed_end",
    "decide_end",
    "lac_findings",
]

# Digest types whose check means something: a changed bit fails them.
CHECKING_DIGESTS = frozenset({DigestType.CRC32, DigestType.CRC32C, DigestType.HMAC})


class Trust(enum.Enum):
    VERIFIED = "verified"
    UNVERIFIED = "unverified"
    CORRUPT = "corrupt"


class LacSource(str, enum.Enum):
    LAC_BODY = "lacBody"  # the explicit LAC a writer stored with WRITE_LAC
    LAST_ENTRY_BODY = "lastEntryBody"  # the bookie's highest stored entry, with the LAC it carries

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class LacEvidence:
    """One body of one bookie's READ_LAC answer, judged."""

    bookie: str
    source: LacSource
    trust: Trust
    lac: int | None  # the LAC it states (None when unreadable)
    entry_id: int | None  # lastEntryBody: the entry it holds (None for a LAC body, or when unreadable)
    detail: str  # "ok", or why it is not trusted
    problems: tuple[str, ...] = ()
    # Of the bytes judged: a body damaged on the way (a corrupting link) differs on each read, one the
    # bookie really holds reads back identically, so a rejection is confirmed only on the same bytes.
    fingerprint: str = ""


def fingerprint(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def _trust_of(verdict: Verdict, digest_type: DigestType | None) -> Trust:
    if verdict is Verdict.CORRUPT:
        return Trust.CORRUPT
    if verdict is Verdict.OK and digest_type in CHECKING_DIGESTS:
        return Trust.VERIFIED
    return Trust.UNVERIFIED


def judge_lac_body(bookie: str, body: bytes, md: LedgerMetadata) -> LacEvidence:
    v = verify_lac_body(body, ledger_id=md.ledger_id.ledger, digest_type=md.digest_type, password=md.password)
    trust = _trust_of(v.verdict, md.digest_type)
    problems: tuple[str, ...] = ()
    detail = v.detail
    if trust is Trust.CORRUPT:
        problems = ("lac body fails verification",)
    elif v.lac is None or v.lac < -1:
        trust, problems, detail = Trust.CORRUPT, ("impossible LAC",), f"LAC {v.lac} is below -1"
    return LacEvidence(bookie, LacSource.LAC_BODY, trust, v.lac, None, detail, problems, fingerprint(body))


def judge_last_entry_body(bookie: str, body: bytes, md: LedgerMetadata) -> LacEvidence:
    v = verify_entry(body, ledger_id=md.ledger_id, entry_id=None, digest_type=md.digest_type, password=md.password)
    header = v.header
    lac = header.last_add_confirmed if header is not None else None
    # An entry id read from another ledger's header means nothing for this ledger.
    own = header is not None and header.ledger_id == md.ledger_id
    entry_id = header.entry_id if own and header is not None else None
    trust = _trust_of(v.verdict, md.digest_type)
    problems = tuple(p.value for p in v.problems)
    detail = v.detail
    if trust is not Trust.CORRUPT and header is not None:
        if header.entry_id < 0:
            trust, problems, detail = Trust.CORRUPT, ("negative entry id",), f"stored entry id {header.entry_id}"
        elif not -1 <= header.last_add_confirmed < header.entry_id:
            trust, problems = Trust.CORRUPT, ("LAC not below the entry id",)
            detail = (
                f"entry {header.entry_id} carries LAC {header.last_add_confirmed}; a writer always "
                "piggybacks a LAC in [-1, entry id)"
            )
    if trust is Trust.CORRUPT and entry_id is not None and entry_id < 0:
        entry_id = None
    return LacEvidence(bookie, LacSource.LAST_ENTRY_BODY, trust, lac, entry_id, detail, problems, fingerprint(body))


def judge_read_lac(
    bookie: str, lac_body: bytes | None, last_entry_body: bytes | None, md: LedgerMetadata
) -> tuple[LacEvidence, ...]:
    """Both bodies of one READ_LAC answer (an absent or empty body gives nothing, as in Java)."""
    out = []
    if lac_body:
        out.append(judge_lac_body(bookie, lac_body, md))
    if last_entry_body:
        out.append(judge_last_entry_body(bookie, last_entry_body, md))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class LedgerEnd:
    """The last entry a check judges, and the evidence behind it."""

    end: int | None  # None: no bookie answered (re-check later)
    floor: int  # what the metadata alone proves
    basis: str  # why this end, for logs and `explain`
    rejected: tuple[LacEvidence, ...] = ()  # CORRUPT bodies: digest_mismatch material
    capped: tuple[tuple[LacEvidence, int], ...] = ()  # usable values held below what they state, and the cap

    @property
    def suspect_bookies(self) -> frozenset[str]:
        return frozenset(e.bookie for e in self.rejected)


def metadata_floor(md: LedgerMetadata) -> int:
    """The highest entry the metadata proves was acknowledged (-1: none)."""
    if md.is_closed:
        return md.last_entry_id
    before_segments = [s.first_entry_id - 1 for s in md.segments]
    return max([-1, md.last_entry_id, *before_segments])


def closed_end(md: LedgerMetadata) -> LedgerEnd:
    return LedgerEnd(md.last_entry_id, md.last_entry_id, "closed: last entry id in metadata")


def decide_end(md: LedgerMetadata, evidence: Iterable[LacEvidence], answered: bool) -> LedgerEnd:
    """The end of `md` given the judged READ_LAC bodies (see the module docstring for the rule).

    `answered`: at least one bookie gave an answer (bodies, or "no such ledger/entry")."""
    if md.is_closed:
        return closed_end(md)
    floor = metadata_floor(md)
    judged = list(evidence)
    rejected = tuple(e for e in judged if e.trust is Trust.CORRUPT)
    if not answered:
        return LedgerEnd(None, floor, "no bookie answered READ_LAC", rejected)
    bad = {e.bookie for e in rejected}
    usable = [e for e in judged if e.trust is not Trust.CORRUPT and e.bookie not in bad]

    held_verified = max(
        (e.entry_id for e in usable if e.trust is Trust.VERIFIED and e.entry_id is not None), default=-1
    )
    held_any = max((e.entry_id for e in usable if e.entry_id is not None), default=-1)
    stated: dict[str, int] = {}  # per bookie, the highest LAC its usable bodies state
    for e in usable:
        if e.lac is not None:
            stated[e.bookie] = max(stated.get(e.bookie, e.lac), e.lac)

    best, basis = floor, "metadata"
    capped: list[tuple[LacEvidence, int]] = []
    for e in usable:
        if e.lac is None:
            continue
        if e.trust is Trust.VERIFIED:
            cap = held_verified
        else:
            others = max((v for b, v in stated.items() if b != e.bookie), default=-1)
            cap = min(others, held_any)
        value = min(e.lac, cap)
        if value < e.lac:
            capped.append((e, cap))
        if value > best:
            best = value
            basis = f"{e.trust.value} {e.source.value} of bookie {e.bookie} (LAC {e.lac})"
    return LedgerEnd(best, floor, basis, rejected, tuple(capped))


def lac_findings(md: LedgerMetadata, end: LedgerEnd) -> list[Finding]:
    """One `digest_mismatch` per bookie whose READ_LAC answer failed verification."""
    out: list[Finding] = []
    seen: set[str] = set()
    for e in end.rejected:
        if e.bookie in seen:
            continue
        seen.add(e.bookie)
        what = f"entry {e.entry_id}" if e.entry_id is not None else e.source.value
        out.append(
            Finding.of(
                Category.DIGEST_MISMATCH,
                f"ledger {md.ledger_id}: bookie {e.bookie} answered READ_LAC with a {e.source.value} that fails "
                f"verification ({', '.join(e.problems) or e.detail}); {what} on it is not trusted",
                metadata=md,
                bookie=e.bookie,
                entry_id=e.entry_id,
                method=Method.READ,
                detail={
                    "source": e.source.value,
                    "problems": list(e.problems),
                    "why": e.detail,
                    "statedLac": e.lac,
                    "statedEntryId": e.entry_id,
                    "bodyFingerprint": e.fingerprint,
                },
            )
        )
    return out
