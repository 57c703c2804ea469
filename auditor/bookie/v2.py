"""Bookie v2 (pre-protobuf) wire protocol, as far as the auditor speaks it: READENTRY and BATCH_READ_ENTRY
(BP-62, BookKeeper 4.17+) frames behind a read-only gate, and reply decoding. Pure: no sockets, no asyncio.

Framing is the v3 one (a 4-byte big-endian length, then the body), so `protocol.FrameDecoder` splits v2
streams too. A request body is a 4-byte packet header `version << 24 | op << 16 | flags` (version 2),
then READENTRY: ledger (8) entry (8); BATCH_READ_ENTRY: ledger (8) first entry (8) request id (8) max count
(4) max size (8). A 20-byte master key follows only with the fencing flag: the auditor never sets a flag,
so its frames have exactly these sizes. A reply body is the header, error code (4), ledger (8), entry (8),
then READENTRY: the entry's bytes; BATCH_READ_ENTRY: request id (8) and, to the end of the frame, entry
length (4) + entry bytes, for the entries first, first + 1, ... the bookie could read.

The gate (`gated_bytes`) is as strict as the v3 one: only a `V2Frame`, which only this module's builders
can make, and only of exactly one of the two shapes above (version 2, no flag, no master key, no byte
more); anything else raises `protocol.UnsafeRequestError` before a byte is written.

v2 replies carry no txn id: `V2Codec` matches READENTRY replies to requests by (ledger, entry), batch
replies by request id (which is the request's txn id), per connection.
"""

from __future__ import annotations

import enum
import struct
from collections import OrderedDict, deque
from dataclasses import dataclass

from . import protocol as P
from .protocol import MAX_LONG, Op, Reply, Status, UnsafeRequestError

VERSION = 2  # BookieProtocol.CURRENT_PROTOCOL_VERSION


class V2Op(enum.IntEnum):
    ADDENTRY = 1
    READENTRY = 2
    AUTH = 3
    READ_LAC = 4
    WRITE_LAC = 5
    GET_BOOKIE_INFO = 6
    BATCH_READ_ENTRY = 7


class V2Flag(enum.IntFlag):
    DO_FENCING = 0x1
    RECOVERY_ADD = 0x2
    HIGH_PRIORITY = 0x4


MASTER_KEY_LENGTH = 20
MAX_INT = 2**31 - 1

_HEADER = struct.Struct(">i")
_READ = struct.Struct(">iiqq")  # frame length, packet header, ledger, entry
_BATCH = struct.Struct(">iiqqqiq")  # frame length, packet header, ledger, entry, request id, max count, max size
_REPLY = struct.Struct(">iiqq")  # packet header, error code, ledger, entry
_REQUEST_ID = struct.Struct(">q")
_ENTRY_LENGTH = struct.Struct(">i")
REPLY_HEADER_SIZE = _REPLY.size  # 24: what every reply body has before its own part

# The v2 error codes (BookieProtocol) and the v3 statuses they mean.
V2_STATUS: dict[int, Status] = {
    0: Status.EOK,
    1: Status.ENOLEDGER,
    2: Status.ENOENTRY,
    100: Status.EBADREQ,
    101: Status.EIO,
    102: Status.EUA,
    103: Status.EBADVERSION,
    104: Status.EFENCED,
    105: Status.EREADONLY,
    106: Status.ETOOMANYREQUESTS,
    107: Status.EUNKNOWNLEDGERSTATE,
}
V2_CODE: dict[Status, int] = {s: c for c, s in V2_STATUS.items()}
# What a v2 reply's operation is called on our side (the transport matches (txn, Op)).
_REPLY_OP = {int(V2Op.READENTRY): Op.READ_ENTRY, int(V2Op.BATCH_READ_ENTRY): Op.BATCH_READ_ENTRY}


def packet_header(op: int, flags: int = 0, version: int = VERSION) -> int:
    """The 4-byte packet header as a signed int (`BookieProtocol.PacketHeader.toInt`)."""
    value = (version & 0xFF) << 24 | (op & 0xFF) << 16 | (flags & 0xFFFF)
    return value - (1 << 32) if value >= 1 << 31 else value


