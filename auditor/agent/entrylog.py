"""Entry bytes at an indexed location, read from DbLedgerStorage's entry logs with plain read-only opens.

Entry log `<id>` of the directory pair `i` is `<ledgerDirs[i]>/current/<id hex>.log` (each directory's
storage has an entry logger of its own, so ids repeat across directories: the index's directory says which
one). The 4 bytes before the indexed offset hold the entry's length (codecs.py). Files are opened
`O_RDONLY` (and `O_NOATIME` where the kernel allows it, so reading does not even touch access times),
kept open in a small cache, and read with `pread`, never mapped or locked.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from auditor.errors import DataError

from .codecs import ENTRY_LOG_HEADER_SIZE, FRAME_SIZE, MIN_ENTRY_SIZE, entry_log_name, parse_frame_size

# Larger than any entry a bookie accepts (nettyMaxFrameSizeBytes, 5 MiB by default): a bigger length is
# not an entry's.
MAX_ENTRY_SIZE = 64 * 1024 * 1024
_NOATIME = getattr(os, "O_NOATIME", 0)


class EntryLogError(DataError):  # the bookie's files: bytes from outside
    """The entry could not be read where the index puts it (file missing, short, or another entry)."""


class EntryLogReader:
    """Reads entries from the entry logs of `ledger_dirs` (the bookie's ledgerDirectories, in order)."""

    def __init__(self, ledger_dirs: list[Path], max_open: int = 16) -> None:
        self.ledger_dirs = ledger_dirs
        self._max_open = max_open
        self._fds: OrderedDict[tuple[int, int], int] = OrderedDict()
        self._lock = threading.Lock()

    def path(self, dir_index: int, log_id: int) -> Path:
        return self.ledger_dirs[dir_index] / "current" / entry_log_name(log_id)

    def _fd(self, dir_index: int, log_id: int) -> int:
        key = (dir_index, log_id)
        fd = self._fds.get(key)
        if fd is not None:
            self._fds.move_to_end(key)
            return fd
        path = self.path(dir_index, log_id)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | _NOATIME)
        except PermissionError:  # O_NOATIME needs the file's owner (or CAP_FOWNER): without it, plainly
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self._fds[key] = fd
        while len(self._fds) > self._max_open:
            _, old = self._fds.popitem(last=False)
            os.close(old)
        return fd

    def forget(self, dir_index: int, log_id: int) -> None:
        """Close the cached descriptor of a log (it may have been compacted away and replaced)."""
        with self._lock:
            fd = self._fds.pop((dir_index, log_id), None)
            if fd is not None:
                os.close(fd)

    def read(self, dir_index: int, log_id: int, offset: int) -> bytes:
        """The stored entry bytes at `offset` of log `log_id`: EntryLogError unless the frame is sane."""
        where = f"{self.path(dir_index, log_id)}@{offset}"
        if offset < ENTRY_LOG_HEADER_SIZE + FRAME_SIZE.size:
            raise EntryLogError(f"{where}: offset inside the entry log's header")
        with self._lock:
            try:
                fd = self._fd(dir_index, log_id)
                frame = os.pread(fd, FRAME_SIZE.size, offset - FRAME_SIZE.size)
                if len(frame) != FRAME_SIZE.size:
                    raise EntryLogError(f"{where}: the entry log ends before the entry's length")
                size = parse_frame_size(frame)
                if not MIN_ENTRY_SIZE <= size <= MAX_ENTRY_SIZE:
                    raise EntryLogError(f"{where}: implausible entry length {size}")
                data = os.pread(fd, size, offset)
            except FileNotFoundError:
                raise EntryLogError(f"{where}: no such entry log") from None
            except OSError as exc:
                raise EntryLogError(f"{where}: {exc.strerror or exc}") from None
        if len(data) != size:
            raise EntryLogError(f"{where}: short read ({len(data)} of {size} bytes)")
        return data

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()


def names_entry(data: bytes, ledger_id: int, entry_id: int) -> bool:
    """Whether stored bytes start with this ledger and entry id (else the index pointed elsewhere, or the
    header is damaged: the caller re-reads with a fresh index before calling it corrupt)."""
    return data[0:16] == ledger_id.to_bytes(8, "big", signed=True) + entry_id.to_bytes(8, "big", signed=True)
