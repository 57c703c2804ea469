"""Logging: JSON lines from structlog and stdlib loggers alike, camelCase ids, one line per finding."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import datetime

import pytest

from auditor.durability.findings import Category, Finding
from auditor.durability.ids import LedgerId
from auditor.logging import configure_logging, get_logger, log_finding


@pytest.fixture
def out() -> Iterator[io.StringIO]:
    buf = io.StringIO()
    configure_logging("info", "json", stream=buf)
    yield buf
    configure_logging("info", "json")  # back to stderr for later tests


def lines(buf: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_json_lines_with_utc_timestamps_and_camel_ids(out: io.StringIO) -> None:
    log = get_logger("auditor.test")
    log.info("ledger checked", ledger_id=LedgerId.of(42), bookie_id="127.0.0.1:3181", took=0.5)
    log.debug("not shown at info")
    [rec] = lines(out)
    assert rec["event"] == "ledger checked" and rec["level"] == "info" and rec["logger"] == "auditor.test"
    assert rec["ledgerId"] == 42 and rec["bookieId"] == "127.0.0.1:3181" and rec["took"] == 0.5
    assert "ledger_id" not in rec and "bookie_id" not in rec
    assert rec["timestamp"].endswith("Z")
    datetime.fromisoformat(rec["timestamp"].replace("Z", "+00:00"))
    log.info("scoped", ledgerId=LedgerId(3, 9))
    scoped = lines(out)[-1]
    assert (scoped["ledgerId"], scoped["scopeId"]) == (9, 3)  # as Finding.to_log_dict renders it


def test_stdlib_loggers_share_the_format(out: io.StringIO) -> None:
    logging.getLogger("kazoo.client").error("Connection dropped: %s", "socket closed")  # (warnings: debug)
    logging.getLogger("asyncio").info("loop event")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("grpc").exception("handler failed")
    recs = lines(out)
    assert [(r["logger"], r["level"], r["event"]) for r in recs] == [
        ("kazoo.client", "error", "Connection dropped: socket closed"),
        ("asyncio", "info", "loop event"),
        ("grpc", "error", "handler failed"),
    ]
    assert "ValueError: boom" in recs[2]["exception"]
    assert all("timestamp" in r for r in recs)


def test_log_finding_one_line_with_every_field(out: io.StringIO) -> None:
    f = Finding.of(
        Category.ENTRY_NO_REPLICA,
        "entries 3-4 have no copy",
        ledger=LedgerId(3, 9),
        bookie="b2:3182",
        segment_index=1,
        ensemble=("b1:3181", "b2:3182"),
        confirmed=True,
        detail={"wq": 2},
    )
    log_finding(f, check="scrutiny")
    g = Finding.of(Category.PLACEMENT_SOFT, "two zones, three desired", ledger=LedgerId.of(5))
    log_finding(g)
    first, second = lines(out)
    expected = json.loads(json.dumps(f.to_log_dict()))
    assert {k: first[k] for k in expected} == expected  # every field, same values
    assert first["event"] == "finding" and first["check"] == "scrutiny" and first["level"] == "error"
    assert second["level"] == "info" and second["category"] == "placement_soft"
    assert len(out.getvalue().splitlines()) == 2


def test_reserved_keys_are_not_clobbered(out: io.StringIO) -> None:
    class Odd:
        def to_log_dict(self) -> dict:
            return {"category": "x", "severity": "major", "event": "theirs", "level": "theirs"}

    log_finding(Odd())
    [rec] = lines(out)
    assert rec["event"] == "finding" and rec["level"] == "warning"
    assert rec["findingEvent"] == "theirs" and rec["findingLevel"] == "theirs"


def test_reconfigure_replaces_the_handler_and_console_format() -> None:
    a, b = io.StringIO(), io.StringIO()
    configure_logging("info", "json", stream=a)
    configure_logging("debug", "console", stream=b)
    try:
        get_logger("auditor.x").debug("visible now", ledgerId=1)
        logging.getLogger("kazoo").debug("kazoo too")
    finally:
        configure_logging("info", "json")
    assert a.getvalue() == ""
    text = b.getvalue()
    assert "visible now" in text and "ledgerId=1" in text and "kazoo too" in text
    assert not text.lstrip().startswith("{")
    with pytest.raises(ValueError):
        configure_logging("loud", "json")


def test_kazoo_chatter_is_debug(out: io.StringIO) -> None:
    kazoo = logging.getLogger("kazoo.client")
    kazoo.info("Connecting to 127.0.0.1(127.0.0.1):1, use_ssl: False")
    kazoo.warning("Connection dropped: socket connection error: Connection refused")
    kazoo.error("a real kazoo error")
    logging.getLogger("auditor.metadata").warning("ours stays")
    assert [(r["logger"], r["level"]) for r in lines(out)] == [
        ("kazoo.client", "error"),
        ("auditor.metadata", "warning"),
    ]
    buf = io.StringIO()
    configure_logging("debug", "json", stream=buf)
    kazoo.warning("Connection dropped: socket connection error: Connection refused")
    [rec] = [r for r in lines(buf) if r["logger"] == "kazoo.client"]
    assert rec["level"] == "debug" and rec["event"].startswith("Connection dropped")
