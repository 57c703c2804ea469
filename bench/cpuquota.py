"""A CPU quota for a benchmark's child: a cgroup of its own (v1 `cpu` controller, or v2 with `cpu` enabled)
whose `cfs_quota_us`/`cpu.max` holds it and its descendants to a number of CPUs, and the machine's busy
time while it runs (/proc/stat).

Why: on this 2-CPU machine the bookies and ZooKeeper share the CPUs with the auditor, so N auditor
processes cannot each get a CPU of their own. Holding N processes to N x F CPUs (F well under 1) leaves the
peers what they need and asks the question "does the scan scale with the CPU its processes are given?" at
a smaller size (bench/check_scaling.py `--cpu-quota`). Needs a writable cgroup hierarchy (root, or a
delegated subtree); anything else is an error naming the directory, never a run without the quota.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

V1_CPU = Path("/sys/fs/cgroup/cpu")
V1_CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # where v1 counts usage (when not co-mounted with cpu)
V2 = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
PERIOD_US = 10_000  # short: a throttled pipelined client waits at most a few ms for its next slice


class QuotaUnavailable(RuntimeError):
    """No writable cgroup with the cpu controller."""


@dataclass(frozen=True)
class CpuGroup:
    """One cgroup directory and how its quota is written (v1 or v2)."""

    path: Path
    v2: bool
    acct: Path | None = None  # v1: the cpuacct group beside it (its CPU usage)

    def set_cpus(self, cpus: float) -> None:
        quota = max(1000, round(cpus * PERIOD_US))
        if self.v2:
            (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        else:
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))

    def cpu_seconds(self) -> float:
        """CPU its tasks used, the ones that ended included: the whole process tree, whoever waits for
        whom (a fork server's workers are not their command's children, so its rusage misses them)."""
        if self.v2:
            for line in (self.path / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
            raise QuotaUnavailable(f"{self.path / 'cpu.stat'} has no usage_usec")
        if self.acct is None:
            raise QuotaUnavailable(f"no cpuacct group beside {self.path}")
        return int((self.acct / "cpuacct.usage").read_text()) / 1e9

    def throttled_seconds(self) -> float:
        """Time the group spent held back by its quota."""
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "throttled_usec":
                return int(value) / 1e6
            if key == "throttled_time":  # v1: nanoseconds
                return int(value) / 1e9
        return 0.0

    def final_cpu_seconds(self, timeout: float = 15.0) -> float:
        """`cpu_seconds` once no task is left in the group (a command's fork server and workers end just
        after it); RuntimeError naming the group if some still run after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while (self.path / "cgroup.procs").read_text().strip():
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes of the measured command are still running in {self.path}")
            time.sleep(0.05)
        return self.cpu_seconds()

    def joiner(self) -> Callable[[], None]:
        """A `preexec_fn`: the forked child joins the group before it execs (its descendants follow)."""
        groups = [self.path / "cgroup.procs"] + ([self.acct / "cgroup.procs"] if self.acct else [])

        def join() -> None:
            for procs in groups:
                procs.write_text(str(os.getpid()))

        return join


def _v2_root() -> Path | None:
    for root in V2:
        controllers = root / "cgroup.controllers"
        if controllers.exists() and "cpu" in controllers.read_text().split():
            return root
    return None


@contextmanager
def cpu_group(name: str) -> Iterator[CpuGroup]:
    """A new cgroup `name` with the cpu controller (and, on v1, a cpuacct group for its usage), removed at
    the end. Raises QuotaUnavailable naming the directory it could not make."""
    made: list[Path] = []
    root = _v2_root()
    try:
        if root is not None:
            group = CpuGroup(root / name, v2=True)
        elif V1_CPU.is_dir():
            acct = V1_CPU / name if (V1_CPU / "cpuacct.usage").exists() else V1_CPUACCT / name
            group = CpuGroup(V1_CPU / name, v2=False, acct=acct)
        else:
            raise QuotaUnavailable("no cpu cgroup controller under /sys/fs/cgroup (v1 cpu/ or v2 with cpu enabled)")
        for path in dict.fromkeys(p for p in (group.path, group.acct) if p is not None):
            try:
                path.mkdir()
            except OSError as err:
                raise QuotaUnavailable(f"cannot make the cgroup {err.filename}: {err.strerror} (needs root)") from None
            made.append(path)
        yield group
    finally:
        for path in reversed(made):
            try:
                path.rmdir()
            except OSError:
                pass  # a task still inside: left for the operator, named by the bench's log


def unavailable() -> str | None:
    """Why no cgroup can be made here (None: one can): a benchmark asks before it plants anything."""
    try:
        with cpu_group(f"bk-auditor-bench-probe-{os.getpid()}"):
            return None
    except QuotaUnavailable as err:
        return str(err)


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs so far, from /proc/stat: a run's share of the machine busy is the
    difference of two readings."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already in user
    return float(total - idle), float(total)
