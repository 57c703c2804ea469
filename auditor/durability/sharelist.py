"""Recognise a bookie's entry list that is exactly its share of a ledger, without the general decode.

A healthy bookie answers GET_LIST_OF_ENTRIES_OF_LEDGER with exactly the entries the schedule gives it
(`expected_by_bookie`), encoded as every real bookie encodes a set: one period-0 record per maximal run
(`auditor.durability.entrylist`). For a one-segment ledger that share is one stripe, whose runs are an
arithmetic progression: one run [0, last] when E == WQ, else a run of WQ entries every E. Every run but
the last depends only on where the stripe starts and its pattern, so those records are built once per
pattern (at C speed) and kept, and an answer is one bytes comparison with their prefix plus a check of
its last record. That costs less than decoding it record by record and then comparing the ranges with
the share, which was most of what a scan of healthy ledgers spent per answer.

`decode_share` is an optimisation only, never a judgement: it returns exactly the `EntryList` that
`EntryList.decode` returns for the same bytes (the same records, total and ranges), and only when those
bytes list exactly the share; for anything else (another set, unusual records, a share of several
stripes) it returns None and the caller decodes the general way, which validates and explains.
"""

from __future__ import annotations

import functools
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
from .ranges import Range
from .striped import StripedSet

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
    # The stripe's runs: the first from `first` to its run's end, each later one from its run start, the
    # last one ending at `last`. Every run but the first and the last is `length` long.
    later_starts = range(first + (s - first - 1) % p + 1, last + 1, p)
    n = len(later_starts) + 1
    if len(range(first + (s + length - 1 - first) % p, last, p)) != n - 1:
        return None  # `last` ends no run: not a stripe a bookie's share can be
    if len(data) != HEADER_LENGTH + n * RECORD_LENGTH or _HEADER.unpack_from(data, 0) != (CURRENT_VERSION, n):
        return None
    # All runs but the last depend only on where the stripe starts, not on where it ends: compared with a
    # prefix of the records of a longer stripe (kept for stripes starting in the first period: every
    # one-segment ledger's).
    head = n - 1
    if first < p and head <= _MAX_KEPT_RUNS:
        records, ranges = _early_stripe(first, p, s, length, max(_MIN_RUNS, 1 << (head - 1).bit_length()))
    else:
        records, ranges = _stripe(first, p, s, length, head)
    if not data.startswith(memoryview(records)[: head * RECORD_LENGTH], HEADER_LENGTH):
        return None
    final = later_starts[-1] if head else first
    if _RECORD.unpack_from(data, HEADER_LENGTH + head * RECORD_LENGTH) != (final, final, last - final + 1, 0):
        return None
    if head:
        total = ranges[0][1] - first + 1 + length * (head - 1) + last - final + 1
        return EntryList.verified(data, (*ranges[:head], (final, last)), total, share)
    return EntryList.verified(data, ((first, last),), last - first + 1, share)


def _stripe(first: int, p: int, s: int, length: int, count: int) -> tuple[bytes, tuple[Range, ...]]:
    """The first `count` runs of the stripe from `first` (residues s .. s + length - 1 of every `p`, going
    on without end), as a real bookie encodes them (one period-0 record each) and as ranges: the first run
    from `first` to its end, every later one `length` long."""
    if count == 0:
        return b"", ()
    starts = (first, *range(first + (s - first - 1) % p + 1, first + count * p, p)[: count - 1])
    ends = range(first + (s + length - 1 - first) % p, first + (count + 1) * p, p)[:count]
    # The records as 64-bit words, (start, start, size << 32 | period 0) each, built at C speed.
    words = array("q", bytes(RECORD_LENGTH * count))
    column = array("q", starts)
    words[0::3] = column
    words[1::3] = column
    sizes = array("q", (length << 32,)) * count
    sizes[0] = (ends[0] - first + 1) << 32
    words[2::3] = sizes
    if _SWAP:
        words.byteswap()
    return words.tobytes(), tuple(zip(starts, ends))


# `_stripe`s starting in the first period, by (first, period, first residue, run length, number of runs
# rounded up to a power of two): a few serve every one-segment ledger of a cluster. Bounded: at most
# _MAX_STRIPES of them, of at most _MAX_KEPT_RUNS runs each (under 50 KiB with their ranges); a longer
# list builds its own.
_MIN_RUNS = 32
_MAX_KEPT_RUNS = 512
_MAX_STRIPES = 64
_early_stripe = functools.lru_cache(maxsize=_MAX_STRIPES)(_stripe)
