"""How many CPUs this process may use: the default number of worker processes of `check --processes`
and `sweep --master processes[*]`.

Why not `os.cpu_count()`: in a container it is the node's CPU count. A Kubernetes CPU limit is a CFS quota
(cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`) and a cpuset narrows the affinity mask;
a process per node CPU on a pod limited to two would only contend for them.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def quota_cpus(cgroup_root: Path = CGROUP_ROOT) -> int | None:
    """The CPU quota of this process's cgroup rounded up (at least 1); None when there is none or it cannot
    be read. The process's own cgroup is taken as mounted at `cgroup_root`, as it is in a container."""
    try:
        text = (cgroup_root / "cpu.max").read_text().split()  # v2: "<quota|max> <period>"
        quota, period = (text[0], text[1]) if len(text) == 2 else ("max", "1")
    except OSError:
        try:  # v1
            quota = (cgroup_root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (cgroup_root / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        q, p = int(quota), int(period)
    except ValueError:  # "max" (v2) or garbage: no quota
        return None
    if q <= 0 or p <= 0:  # v1 says -1 for none
        return None
    return max(1, math.ceil(q / p))


def available_cpus(cgroup_root: Path = CGROUP_ROOT) -> int:
    """CPUs in the affinity mask, capped by the cgroup's quota; at least 1."""
    try:
        mask = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        mask = os.cpu_count() or 1
    quota = quota_cpus(cgroup_root)
    return max(1, min(mask, quota) if quota is not None else mask)
