"""A set of 64-bit integers kept as sorted runs of machine words: about 9 bytes an element where a Python
set of ints takes 60 or more, so a run can remember a fact about each of a million ledgers (which ones
already have a finding of a category) in megabytes.

Elements live in chunks of at most 2 * CHUNK sorted int64s (`array('q')`), found by binary search over
each chunk's largest element; adding in ascending order (a scan's) appends, any other order inserts into
one chunk and splits it when full, so no order costs more than O(log n + CHUNK) an element.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator

CHUNK = 2048
_MIN, _MAX = -(2**63), 2**63 - 1


class IntSet:
    __slots__ = ("_chunks", "_maxes", "_len")

    def __init__(self, values: Iterable[int] = ()) -> None:
        self._chunks: list[array[int]] = []
        self._maxes: list[int] = []  # each chunk's largest element, ascending
        self._len = 0
        for v in values:
            self.add(v)

    def __len__(self) -> int:
        return self._len

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int):
            return False
        k = bisect_left(self._maxes, value)
        if k == len(self._maxes):
            return False
        chunk = self._chunks[k]
        return chunk[bisect_left(chunk, value)] == value  # value <= the chunk's largest: the index is inside

    def __iter__(self) -> Iterator[int]:
        for chunk in self._chunks:
            yield from chunk

    def add(self, value: int) -> bool:
        """Add `value` (an int64); True when it was not in the set yet."""
        if not _MIN <= value <= _MAX:
            raise OverflowError(f"{value} is not a 64-bit integer")
        chunks, maxes = self._chunks, self._maxes
        k = bisect_left(maxes, value)
        if k == len(maxes):  # above every element: append to the last chunk (the first one, if empty)
            if not chunks:
                chunks.append(array("q"))
                maxes.append(value)
            k = len(chunks) - 1
            chunk = chunks[k]
            chunk.append(value)
            maxes[k] = value
        else:
            chunk = chunks[k]
            i = bisect_left(chunk, value)
            if chunk[i] == value:
                return False
            chunk.insert(i, value)
        self._len += 1
        if len(chunk) > 2 * CHUNK:  # split a full chunk in two
            upper = chunk[CHUNK:]
            del chunk[CHUNK:]
            chunks.insert(k + 1, upper)
            maxes[k] = chunk[-1]
            maxes.insert(k + 1, upper[-1])
        return True
