"""`AdminClient`, the async client of the admin API that the CLI uses; its errors (`AdminClientError`,
`StandbyReplyError`) are in client_errors.py, which the CLI's exit-code table imports without gRPC.

Imports only the generated stubs and the error root: never the server (an import-linter contract)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import grpc
from google.protobuf.message import Message
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from auditor._proto import admin_pb2 as pb
from auditor._proto import admin_pb2_grpc as pb_grpc
from auditor.admin.client_errors import AdminClientError, StandbyReplyError, standby_leader

__all__ = ["AdminClient", "AdminClientError", "StandbyReplyError"]

Reply = TypeVar("Reply", bound=Message)

# Trailing metadata a daemon may attach to a standby's refusal: the leader's identity (when known).
LEADER_TRAILER = "bk-auditor-leader"


# What gRPC says when the TLS handshake fails (wrong CA either way, or a server that requires a client
# certificate closing the connection on a client without one).
_HANDSHAKE_SIGNS = ("handshake", "ssl", "certificate", "socket closed", "verification")


class AdminClient:
    """Async client of the admin API (used by the CLI). Use as `async with AdminClient(addr) as c:`.

    TLS when given `tls_ca` (the CA of the server's certificate) or a client certificate; `tls_cert` +
    `tls_key` authenticate this client (mutual TLS); `tls_server_name` is the name checked against the
    server's certificate when it differs from the address dialled (e.g. a pod IP)."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float = 10.0,
        tls_ca: Path | None = None,
        tls_cert: Path | None = None,
        tls_key: Path | None = None,
        tls_server_name: str | None = None,
    ) -> None:
        self.target = target
        self.timeout = timeout
        if (tls_cert is None) != (tls_key is None):
            raise AdminClientError("a client certificate needs both --tls-cert and --tls-key")
        self.tls = tls_ca is not None or tls_cert is not None
        if self.tls:
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca, "--tls-ca"),
                private_key=_read(tls_key, "--tls-key"),
                certificate_chain=_read(tls_cert, "--tls-cert"),
            )
            options = [("grpc.ssl_target_name_override", tls_server_name)] if tls_server_name else []
            self._channel = aio.secure_channel(target, creds, options=options)
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
        details = exc.details() or ""
        if self.tls and code is grpc.StatusCode.UNAVAILABLE and any(s in details.lower() for s in _HANDSHAKE_SIGNS):
            return AdminClientError(
                f"TLS handshake with the bk-auditor admin API at {self.target} failed: either side refused the "
                "other's certificate (--tls-ca must hold the CA of the server's certificate, which must name "
                "the --admin host or --tls-server-name; a server with admin.tls_client_ca requires "
                "--tls-cert/--tls-key signed by that CA) "
                f"[{_last_error(details)}]",
                code,
            )
        if code is grpc.StatusCode.DEADLINE_EXCEEDED and details == "Deadline Exceeded":
            # Our own deadline (the daemon's bound on a long question says so in its own words, below).
            return AdminClientError(
                f"cannot reach the bk-auditor admin API at {self.target}: no answer within {self.timeout:g}s "
                "(--timeout)",
                code,
            )
        if code is grpc.StatusCode.UNAVAILABLE:
            return AdminClientError(
                f"cannot reach the bk-auditor admin API at {self.target}: {exc.details() or code.name}", code
            )
        if code is grpc.StatusCode.FAILED_PRECONDITION:
            standby, leader = standby_leader(details)
            if standby:
                return StandbyReplyError(what, _trailer(exc, LEADER_TRAILER) or leader, code)
        return AdminClientError(f"{what} failed: {exc.details() or code.name} ({code.name})", code)

    async def _call(
        self, method: Callable[..., Awaitable[Any]], request: Message, reply: type[Reply], what: str
    ) -> Reply:
        """The `reply` of `method` (a method of the stub) to `request`, or an AdminClientError."""
        try:
            # The generated gRPC stub is untyped; its method answers with the reply message its proto
            # declares (the stub's response_deserializer), which is `reply`.
            return cast(Reply, await method(request, timeout=self.timeout))
        except aio.AioRpcError as exc:
            raise self._error(exc, what) from None

    async def status(self) -> pb.StatusResponse:
        return await self._call(self._stub.Status, pb.StatusRequest(), pb.StatusResponse, "status")

    async def trigger(self, check: str, *, ledger: str = "", finding_key: str = "") -> pb.TriggerCheckResponse:
        """Run `check` now; with `ledger` or `finding_key`, re-check only that ledger (every per-ledger
        check when `check` is "")."""
        what = " ".join(
            ["trigger", check or "every per-ledger check"]
            + ([f"of ledger {ledger}"] if ledger else [])
            + ([f"of finding {finding_key}"] if finding_key else [])
        )
        req = pb.TriggerCheckRequest(check=check, ledger=ledger, finding_key=finding_key)
        return await self._call(self._stub.TriggerCheck, req, pb.TriggerCheckResponse, what)

    async def findings(
        self, *, category: str = "", ledger: str = "", bookie: str = "", limit: int = 0, include_resolved: bool = False
    ) -> pb.ListFindingsResponse:
        req = pb.ListFindingsRequest(
            category=category, ledger=ledger, bookie=bookie, limit=limit, include_resolved=include_resolved
        )
        return await self._call(self._stub.ListFindings, req, pb.ListFindingsResponse, "list findings")

    async def explain(self, ledger: str) -> pb.ExplainLedgerResponse:
        return await self._call(
            self._stub.ExplainLedger,
            pb.ExplainLedgerRequest(ledger=ledger),
            pb.ExplainLedgerResponse,
            f"explain ledger {ledger}",
        )

    async def pause(self, reason: str = "") -> pb.PauseResponse:
        return await self._call(self._stub.Pause, pb.PauseRequest(reason=reason), pb.PauseResponse, "pause")

    async def resume(self) -> pb.ResumeResponse:
        return await self._call(self._stub.Resume, pb.ResumeRequest(), pb.ResumeResponse, "resume")

    # The operator's questions (the CLI's --admin form of can-decommission, underreplicated, whoisauditor,
    # recovery-delay and replication).
    async def can_decommission(self, bookie: str) -> pb.CanDecommissionResponse:
        req = pb.CanDecommissionRequest(bookie=bookie)
        return await self._call(
            self._stub.CanDecommission, req, pb.CanDecommissionResponse, f"can-decommission {bookie}"
        )

    async def underreplicated(self) -> pb.ListUnderreplicatedResponse:
        return await self._call(
            self._stub.ListUnderreplicated,
            pb.ListUnderreplicatedRequest(),
            pb.ListUnderreplicatedResponse,
            "underreplicated",
        )

    async def who_is_auditor(self) -> pb.WhoIsAuditorResponse:
        return await self._call(
            self._stub.WhoIsAuditor, pb.WhoIsAuditorRequest(), pb.WhoIsAuditorResponse, "whoisauditor"
        )

    async def recovery_delay(self) -> pb.RecoveryDelay:
        return await self._call(
            self._stub.GetRecoveryDelay, pb.GetRecoveryDelayRequest(), pb.RecoveryDelay, "get recovery delay"
        )

    async def set_recovery_delay(self, seconds: int, expected_version: int | None) -> pb.RecoveryDelay:
        req = pb.SetRecoveryDelayRequest(seconds=seconds, expected_version=expected_version)
        return await self._call(self._stub.SetRecoveryDelay, req, pb.RecoveryDelay, f"set recovery delay to {seconds}s")

    async def replication(self) -> pb.Replication:
        return await self._call(
            self._stub.GetReplication, pb.GetReplicationRequest(), pb.Replication, "get replication"
        )

    async def set_replication(self, enabled: bool) -> pb.Replication:
        req = pb.SetReplicationRequest(enabled=enabled)
        return await self._call(
            self._stub.SetReplication, req, pb.Replication, f"{'enable' if enabled else 'disable'} replication"
        )

    async def repair_limits(self) -> pb.RepairLimits:
        return await self._call(
            self._stub.GetRepairLimits, pb.GetRepairLimitsRequest(), pb.RepairLimits, "get repair limits"
        )

    async def set_repair_limits(
        self,
        *,
        bytes_per_second: float | None = None,
        entries_in_flight: int | None = None,
        entries_in_flight_per_bookie: int | None = None,
        clear: bool = False,
    ) -> pb.RepairLimits:
        req = pb.SetRepairLimitsRequest(
            bytes_per_second=bytes_per_second,
            entries_in_flight=entries_in_flight,
            entries_in_flight_per_bookie=entries_in_flight_per_bookie,
            clear=clear,
        )
        return await self._call(self._stub.SetRepairLimits, req, pb.RepairLimits, "set repair limits")

    async def health(self, service: str = "") -> str:
        """The health status name of `service` (SERVING, NOT_SERVING, ...); NOT_FOUND for unknown names."""
        try:
            resp = await self._health.Check(health_pb2.HealthCheckRequest(service=service), timeout=self.timeout)
        except aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.NOT_FOUND:
                return "NOT_FOUND"
            raise self._error(exc, f"health check of {service!r}") from None
        # grpc_health ships no types; an enum's Name() is a str.
        return cast(str, health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status))


def _read(path: Path | None, flag: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise AdminClientError(f"{flag} {path}: {exc.strerror or exc}") from None


def _trailer(exc: aio.AioRpcError, key: str) -> str | None:
    """A trailing metadata value of a failed call (None when absent)."""
    for k, v in exc.trailing_metadata() or ():
        if k == key:
            return v if isinstance(v, str) else bytes(v).decode("utf-8", "replace")
    return None


def _last_error(details: str) -> str:
    """gRPC's connection error without its generic preamble (the part that says what went wrong)."""
    tail = details.rsplit("last error:", 1)[-1].strip()
    return tail.removesuffix(": OK")
