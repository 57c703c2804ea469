"""The admin client's errors, without gRPC: the CLI's one exit-code table (auditor.cli.common.EXIT_CODES)
names them, and the command line must not import gRPC to start.

    auditor.errors.AdminError
    └── AdminClientError      a failed admin call, worded for a person (exit 2)
        └── StandbyReplyError a leader-only call reached a standby; names the leader when known (exit 3)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from auditor.errors import AdminError

if TYPE_CHECKING:  # annotations only: gRPC is imported where calls are made (client.py)
    import grpc


class AdminClientError(AdminError):
    """A failed admin call, worded for a person: what failed and why."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code


class StandbyReplyError(AdminClientError):
    """A leader-only call (trigger, pause, resume, repair-limits, the switches) refused by a standby:
    "standby; the leader is X". `leader` is the leader's identity, None when the standby did not know it."""

    def __init__(self, what: str, leader: str | None, code: grpc.StatusCode | None = None) -> None:
        self.leader = leader
        self.what = what
        super().__init__(
            f"standby; the leader is {leader or 'not known'}: {what} refused (ask the leader's admin API)", code
        )


# How the daemon's StandbyError (auditor/admin/errors.py) words its refusal, carried as the status details.
_STANDBY = re.compile(r"this replica is a standby; the leader is (?:not known|(?P<leader>.+?))\s*$")


def standby_leader(details: str) -> tuple[bool, str | None]:
    """Whether `details` is a standby's refusal, and the leader it names (None: not known)."""
    m = _STANDBY.search(details)
    if m is None:
        return False, None
    return True, m.group("leader")
