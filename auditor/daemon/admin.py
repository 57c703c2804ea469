"""The admin API: a grpc.aio server with our `bkauditor.admin.v1.AdminService`, the standard gRPC health
service (for Kubernetes gRPC probes) and, when grpcio-reflection is installed, server reflection (grpcurl).

The daemon plugs in through `AdminBackend`; `StateBackend` implements it from a `DaemonState` plus two
callables the daemon supplies (`trigger`, `explain`). `AdminClient` is the client the CLI uses.

Health service names (grpc.health.v1):
* `liveness`  - SERVING while the server runs (answered on the event loop, so a wedged loop fails it);
* `readiness` - set by the daemon (process healthy and ZooKeeper session connected); standbys are ready;
* `leader`    - SERVING only on the elected leader whose leadership is confirmed (answered from the live
                state at each check: a process resuming after a freeze never reports a leadership it may
                have lost meanwhile; see auditor/daemon/watchdog.py);
* ``          - overall: mirrors readiness.
All flip to NOT_SERVING when `stop()` begins.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from auditor import __version__
from auditor._proto import admin_pb2 as pb
from auditor._proto import admin_pb2_grpc as pb_grpc
from auditor.durability.ids import LedgerId, LedgerIdError
from auditor.durability.javatext import shown
from auditor.settings import parse_bind

from .state import DaemonState, FindingRecord, TaskInfo
from .supervisor import Supervisor

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["AdminService"].full_name
HEALTH_LIVENESS = "liveness"
HEALTH_READINESS = "readiness"
HEALTH_LEADER = "leader"
HEALTH_OVERALL = ""
DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


# ------------------------------------------------------------------------------------------ errors


class AdminError(Exception):
    """Base of the errors a backend raises on purpose; each maps to one gRPC status."""

    code = grpc.StatusCode.INTERNAL


class NotLeaderError(AdminError):
    """A leader-only request reached a standby."""

    code = grpc.StatusCode.FAILED_PRECONDITION

    def __init__(self, leader: str | None = None) -> None:
        self.leader = leader
        where = f"the leader is {leader}" if leader else "the leader is not known"
        super().__init__(f"this replica is a standby; {where}")


class UnknownCheckError(AdminError, KeyError):
    code = grpc.StatusCode.NOT_FOUND

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown check"


class LedgerNotFoundError(AdminError, LookupError):
    code = grpc.StatusCode.NOT_FOUND


class NotSupportedError(AdminError):
    """The daemon did not plug in this capability."""

    code = grpc.StatusCode.UNIMPLEMENTED


# ------------------------------------------------------------------------------------------ data


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    identity: str
    is_leader: bool
    leader: str | None
    paused: bool
    pause_reason: str
    paused_since: float | None
    tasks: list[TaskInfo]
    recheck_queue_depth: int
    finding_counts: Mapping[str, int]
    started_at: float
    leader_since: float | None = None
    version: str = __version__
    leadership: str = "standby"  # leader | unconfirmed | standby (state.Leadership.status)
    vote_path: str | None = None


@dataclass(frozen=True, slots=True)
class TriggerResult:
    accepted: bool
    message: str = ""


@dataclass(frozen=True, slots=True)
class BookieCopies:
    """What one ensemble member holds of one segment. `missing` is a RangeSet or (first, last) pairs."""

    bookie: str
    ensemble_index: int
    status: str  # ok | missing | unreachable | not_checked | error
    expected_entries: int = 0
    present_entries: int | None = None
    missing: Any = ()
    error: str = ""
    registered: bool = True


@dataclass(frozen=True, slots=True)
class SegmentCopies:
    index: int
    first_entry_id: int
    last_entry_id: int
    ensemble: tuple[str, ...]
    bookies: list[BookieCopies] = field(default_factory=list)
    min_copies: int | None = None


@dataclass(frozen=True, slots=True)
class LedgerExplanation:
    """What the daemon's `explain` returns. `metadata` is an auditor.durability.model.LedgerMetadata."""

    metadata: Any
    segments: list[SegmentCopies] = field(default_factory=list)
    under_replicated: bool = False
    notes: list[str] = field(default_factory=list)


