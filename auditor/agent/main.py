"""The agent process (`bk-auditor agent`): check the options (fail closed), open the bookie's indexes, serve
the gRPC service and the metrics until SIGTERM or SIGINT.

The scratch directory (`--scratch-dir`, default a fresh temporary directory) holds everything the agent
writes: the RocksDB secondaries, their info logs, the index mirrors (index.py). It must not be inside a
bookie directory: that is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from auditor._proto import bookie_agent_pb2_grpc as pb_grpc
from auditor.admin.credentials import ServerTls
from auditor.errors import ConfigError
from auditor.logging import get_logger
from auditor.metrics.exposition import MetricsServer, serve
from auditor.settings.values import parse_bind

from .access import TokenFile, check_exposure
from .bookieconf import BookieLayout
from .entrylog import EntryLogReader
from .index import BookieIndex
from .metrics import AgentMetrics
from .service import AgentServicer

log = get_logger("auditor.agent")

SERVICE_NAME = "bkauditor.agent.v1.BookieAgent"
TLS_NAMES = {"cert": "--tls-cert", "key": "--tls-key", "client_ca": "--tls-client-ca"}


@dataclass(frozen=True, slots=True)
class AgentOptions:
    layout: BookieLayout
    listen: str
    token_file: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    insecure: bool = False
    metrics_listen: str | None = None
    scratch_dir: Path | None = None
    max_index_age: float = 1.0  # seconds: an older view is refreshed before it answers
    max_verify_bytes: int = 64 * 1024 * 1024  # per VerifyEntries call, whatever the caller asks

    def check(self) -> None:
        """ConfigError (one line, naming the flag) for options the agent must refuse."""
        try:
            host, _ = parse_bind(self.listen)
        except ValueError as exc:
            raise ConfigError(f"agent: --listen {self.listen}: {exc}") from None
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("agent: --tls-cert and --tls-key go together")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ConfigError("agent: --tls-client-ca needs --tls-cert and --tls-key")
        check_exposure(host, token=self.token_file is not None, insecure=self.insecure)
        if self.scratch_dir is not None:
            scratch = self.scratch_dir.resolve()
            for d in (*self.layout.ledger_dirs, *self.layout.index_dirs):
                if scratch == d.resolve() or d.resolve() in scratch.parents:
                    raise ConfigError(f"agent: --scratch-dir {self.scratch_dir} is inside the bookie directory {d}")


class Agent:
    """The running agent: `start()` binds and answers, `stop()` ends it."""

    def __init__(self, options: AgentOptions) -> None:
        options.check()
        self.options = options
        self.token = TokenFile(options.token_file) if options.token_file is not None else None
        self._own_scratch = options.scratch_dir is None
        self.scratch = options.scratch_dir or Path(tempfile.mkdtemp(prefix="bk-auditor-agent-"))
        self.index = BookieIndex(list(options.layout.index_dirs), self.scratch / "index", options.max_index_age)
        self.logs = EntryLogReader(list(options.layout.ledger_dirs))
        self.metrics = AgentMetrics(self.index.age)
        self.index.on_refresh = lambda result: self.metrics.refreshes.labels(result).inc()
        self.servicer = AgentServicer(
            self.index,
            self.logs,
            self.metrics,
            token=self.token,
            bookie_id=options.layout.bookie_id,
            max_verify_bytes=options.max_verify_bytes,
        )
        self._server: aio.Server | None = None
        self._metrics_server: MetricsServer | None = None
        self.port = 0

    def _credentials(self) -> grpc.ServerCredentials | None:
        o = self.options
        if o.tls_cert is None or o.tls_key is None:
            return None
        try:
            tls = ServerTls(o.tls_cert, o.tls_key, o.tls_client_ca, names=TLS_NAMES, what="agent")
        except OSError as exc:
            raise ConfigError(str(exc)) from None
        return tls.credentials()

    async def start(self) -> int:
        """Bind and serve; the port bound (useful with port 0)."""
        creds = self._credentials()
        if self.options.metrics_listen:
            try:
                self._metrics_server = serve(self.metrics.registry, self.options.metrics_listen)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"agent: cannot serve metrics on {self.options.metrics_listen}: {exc}") from None
        server = aio.server(options=[("grpc.so_reuseport", 0)])
        pb_grpc.add_BookieAgentServicer_to_server(self.servicer, server)
        health = health_aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health, server)
        host, port = parse_bind(self.options.listen)
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            bound = server.add_insecure_port(address) if creds is None else server.add_secure_port(address, creds)
        except RuntimeError as exc:
            raise ConfigError(f"agent: cannot listen on {self.options.listen}: {exc}") from None
        if not bound:
            raise ConfigError(f"agent: cannot listen on {self.options.listen} (address in use or not local)")
        try:  # a first view now, so that a bad directory shows in the log at start (answers stay UNKNOWN)
            await asyncio.to_thread(self.index.refresh)
        except Exception as exc:
            log.warning("agent: the bookie's index cannot be read yet", error=str(exc))
        await server.start()
        await health.set("", health_pb2.HealthCheckResponse.SERVING)
        await health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
        self._server = server
        self.port = bound
        log.info(
            "agent: serving",
            listen=self.options.listen,
            port=bound,
            bookie=self.options.layout.bookie_id,
            tls=creds is not None,
            token=self.token is not None,
            ledger_dirs=[str(d) for d in self.options.layout.ledger_dirs],
            index_dirs=[str(d) for d in self.options.layout.index_dirs],
            scratch=str(self.scratch),
        )
        return int(bound)

    async def stop(self, grace: float = 2.0) -> None:
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        if self._metrics_server is not None:
            self._metrics_server.close()
            self._metrics_server = None
        self.index.close()
        self.logs.close()
        if self._own_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


async def run(options: AgentOptions) -> int:
    """Serve until SIGTERM/SIGINT; exit code 0."""
    agent = Agent(options)
    await agent.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await agent.stop()
    return 0
