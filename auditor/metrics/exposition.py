"""Prometheus exposition shared by the daemon and the repair role: every series labelled with the
BookKeeper cluster (`ClusterLabelled`), served by prometheus-client's own HTTP server thread (`serve`).
Each role keeps its metrics in a registry of its own (auditor/daemon/metrics.py, auditor/repair/metrics.py).
"""

from __future__ import annotations

import os

# Before prometheus_client is imported anywhere: no `*_created` series (the Pulsar chart drops them too).
os.environ.setdefault("PROMETHEUS_DISABLE_CREATED_SERIES", "True")

from collections.abc import Iterator
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

from auditor.settings import parse_bind

# Not "cluster": kube-prometheus, Thanos and Mimir put their own (Kubernetes) cluster label on every series.
CLUSTER_LABEL = "bookkeeper_cluster"


class ClusterLabelled:
    """A collector that yields everything `inner` collects with `bookkeeper_cluster="<cluster>"` added to each sample
    (exemplars and timestamps kept)."""

    def __init__(self, inner: CollectorRegistry, cluster: str) -> None:
        if not cluster:
            raise ValueError("the cluster label must not be empty")
        self._inner = inner
        self._cluster = cluster

    def collect(self) -> Iterator[Metric]:
        for family in self._inner.collect():
            out = Metric(family.name, family.documentation, family.type, family.unit)
            for s in family.samples:
                if CLUSTER_LABEL in s.labels:  # a metric of ours must not define it: one meaning only
                    raise ValueError(f"{s.name}: label {CLUSTER_LABEL!r} is reserved for the cluster name")
                out.samples.append(s._replace(labels={CLUSTER_LABEL: self._cluster, **s.labels}))
            yield out


class MetricsServer:
    """The running exposition endpoint."""

    def __init__(self, server: Any, thread: Any) -> None:
        self._server = server
        self._thread = thread

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def serve(registry: CollectorRegistry, bind: str) -> MetricsServer:
    """Start the HTTP endpoint (`/metrics`, any path) for `registry` on `host:port` in a daemon thread."""
    host, port = parse_bind(bind)
    server, thread = prometheus_client.start_http_server(port, addr=host, registry=registry)
    return MetricsServer(server, thread)
