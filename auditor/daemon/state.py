"""What the daemon knows right now, kept in memory and served by the admin API and the metrics: one
`DaemonState` per process, bundling

* the finding store and the task board (`auditor.board`: plain answer types, below the admin API too),
* `PauseControl`: the operator's pause switch (pause.py),
* `Leadership`: whether this process leads, and who does (leadership.py),
* `FindingsSource`: where the findings held come from: this leader's own checks, or (on a standby) the
  findings the leader saved in ZooKeeper (shared_state.py).

No I/O here; the clocks are injectable so tests control time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from auditor.board.findings import FindingStore
from auditor.board.tasks import TaskBoard

from .leadership import Leadership
from .pause import PauseControl


@dataclass
class FindingsSource:
    """Where the finding store's contents come from: "leader" (this replica audits), "persisted" (a
    standby's copy of what the leader `saved_by` saved at `as_of`), "none" (a standby that has not read
    them yet)."""

    kind: str = "none"
    saved_by: str = ""
    as_of: float | None = None


@dataclass
class DaemonState:
    """The findings (and where they come from), the tasks, the pause switch and the leadership of one
    daemon process."""

    identity: str
    findings: FindingStore = field(default_factory=FindingStore)
    tasks: TaskBoard = field(default_factory=TaskBoard)
    pause: PauseControl = field(default_factory=PauseControl)
    leadership: Leadership | None = None
    started_at: float = field(default_factory=time.time)
    recheck_depth: Callable[[], int] = lambda: 0
    findings_source: FindingsSource = field(default_factory=FindingsSource)

    def __post_init__(self) -> None:
        if self.leadership is None:
            self.leadership = Leadership(self.identity)
