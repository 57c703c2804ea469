"""The admin API server: a grpc.aio server with our `bkauditor.admin.v1.AdminService`, the standard gRPC
health service (for Kubernetes gRPC probes) and, when grpcio-reflection is installed, server reflection
(grpcurl); TLS when given a certificate and key, mutual TLS with a client CA, and an optional plaintext
listener for the kubelet's probes. Who may call what is access.py's policy, applied here to every
AdminService call by one interceptor.

The daemon plugs in through `models.AdminBackend` (auditor/daemon/backend.py implements it) and, for the
operator's questions, `models.OperatorQuestions` (auditor/daemon/operator.py); errors become statuses
through the one table in errors.py.

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
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import grpc
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from auditor._proto import admin_pb2 as pb
from auditor._proto import admin_pb2_grpc as pb_grpc
from auditor.aio import spawn as spawn_task
from auditor.durability.ids import LedgerId
from auditor.metadata.own.repairlimits import RepairLimits
from auditor.settings.values import parse_bind

from .access import AccessPolicy, Peer
from .convert import explanation_to_pb, finding_to_pb, status_to_pb
from .credentials import ServerTls
from .errors import NotSupportedError, status_of
from .models import AdminBackend, OperatorQuestions, RecoveryDelayState, RepairLimitsState, ReplicationState
from .questions import decommission_to_pb, marked_to_pb

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["AdminService"].full_name
HEALTH_LIVENESS = "liveness"
HEALTH_READINESS = "readiness"
HEALTH_LEADER = "leader"
HEALTH_OVERALL = ""
DEFAULT_LIMIT = 1000
DEFAULT_MAX_CONCURRENT_CALLS = 64  # admin.max_concurrent_calls' default
MAX_LIMIT = 100_000
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# How the server starts its background jobs (the health updates that follow leadership): the daemon passes
# its supervisor's `fire`, so they are counted with its other tasks; by default `auditor.aio.spawn`.
Spawn = Callable[[str, Coroutine[Any, Any, Any]], object]


# ------------------------------------------------------------------------------------------ servicer


def _short(message: str, limit: int = 1000) -> str:
    return message if len(message) <= limit else message[:limit] + f"... ({len(message)} characters)"


def _parse_ledger(text: str) -> LedgerId:
    return LedgerId.parse(text)


def _caller(context: aio.ServicerContext) -> str:
    """Who made a call, for the log of changes: the client certificate's subject, else its address."""
    peer = Peer.from_auth_context(context.auth_context())
    return peer.subject or ", ".join(peer.names) or str(context.peer())


def _delay_to_pb(d: RecoveryDelayState) -> pb.RecoveryDelay:
    return pb.RecoveryDelay(
        ledgers_root=d.ledgers_root, seconds=d.seconds, version=d.version, previous_seconds=d.previous
    )


def _replication_to_pb(r: ReplicationState) -> pb.Replication:
    return pb.Replication(ledgers_root=r.ledgers_root, enabled=r.enabled, changed=r.changed)


def _limits_to_pb(r: RepairLimitsState) -> pb.RepairLimits:
    x = r.limits
    return pb.RepairLimits(
        ledgers_root=r.ledgers_root,
        bytes_per_second=x.bytes_per_second,
        entries_in_flight=x.entries_in_flight,
        entries_in_flight_per_bookie=x.entries_in_flight_per_bookie,
        set_by=x.set_by,
        set_at=x.set_at_ms / 1000,
    )


def _limits_from_pb(request: pb.SetRepairLimitsRequest) -> RepairLimits:
    def get(name: str) -> Any:
        return getattr(request, name) if request.HasField(name) else None

    return RepairLimits(get("bytes_per_second"), get("entries_in_flight"), get("entries_in_flight_per_bookie"))


