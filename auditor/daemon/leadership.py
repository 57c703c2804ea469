"""Whether this process leads, who does and since when, and whether our leadership is confirmed after a
stall of the event loop (the loop watchdog, watchdog.py, beats it)."""

from __future__ import annotations

import time
from collections.abc import Callable

from auditor.board import Clock


class Leadership:
    """Whether we lead, who leads (identity, when known) and since when; listeners hear every change.

    `is_leader` is what the election told us. `confirmed` is what we tell others (admin status, the
    `leader` health, the is_leader metric) and what guards our writes: a process whose event loop did not
    run for longer than `stall_limit` seconds (SIGSTOP, a VM or container frozen, swapping) may have lost
    its ZooKeeper session meanwhile and a standby may lead by now, so from the moment such a stall is
    visible leadership is unconfirmed until a ZooKeeper round trip shows our vote still exists
    (`confirm()`). `beat()` is called by the loop watchdog; `stall_limit` None turns the check off.
    """

    def __init__(self, identity: str, clock: Clock = time.time, monotonic: Clock = time.monotonic) -> None:
        self.identity = identity
        self._clock = clock
        self._monotonic = monotonic
        self.is_leader = False
        self.leader: str | None = None
        self.since: float | None = None
        self.vote_path: str | None = None
        self.changes = 0
        self.stall_limit: float | None = None
        self.unconfirmed_since: float | None = None
        self._last_beat = monotonic()
        self._listeners: list[Callable[[bool], object]] = []

    def add_listener(self, callback: Callable[[bool], object]) -> None:
        self._listeners.append(callback)

    def set(self, is_leader: bool, leader: str | None = None, vote_path: str | None = None) -> bool:
        """Record the current state; True if our own leadership flipped. Becoming leader is confirmed
        (the election just read our vote as the first one)."""
        flipped = is_leader != self.is_leader
        self.is_leader = is_leader
        self.leader = self.identity if is_leader else leader
        self.vote_path = vote_path if is_leader else None
        if flipped:
            self.unconfirmed_since = None
            self.since = self._clock()
            self.changes += 1
            for cb in list(self._listeners):
                cb(is_leader)
        return flipped

    # ----------------------------------------------------------------------------- stalls
    def beat(self) -> float:
        """The loop ran now; returns the seconds since the previous beat."""
        now = self._monotonic()
        gap, self._last_beat = now - self._last_beat, now
        return gap

    @property
    def stalled(self) -> bool:
        """The loop has not beaten for longer than the stall limit (seen before the watchdog runs again)."""
        return self.stall_limit is not None and self._monotonic() - self._last_beat > self.stall_limit

    def suspect(self) -> bool:
        """Leadership unconfirmed until `confirm()`; True if this changed anything."""
        if not self.is_leader or self.unconfirmed_since is not None:
            return False
        self.unconfirmed_since = self._clock()
        return True

    def confirm(self) -> None:
        self.unconfirmed_since = None

    @property
    def confirmed(self) -> bool:
        return self.is_leader and self.unconfirmed_since is None and not self.stalled

    @property
    def status(self) -> str:
        """`leader` (confirmed), `unconfirmed` (elected, but a stall since: being checked) or `standby`."""
        if not self.is_leader:
            return "standby"
        return "leader" if self.confirmed else "unconfirmed"
