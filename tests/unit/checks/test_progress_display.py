"""`check` off a terminal: periodic one-line progress logs (done/total, rate, ETA) instead of a bar."""

from __future__ import annotations

import io
import json
import time

from auditor.checks.oneshot import ProgressDisplay
from auditor.checks.runner import Progress
from auditor.logging import configure_logging


def test_off_a_terminal_progress_is_a_log_line_per_interval() -> None:
    logs = io.StringIO()
    configure_logging("info", "json", stream=logs)
    try:
        display = ProgressDisplay(io.StringIO(), log_every=0.05)
        assert not display.enabled
        p = Progress("scrutiny", ledgers_done=0, ledgers_total=1000, started=time.monotonic() - 2.0)
        with display:
            display.update(p)  # the first call starts the interval: nothing yet
            time.sleep(0.06)
            p.ledgers_done = 500
            display.update(p)
            display.update(p)  # within the interval: nothing
    finally:
        configure_logging("info", "json")
    [line] = [json.loads(x) for x in logs.getvalue().splitlines()]
    assert line["event"] == "check progress" and line["check"] == "scrutiny"
    assert (line["ledgersDone"], line["ledgersTotal"]) == (500, 1000)
    assert 200 <= line["ledgersPerSecond"] <= 250 and 2 <= line["etaSeconds"] <= 3