class AdminBackend(Protocol):
    """What the admin service needs from the daemon."""

    def status(self) -> StatusSnapshot: ...

    def query_findings(
        self, *, category: str | None, ledger: LedgerId | None, bookie: str | None, include_resolved: bool
    ) -> list[FindingRecord]: ...

    async def trigger(self, check: str) -> TriggerResult: ...

    async def explain(self, ledger: LedgerId) -> LedgerExplanation: ...

    async def pause(self, reason: str) -> bool: ...

    async def resume(self) -> bool: ...


TriggerFn = Callable[[str], Awaitable[TriggerResult | bool | None]]
ExplainFn = Callable[[LedgerId], Awaitable[LedgerExplanation]]


class StateBackend:
    """AdminBackend over a DaemonState. `trigger` runs only on the leader (standbys raise NotLeaderError)
    and only for tasks on the board; `explain` works on any replica."""

    def __init__(
        self,
        state: DaemonState,
        *,
        trigger: TriggerFn | None = None,
        explain: ExplainFn | None = None,
        version: str = __version__,
    ) -> None:
        self.state = state
        self._trigger = trigger
        self._explain = explain
        self.version = version

    def status(self) -> StatusSnapshot:
        s = self.state
        lead = s.leadership
        assert lead is not None
        confirmed = lead.confirmed
        return StatusSnapshot(
            identity=s.identity,
            is_leader=confirmed,
            leader=lead.leader if confirmed or not lead.is_leader else None,
            paused=s.pause.paused,
            pause_reason=s.pause.reason,
            paused_since=s.pause.since,
            tasks=s.tasks.snapshot(),
            recheck_queue_depth=s.recheck_depth(),
            finding_counts=s.findings.counts(),
            started_at=s.started_at,
            leader_since=lead.since if lead.is_leader else None,
            version=self.version,
            leadership=lead.status,
            vote_path=lead.vote_path,
        )

    def query_findings(
        self,
        *,
        category: str | None = None,
        ledger: LedgerId | None = None,
        bookie: str | None = None,
        include_resolved: bool = False,
    ) -> list[FindingRecord]:
        return self.state.findings.query(
            category=category, ledger=ledger, bookie=bookie, include_resolved=include_resolved
        )

    async def trigger(self, check: str) -> TriggerResult:
        if check not in self.state.tasks:
            raise UnknownCheckError(f"unknown check {shown(check)}; known: {', '.join(self.state.tasks.names())}")
        lead = self.state.leadership
        assert lead is not None
        if not lead.confirmed:
            raise NotLeaderError(lead.leader if not lead.is_leader else None)
        if self._trigger is None:
            raise NotSupportedError("this daemon cannot trigger checks")
        result = await self._trigger(check)
        if isinstance(result, TriggerResult):
            return result
        accepted = result is None or bool(result)
        return TriggerResult(accepted, f"{check} {'triggered' if accepted else 'is already running or queued'}")

    async def explain(self, ledger: LedgerId) -> LedgerExplanation:
        if self._explain is None:
            raise NotSupportedError("this daemon cannot explain ledgers")
        return await self._explain(ledger)

    async def pause(self, reason: str) -> bool:
        changed = self.state.pause.pause(reason)
        self.state.tasks.pause_all()
        return changed

    async def resume(self) -> bool:
        changed = self.state.pause.resume()
        self.state.tasks.resume_all()
        return changed


# ------------------------------------------------------------------------------------------ conversion


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
    )
    if s.paused_since is not None:
        msg.paused_since = s.paused_since
    if s.leader_since is not None:
        msg.leader_since = s.leader_since
    return msg


def _key_text(key: Any) -> str:
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
        dedup_key=_key_text(rec.key),
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


