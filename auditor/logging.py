"""Logging, configured in one place: structlog for our code, and the stdlib loggers of libraries (kazoo,
grpc, asyncio) routed through the same processors, so every line has the same shape.

* `json` (default): one JSON object per line on stderr: `timestamp` (ISO 8601, UTC), `level`,
  `logger`, `event`, then the event's keys.
* `console`: structlog's console renderer (colours only on a TTY, none when NO_COLOR is set), for people
  at a terminal.

Every module of ours gets its logger one way, `log = get_logger("auditor.<subject>")` (the name is what
a JSON line carries as `logger`; tests/unit/test_logger_idiom.py keeps it so). This module sits just above
the pure core so that every other layer may import it: it imports only structlog, the standard library,
`auditor.redact` and the core's `LedgerId` and `Finding` (for the shape of their log lines).

Key convention, shared with BookKeeper's own structured logs: camelCase `ledgerId`, `bookieId`,
`entryId`. Snake-case spellings of those (`ledger_id=...`) are renamed on the way out, so a call site
cannot break the convention by accident.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import sys
from collections.abc import Mapping
from typing import IO, Any, Protocol

import structlog
from structlog.typing import EventDict, WrappedLogger

from auditor import redact
from auditor.durability.findings import Finding
from auditor.durability.ids import LedgerId

_HANDLER_FLAG = "_bk_auditor_handler"
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}

# snake_case spelling -> the camelCase key every line must use
CAMEL_KEYS = {
    "ledger_id": "ledgerId",
    "bookie_id": "bookieId",
    "entry_id": "entryId",
    "scope_id": "scopeId",
    "segment_index": "segmentIndex",
    "first_entry_id": "firstEntryId",
    "last_entry_id": "lastEntryId",
}
# Keys structlog itself owns; a finding field with one of these names is prefixed instead of clobbering it.
_RESERVED = {"event", "level", "timestamp", "logger", "exception", "stack"}
# Finding severity -> log level.
_SEVERITY_LEVEL = {"critical": logging.ERROR, "major": logging.WARNING, "minor": logging.WARNING, "info": logging.INFO}


def _camel_keys(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    for snake, camel in CAMEL_KEYS.items():
        if snake in event:
            event.setdefault(camel, event.pop(snake))
    ledger = event.get("ledgerId")
    if isinstance(ledger, LedgerId):
        # Same shape as Finding.to_log_dict: ledgerId is always a number, scopeId only when not 0, so a
        # log store never sees ledgerId as a number in one line and a string in the next.
        event["ledgerId"] = ledger.ledger
        if ledger.scope:
            event.setdefault("scopeId", ledger.scope)
    return event


def _json_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Mapping):
        return dict(value)
    return str(value)  # LedgerId -> its decimal / qualified text, Path, datetime ...


def _dumps(obj: Any, **kw: Any) -> str:
    return json.dumps(obj, default=_json_default, ensure_ascii=False, separators=(",", ":"))


def _shared_processors() -> list[Any]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _camel_keys,
        structlog.processors.StackInfoRenderer(),
    ]


# Libraries whose routine lines (connecting, connection dropped, retrying, session closed) are noise at
# info: our own code logs what they mean (lost session, stepping down, unreachable ZooKeeper). Their
# errors still show; everything else is demoted to debug.
CHATTY_LOGGERS = ("kazoo",)
# kazoo's debug trace of every request and response carries znode data (ledger metadata holds the ledger's
# password) and the digest login (Auth user:password): the line is kept, its payload replaced by its type.
_KAZOO_PAYLOAD_LINES = frozenset({"Sending request(xid=%s): %s", "Received response(xid=%s): %r"})


class _DemoteChatter(logging.Filter):
    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        msg, args = record.msg, record.args  # structlog's own records carry a dict as msg
        if isinstance(msg, str) and msg in _KAZOO_PAYLOAD_LINES and isinstance(args, tuple) and len(args) == 2:
            record.args = (args[0], f"<{type(args[1]).__name__}>")
        if record.levelno < logging.ERROR and record.name.split(".", 1)[0] in CHATTY_LOGGERS:
            if self.level > logging.DEBUG:
                return False
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


def _scrub(_logger: WrappedLogger, _name: str, line: str) -> str:
    """The rendered line without any configured secret (`auditor.redact`: a library may print one)."""
    return redact.scrub(line)


def console_colours(out: IO[str]) -> bool:
    """Colours in console logs: only on a terminal, and never when NO_COLOR is set to anything but ""
    (https://no-color.org)."""
    if os.environ.get("NO_COLOR", ""):
        return False
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


def configure_logging(level: str = "info", fmt: str = "json", stream: IO[str] | None = None) -> None:
    """(Re)configure all logging. Safe to call again (tests do): the previous handler is replaced."""
    if level.lower() not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    if fmt not in ("json", "console"):
        raise ValueError(f"log format must be json or console, got {fmt!r}")
    out = stream if stream is not None else sys.stderr
    shared = _shared_processors()
    if fmt == "json":
        renderer: Any = structlog.processors.JSONRenderer(serializer=_dumps)
        final = [structlog.processors.format_exc_info, renderer, _scrub]
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=console_colours(out))
        final = [renderer, _scrub]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *final],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    handler.addFilter(_DemoteChatter(LEVELS[level.lower()]))
    setattr(handler, _HANDLER_FLAG, True)
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, _HANDLER_FLAG, False):
            root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(LEVELS[level.lower()])
    logging.captureWarnings(True)
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            # `log.info("... %s", x)` reads as the stdlib's does (the event, formatted), not as a key.
            structlog.stdlib.PositionalArgumentsFormatter(),
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,  # reconfiguration (level, stream) must reach existing loggers
    )


def get_logger(name: str, **initial: Any) -> Any:
    """The logger of one of our modules, `name` like a stdlib one (`auditor.daemon...`): a structlog
    logger over the stdlib logger of that name, so that its lines go where stdlib logging sends them
    whether or not `configure_logging` ran (a library's host, a test's log capture)."""
    return structlog.wrap_logger(logging.getLogger(name), **initial)


class LoggableFinding(Protocol):
    """What `log_finding` needs (a `Finding`, or anything with the same wire form)."""

    def to_log_dict(self) -> Mapping[str, Any]: ...


def log_finding(
    finding: LoggableFinding, *, logger: Any = None, check: str | None = None, event: str = "finding"
) -> None:
    """Exactly one line per finding carrying every field of `finding.to_log_dict()` at the top level.
    The level follows the severity: critical -> error, major/minor -> warning, info -> info."""
    fields = dict(finding.to_log_dict())
    for key in _RESERVED & set(fields):
        fields["finding" + key[0].upper() + key[1:]] = fields.pop(key)
    if check is not None:
        fields.setdefault("check", check)
    severity = str(fields.get("severity", "")).lower()
    level = _SEVERITY_LEVEL.get(severity, logging.WARNING)
    (logger or get_logger("auditor.findings")).log(level, event, **fields)


def log_new_finding(finding: Finding, *, logger: Any = None, check: str | None = None) -> None:
    """Log a finding seen for the first time, unless it is informational (`Finding.actionable`): info
    findings are counted, not logged one by one. The one rule for the daemon, `bk-auditor check` and the
    Spark sweep."""
    if finding.actionable:
        log_finding(finding, logger=logger, check=check)
