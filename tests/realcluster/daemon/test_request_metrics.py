"""The daemon's bookie request metrics against the real cluster: counted as requests complete (they rise
while the scrutiny still runs, not at its end) and each failed request under its real kind (a paused
bookie's requests: `timeout`), never `unknown`."""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon

pytestmark = pytest.mark.realcluster


def test_request_errors_rise_during_the_run_with_their_kind(
    cluster: Cluster, daemons: list[Daemon], tmp_path: Path
) -> None:
    ids = [b.bookie_id for b in cluster.bookies[:3]]
    paused = ids[2]
    for _ in range(2):
        cluster.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, entries=5, bookies=ids)
    cluster.pause_bookie(3)  # still registered: every request to it times out
    try:
        d = Daemon(
            cluster,
            "auditor-requests",
            tmp_path,
            bookie_client={"timeout_seconds": 1},
            recheck={"delays_seconds": [2, 2], "attempts": 2},  # the run waits out its re-checks
        ).start()
        daemons.append(d)

        def timeouts() -> float:
            try:
                samples = d.samples()
            except OSError:  # not serving /metrics yet
                return 0.0
            return sum(
                s.value
                for s in samples
                if s.name == "bk_auditor_bookie_request_errors_total"
                and s.labels.get("bookie") == paused
                and s.labels.get("operation") == "scrutiny"
                and s.labels.get("error") == "timeout"
            )

        d.wait(lambda: timeouts() > 0, 40, "a timeout counted")
        # counted while the run goes on (its re-checks of the paused bookie's ledgers still to come): no
        # run has ended yet. (Not the check_running gauge: it follows the task board every 5 s.)
        assert d.metric("bk_auditor_check_runs_total", check="scrutiny", outcome="success") == 0
        assert not [ln for ln in d.logs() if ln.get("event") == "check finished" and ln.get("check") == "scrutiny"]
        assert (d.metric("bk_auditor_bookie_requests_total", bookie=paused, operation="scrutiny") or 0) >= timeouts()
        kinds = {s.labels["error"] for s in d.samples() if s.name == "bk_auditor_bookie_request_errors_total"}
        assert "unknown" not in kinds, kinds
    finally:
        cluster.resume_bookie(3)
