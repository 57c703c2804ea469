"""Every error bk-auditor raises on purpose derives from `AuditorError`.

    AuditorError
    ├── ConfigError          a setting, config file, environment variable or Java property is wrong
    ├── DataError            bytes from outside (a znode, a bookie answer, a ledger id text) are malformed
    ├── MetadataError        ZooKeeper: missing or unreadable znodes, wrong root, lost leadership, races
    ├── BookieError          a bookie's wire protocol was violated, or a request our gate forbids
    └── AdminError           an admin API request cannot be served (unknown check or ledger, not leader)

Each package defines its own subclasses beside the code that raises them and derives them from one of
these five. The CLI maps them to exit codes and the admin API to gRPC status codes, each in one table
(`auditor.cli.common.EXIT_CODES`, `auditor.admin.errors.STATUS_CODES`).
This module imports nothing of ours, so every layer (the pure core included) may use it.
"""

from __future__ import annotations


class AuditorError(Exception):
    """The root of every error bk-auditor raises on purpose."""


class ConfigError(AuditorError, ValueError):
    """A setting, config file, environment variable or Java property is wrong (exit 2).

    `problems` holds one line per problem (control characters and line breaks escaped, whatever a key or
    value held); str() joins them with "; "."""

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [_printable(p) for p in ([problems] if isinstance(problems, str) else problems)]
        super().__init__("; ".join(self.problems))


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class DataError(AuditorError, ValueError):
    """Bytes or text from outside the process are malformed."""


class MetadataError(AuditorError):
    """A ZooKeeper metadata problem."""


class BookieError(AuditorError):
    """A bookie protocol problem, or a request the gate forbids."""


class AdminError(AuditorError):
    """An admin API request that cannot be served."""


ERROR_PREFIX = "error: "


def error_line(problem: BaseException | str) -> str:
    """The one stderr line every command prints for an error: `error: ` and the problem on one line. Our
    own errors say what they are; anything else is named by its type (e.g. `TimeoutError: ...`)."""
    if isinstance(problem, BaseException):
        text = str(problem) if isinstance(problem, AuditorError) else f"{type(problem).__name__}: {problem}"
    else:
        text = problem
    return ERROR_PREFIX + " ".join(text.split())