class AdminServicer(pb_grpc.AdminServiceServicer):
    def __init__(self, backend: AdminBackend, questions: OperatorQuestions | None = None) -> None:
        self.backend = backend
        self.questions = questions

    async def _ask(self, context: aio.ServicerContext, ask: Callable[[OperatorQuestions], Any]) -> Any:
        """An operator question's answer, or the status its error maps to."""
        try:
            if self.questions is None:
                raise NotSupportedError("this daemon does not answer the operator's questions")
            return await ask(self.questions)
        except Exception as exc:
            await self._fail(context, exc)
            raise

    async def _fail(self, context: aio.ServicerContext, exc: BaseException) -> None:
        """Abort with the status errors.STATUS_CODES gives `exc`; an error it does not list is a bug:
        INTERNAL, naming its class."""
        # Details travel as a gRPC trailer (16 KiB at most): a message quoting a huge input would turn
        # the answer into RESOURCE_EXHAUSTED, so every message is cut to a readable length.
        code = status_of(exc)
        if code is None:
            await context.abort(grpc.StatusCode.INTERNAL, _short(f"{type(exc).__name__}: {exc}"))
        else:
            await context.abort(code, _short(str(exc)) or code.name.lower().replace("_", " "))

    async def Status(self, request: pb.StatusRequest, context: aio.ServicerContext) -> pb.StatusResponse:
        return status_to_pb(self.backend.status())

    async def TriggerCheck(
        self, request: pb.TriggerCheckRequest, context: aio.ServicerContext
    ) -> pb.TriggerCheckResponse:
        if not request.check and not request.ledger and not request.finding_key:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "check name is empty")
        try:
            ledger = _parse_ledger(request.ledger) if request.ledger else None
            if ledger is not None or request.finding_key:
                result = await self.backend.trigger(request.check, ledger, request.finding_key)
            else:
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
        limit = min(request.limit or DEFAULT_LIMIT, MAX_LIMIT)
        try:
            ledger = _parse_ledger(request.ledger) if request.ledger else None
            page = self.backend.query_findings(
                category=request.category or None,
                ledger=ledger,
                bookie=request.bookie or None,
                include_resolved=request.include_resolved,
                limit=limit,
            )
        except Exception as exc:
            await self._fail(context, exc)
            raise
        msg = pb.ListFindingsResponse(
            findings=[finding_to_pb(r) for r in page.records[:limit]],
            total_matching=page.total,
            source=page.source,
            saved_by=page.saved_by,
            leader_identity=page.leader,
        )
        if page.as_of is not None:
            msg.as_of = page.as_of
        return msg

    async def ExplainLedger(
        self, request: pb.ExplainLedgerRequest, context: aio.ServicerContext
    ) -> pb.ExplainLedgerResponse:
        try:
            ledger = _parse_ledger(request.ledger)
            explanation = await self.backend.explain(ledger)
            findings = self.backend.query_findings(
                category=None, ledger=ledger, bookie=None, include_resolved=False
            ).records
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

    async def CanDecommission(
        self, request: pb.CanDecommissionRequest, context: aio.ServicerContext
    ) -> pb.CanDecommissionResponse:
        return decommission_to_pb(await self._ask(context, lambda q: q.can_decommission(request.bookie)))

    async def ListUnderreplicated(
        self, request: pb.ListUnderreplicatedRequest, context: aio.ServicerContext
    ) -> pb.ListUnderreplicatedResponse:
        return marked_to_pb(await self._ask(context, lambda q: q.underreplicated()))

    async def WhoIsAuditor(
        self, request: pb.WhoIsAuditorRequest, context: aio.ServicerContext
    ) -> pb.WhoIsAuditorResponse:
        leaders = await self._ask(context, lambda q: q.who_is_auditor())
        return pb.WhoIsAuditorResponse(
            leaders=[pb.AuditorLeader(election=x.election, vote=x.vote, identity=x.identity) for x in leaders]
        )

    async def GetRecoveryDelay(
        self, request: pb.GetRecoveryDelayRequest, context: aio.ServicerContext
    ) -> pb.RecoveryDelay:
        return _delay_to_pb(await self._ask(context, lambda q: q.recovery_delay()))

    async def SetRecoveryDelay(
        self, request: pb.SetRecoveryDelayRequest, context: aio.ServicerContext
    ) -> pb.RecoveryDelay:
        expected = request.expected_version if request.HasField("expected_version") else None
        caller = _caller(context)
        return _delay_to_pb(await self._ask(context, lambda q: q.set_recovery_delay(request.seconds, expected, caller)))

    async def GetReplication(self, request: pb.GetReplicationRequest, context: aio.ServicerContext) -> pb.Replication:
        return _replication_to_pb(await self._ask(context, lambda q: q.replication()))

    async def SetReplication(self, request: pb.SetReplicationRequest, context: aio.ServicerContext) -> pb.Replication:
        caller = _caller(context)
        return _replication_to_pb(await self._ask(context, lambda q: q.set_replication(request.enabled, caller)))

    async def GetRepairLimits(
        self, request: pb.GetRepairLimitsRequest, context: aio.ServicerContext
    ) -> pb.RepairLimits:
        return _limits_to_pb(await self._ask(context, lambda q: q.repair_limits()))

    async def SetRepairLimits(
        self, request: pb.SetRepairLimitsRequest, context: aio.ServicerContext
    ) -> pb.RepairLimits:
        caller = _caller(context)
        change = _limits_from_pb(request)
        return _limits_to_pb(await self._ask(context, lambda q: q.set_repair_limits(change, request.clear, caller)))


