"""`AdminClient`, the async client of the admin API that the CLI uses, and its one error.

Imports only the generated stubs and the error root: never the server (an import-linter contract)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from auditor._proto import admin_pb2 as pb
from auditor._proto import admin_pb2_grpc as pb_grpc
from auditor.errors import AdminError


class AdminClientError(AdminError):
    """A failed admin call, worded for a person: what failed and why."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code


class AdminClient:
    """Async client of the admin API (used by the CLI). Use as `async with AdminClient(addr) as c:`."""

    def __init__(self, target: str, *, timeout: float = 10.0, tls_ca: Path | None = None) -> None:
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
