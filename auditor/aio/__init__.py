"""Small asyncio helpers shared by every layer that runs on the event loop.

* `tasks.spawn`: start a background task whose reference is kept until it ends and whose failure is
  logged (never lost to the garbage collector, never silent).
* `ratelimit.TokenBucket`: the requests-per-second limiter of the bookie client and the ZooKeeper bridge.
* `cooperative.finish`: drive a stepwise computation of the core, yielding to the loop between steps.
* `window.Window`: at most N holders at once (requests in flight), O(1) where `asyncio.Semaphore` scans.

This package imports nothing of ours except `auditor.errors`, so the adapters (`metadata`, `bookie`) may
use it; the pure core (`durability`) must not.
"""

from __future__ import annotations

from .cooperative import finish
from .ratelimit import TokenBucket
from .tasks import error_text, log_failure, spawn
from .window import Window

__all__ = ["TokenBucket", "Window", "error_text", "finish", "log_failure", "spawn"]