_READ_HEADER = packet_header(V2Op.READENTRY)
_BATCH_HEADER = packet_header(V2Op.BATCH_READ_ENTRY)


# ----- requests -------------------------------------------------------------------------------------
class V2Frame(P.GatedFrame):
    """A v2 READENTRY or BATCH_READ_ENTRY frame written by `read_entry_frame` / `batch_read_frame`. Only
    this module can make one (the constructor wants its private token); a `GatedFrame` by type, so the
    transport carries it, but never exactly one: the v3 client's gate (`BookieClient._encode`) refuses it."""

    __slots__ = ()

    def __init__(self, frame: bytes, token: object = None) -> None:
        if token is not _MINT:
            raise UnsafeRequestError("a V2Frame is made only by v2.read_entry_frame / batch_read_frame")
        self.frame = frame


_MINT = object()


def check_ids(ledger_id: int, entry_id: int) -> None:
    # Java writes them as signed longs; a v2 read of entry -1 means "the LAC" to old bookies: not ours.
    if type(ledger_id) is not int or not 0 <= ledger_id <= MAX_LONG:
        raise ValueError(f"ledger id {ledger_id!r} is not in 0..2^63-1")
    if type(entry_id) is not int or not 0 <= entry_id <= MAX_LONG:
        raise ValueError(f"entry id {entry_id!r} is not in 0..2^63-1")


def read_entry_frame(ledger_id: int, entry_id: int) -> V2Frame:
    """A plain v2 READENTRY: no flag, no master key (the one shape that cannot fence)."""
    check_ids(ledger_id, entry_id)
    return V2Frame(_READ.pack(_READ.size - 4, _READ_HEADER, ledger_id, entry_id), _MINT)


def batch_read_frame(request_id: int, ledger_id: int, first_entry: int, max_count: int, max_size: int) -> V2Frame:
    """A plain BATCH_READ_ENTRY: entries `first_entry`, `first_entry + 1`, ... up to `max_count` of them and
    `max_size` bytes of reply frame (the bookie always sends the first entry it can read, whatever its size,
    and caps `max_size` by its own `maxBatchReadSize`, 5 MiB by default)."""
    check_ids(ledger_id, first_entry)
    if type(request_id) is not int or not 0 <= request_id <= MAX_LONG:
        raise ValueError(f"request id {request_id!r} is not in 0..2^63-1")
    if type(max_count) is not int or not 1 <= max_count <= MAX_INT:
        raise ValueError(f"max count {max_count!r} is not in 1..2^31-1 (0 would mean no limit to the bookie)")
    if type(max_size) is not int or not 1 <= max_size <= MAX_LONG:
        raise ValueError(f"max size {max_size!r} is not in 1..2^63-1")
    frame = _BATCH.pack(_BATCH.size - 4, _BATCH_HEADER, ledger_id, first_entry, request_id, max_count, max_size)
    return V2Frame(frame, _MINT)


def gated_bytes(request: object) -> bytes:
    """The bytes of a v2 request once proven to be a plain READENTRY or BATCH_READ_ENTRY of exactly the
    shape the builders write: version 2, no flag (no fencing, no recovery add, no priority), hence no master
    key, no trailing byte, ids in range. UnsafeRequestError otherwise (every other operation: adds,
    WRITE_LAC, AUTH, ...)."""
    if type(request) is not V2Frame:
        raise UnsafeRequestError(f"not a v2 read frame: {type(request).__name__}")
    frame = request.frame
    if type(frame) is not bytes or len(frame) < 8:
        raise UnsafeRequestError("a v2 frame is not bytes of a whole request")
    length, header = _READ.unpack_from(frame)[:2] if len(frame) >= _READ.size else (0, 0)
    version, op, flags = (header >> 24) & 0xFF, (header >> 16) & 0xFF, header & 0xFFFF
    if version != VERSION:
        raise UnsafeRequestError(f"v2 frame has protocol version {version} (only 2 may be sent)")
    if flags:
        raise UnsafeRequestError(f"v2 frame carries flags {flags:#x} (fencing, recovery add or priority)")
    if op == V2Op.READENTRY:
        shape: struct.Struct = _READ
    elif op == V2Op.BATCH_READ_ENTRY:
        shape = _BATCH
    else:
        name = V2Op(op).name if op in V2Op._value2member_map_ else str(op)
        raise UnsafeRequestError(f"v2 operation {name} may never be sent by the auditor")
    if len(frame) != shape.size or length != shape.size - 4:
        raise UnsafeRequestError(f"v2 {V2Op(op).name} frame is {len(frame)} bytes, not {shape.size} (a master key?)")
    fields = shape.unpack(frame)
    if any(v < 0 for v in fields[2:]) or (op == V2Op.BATCH_READ_ENTRY and fields[5] < 1):
        raise UnsafeRequestError(f"v2 {V2Op(op).name} frame has a negative id or limit")
    return frame


