"""One long-lived BkLedgerTool JVM (`BkLedgerTool serve`) that runs the tool's commands one after another.

A command run in a fresh JVM costs its start-up, class loading and a new BookKeeper client (about 2-3 s
on two cores) before it does anything; a test suite runs hundreds. The server keeps the JVM and its
clients: a command costs what the command does. The server reads one command per line (arguments
separated by tabs) and answers with the command's stdout, then END_MARK and the exit code. It logs to its
own file. Stopped by pid, with the cluster; when ZooKeeper was restarted since it started, a fresh one is
started for the next command (its client's session and watches then start clean, as a fresh JVM's did).
"""

from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from pathlib import Path

from devcluster.cluster.errors import HarnessError
from devcluster.cluster.processes import tail

END_MARK = "\x1eEND "


class ToolServer:
    """The server JVM for one argv prefix (JVM flags, class path, main class)."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.argv = argv
        self.log = log
        self.lock = threading.Lock()  # one command at a time; a caller that finds it busy runs its own JVM
        self._popen: subprocess.Popen[bytes] | None = None
        self._generation: object = None
        self._buffer = b""

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    def _running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def _start(self, generation: object) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            out.write(f"\n=== start {time.strftime('%H:%M:%S')} {' '.join(self.argv)}\n".encode())
            out.flush()
            self._popen = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=out, start_new_session=True
            )
        self._generation = generation
        self._buffer = b""

    def run(self, args: list[str], timeout: float, generation: object) -> tuple[int, str]:
        """Run one command; (exit code, its stdout). `generation` names the ZooKeeper incarnation: a
        server started under another one is replaced first. The caller holds `lock`."""
        bad = [a for a in args if "\t" in a or "\n" in a]
        if bad:
            raise HarnessError(f"ledger tool argument {bad[0]!r} holds a tab or a newline")
        if self._running() and self._generation != generation:
            self.stop()
        if not self._running():
            self._start(generation)
        assert self._popen is not None and self._popen.stdin is not None and self._popen.stdout is not None
        try:
            self._popen.stdin.write(("\t".join(args) + "\n").encode())
            self._popen.stdin.flush()
        except OSError as e:
            self.stop()
            raise HarnessError(f"ledger tool server (log {self.log}) gone: {e}\n{tail(self.log)}") from e
        out = self._read_until_end(self._popen.stdout.fileno(), time.monotonic() + timeout, args)
        lines = out.split("\n")
        rc = int(lines[-1][len(END_MARK) :])
        return rc, "\n".join(lines[:-1])

    def _read_until_end(self, fd: int, deadline: float, args: list[str]) -> str:
        marker = END_MARK.encode()
        while True:
            at = self._buffer.find(marker)
            if at >= 0:
                end = self._buffer.find(b"\n", at)
                if end >= 0:
                    out, self._buffer = self._buffer[:end], self._buffer[end + 1 :]
                    return out.decode(errors="replace")
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise HarnessError(f"ledger tool {args[0]} timed out; server log {self.log}:\n{tail(self.log)}")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.stop()
                    raise HarnessError(f"ledger tool server exited during {args[0]}; log {self.log}:\n{tail(self.log)}")
                self._buffer += chunk

    def stop(self) -> None:
        """Close its stdin (it halts), then SIGKILL by pid if it has not gone within seconds."""
        popen, self._popen = self._popen, None
        if popen is None:
            return
        try:
            if popen.stdin is not None:
                popen.stdin.close()
        except OSError:
            pass
        try:
            popen.wait(5)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(10)
        if popen.stdout is not None:
            popen.stdout.close()
