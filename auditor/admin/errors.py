"""The errors an admin backend raises on purpose, and the one table that maps every error to a gRPC status.

    auditor.errors.AdminError               INTERNAL: a deliberate refusal the table does not refine
    ├── StandbyError                        FAILED_PRECONDITION: a leader-only request reached a standby
    ├── UnknownCheckError (a KeyError)      NOT_FOUND: no task of that name
    ├── LedgerNotFoundError (a LookupError) NOT_FOUND: no such ledger
    ├── FindingNotFoundError (a LookupError) NOT_FOUND: no active finding with that key
    ├── NotSupportedError                   UNIMPLEMENTED: the daemon did not plug in this capability
    ├── InvalidArgumentError                INVALID_ARGUMENT: e.g. a malformed bookie id
    ├── NotConnectedError                   FAILED_PRECONDITION: not connected to ZooKeeper (yet)
    ├── QuestionTimeoutError                DEADLINE_EXCEEDED: an operator question outran its bound
    ├── UnauthenticatedError                UNAUTHENTICATED: the call needs a client certificate (access.py)
    └── PermissionDeniedError               PERMISSION_DENIED: that certificate may not make this call

Errors of other layers that reach the API are mapped in the same table (a metadata guard's
`NotLeaderError`, `NoSuchLedgerError`, a malformed `LedgerIdError`, an operator switch changed by someone
else since it was read, `ConcurrentUpdateError`); anything not listed is a bug and
answers INTERNAL. The client's own error, `AdminClientError`, is in client.py.
"""

from __future__ import annotations

import grpc

from auditor.durability.ids import LedgerIdError
from auditor.errors import AdminError
from auditor.metadata.errors import (
    ConcurrentUpdateError,
    MetadataConfigError,
    MissingZnodeError,
    NoSuchLedgerError,
    NotLeaderError,
)


class StandbyError(AdminError):
    """A leader-only request reached a standby; names the leader when it is known."""

    def __init__(self, leader: str | None = None) -> None:
        self.leader = leader
        where = f"the leader is {leader}" if leader else "the leader is not known"
        super().__init__(f"this replica is a standby; {where}")


class UnknownCheckError(AdminError, KeyError):
    """No task of that name on the board."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown check"


class LedgerNotFoundError(AdminError, LookupError):
    """The ledger does not exist (or cannot be looked up yet)."""


class FindingNotFoundError(AdminError, LookupError):
    """No active finding has that key (resolved meanwhile, or a key from another cluster)."""


class NotSupportedError(AdminError):
    """The daemon did not plug in this capability."""


class InvalidArgumentError(AdminError, ValueError):
    """A request field the backend cannot use (named in the message)."""


class NotConnectedError(AdminError):
    """The daemon has no ZooKeeper session yet (or lost it): it cannot answer now; try again."""


class QuestionTimeoutError(AdminError, TimeoutError):
    """An operator question (bookie reads) did not finish within admin.question_timeout_seconds."""


class UnauthenticatedError(AdminError):
    """With admin TLS, a call that needs an authenticated client came without a client certificate."""


class PermissionDeniedError(AdminError):
    """An authenticated client whose certificate names none of admin.authorized_clients."""


# The one table: an error's most specific class listed here chooses its status.
STATUS_CODES: dict[type[BaseException], grpc.StatusCode] = {
    StandbyError: grpc.StatusCode.FAILED_PRECONDITION,
    NotLeaderError: grpc.StatusCode.FAILED_PRECONDITION,  # a guarded write refused: leadership lost meanwhile
    UnknownCheckError: grpc.StatusCode.NOT_FOUND,
    LedgerNotFoundError: grpc.StatusCode.NOT_FOUND,
    FindingNotFoundError: grpc.StatusCode.NOT_FOUND,
    NoSuchLedgerError: grpc.StatusCode.NOT_FOUND,
    LookupError: grpc.StatusCode.NOT_FOUND,
    LedgerIdError: grpc.StatusCode.INVALID_ARGUMENT,
    NotSupportedError: grpc.StatusCode.UNIMPLEMENTED,
    InvalidArgumentError: grpc.StatusCode.INVALID_ARGUMENT,
    MetadataConfigError: grpc.StatusCode.INVALID_ARGUMENT,  # e.g. a recovery delay Java cannot read
    NotConnectedError: grpc.StatusCode.FAILED_PRECONDITION,
    MissingZnodeError: grpc.StatusCode.FAILED_PRECONDITION,  # no under-replication tree on this cluster
    ConcurrentUpdateError: grpc.StatusCode.ABORTED,  # compare-and-set lost: read again
    QuestionTimeoutError: grpc.StatusCode.DEADLINE_EXCEEDED,
    UnauthenticatedError: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDeniedError: grpc.StatusCode.PERMISSION_DENIED,
    AdminError: grpc.StatusCode.INTERNAL,
}


def status_of(exc: BaseException) -> grpc.StatusCode | None:
    """The status STATUS_CODES gives `exc` (None: not a deliberate error, i.e. a bug)."""
    for cls in type(exc).__mro__:
        code = STATUS_CODES.get(cls)
        if code is not None:
            return code
    return None
