"""Processes we start: each is recorded by pid, stopped by that pid, and logs to its own file."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from devcluster.cluster.cds import ArchiveRun, archive_run, class_path

# Exit codes of a JVM that ended normally: by itself, or on SIGTERM through its shutdown hooks.
CLEAN_EXITS = (0, 128 + signal.SIGTERM, -signal.SIGTERM)


def tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def child_pids(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (e.g. the worker processes of a process we started)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold anything
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return out


def descendant_pids(pid: int) -> list[int]:
    """The live processes below `pid`: its children, theirs, and so on (a pool's fork server, the
    workers it forked and the resource tracker)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        children = child_pids(todo.pop())
        out += children
        todo += children
    return out


@dataclass
class Proc:
    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    # A JVM of this kind (bookie, zookeeper, ...) starts from a class-data sharing archive (cds.py).
    cds: str | None = None
    _archive: ArchiveRun | None = None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self, env: dict[str, str] | None = None) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._publish_archive()  # of a run that ended by itself
        argv = self.argv
        cp = class_path(argv)
        if self.cds is not None and cp is not None:
            self._archive = archive_run(self.cds, cp)
            argv = [argv[0], *self._archive.flags, *argv[1:]]
        with open(self.log, "ab") as out:
            out.write(f"\n=== start {time.strftime('%H:%M:%S')} {' '.join(argv)}\n".encode())
            out.flush()
            self.popen = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def signal(self, sig: int) -> None:
        if self.running:
            assert self.popen is not None
            os.kill(self.popen.pid, sig)

    def pause(self, timeout: float = 10.0) -> None:
        """SIGSTOP, then wait until every thread is stopped: kill() returns before the threads of a busy
        process have all stopped, and a bookie thread still running could answer a request sent at once
        (make test saw a paused bookie answer an entry-list request 1.3 ms later)."""
        self.signal(signal.SIGSTOP)
        if not self.running:
            return
        deadline = time.monotonic() + timeout
        while not self._all_threads_stopped():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} (pid {self.pid}) did not stop within {timeout} s of SIGSTOP")
            time.sleep(0.005)

    def _all_threads_stopped(self) -> bool:
        tasks = Path(f"/proc/{self.pid}/task")
        for task in tasks.iterdir():
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue  # a thread that exited
            # The state follows the command name, which is in parentheses and may itself hold spaces.
            if stat[stat.rindex(")") + 2] not in "TtZX":  # stopped, or exiting
                return False
        return True

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`; only ever our own pid."""
        if not self.running:
            return
        assert self.popen is not None
        # A paused process cannot act on SIGTERM.
        os.kill(self.popen.pid, signal.SIGCONT)
        os.kill(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)
        self._publish_archive()

    def kill(self) -> None:
        if self.running:
            assert self.popen is not None
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)
        self._publish_archive()

    def _publish_archive(self) -> None:
        """The archive a first run of this kind wrote at its exit becomes the kind's (cds.py)."""
        if self._archive is None or self.popen is None or self.popen.poll() is None:
            return
        self._archive.publish(self.popen.returncode in CLEAN_EXITS)
        self._archive = None