def request_key(frame: bytes) -> tuple[int, int] | None:
    """(ledger, entry) of a gated READENTRY frame (what its reply is matched by); None for a batch."""
    if len(frame) == _READ.size:
        _, _, ledger, entry = _READ.unpack(frame)
        return ledger, entry
    return None


# ----- replies --------------------------------------------------------------------------------------
@dataclass(slots=True)
class V2ReadResponse:
    """A READENTRY reply's fields, named as the v3 ReadResponse's (the transport judges both alike)."""

    ledgerId: int
    entryId: int
    body: bytes

    def HasField(self, name: str) -> bool:
        # v2 sends bytes only with EOK (an error reply has none); it never sends a LAC.
        return name == "body" and bool(self.body)


@dataclass(slots=True)
class V2BatchResponse:
    """A BATCH_READ_ENTRY reply: the entries first, first + 1, ... that the bookie sent, in order."""

    ledgerId: int
    entryId: int
    requestId: int
    entries: list[bytes]


def decode_reply(body: bytes) -> tuple[Reply, tuple[int, int] | None]:
    """One v2 reply body as a `Reply` (its `txn_id` 0 until matched) and, for READENTRY, its (ledger, entry)
    key; for a batch the key is None and `txn_id` is its request id. ProtocolError for anything that is not
    a v2 READENTRY or BATCH_READ_ENTRY reply (the connection is then dropped)."""
    if len(body) < REPLY_HEADER_SIZE:
        raise P.ProtocolError(f"v2 reply of {len(body)} bytes is shorter than its {REPLY_HEADER_SIZE}-byte header")
    header, code, ledger, entry = _REPLY.unpack_from(body)
    version, op_code = (header >> 24) & 0xFF, (header >> 16) & 0xFF
    if version != VERSION:
        raise P.ProtocolError(f"v2 reply has protocol version {version}, not 2")
    op = _REPLY_OP.get(op_code)
    if op is None:
        raise P.ProtocolError(f"v2 reply has operation {op_code}, which the auditor never sends")
    status = V2_STATUS.get(code)
    problem = None if status is not None else f"unknown v2 error code {code}"
    if op is Op.READ_ENTRY:
        sub_read = V2ReadResponse(ledger, entry, body[REPLY_HEADER_SIZE:])
        return Reply(0, op, status, code, sub_read, problem), (ledger, entry)
    if len(body) < REPLY_HEADER_SIZE + 8:
        raise P.ProtocolError("v2 batch reply ends before its request id")
    (request_id,) = _REQUEST_ID.unpack_from(body, REPLY_HEADER_SIZE)
    entries: list[bytes] = []
    pos, end = REPLY_HEADER_SIZE + 8, len(body)
    while pos < end:
        if end - pos < 4:
            raise P.ProtocolError(f"v2 batch reply {request_id}: {end - pos} stray bytes after its entries")
        (n,) = _ENTRY_LENGTH.unpack_from(body, pos)
        pos += 4
        if n < 0 or n > end - pos:
            raise P.ProtocolError(f"v2 batch reply {request_id}: entry length {n} runs past the frame")
        entries.append(body[pos : pos + n])
        pos += n
    if request_id < 0:
        raise P.ProtocolError(f"v2 batch reply has request id {request_id}, never sent")
    return Reply(request_id, op, status, code, V2BatchResponse(ledger, entry, request_id, entries), problem), None