def metadata_to_pb(md: Any) -> pb.LedgerMetadataView:
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


# ------------------------------------------------------------------------------------------ servicer


def _short(message: str, limit: int = 1000) -> str:
    return message if len(message) <= limit else message[:limit] + f"... ({len(message)} characters)"


def _parse_ledger(text: str) -> LedgerId:
    return LedgerId.parse(text)


class AdminServicer(pb_grpc.AdminServiceServicer):
    def __init__(self, backend: AdminBackend) -> None:
        self.backend = backend

    async def _fail(self, context: aio.ServicerContext, exc: BaseException) -> None:
        # Details travel as a gRPC trailer (16 KiB at most): a message quoting a huge input would turn
        # the answer into RESOURCE_EXHAUSTED, so every message is cut to a readable length.
        message = _short(str(exc))
        if isinstance(exc, AdminError):
            await context.abort(exc.code, message)
        if type(exc).__name__ == "NotLeaderError":  # e.g. auditor.metadata's guard, raised by the daemon
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, message)
        if isinstance(exc, LedgerIdError):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)
        if type(exc).__name__ == "NoSuchLedgerError" or isinstance(exc, LookupError):
            await context.abort(grpc.StatusCode.NOT_FOUND, message or "not found")
        await context.abort(grpc.StatusCode.INTERNAL, _short(f"{type(exc).__name__}: {exc}"))

    async def Status(self, request: pb.StatusRequest, context: aio.ServicerContext) -> pb.StatusResponse:
        return status_to_pb(self.backend.status())

    async def TriggerCheck(
        self, request: pb.TriggerCheckRequest, context: aio.ServicerContext
    ) -> pb.TriggerCheckResponse:
        if not request.check:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "check name is empty")
        try:
            result = await self.backend.trigger(request.check)
        except Exception as exc:  # mapped to a status; never leaks as UNKNOWN
            await self._fail(context, exc)
            raise
        return pb.TriggerCheckResponse(accepted=result.accepted, message=result.message)

    async def ListFindings(
        self, request: pb.ListFindingsRequest, context: aio.ServicerContext
    ) -> pb.ListFindingsResponse:
        if request.limit < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"limit must be >= 0, got {request.limit}")
        try:
            ledger = _parse_ledger(request.ledger) if request.ledger else None
            records = self.backend.query_findings(
                category=request.category or None,
                ledger=ledger,
                bookie=request.bookie or None,
                include_resolved=request.include_resolved,
            )
        except Exception as exc:
            await self._fail(context, exc)
            raise
        limit = min(request.limit or DEFAULT_LIMIT, MAX_LIMIT)
        return pb.ListFindingsResponse(
            findings=[finding_to_pb(r) for r in records[:limit]], total_matching=len(records)
        )

    async def ExplainLedger(
        self, request: pb.ExplainLedgerRequest, context: aio.ServicerContext
    ) -> pb.ExplainLedgerResponse:
        try:
            ledger = _parse_ledger(request.ledger)
            explanation = await self.backend.explain(ledger)
            findings = self.backend.query_findings(category=None, ledger=ledger, bookie=None, include_resolved=False)
        except Exception as exc:
            await self._fail(context, exc)
            raise
        return explanation_to_pb(explanation, findings)

    async def Pause(self, request: pb.PauseRequest, context: aio.ServicerContext) -> pb.PauseResponse:
        try:
            return pb.PauseResponse(changed=await self.backend.pause(request.reason))
        except Exception as exc:
            await self._fail(context, exc)
            raise

    async def Resume(self, request: pb.ResumeRequest, context: aio.ServicerContext) -> pb.ResumeResponse:
        try:
            return pb.ResumeResponse(changed=await self.backend.resume())
        except Exception as exc:
            await self._fail(context, exc)
            raise


# ------------------------------------------------------------------------------------------ server


