"""Bookie request metrics that mean what they say: each failed request counted under its real error kind
(timeout, connection, malformed, the bookie's status code), and counted as it completes (RunStats tells
`on_requests` at once; a worker process's partition when it is absorbed)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

from auditor.bookie.client import BookieClient
from auditor.bookie.config import BookieClientConfig
from auditor.bookie.pending import _BadReply, _TimedOut
from auditor.bookie.protocol import Status
from auditor.bookie.results import EntryListResult, Outcome, ReadEntryResult, error_kind
from auditor.checks.context import RunStats
from auditor.daemon.metrics import AuditorMetrics

B = "127.0.0.1:3181"


def _read(outcome: Outcome, status: Status | None, error: str | None) -> ReadEntryResult:
    return ReadEntryResult(B, outcome, status, error, 0.01, 7, 0)


def test_error_kinds() -> None:
    assert error_kind(_read(Outcome.PRESENT, Status.EOK, None)) is None
    assert error_kind(_read(Outcome.ABSENT, Status.ENOENTRY, None)) is None
    assert error_kind(_read(Outcome.UNKNOWN, Status.EIO, "bookie answered EIO")) == "EIO"
    assert error_kind(_read(Outcome.UNKNOWN, Status.ETOOMANYREQUESTS, "x")) == "ETOOMANYREQUESTS"
    assert error_kind(_read(Outcome.UNKNOWN, None, _TimedOut("no reply within 5 s"))) == "timeout"
    assert error_kind(_read(Outcome.UNKNOWN, None, "bookie b: cannot connect: refused")) == "connection"
    assert error_kind(_read(Outcome.UNKNOWN, None, _BadReply("bookie b answered unknown(99)"))) == "malformed"
    assert error_kind(_read(Outcome.UNKNOWN, Status.EOK, "answered EOK without a body")) == "malformed"
    # a DbLedgerStorage bookie's silence to GET_LIST is no failure: the check reads instead
    silent = EntryListResult(B, Outcome.UNKNOWN, None, _TimedOut("no reply"), 0.5, 7, None, True)
    assert error_kind(silent) is None
    assert error_kind(EntryListResult(B, Outcome.UNKNOWN, None, _TimedOut("no reply"), 0.5, 7)) == "timeout"


def test_real_sockets_give_connection_and_timeout() -> None:
    """A real client: a port nobody listens on is `connection`; a listener that never answers is `timeout`."""

    async def main() -> tuple[str | None, str | None]:
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]
        closed.close()
        silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        silent_port = silent.sockets[0].getsockname()[1]
        config = BookieClientConfig(request_timeout=0.3, connect_timeout=0.5)
        try:
            a = BookieClient(f"127.0.0.1:{dead_port}", config=config)
            b = BookieClient(f"127.0.0.1:{silent_port}", config=config)
            try:
                ra = await a.read_entry(1, 0)
                rb = await b.read_entry(1, 0)
            finally:
                await a.close()
                await b.close()
        finally:
            silent.close()
        return error_kind(ra), error_kind(rb)

    assert asyncio.run(main()) == ("connection", "timeout")


def test_run_stats_tell_requests_as_they_complete() -> None:
    told: list[tuple[str, int, dict[str, int]]] = []

    def on(bookie: str, n: int, errors: Mapping[str, int]) -> None:
        told.append((bookie, n, dict(errors)))

    stats = RunStats("scrutiny", on_requests=on)
    stats.requests_done(B, [_read(Outcome.PRESENT, Status.EOK, None), _read(Outcome.UNKNOWN, Status.EIO, "e")])
    assert told == [(B, 2, {"EIO": 1})]  # at once, not at the end of the run
    stats.requests_done(B, [_read(Outcome.UNKNOWN, None, _TimedOut("t"))])
    assert told[-1] == (B, 1, {"timeout": 1})
    assert stats.bookie_requests[B] == 3
    assert stats.bookie_errors[B] == {"EIO": 1, "timeout": 1}
    # a worker process's partition: absorbed whole, and told then
    part = RunStats("scrutiny")
    part.requests_done("b2:3181", [_read(Outcome.UNKNOWN, None, "cannot connect")] * 4)
    stats.absorb(part.as_dict())
    assert told[-1] == ("b2:3181", 4, {"connection": 4})
    assert stats.as_dict()["bookieErrorsByBookie"] == {B: {"EIO": 1, "timeout": 1}, "b2:3181": {"connection": 4}}


def _value(m: AuditorMetrics, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(m.exposition().decode()):
        for s in family.samples:
            got = dict(s.labels)
            got.pop("bookkeeper_cluster", None)
            if s.name == name and got == labels:
                return s.value
    raise KeyError((name, labels))


def test_metrics_count_each_error_kind() -> None:
    m = AuditorMetrics(cluster="zk:2181/ledgers")
    stats = RunStats("ledger", on_requests=lambda b, n, e: m.bookie_requests_done(b, "ledger", n, e))
    stats.requests_done(B, [_read(Outcome.UNKNOWN, None, _TimedOut("t")), _read(Outcome.PRESENT, Status.EOK, None)])
    stats.requests_done(B, [_read(Outcome.UNKNOWN, Status.ENOLEDGER, "x")])  # an UNKNOWN still named by status
    assert _value(m, "bk_auditor_bookie_requests_total", bookie=B, operation="ledger") == 3
    assert _value(m, "bk_auditor_bookie_request_errors_total", bookie=B, operation="ledger", error="timeout") == 1
    assert _value(m, "bk_auditor_bookie_request_errors_total", bookie=B, operation="ledger", error="ENOLEDGER") == 1
    assert "unknown" not in m.exposition().decode().split("bk_auditor_bookie_request_errors_total")[-1]
