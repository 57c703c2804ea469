"""The operator's pause switch (with its reason) that the daemon's tasks await between units of work. It is
cluster-wide: the leader keeps it in ZooKeeper (`auditor.metadata.own.pausestate`) and every replica
follows it there (shared_state.py), so it survives a failover."""

from __future__ import annotations

import asyncio
import time

from auditor.board import Clock


class PauseControl:
    """The operator's pause switch. Tasks `await wait_resumed()` between units of work."""

    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock
        self._running = asyncio.Event()
        self._running.set()
        self.reason: str = ""
        self.by: str = ""  # who paused (the daemon that took the operator's request)
        self.since: float | None = None

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self, reason: str = "", by: str = "", since: float | None = None) -> bool:
        """Pause; True if this changed the state (a repeated pause only updates the reason)."""
        changed = not self.paused
        self._running.clear()
        self.reason = reason
        self.by = by
        if changed or since is not None:
            self.since = self._clock() if since is None else since
        return changed

    def resume(self) -> bool:
        changed = self.paused
        self._running.set()
        self.reason = ""
        self.by = ""
        self.since = None
        return changed

    async def wait_resumed(self) -> None:
        await self._running.wait()
