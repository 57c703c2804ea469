"""The agent's Prometheus metrics (served by auditor/metrics/exposition.py's endpoint, `--metrics-listen`)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge


class AgentMetrics:
    def __init__(self, index_age: Callable[[], float]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "bk_auditor_agent_requests", "Agent calls answered, by method and gRPC code", ["method", "code"], registry=r
        )
        self.ledgers = Counter(
            "bk_auditor_agent_ledgers_answered", "Ledgers answered by ListEntries, by outcome", ["outcome"], registry=r
        )
        self.refreshes = Counter(
            "bk_auditor_agent_index_refreshes", "Catch-ups with the bookie's RocksDB index", ["result"], registry=r
        )
        self.index_age = Gauge(
            "bk_auditor_agent_index_age_seconds", "Age of the agent's view of the index (last catch-up)", registry=r
        )
        self.index_age.set_function(index_age)
        self.verified_entries = Counter(
            "bk_auditor_agent_verified_entries",
            "Entries read from the entry logs and checked, by verdict",
            ["verdict"],
            registry=r,
        )
        self.verified_bytes = Counter(
            "bk_auditor_agent_verified_bytes", "Bytes read from the entry logs to check digests", registry=r
        )
        self.errors = Counter("bk_auditor_agent_errors", "Errors, by kind", ["kind"], registry=r)
