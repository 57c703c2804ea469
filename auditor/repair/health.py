"""The repair worker's health, for Kubernetes probes: `/healthz` and `/readyz` beside `/metrics` on the
worker's one HTTP endpoint (`metrics.bind`).

* `/healthz` (liveness) - 200 while the worker's event loop turns: a heartbeat on the loop, read by the
  HTTP thread; 503 once it is older than `stale_after_s` (a wedged loop: restarting the pod helps).
* `/readyz` (readiness) - 200 while live, connected to ZooKeeper and not stopping; 503 with the reason
  (`zookeeper suspended`, `zookeeper lost`, `stopping`): such a worker takes no ledger, and while it is
  not ready it does not count as available for the PodDisruptionBudget.

Every other path is the Prometheus exposition, as before. The HTTP server is a thread of its own (as
prometheus-client's), so it answers while the loop is busy; what it says about the loop comes from the
heartbeat, never from the thread being alive.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from kazoo.protocol.states import KazooState
from prometheus_client import CollectorRegistry, make_wsgi_app

from auditor.aio.tasks import spawn
from auditor.metrics.exposition import MetricsServer
from auditor.settings import parse_bind

LIVENESS_PATH = "/healthz"
READINESS_PATH = "/readyz"
# The loop beats every second; a step of the worker may hold it a while (a large metadata decode), so
# liveness fails only after a long silence, well past the probe's own period.
BEAT_S = 1.0
STALE_AFTER_S = 30.0

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class RepairHealth:
    """What the probes are told. `zookeeper_state` is read at each probe (the connection's state, kept
    on the loop by kazoo's callbacks); `beat()` runs on the loop."""

    def __init__(
        self,
        zookeeper_state: Callable[[], str],
        *,
        stale_after_s: float = STALE_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._zookeeper_state = zookeeper_state
        self._stale_after_s = stale_after_s
        self._clock = clock
        self._last_beat = clock()
        self._stopping = False
        self._beats: set[asyncio.Task[Any]] = set()

    def stopping(self) -> None:
        """The worker was told to stop (SIGTERM): not ready from now on."""
        self._stopping = True

    def beat(self) -> None:
        self._last_beat = self._clock()

    def start_beating(self) -> Callable[[], None]:
        """Beat every `BEAT_S` on the running loop until the returned canceller is called."""

        async def beating() -> None:
            while True:
                self.beat()
                await asyncio.sleep(BEAT_S)

        task = spawn(beating(), name="repair health heartbeat", keep=self._beats)

        def cancel() -> None:
            task.cancel()

        return cancel

    def liveness(self) -> str | None:
        """None when live, else why not."""
        silent = self._clock() - self._last_beat
        if silent > self._stale_after_s:
            return f"event loop silent for {silent:.0f}s (more than {self._stale_after_s:.0f}s)"
        return None

    def readiness(self) -> str | None:
        """None when ready, else why not (the first reason that applies)."""
        if self._stopping:
            return "stopping"
        dead = self.liveness()
        if dead is not None:
            return dead
        state = str(self._zookeeper_state())
        if state != KazooState.CONNECTED:
            return f"zookeeper {state.lower()}"
        return None


def health_app(health: RepairHealth, metrics: WsgiApp) -> WsgiApp:
    """The WSGI app: the two probe paths answered from `health`, every other request by `metrics`."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path not in (LIVENESS_PATH, READINESS_PATH):
            return metrics(environ, start_response)
        problem = health.liveness() if path == LIVENESS_PATH else health.readiness()
        status = "200 OK" if problem is None else "503 Service Unavailable"
        body = (("ok" if path == LIVENESS_PATH else "ready") if problem is None else problem).encode() + b"\n"
        start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
        return [body]

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a probe every few seconds is no log line


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def serve_with_health(registry: CollectorRegistry, bind: str, health: RepairHealth) -> MetricsServer:
    """Serve `registry` (any path) and the probe paths on `host:port`, in a daemon thread."""
    host, port = parse_bind(bind)

    class Server(_ThreadingServer):
        address_family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]

    server = make_server(host, port, health_app(health, make_wsgi_app(registry)), Server, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="repair metrics and health", daemon=True)
    thread.start()
    return MetricsServer(server, thread)
