"""The operator questions' answers on the wire: what the CLI's --admin form rebuilds from the daemon's
message is exactly the report the direct form computes (so both print the same), the access rules count
the two Set calls as mutations, and their errors carry the statuses of the one table."""

from __future__ import annotations

import grpc
import pytest

from auditor._proto import admin_pb2 as pb
from auditor.admin.access import AccessPolicy, Peer
from auditor.admin.errors import (
    InvalidArgumentError,
    NotConnectedError,
    PermissionDeniedError,
    QuestionTimeoutError,
    UnauthenticatedError,
    status_of,
)
from auditor.admin.questions import decommission_from_pb, decommission_to_pb, marked_from_pb, marked_to_pb
from auditor.checks.decommission import DecommissionReport, LedgerOnBookie
from auditor.checks.underreplicated import MarkedLedger
from auditor.durability.decommission import LedgerDecommission
from auditor.durability.ids import LedgerId
from auditor.durability.ranges import RangeSet
from auditor.metadata.errors import ConcurrentUpdateError, MetadataConfigError, MissingZnodeError


def _row(ledger: LedgerId, verdict: LedgerDecommission | None, **kw: object) -> LedgerOnBookie:
    base: dict[str, object] = dict(
        ledger=ledger,
        closed=True,
        segments=(0, 2),
        verdict=verdict,
        marked_seconds=None,
        lock_holder=None,
        locked_seconds=None,
        reason="why",
    )
    return LedgerOnBookie(**(base | kw))  # type: ignore[arg-type]


def _report() -> DecommissionReport:
    lost = LedgerDecommission(RangeSet.of([(0, 9), (12, 12)]), RangeSet(), RangeSet(), False, ())
    unsure = LedgerDecommission(RangeSet(), RangeSet.span(3, 4), RangeSet.span(5, 7), True, ("b1:3181", "b2:3181"))
    clean = LedgerDecommission(RangeSet(), RangeSet(), RangeSet(), False, ())
    return DecommissionReport(
        "x:3181",
        registered=False,
        replication_disabled=True,
        ledgers=[
            _row(LedgerId.of(7), lost),
            _row(LedgerId(5, 2**40), unsure, closed=False, marked_seconds=12.5, lock_holder="w-1", locked_seconds=3.0),
            _row(LedgerId.of(9), None, closed=False, segments=(1,)),
            _row(LedgerId.of(11), clean, marked_seconds=0.0),
        ],
        unreadable=["/ledgers/00/0000/L0001"],
    )


def test_decommission_report_survives_the_wire() -> None:
    report = _report()
    back = decommission_from_pb(pb.CanDecommissionResponse.FromString(decommission_to_pb(report).SerializeToString()))
    assert back == report and back.to_dict() == report.to_dict()
    assert not back.safe and [b.value for b in back.ledgers[2].blockers] == ["open_ledger"]
    safe = DecommissionReport("x:3181", True, False, [_row(LedgerId.of(1), _report().ledgers[3].verdict)])
    assert decommission_from_pb(decommission_to_pb(safe)).safe


def test_a_verdict_that_does_not_follow_from_the_answer_is_refused() -> None:
    msg = decommission_to_pb(_report())
    msg.safe = True  # a daemon that says "safe" while naming blockers must not print "safe"
    with pytest.raises(ValueError, match="x:3181: the daemon's verdict does not follow"):
        decommission_from_pb(msg)


def test_marked_ledgers_survive_the_wire() -> None:
    rows = [
        MarkedLedger(LedgerId.of(3), "/l/underreplication/ledgers/0000/0000/0000/urL0000000003", ("b:1",), 3600.0,
                     "worker-7", 12.0, "broken", "entry_under_replicated", 12, ("r1", "r2")),
        MarkedLedger(LedgerId(1, 5), "/m", (), None, None, None, "deleted", None, 0),
    ]  # fmt: skip
    back = marked_from_pb(pb.ListUnderreplicatedResponse.FromString(marked_to_pb(rows).SerializeToString()))
    assert back == rows and [m.to_dict() for m in back] == [m.to_dict() for m in rows]


def test_unset_optional_fields_stay_unset() -> None:
    msg = pb.RecoveryDelay(ledgers_root="/l", seconds=None, version=None)
    assert not msg.HasField("seconds") and not msg.HasField("version")
    assert pb.SetRecoveryDelayRequest(seconds=5, expected_version=None).HasField("expected_version") is False


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ConcurrentUpdateError("/l/underreplication/lostBookieRecoveryDelay", "changed"), grpc.StatusCode.ABORTED),
        (MissingZnodeError("/l/underreplication", "missing"), grpc.StatusCode.FAILED_PRECONDITION),
        (MetadataConfigError("lostBookieRecoveryDelay must be 0..2147483647 seconds, got -1"),
         grpc.StatusCode.INVALID_ARGUMENT),
        (InvalidArgumentError("'a b' is not a bookie id"), grpc.StatusCode.INVALID_ARGUMENT),
        (NotConnectedError("not connected"), grpc.StatusCode.FAILED_PRECONDITION),
        (QuestionTimeoutError("not answered within 1s"), grpc.StatusCode.DEADLINE_EXCEEDED),
    ],
)  # fmt: skip
def test_operator_errors_have_their_status(error: Exception, code: grpc.StatusCode) -> None:
    assert status_of(error) is code


def test_the_switch_changes_are_mutations_and_the_questions_reads() -> None:
    ops = Peer(authenticated=True, subject="CN=ops", names=("dns:ops",))
    reader = Peer(authenticated=True, subject="CN=reader", names=("dns:reader",))
    anonymous = Peer(authenticated=False)
    policy = AccessPolicy(tls=True, authorized_clients=frozenset({"dns:ops"}), unauthenticated_reads=True)
    for read in ("CanDecommission", "ListUnderreplicated", "WhoIsAuditor", "GetRecoveryDelay", "GetReplication"):
        policy.check(read, anonymous)
    for change in ("SetRecoveryDelay", "SetReplication"):
        policy.check(change, ops)
        with pytest.raises(PermissionDeniedError, match=f"^{change} refused: client certificate CN=reader"):
            policy.check(change, reader)
        with pytest.raises(UnauthenticatedError, match=f"^{change} refused: a mutating call"):
            policy.check(change, anonymous)
