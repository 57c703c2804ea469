"""Recognise a bookie's entry list that is exactly its share of a ledger, without the general decode.

A healthy bookie answers GET_LIST_OF_ENTRIES_OF_LEDGER with exactly the entries the schedule gives it
(`expected_by_bookie`), encoded as every real bookie encodes a set: one period-0 record per maximal run
(`auditor.durability.entrylist`). For a one-segment ledger that share is one stripe, whose runs are an
arithmetic progression: one run [0, last] when E == WQ, else a run of WQ entries every E. Building the
records of that progression at C speed and comparing them with the answer's bytes costs less than
decoding it record by record and then comparing the ranges with the share, which is most of what a scan
of healthy ledgers spends per answer.

`decode_share` is an optimisation only, never a judgement: it returns exactly the `EntryList` that
`EntryList.decode` returns for the same bytes (the same records, total and ranges), and only when those
bytes list exactly the share; for anything else (another set, unusual records, a share of several
stripes) it returns None and the caller decodes the general way, which validates and explains.
"""

from __future__ import annotations

import sys
from array import array

from .entrylist import (
    _HEADER,
    _MAX_INT32,
    _RECORD,
    CURRENT_VERSION,
    HEADER_LENGTH,
    MAX_ENTRY_ID,
    RECORD_LENGTH,
    EntryList,
)
from .schedule import StripedSet

_SWAP = sys.byteorder == "little"  # records are big-endian


def decode_share(data: bytes, share: StripedSet) -> EntryList | None:
    """`EntryList.decode(data)`, marked as holding exactly `share` (`EntryList.share`), when `data` lists
    exactly the entries of `share` as a real bookie encodes them; None otherwise (decode it the general
    way). `share` must be one stripe (a one-segment ledger's share); several give None."""
    pieces = share.pieces
    if len(pieces) != 1:
        return None
    piece = pieces[0]
    first, last, p = piece.first, piece.last, piece.period
    if first < 0 or last > MAX_ENTRY_ID:
        return None
    if p == 1:  # E == WQ: the whole range, one record (a run over an int32 is several: the general decode)
        run = last - first + 1
        if run > _MAX_INT32 or len(data) != HEADER_LENGTH + RECORD_LENGTH:
            return None
        if _HEADER.unpack_from(data, 0) != (CURRENT_VERSION, 1) or _RECORD.unpack_from(data, HEADER_LENGTH) != (
            first,
            first,
            run,
            0,
        ):
            return None
        return EntryList.verified(data, ((first, last),), run, share)
    runs = piece.pattern.runs
    if len(runs) != 1:
        return None
    s, length = runs[0]  # one run of `length` residues from residue `s` (maybe wrapping) per period
    # The stripe's runs: the first from `first`, each later one from its run start; each ends at its
    # run's end, the last one at `last`. Every run but the first and the last is `length` long.
    later_starts = range(first + (s - first - 1) % p + 1, last + 1, p)
    early_ends = range(first + (s + length - 1 - first) % p, last, p)
    n = len(later_starts) + 1
    if len(early_ends) != n - 1 or len(data) != HEADER_LENGTH + n * RECORD_LENGTH:
        return None
    if _HEADER.unpack_from(data, 0) != (CURRENT_VERSION, n):
        return None
    starts = (first, *later_starts)
    ends = (*early_ends, last)
    first_size, last_size = ends[0] - first + 1, last - starts[-1] + 1
    # The records real bookies would send, built as 64-bit words at C speed and compared as bytes:
    # (start, start, size << 32 | period 0) each.
    words = array("q", bytes(RECORD_LENGTH * n))
    column = array("q", starts)
    words[0::3] = column
    words[1::3] = column
    sizes = array("q", (length << 32,)) * n
    sizes[0], sizes[-1] = first_size << 32, last_size << 32
    words[2::3] = sizes
    if _SWAP:
        words.byteswap()
    if data[HEADER_LENGTH:] != words.tobytes():
        return None
    total = first_size if n == 1 else first_size + last_size + length * (n - 2)
    return EntryList.verified(data, tuple(zip(starts, ends)), total, share)
