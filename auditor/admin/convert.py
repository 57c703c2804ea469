"""The backend's answers (models.py) as the protobuf messages of `bkauditor.admin.v1`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from auditor._proto import admin_pb2 as pb
from auditor.board.findings import FindingRecord
from auditor.board.tasks import TaskInfo
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata

from .models import LedgerExplanation, StatusSnapshot


def task_to_pb(t: TaskInfo) -> pb.TaskStatus:
    msg = pb.TaskStatus(
        name=t.name,
        state=str(t.state),
        last_error=t.last_error or "",
        done=t.done,
        cursor=t.cursor or "",
        runs=t.runs,
        failures=t.failures,
        restarts=t.restarts,
    )
    for name in (
        "interval_seconds",
        "last_start",
        "last_finish",
        "last_success",
        "last_error_at",
        "total",
        "eta_seconds",
        "rate_per_second",
        "next_run",
        "restart_at",
    ):
        value = getattr(t, name)
        if value is not None:
            setattr(msg, name, value)
    return msg


def status_to_pb(s: StatusSnapshot) -> pb.StatusResponse:
    msg = pb.StatusResponse(
        identity=s.identity,
        leader=s.is_leader,
        leader_identity=s.leader or "",
        paused=s.paused,
        pause_reason=s.pause_reason,
        tasks=[task_to_pb(t) for t in s.tasks],
        recheck_queue_depth=s.recheck_queue_depth,
        finding_counts=dict(s.finding_counts),
        version=s.version,
        started_at=s.started_at,
        leadership=s.leadership,
        vote_path=s.vote_path or "",
        findings_source=s.findings_source,
        findings_saved_by=s.findings_saved_by,
        paused_by=s.paused_by,
    )
    if s.findings_as_of is not None:
        msg.findings_as_of = s.findings_as_of
    if s.paused_since is not None:
        msg.paused_since = s.paused_since
    if s.leader_since is not None:
        msg.leader_since = s.leader_since
    return msg


def key_text(key: Any) -> str:
    """A finding's dedup key as the API shows it (and takes back: `trigger --finding`)."""
    if isinstance(key, tuple):
        return json.dumps(list(key), default=str, separators=(",", ":"))
    return str(key)


def finding_to_pb(rec: FindingRecord) -> pb.Finding:
    f = rec.finding
    ledger: LedgerId | None = f.ledger
    msg = pb.Finding(
        category=rec.category,
        severity=rec.severity,
        message=str(getattr(f, "message", "")),
        ledger_id=str(ledger) if ledger is not None else "",
        qualified_name=ledger.qualified_name if ledger is not None else "",
        bookie_id=f.bookie or "",
        confirmed=bool(f.confirmed),
        dedup_key=key_text(rec.key),
        check=rec.check or "",
        first_seen=rec.first_seen,
        last_seen=rec.last_seen,
        times_seen=rec.times_seen,
        fields_json=json.dumps(f.to_log_dict(), default=str, sort_keys=True),
    )
    if rec.resolved_at is not None:
        msg.resolved_at = rec.resolved_at
    return msg


def _ranges(missing: Any) -> list[tuple[int, int]]:
    ranges = getattr(missing, "ranges", None)
    pairs = ranges if ranges is not None else missing
    return [(int(a), int(b)) for a, b in pairs]


def _custom_text(value: bytes | str) -> str:
    if isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + bytes(value).hex()


def metadata_to_pb(md: LedgerMetadata) -> pb.LedgerMetadataView:
    msg = pb.LedgerMetadataView(
        ledger_id=str(md.ledger_id),
        qualified_name=md.ledger_id.qualified_name,
        state=md.state.name,
        ensemble_size=md.ensemble_size,
        write_quorum=md.write_quorum,
        ack_quorum=md.ack_quorum,
        last_entry_id=md.last_entry_id,
        length=md.length,
        digest_type=md.digest_type.name if md.digest_type is not None else "",
        custom_metadata={k: _custom_text(v) for k, v in md.custom_metadata.items()},
        format_version=md.format_version,
    )
    if md.ctime is not None:
        msg.ctime = md.ctime
    if md.version is not None:
        msg.metadata_version = md.version
    return msg


def explanation_to_pb(e: LedgerExplanation, findings: Iterable[FindingRecord]) -> pb.ExplainLedgerResponse:
    msg = pb.ExplainLedgerResponse(
        under_replicated=e.under_replicated, notes=list(e.notes), findings=[finding_to_pb(r) for r in findings]
    )
    if e.metadata is not None:
        msg.metadata.CopyFrom(metadata_to_pb(e.metadata))
    for seg in e.segments:
        s = msg.segments.add(
            index=seg.index,
            first_entry_id=seg.first_entry_id,
            last_entry_id=seg.last_entry_id,
            ensemble=list(seg.ensemble),
        )
        if seg.min_copies is not None:
            s.min_copies = seg.min_copies
        for b in seg.bookies:
            bc = s.bookies.add(
                bookie_id=b.bookie,
                ensemble_index=b.ensemble_index,
                status=b.status,
                expected_entries=b.expected_entries,
                error=b.error,
                registered=b.registered,
                missing=[pb.EntryRange(first=a, last=z) for a, z in _ranges(b.missing)],
            )
            if b.present_entries is not None:
                bc.present_entries = b.present_entries
    return msg
