"""The operator questions' answers on the wire, both ways: the server sends the very reports the command
line's direct form computes (`DecommissionReport`, `MarkedLedger`), and the command line's `--admin` form
turns the messages back into them, so both forms print through one piece of code. `from_pb(to_pb(x)) == x`
(unit-tested)."""

from __future__ import annotations

from collections.abc import Iterable

from auditor._proto import admin_pb2 as pb
from auditor.checks.decommission import DecommissionReport, LedgerOnBookie
from auditor.checks.underreplicated import MarkedLedger
from auditor.durability.decommission import LedgerDecommission
from auditor.durability.ids import LedgerId
from auditor.durability.ranges import RangeSet


def _ranges(rs: RangeSet) -> list[pb.EntryRange]:
    return [pb.EntryRange(first=a, last=b) for a, b in rs.ranges]


def _rangeset(ranges: Iterable[pb.EntryRange]) -> RangeSet:
    return RangeSet.of((r.first, r.last) for r in ranges)


def _opt(msg: object, name: str) -> float | None:
    return getattr(msg, name) if msg.HasField(name) else None  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------ can-decommission


def decommission_to_pb(report: DecommissionReport) -> pb.CanDecommissionResponse:
    msg = pb.CanDecommissionResponse(
        bookie=report.bookie,
        safe=report.safe,
        registered=report.registered,
        replication_disabled=report.replication_disabled,
        unreadable_metadata=list(report.unreadable),
    )
    for x in report.ledgers:
        v = x.verdict
        row = msg.ledgers.add(
            ledger=x.ledger.qualified_name,
            ledger_id=x.ledger.ledger,
            closed=x.closed,
            segments=list(x.segments),
            blockers=[b.value for b in x.blockers],
            judged=v is not None,
            lock_holder=x.lock_holder or "",
            reason=x.reason,
            marked_seconds=x.marked_seconds,
            locked_seconds=x.locked_seconds,
        )
        if v is not None:
            row.only_here.extend(_ranges(v.lost))
            row.unconfirmed.extend(_ranges(v.unsure))
            row.fewer_copies.extend(_ranges(v.thin))
            row.unanswered.extend(v.unanswered)
            row.open_last_segment = v.open_last_segment
    return msg


def decommission_from_pb(msg: pb.CanDecommissionResponse) -> DecommissionReport:
    rows = []
    for x in msg.ledgers:
        verdict = (
            LedgerDecommission(
                lost=_rangeset(x.only_here),
                unsure=_rangeset(x.unconfirmed),
                thin=_rangeset(x.fewer_copies),
                open_last_segment=x.open_last_segment,
                unanswered=tuple(x.unanswered),
            )
            if x.judged
            else None
        )
        rows.append(
            LedgerOnBookie(
                ledger=LedgerId.parse(x.ledger),
                closed=x.closed,
                segments=tuple(x.segments),
                verdict=verdict,
                marked_seconds=_opt(x, "marked_seconds"),
                lock_holder=x.lock_holder or None,
                locked_seconds=_opt(x, "locked_seconds"),
                reason=x.reason,
            )
        )
    report = DecommissionReport(
        msg.bookie, msg.registered, msg.replication_disabled, rows, list(msg.unreadable_metadata)
    )
    # The verdict travels as its parts; a server that judged otherwise would show here, not silently.
    if report.safe != msg.safe or any(
        [b.value for b in r.blockers] != list(x.blockers) for r, x in zip(rows, msg.ledgers, strict=True)
    ):
        raise ValueError(f"can-decommission {msg.bookie}: the daemon's verdict does not follow from its answer")
    return report


# ------------------------------------------------------------------------------------------ underreplicated


def marked_to_pb(rows: Iterable[MarkedLedger]) -> pb.ListUnderreplicatedResponse:
    msg = pb.ListUnderreplicatedResponse()
    for m in rows:
        msg.ledgers.add(
            ledger=m.ledger.qualified_name,
            ledger_id=m.ledger.ledger,
            marker=m.marker,
            replicas=list(m.replicas),
            marked_seconds=m.marked_seconds,
            lock_holder=m.lock_holder or "",
            locked_seconds=m.locked_seconds,
            verdict=m.verdict,
            worst_category=m.worst or "",
            entries=m.entries,
            reasons=list(m.reasons),
        )
    return msg


def marked_from_pb(msg: pb.ListUnderreplicatedResponse) -> list[MarkedLedger]:
    return [
        MarkedLedger(
            ledger=LedgerId.parse(m.ledger),
            marker=m.marker,
            replicas=tuple(m.replicas),
            marked_seconds=_opt(m, "marked_seconds"),
            lock_holder=m.lock_holder or None,
            locked_seconds=_opt(m, "locked_seconds"),
            verdict=m.verdict,
            worst=m.worst_category or None,
            entries=m.entries,
            reasons=tuple(m.reasons),
        )
        for m in msg.ledgers
    ]
