"""The operator's pause switch (with its reason) that the daemon's tasks await between units of work."""

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
        self.since: float | None = None

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self, reason: str = "") -> bool:
        """Pause; True if this changed the state (a repeated pause only updates the reason)."""
        changed = not self.paused
        self._running.clear()
        self.reason = reason
        if changed:
            self.since = self._clock()
        return changed

    def resume(self) -> bool:
        changed = self.paused
        self._running.set()
        self.reason = ""
        self.since = None
        return changed

    async def wait_resumed(self) -> None:
        await self._running.wait()
