"""A heartbeat task for responsiveness tests: it counts its turns on the event loop.

Responsiveness is asserted by counting turns while some work runs (the work must let the loop run
between its steps), never by wall-clock speed.
"""

from __future__ import annotations

import asyncio
from typing import Any


class Heartbeat:
    def __init__(self) -> None:
        self.ticks = 0
        self._running = False
        self._task: asyncio.Task[None] | None = None

    async def _beat(self) -> None:
        while self._running:
            self.ticks += 1
            await asyncio.sleep(0)

    async def __aenter__(self) -> Heartbeat:
        self._running = True
        self._task = asyncio.create_task(self._beat())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._running = False
        assert self._task is not None
        await self._task