# ------------------------------------------------------------------------------------------ server


class _HealthServicer(health_aio.HealthServicer):  # type: ignore[misc]  # grpc_health ships no types
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


class _AccessInterceptor(aio.ServerInterceptor):  # type: ignore[misc]  # grpc ships no types
    """Applies the access policy to every AdminService method (health and reflection pass untouched). A
    method it cannot wrap (not unary) is refused, so nothing added later bypasses the policy."""

    def __init__(self, policy: AccessPolicy) -> None:
        self.policy = policy

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Any], handler_call_details: grpc.HandlerCallDetails
    ) -> Any:
        handler = await continuation(handler_call_details)
        service, _, method = str(handler_call_details.method).lstrip("/").partition("/")
        if handler is None or service != SERVICE_NAME:
            return handler
        policy = self.policy
        inner = handler.unary_unary

        async def guarded(request: Any, context: aio.ServicerContext) -> Any:
            try:
                policy.check(method, Peer.from_auth_context(context.auth_context()))
            except Exception as exc:
                code = status_of(exc) or grpc.StatusCode.INTERNAL
                await context.abort(code, _short(str(exc)))
            if inner is None:
                await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method}: only unary calls are served")
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            guarded,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


class AdminServer:
    """The gRPC server: admin service + health (+ reflection) on `bind` (settings admin.bind); TLS when given
    a certificate and key, requiring a client certificate when given a client CA (`tls_client_ca`); and on
    `probe_bind`, when given, the same services in plaintext for the kubelet (callers there are never
    authenticated: access.py says what they may call)."""

    def __init__(
        self,
        backend: AdminBackend,
        bind: str,
        *,
        tls_cert: Path | None = None,
        tls_key: Path | None = None,
        tls_client_ca: Path | None = None,
        authorized_clients: frozenset[str] | list[str] = frozenset(),
        unauthenticated_reads: bool = False,
        probe_bind: str | None = None,
        reflection: bool = True,
        spawn: Spawn | None = None,
        questions: OperatorQuestions | None = None,
        tls_reloaded: Callable[[str], None] | None = None,
        max_concurrent_calls: int = DEFAULT_MAX_CONCURRENT_CALLS,
    ) -> None:
        self.backend = backend
        self.questions = questions
        self.max_concurrent_calls = max_concurrent_calls  # admin.max_concurrent_calls
        self._tasks: set[asyncio.Task[Any]] = set()  # what the default `spawn` keeps
        self._spawn: Spawn = spawn or self._spawn_kept
        self.bind = bind
        self.tls_cert = tls_cert
        self.tls_key = tls_key
        self.tls_client_ca = tls_client_ca
        self.tls_reloaded = tls_reloaded  # "accepted"/"rejected" per change of the TLS files (credentials.py)
        self.probe_bind = probe_bind
        self.policy = AccessPolicy(
            tls=tls_cert is not None,
            authorized_clients=frozenset(authorized_clients),
            unauthenticated_reads=unauthenticated_reads,
        )
        self.reflection_enabled = False
        self._want_reflection = reflection
        self.health = _HealthServicer()
        self._server: aio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.port: int = 0
        self.probe_port: int | None = None
        self.tls: ServerTls | None = None

    def _spawn_kept(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A background job kept referenced by this server until it ends; its failure is logged."""
        return spawn_task(coro, name=name, keep=self._tasks)

    async def start(self) -> int:
        """Start serving; returns the bound port (useful with port 0)."""
        self._loop = asyncio.get_running_loop()
        # No SO_REUSEPORT: a second daemon on the same address must fail, not silently share the port.
        # maximum_concurrent_rpcs: past it gRPC answers RESOURCE_EXHAUSTED at once, so a flood of callers
        # cannot pile up work (and memory) behind the questions, which wait their turn one at a time.
        server = aio.server(
            options=[("grpc.so_reuseport", 0)],
            interceptors=[_AccessInterceptor(self.policy)],
            maximum_concurrent_rpcs=self.max_concurrent_calls,
        )
        pb_grpc.add_AdminServiceServicer_to_server(AdminServicer(self.backend, self.questions), server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        if self._want_reflection:
            self.reflection_enabled = _enable_reflection(server)
        try:
            creds = self._credentials()
            self.port = _add_port(server, self.bind, creds)
            if self.probe_bind is not None:
                self.probe_port = _add_port(server, self.probe_bind, None)
        except BaseException:
            await server.stop(None)
            raise
        await self.health.set(SERVICE_NAME, SERVING)
        await self.health.set(HEALTH_LIVENESS, SERVING)
        await self.health.set(HEALTH_READINESS, NOT_SERVING)
        await self.health.set(HEALTH_LEADER, NOT_SERVING)
        await self.health.set(HEALTH_OVERALL, NOT_SERVING)
        await server.start()
        self._server = server
        return self.port

    def _credentials(self) -> grpc.ServerCredentials | None:
        """TLS credentials from the PEM files (re-read when they change: credentials.py), or None."""
        if self.tls_cert is None or self.tls_key is None:
            return None
        self.tls = ServerTls(self.tls_cert, self.tls_key, self.tls_client_ca, self.tls_reloaded)
        return self.tls.credentials()

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
        """Keep the `leader` health status in step with the daemon's Leadership (its listeners are sync), and
        answer it from `leadership.confirmed` at each check."""
        if hasattr(leadership, "confirmed"):
            self.health.leader_claim = lambda: bool(leadership.confirmed)

        def changed(is_leader: bool) -> None:
            loop = self._loop
            if loop is None or loop.is_closed():
                return

            def coro_starter() -> None:
                self._spawn("health-update", self.set_health(leader=is_leader))

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


def _add_port(server: aio.Server, bind: str, creds: grpc.ServerCredentials | None) -> int:
    """Listen on `bind` (TLS with `creds`, else plaintext); the bound port, or OSError naming the address."""
    host, port = parse_bind(bind)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    reason = ""
    bound: int  # grpc ships no types: add_*_port answers the port bound, 0 when it could not bind
    try:
        bound = server.add_insecure_port(address) if creds is None else server.add_secure_port(address, creds)
    except RuntimeError as exc:  # grpc refuses, e.g. bad PEM material or an address it cannot use
        bound, reason = 0, f": {exc}"
    if bound == 0:
        raise OSError(f"admin API: cannot bind {bind} (address in use or not local){reason}")
    return bound


def _enable_reflection(server: aio.Server) -> bool:
    try:
        from grpc_reflection.v1alpha import reflection
    except ImportError:  # optional: grpcurl works only with it
        return False
    names = (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    return True
