"""One simulated bookie's answer to one v2 request frame (READENTRY, BATCH_READ_ENTRY), as a real 4.17
bookie answers it (tests/realcluster/devcluster/test_simbookie.py compares the raw reply frames).

Read-only like the v3 side: a read carrying the fencing or recovery-add flag gets EBADREQ and fences
nothing; any other v2 operation (adds, AUTH, ...) closes the connection, as a bookie does at an operation
it cannot decode. A batch is served as `BatchedReadEntryProcessor` serves it: the entries from the first one
on while the bookie holds them, up to the count asked (0 or less: no limit) and the reply frame size asked
(capped at the bookie's `maxBatchReadSize`, 5 MiB), the first entry always, whatever its size; the first
entry's own error (ENOLEDGER, ENOENTRY) when it holds none.
"""

from __future__ import annotations

from auditor.bookie import v2

from .replies import BookieView
from .stored import holds

MAX_BATCH_READ_SIZE = 5 * 1024 * 1024  # the bookie's default maxBatchReadSize
# What a batch reply's frame counts before its entries (the bookie's own starting figure: header 24,
# request id 8, and the 4 length bytes).
_BATCH_FRAME_START = 24 + 8 + 4
_UNSAFE_FLAGS = int(v2.V2Flag.DO_FENCING | v2.V2Flag.RECOVERY_ADD)
_EOK, _ENOLEDGER, _ENOENTRY, _EBADREQ = 0, 1, 2, 100


def answer_v2(view: BookieView, body: bytes) -> bytes | None:
    """The reply body to one v2 request body; None when the bookie would close the connection. (The
    server counts the request in `view.requests`.)"""
    req = v2.parse_request(body)
    if req is None:
        return None
    if req.flags & _UNSAFE_FLAGS:
        view.refused += 1
        if req.op == v2.V2Op.READENTRY:
            return v2.read_reply(_EBADREQ, req.ledger_id, req.entry_id)
        return v2.batch_reply(_EBADREQ, req.ledger_id, req.entry_id, req.request_id, [])
    written, runs = view.stored(req.ledger_id)
    missing = _ENOLEDGER if written is None or not runs else _ENOENTRY
    if req.op == v2.V2Op.READENTRY:
        if written is not None and runs and holds(runs, req.entry_id):
            return v2.read_reply(_EOK, req.ledger_id, req.entry_id, written.body(req.entry_id))
        return v2.read_reply(missing, req.ledger_id, req.entry_id)
    count = req.max_count if req.max_count > 0 else 2**31 - 1
    limit = min(req.max_size, MAX_BATCH_READ_SIZE)
    entries: list[bytes] = []
    size = _BATCH_FRAME_START
    for e in range(req.entry_id, req.entry_id + count):
        if written is None or not holds(runs, e):
            break
        data = written.body(e)
        size += len(data) + 4
        if entries and size > limit:
            break
        entries.append(data)
    if not entries:
        return v2.batch_reply(missing, req.ledger_id, req.entry_id, req.request_id, [])
    return v2.batch_reply(_EOK, req.ledger_id, req.entry_id, req.request_id, entries)
