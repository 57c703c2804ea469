"""What the bookie clients of a process tree know of each bookie's capabilities, learnt once per incarnation.

A bookie on DbLedgerStorage never answers GET_LIST_OF_ENTRIES_OF_LEDGER for a ledger it holds: the request
times out and the bookie logs an exception. Finding that out costs one request and a timeout, so it should
happen once per bookie, not once per client (a scan's partitions each have their own clients, on several
worker processes). A `CapabilityBook` is where the clients of one process tree share it:

* `lookup`: what the tree knows of the bookie in this incarnation (UNKNOWN: nothing yet);
* `claim`: the right to ask (True: the caller sends the one probe; False: another client is probing now,
  wait and look again);
* `settle`: the probe's outcome (UNKNOWN gives the claim back, for the next client to try).

An incarnation names one run of the bookie: the creation zxid of its registration znode, which a restarted
bookie creates anew (an ephemeral node of its new ZooKeeper session; it waits for the old one to go first).
What was learnt of an earlier incarnation is forgotten: the bookie may have been reconfigured (sorted ->
DbLedgerStorage) while it was down. `LocalCapabilityBook` serves one process; the worker processes of a
scan share `auditor.processes.capabilities.SharedCapabilityBook`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from .results import Capability

# A claim older than this was given up (its client's process ended mid-probe): another client may probe. A
# probe takes at most the probe timeout and a liveness ping (bookie_client: 1 s + 2 s by default).
CLAIM_EXPIRES_SECONDS = 30.0

Incarnation = Callable[[str], Awaitable[str | None]]  # bookie id -> its incarnation now (None: not known)


class CapabilityBook(Protocol):
    def lookup(self, bookie_id: str, incarnation: str) -> Capability: ...

    def claim(self, bookie_id: str, incarnation: str) -> bool: ...

    def settle(self, bookie_id: str, incarnation: str, capability: Capability) -> None: ...


# One bookie's line in a book: (incarnation, state, claimed at), state a Capability value or PROBING.
PROBING = "probing"
Line = tuple[str, str, float]


def looked_up(line: Line | None, incarnation: str) -> Capability:
    """What `line` says of the bookie in `incarnation`."""
    if line is None or line[0] != incarnation or line[1] == PROBING:
        return Capability.UNKNOWN
    return Capability(line[1])


def claimed(line: Line | None, incarnation: str, now: float) -> Line | None:
    """The line after a claim in `incarnation` at `now`; None when the claim is refused (known already, or
    another client's claim still stands)."""
    if line is not None and line[0] == incarnation:
        if line[1] != PROBING or now - line[2] < CLAIM_EXPIRES_SECONDS:
            return None
    return (incarnation, PROBING, now)


def settled(line: Line | None, incarnation: str, capability: Capability) -> Line | None:
    """The line after a probe in `incarnation` ended with `capability` (None: the bookie has no line). What
    it learnt replaces the line; UNKNOWN gives its claim back and leaves anything else as it was."""
    if capability is not Capability.UNKNOWN:
        return (incarnation, capability.value, 0.0)
    if line is not None and line[0] == incarnation and line[1] == PROBING:
        return None
    return line


class LocalCapabilityBook:
    """A `CapabilityBook` for the clients of one process."""

    def __init__(self) -> None:
        self._lines: dict[str, Line] = {}

    def lookup(self, bookie_id: str, incarnation: str) -> Capability:
        return looked_up(self._lines.get(bookie_id), incarnation)

    def claim(self, bookie_id: str, incarnation: str) -> bool:
        line = claimed(self._lines.get(bookie_id), incarnation, time.time())
        if line is None:
            return False
        self._lines[bookie_id] = line
        return True

    def settle(self, bookie_id: str, incarnation: str, capability: Capability) -> None:
        line = settled(self._lines.get(bookie_id), incarnation, capability)
        if line is None:
            self._lines.pop(bookie_id, None)
        else:
            self._lines[bookie_id] = line