class V2Codec:
    """One v2 connection's reply matching: a batch reply names its request id (the txn id it was sent with);
    a READENTRY reply only its (ledger, entry), so the txns sent for each key are kept, oldest first (two
    reads of one entry get the same answer), and a reply takes the oldest. `memory` bounds the txns kept
    (requests whose reply never came are forgotten oldest first; a reply for one of them is then hostile)."""

    __slots__ = ("_by_key", "_keys", "_memory")

    def __init__(self, memory: int) -> None:
        self._by_key: dict[tuple[int, int], deque[int]] = {}
        self._keys: OrderedDict[int, tuple[int, int]] = OrderedDict()
        self._memory = memory

    def sent(self, txn: int, frame: bytes) -> None:
        key = request_key(frame)
        if key is None:
            return
        self._by_key.setdefault(key, deque()).append(txn)
        self._keys[txn] = key
        while len(self._keys) > self._memory:
            old, old_key = self._keys.popitem(last=False)
            self._drop(old_key, old)

    def decode(self, body: bytes) -> Reply:
        reply, key = decode_reply(body)
        if key is None:
            return reply
        txns = self._by_key.get(key)
        if not txns:
            raise P.ProtocolError(f"v2 reply for ledger {key[0]} entry {key[1]}, never asked on this connection")
        txn = txns.popleft()
        if not txns:
            del self._by_key[key]
        self._keys.pop(txn, None)
        reply.txn_id = txn
        return reply

    def _drop(self, key: tuple[int, int], txn: int) -> None:
        txns = self._by_key.get(key)
        if txns is not None:
            try:
                txns.remove(txn)
            except ValueError:
                pass
            if not txns:
                del self._by_key[key]


# ----- replies as a bookie writes them (the simulated bookie, tests) ---------------------------------
def read_reply(code: int, ledger_id: int, entry_id: int, body: bytes = b"") -> bytes:
    """A READENTRY reply body as a 4.17 bookie writes it."""
    return _REPLY.pack(_READ_HEADER, code, ledger_id, entry_id) + body


def batch_reply(code: int, ledger_id: int, entry_id: int, request_id: int, entries: list[bytes]) -> bytes:
    """A BATCH_READ_ENTRY reply body as a 4.17 bookie writes it."""
    parts = [_REPLY.pack(_BATCH_HEADER, code, ledger_id, entry_id), _REQUEST_ID.pack(request_id)]
    for e in entries:
        parts += [_ENTRY_LENGTH.pack(len(e)), e]
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class V2Request:
    """A v2 request body as a bookie parses it (the simulated bookie): what it asks, and its flags."""

    op: int
    flags: int
    ledger_id: int
    entry_id: int
    request_id: int = 0
    max_count: int = 0
    max_size: int = 0
    master_key: bytes | None = None


def parse_request(body: bytes) -> V2Request | None:
    """A v2 request body as a 4.17 bookie parses READENTRY / BATCH_READ_ENTRY (the master key read only
    with the fencing flag; trailing bytes ignored); None for any other operation or a body too short."""
    if len(body) < 20:
        return None
    (header,) = _HEADER.unpack_from(body)
    op, flags = (header >> 16) & 0xFF, header & 0xFFFF
    if op == V2Op.READENTRY:
        _, ledger, entry = struct.unpack_from(">iqq", body)
        pos = 20
        extra: tuple[int, int, int] = (0, 0, 0)
    elif op == V2Op.BATCH_READ_ENTRY and len(body) >= 40:
        _, ledger, entry, rid, count, size = struct.unpack_from(">iqqqiq", body)
        pos = 40
        extra = (rid, count, size)
    else:
        return None
    key = None
    if flags & V2Flag.DO_FENCING:
        if len(body) < pos + MASTER_KEY_LENGTH:
            return None
        key = body[pos : pos + MASTER_KEY_LENGTH]
    return V2Request(op, flags, ledger, entry, *extra, master_key=key)


def _check_frames() -> None:
    """The builders' frames pass the gate on edge values (fail closed at import if they ever did not)."""
    for v in (0, 1, 2**31 - 1, 2**32, MAX_LONG):
        for frame in (read_entry_frame(v, v), batch_read_frame(v, v, v, max(1, v % MAX_INT), max(1, v))):
            if gated_bytes(frame) != frame.frame:
                raise UnsafeRequestError("a v2 frame the builders wrote does not pass the gate")


_check_frames()
