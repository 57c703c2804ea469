"""A stall fence: after the event loop was frozen, what depended on a ZooKeeper session is unconfirmed.

A process that is SIGSTOPped (or whose VM or container is paused, or which is swapped out) for longer
than its session timeout has lost its session on the server, yet its ZooKeeper client learns so only
when its own thread next talks to the server. Meanwhile everything local still looks valid: the
connection state says CONNECTED, the session id is unchanged. A repair worker resumed in that window
would send the recovery adds it had queued for a ledger whose lock another worker may hold by now.

So the loop beats every `interval`. Once it has not run for longer than `limit` (a third of the session
timeout: the client pings after a third of it without traffic, so a session cannot expire during a
shorter freeze) the fence is `stalled`; a stall the beat has seen makes it `unconfirmed` too, and it stays
so until `confirm(epoch)` is called with the epoch of a ZooKeeper round trip begun after the stall. Both
are local reads, cheap enough to ask before every request. The daemon's leadership has the same rule
(daemon/leadership.py and watchdog.py); this is the one for everything else.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from auditor.logging import get_logger

log = get_logger("auditor.aio.stall")

STALL_FRACTION = 1 / 3  # of the ZooKeeper session timeout

Clock = Callable[[], float]


class StallFence:
    def __init__(self, limit: float, *, monotonic: Clock = time.monotonic) -> None:
        if limit <= 0:
            raise ValueError(f"stall limit must be > 0, not {limit}")
        self.limit = limit
        self.interval = min(1.0, max(0.05, limit / 4))
        self._monotonic = monotonic
        self._last_beat = monotonic()
        self.epoch = 0  # bumped at every stall seen: a round trip confirms only if none came after it began
        self.unconfirmed_since: float | None = None  # monotonic time the stall was seen

    @classmethod
    def for_session(cls, session_timeout: float) -> StallFence:
        return cls(session_timeout * STALL_FRACTION)

    def beat(self) -> float:
        """The loop ran now: the seconds since the previous beat. A gap over the limit makes the fence
        unconfirmed (a new epoch)."""
        now = self._monotonic()
        gap, self._last_beat = now - self._last_beat, now
        if gap > self.limit:
            self.epoch += 1
            self.unconfirmed_since = now
            log.warning(
                "the event loop was frozen: session-bound writes held until ZooKeeper confirms the session",
                frozenSeconds=round(gap, 2),
                stallLimitSeconds=round(self.limit, 2),
            )
        return gap

    @property
    def stalled(self) -> bool:
        """The loop has not beaten for longer than the limit (seen before the beat runs again: the first
        request after a resume)."""
        return self._monotonic() - self._last_beat > self.limit

    def confirm(self, epoch: int) -> bool:
        """A ZooKeeper round trip begun at `epoch` showed the session alive: confirmed, unless another
        stall came since. True if the fence is confirmed now."""
        if epoch == self.epoch and not self.stalled:
            self.unconfirmed_since = None
        return self.unconfirmed_since is None

    def problem(self) -> str | None:
        """Why session-bound writes must wait now, or None."""
        silent = self._monotonic() - self._last_beat
        if silent > self.limit:
            return f"the event loop did not run for {silent:.1f}s (over {self.limit:.1f}s): the session may be lost"
        if self.unconfirmed_since is not None:
            return "the process was frozen past a third of its session timeout; unconfirmed until ZooKeeper answers"
        return None

    async def run(self, on_stall: Callable[[int], object]) -> None:
        """Beat until cancelled; after each stall seen, `on_stall(epoch)` (which starts the round trip that
        may confirm that epoch)."""
        self.beat()
        while True:
            await asyncio.sleep(self.interval)
            before = self.epoch
            self.beat()
            if self.epoch != before:
                on_stall(self.epoch)
