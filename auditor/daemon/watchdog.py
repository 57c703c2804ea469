"""The loop watchdog: a leader whose process was frozen must not keep claiming leadership.

A SIGSTOPped (or swapped-out, or VM-paused) leader whose ZooKeeper session expired meanwhile resumes
believing it leads until kazoo's thread has noticed and told the loop; meanwhile a standby leads. Its
writes would fail (every write checks the vote inside its transaction), but its status, health and
metrics would claim leadership. So the loop beats every `interval`; a gap longer than the leadership's
stall limit (a third of the session timeout: kazoo pings after a third of it without traffic, so a
session cannot expire during a shorter freeze) makes leadership unconfirmed, and it stays so until a
ZooKeeper round trip started after the stall shows our vote still exists and belongs to our current
session. The admin API reads `Leadership.confirmed`, which also sees a stall the watchdog has not
beaten yet (the first request answered after a resume).

The limit comes from the configured session timeout (kazoo does not expose the negotiated one); a
ZooKeeper whose maxSessionTimeout is below half of the configured value would make it too lax, so keep
`zookeeper.session_timeout_seconds` within the server's bounds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kazoo.exceptions import KazooException

from auditor.logging import get_logger
from auditor.metadata.errors import MetadataError, NotLeaderError
from auditor.metadata.interfaces import WriteGuard

from .leadership import Leadership
from .supervisor import Spawn

log = get_logger("auditor.daemon.watchdog")

STALL_FRACTION = 1 / 3  # of the ZooKeeper session timeout
RETRY_SECONDS = 1.0  # between two round trips that could not confirm leadership

Confirm = Callable[[], Awaitable[bool]]


class LoopWatchdog:
    def __init__(
        self,
        leadership: Leadership,
        confirm: Confirm,
        spawn: Spawn,
        *,
        session_timeout: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.leadership = leadership
        self._monotonic = monotonic
        self._confirm = confirm
        self._spawn = spawn
        self.session_timeout = session_timeout
        leadership.stall_limit = session_timeout * STALL_FRACTION
        self.interval = min(1.0, max(0.05, leadership.stall_limit / 4))
        self.epoch = 0  # bumped at every stall: a round trip confirms only if no stall happened since it began
        self._checking: asyncio.Task[Any] | None = None
        self._next_check = 0.0

    async def run(self) -> None:
        lead = self.leadership
        lead.beat()
        while True:
            await asyncio.sleep(self.interval)
            gap = lead.beat()
            if lead.stall_limit is not None and gap > lead.stall_limit and lead.is_leader:
                self.epoch += 1
                lead.suspect()
                log.warning(
                    "the event loop was frozen: leadership unconfirmed until ZooKeeper confirms our vote",
                    frozenSeconds=round(gap, 2),
                    stallLimitSeconds=round(lead.stall_limit, 2),
                )
                self._next_check = 0.0
            if (
                lead.is_leader
                and lead.unconfirmed_since is not None
                and self._checking is None
                and self._monotonic() >= self._next_check
            ):
                self._checking = self._spawn("leadership-check", self._check(self.epoch))

    async def _check(self, epoch: int) -> None:
        lead = self.leadership
        try:
            async with asyncio.timeout(self.session_timeout):
                ours = await self._confirm()
        except (TimeoutError, KazooException, MetadataError, OSError) as exc:
            ours, why = False, f"{type(exc).__name__}: {exc}"
        else:
            why = "" if ours else "our vote is gone or belongs to another session"
        finally:
            self._checking = None
        if ours and epoch == self.epoch and lead.is_leader:
            lead.confirm()
            log.warning("leadership confirmed by ZooKeeper after the stall", vote=lead.vote_path)
        elif not ours:
            # The election steps down by itself (session events, its watch on our vote); until then we
            # claim nothing and write nothing.
            self._next_check = self._monotonic() + RETRY_SECONDS
            log.warning("leadership not confirmed", vote=lead.vote_path, reason=why)


class ConfirmedGuard:
    """The election's vote guard, refusing also while leadership is unconfirmed (after a loop freeze)."""

    def __init__(self, inner: WriteGuard, leadership: Leadership) -> None:
        self._inner = inner
        self._leadership = leadership

    @property
    def guard_path(self) -> str:
        return self._inner.guard_path

    def check(self) -> None:
        self._inner.check()
        if not self._leadership.confirmed:
            raise NotLeaderError(f"leadership unconfirmed since the process was frozen (vote {self.guard_path})")
