"""The capability book the worker processes of one process tree share (`SharedCapabilityBook`).

The owner of the worker pool (the `check` command, the daemon) makes one book, and every worker process it
starts gets it (the pool's initializer): a bookie's GET_LIST support is then probed by one client of the
whole tree, once per bookie incarnation, and every later partition, on any worker, starts knowing it
(bookie/capabilities.py says why and how an incarnation is told). The book is a small shared-memory block
holding the lines as JSON, behind one lock; it is read only while a client does not yet know a bookie
(once per bookie per partition), so the lock is never contended in a scan's steady state.
"""

from __future__ import annotations

import json
import struct
import time
from multiprocessing.context import BaseContext
from typing import Any

from auditor.bookie.capabilities import PROBING, Line, claimed, looked_up, settled
from auditor.bookie.results import Capability
from auditor.logging import get_logger

log = get_logger("auditor.processes.capabilities")

# Room for the lines of about 2,000 bookies (a line is about 60 bytes of JSON). A book that is full keeps
# what it holds and takes no new line: the clients then learn alone, as without a book.
BOOK_BYTES = 128 * 1024
_LENGTH = struct.Struct("<I")


class SharedCapabilityBook:
    """A `CapabilityBook` (bookie/capabilities.py) in shared memory, for the processes of one tree. Made by
    the pool's owner with its multiprocessing context, handed to each worker as it starts (it pickles
    only then)."""

    def __init__(self, context: BaseContext, size: int = BOOK_BYTES) -> None:
        self._lock = context.Lock()
        self._block: Any = context.RawArray("c", size)  # ctypes char array: lines as length-prefixed JSON
        self._size = size
        _LENGTH.pack_into(self._block, 0, 2)
        self._block[_LENGTH.size : _LENGTH.size + 2] = b"{}"

    def _read(self) -> dict[str, Line]:
        (n,) = _LENGTH.unpack_from(self._block, 0)
        raw = json.loads(bytes(self._block[_LENGTH.size : _LENGTH.size + n]))
        return {b: (str(v[0]), str(v[1]), float(v[2])) for b, v in raw.items()}

    def _write(self, lines: dict[str, Line]) -> bool:
        data = json.dumps(lines, separators=(",", ":")).encode()
        if _LENGTH.size + len(data) > self._size:
            log.warning("capability book full (%d bookies): new bookies are learnt per client", len(lines))
            return False
        _LENGTH.pack_into(self._block, 0, len(data))
        self._block[_LENGTH.size : _LENGTH.size + len(data)] = data
        return True

    def lookup(self, bookie_id: str, incarnation: str) -> Capability:
        with self._lock:
            return looked_up(self._read().get(bookie_id), incarnation)

    def claim(self, bookie_id: str, incarnation: str) -> bool:
        with self._lock:
            lines = self._read()
            line = claimed(lines.get(bookie_id), incarnation, time.time())
            if line is None:
                return False
            lines[bookie_id] = line
            self._write(lines)  # a full book: this client probes anyway, alone
            return True

    def settle(self, bookie_id: str, incarnation: str, capability: Capability) -> None:
        with self._lock:
            lines = self._read()
            line = settled(lines.get(bookie_id), incarnation, capability)
            if line is None:
                lines.pop(bookie_id, None)
            else:
                lines[bookie_id] = line
            self._write(lines)

    def known(self) -> dict[str, tuple[str, Capability]]:
        """Every bookie the book knows: its incarnation and capability (claims under way left out)."""
        with self._lock:
            lines = self._read()
        return {b: (line[0], looked_up(line, line[0])) for b, line in lines.items() if line[1] != PROBING}
