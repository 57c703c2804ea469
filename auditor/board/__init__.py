"""What the daemon knows, as plain in-memory answer types, below both the daemon and the admin API.

* `findings.FindingStore`: confirmed findings, deduplicated by `Finding.dedup_key()`, with first/last seen
  and a sighting count; a later full run of the same check that no longer sees a finding resolves it
  (`FindingRecord`, `FindingPage` are what it answers). `compact` is its compact form for informational
  whole-ledger findings.
* `tasks.TaskBoard`: per check task its state, last start / success / error, progress, rate-based ETA and
  cursor (`TaskInfo` is one task's snapshot).

No I/O here; the clock is injectable so tests control time. This package imports only durability and aio:
the daemon fills these, and the admin API and the metrics read them.
"""

from __future__ import annotations

from collections.abc import Callable

Clock = Callable[[], float]
"""Epoch seconds now (`time.time`); injectable so tests control time."""

__all__ = ["Clock"]