class _HealthServicer(health_aio.HealthServicer):
    """The standard health service, except that `leader` is SERVING only while `leader_claim()` holds at
    the moment of the check (a stored SERVING could be answered by a process that has just resumed from
    a freeze, before it learnt that its session expired)."""

    leader_claim: Callable[[], bool] | None = None

    async def Check(self, request: health_pb2.HealthCheckRequest, context: Any) -> health_pb2.HealthCheckResponse:
        resp = await super().Check(request, context)
        if (
            request.service == HEALTH_LEADER
            and resp is not None
            and resp.status == SERVING
            and self.leader_claim is not None
            and not self.leader_claim()
        ):
            return health_pb2.HealthCheckResponse(status=NOT_SERVING)
        return resp


class AdminServer:
    """The gRPC server: admin service + health (+ reflection). Binds loopback by default; TLS when given
    a certificate and key."""

    def __init__(
        self,
        backend: AdminBackend,
        bind: str = "127.0.0.1:7979",
        *,
        tls_cert: Path | None = None,
        tls_key: Path | None = None,
        reflection: bool = True,
        supervisor: Supervisor | None = None,
    ) -> None:
        self.backend = backend
        self._supervisor = supervisor or Supervisor()
        self.bind = bind
        self.tls_cert = tls_cert
        self.tls_key = tls_key
        self.reflection_enabled = False
        self._want_reflection = reflection
        self.health = _HealthServicer()
        self._server: aio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.port: int = 0

    async def start(self) -> int:
        """Start serving; returns the bound port (useful with port 0)."""
        host, port = parse_bind(self.bind)
        self._loop = asyncio.get_running_loop()
        # No SO_REUSEPORT: a second daemon on the same address must fail, not silently share the port.
        server = aio.server(options=[("grpc.so_reuseport", 0)])
        pb_grpc.add_AdminServiceServicer_to_server(AdminServicer(self.backend), server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        if self._want_reflection:
            self.reflection_enabled = _enable_reflection(server)
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            if self.tls_cert is not None and self.tls_key is not None:
                creds = grpc.ssl_server_credentials(
                    [(Path(self.tls_key).read_bytes(), Path(self.tls_cert).read_bytes())]  # noqa: ASYNC240 (once, at start)
                )
                self.port = server.add_secure_port(address, creds)
            else:
                self.port = server.add_insecure_port(address)
        except RuntimeError as exc:
            self.port = 0
            reason = f": {exc}"
        else:
            reason = ""
        if self.port == 0:
            await server.stop(None)
            raise OSError(f"admin API: cannot bind {self.bind} (address in use or not local){reason}")
        await self.health.set(SERVICE_NAME, SERVING)
        await self.health.set(HEALTH_LIVENESS, SERVING)
        await self.health.set(HEALTH_READINESS, NOT_SERVING)
        await self.health.set(HEALTH_LEADER, NOT_SERVING)
        await self.health.set(HEALTH_OVERALL, NOT_SERVING)
        await server.start()
        self._server = server
        return self.port

    async def set_health(
        self, *, live: bool | None = None, ready: bool | None = None, leader: bool | None = None
    ) -> None:
        """Update the probe statuses (ignored once stop() began)."""
        if live is not None:
            await self.health.set(HEALTH_LIVENESS, SERVING if live else NOT_SERVING)
        if ready is not None:
            await self.health.set(HEALTH_READINESS, SERVING if ready else NOT_SERVING)
            await self.health.set(HEALTH_OVERALL, SERVING if ready else NOT_SERVING)
        if leader is not None:
            await self.health.set(HEALTH_LEADER, SERVING if leader else NOT_SERVING)

    def follow_leadership(self, leadership: Any) -> None:
        """Keep the `leader` health status in step with a state.Leadership (its listeners are sync), and
        answer it from `leadership.confirmed` at each check."""
        if hasattr(leadership, "confirmed"):
            self.health.leader_claim = lambda: bool(leadership.confirmed)

        def changed(is_leader: bool) -> None:
            loop = self._loop
            if loop is None or loop.is_closed():
                return
            coro_starter = lambda: self._supervisor.fire("health-update", self.set_health(leader=is_leader))  # noqa: E731
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                coro_starter()
            else:
                loop.call_soon_threadsafe(coro_starter)

        leadership.add_listener(changed)
        if getattr(leadership, "is_leader", False):
            changed(True)

    async def stop(self, grace: float = 5.0) -> None:
        """Flip every health status to NOT_SERVING, then stop, letting calls in flight finish within grace."""
        await self.health.enter_graceful_shutdown()
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None

    async def wait_for_termination(self) -> None:
        if self._server is not None:
            await self._server.wait_for_termination()


def _enable_reflection(server: aio.Server) -> bool:
    try:
        from grpc_reflection.v1alpha import reflection
    except ImportError:  # optional: grpcurl works only with it
        return False
    names = (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    return True


# ------------------------------------------------------------------------------------------ client


class AdminClientError(Exception):
    """A failed admin call, worded for a person: what failed and why."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code


class AdminClient:
    """Async client of the admin API (used by the CLI). Use as `async with AdminClient(addr) as c:`."""

    def __init__(self, target: str = "127.0.0.1:7979", *, timeout: float = 10.0, tls_ca: Path | None = None) -> None:
        self.target = target
        self.timeout = timeout
        if tls_ca is not None:
            creds = grpc.ssl_channel_credentials(root_certificates=Path(tls_ca).read_bytes())
            self._channel = aio.secure_channel(target, creds)
        else:
            self._channel = aio.insecure_channel(target)
        self._stub = pb_grpc.AdminServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    def _error(self, exc: aio.AioRpcError, what: str) -> AdminClientError:
        code = exc.code()
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return AdminClientError(
                f"cannot reach the bk-auditor admin API at {self.target}: {exc.details() or code.name}", code
            )
        return AdminClientError(f"{what} failed: {exc.details() or code.name} ({code.name})", code)

    async def _call(self, method: Callable[..., Any], request: Any, what: str) -> Any:
        try:
            return await method(request, timeout=self.timeout)
        except aio.AioRpcError as exc:
            raise self._error(exc, what) from None

    async def status(self) -> pb.StatusResponse:
        return await self._call(self._stub.Status, pb.StatusRequest(), "status")

    async def trigger(self, check: str) -> pb.TriggerCheckResponse:
        return await self._call(self._stub.TriggerCheck, pb.TriggerCheckRequest(check=check), f"trigger {check}")

    async def findings(
        self, *, category: str = "", ledger: str = "", bookie: str = "", limit: int = 0, include_resolved: bool = False
    ) -> pb.ListFindingsResponse:
        req = pb.ListFindingsRequest(
            category=category, ledger=ledger, bookie=bookie, limit=limit, include_resolved=include_resolved
        )
        return await self._call(self._stub.ListFindings, req, "list findings")

    async def explain(self, ledger: str) -> pb.ExplainLedgerResponse:
        return await self._call(
            self._stub.ExplainLedger, pb.ExplainLedgerRequest(ledger=ledger), f"explain ledger {ledger}"
        )

    async def pause(self, reason: str = "") -> pb.PauseResponse:
        return await self._call(self._stub.Pause, pb.PauseRequest(reason=reason), "pause")

    async def resume(self) -> pb.ResumeResponse:
        return await self._call(self._stub.Resume, pb.ResumeRequest(), "resume")

    async def health(self, service: str = "") -> str:
        """The health status name of `service` (SERVING, NOT_SERVING, ...); NOT_FOUND for unknown names."""
        try:
            resp = await self._health.Check(health_pb2.HealthCheckRequest(service=service), timeout=self.timeout)
        except aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.NOT_FOUND:
                return "NOT_FOUND"
            raise self._error(exc, f"health check of {service!r}") from None
        return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
