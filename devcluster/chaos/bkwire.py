"""Reads the client -> bookie direction of a BookKeeper connection: which operation each request is.

The bookie proxy (`proxy.LinkProxy(decode_requests=True)`) feeds every forwarded request chunk here, so
the chaos campaign can count, from the wire and not from our code, every RECOVERY_ADD that reached the
bookie. Written from BookKeeper's protocol, not from the auditor's codec: every request is a frame of a
4-byte big-endian length and a body; a connection speaks one of two bodies, decided by its first frame
the way the bookie decides it (BookieProtoEncoding.RequestDecoder: parse as v3, else v2 from then on):
- v3: a protobuf `Request` (BookkeeperProtocol.proto): field 1 the BKPacketHeader {1 version,
  2 operation, 3 txnId}; 101 AddRequest {100 flag (RECOVERY_ADD = 1), 1 ledgerId, 2 entryId};
  100 ReadRequest {100 flag (FENCE_LEDGER = 1), 1 ledgerId, 2 entryId}.
- v2 (BookieProtocol.java): an int version << 24 | opcode << 16 | flags (FLAG_DO_FENCING 1,
  FLAG_RECOVERY_ADD 2); ADDENTRY (1) then a 20-byte master key, ledgerId, entryId; READENTRY (2) then
  ledgerId, entryId.
After a v3 START_TLS the stream is encrypted: decoding stops (counted as "START_TLS").
"""

from __future__ import annotations

import struct
from collections.abc import Callable

V3_OPS = {
    1: "READ_ENTRY",
    2: "ADD_ENTRY",
    3: "RANGE_READ_ENTRY",
    4: "RANGE_ADD_ENTRY",
    5: "AUTH",
    6: "WRITE_LAC",
    7: "READ_LAC",
    8: "GET_BOOKIE_INFO",
    9: "START_TLS",
    10: "FORCE_LEDGER",
    11: "GET_LIST_OF_ENTRIES_OF_LEDGER",
    12: "BATCH_READ_ENTRY",
}
V2_OPS = {
    1: "ADD_ENTRY",
    2: "READ_ENTRY",
    3: "AUTH",
    4: "READ_LAC",
    5: "WRITE_LAC",
    6: "GET_BOOKIE_INFO",
    7: "BATCH_READ_ENTRY",
}
V2_FLAG_DO_FENCING = 0x1
V2_FLAG_RECOVERY_ADD = 0x2
MAX_FRAME = 64 << 20

# (op, ledger, entry): op is one of the names above, or RECOVERY_ADD / FENCE_READ for flagged ones
OnRequest = Callable[[str, int, int], None]


class NotV3(ValueError):
    pass


def _varint(buf: memoryview, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise NotV3("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _fields(buf: memoryview) -> dict[int, int | memoryview]:
    """The fields of one protobuf message (last one wins; lengths checked)."""
    out: dict[int, int | memoryview] = {}
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if num == 0:
            raise NotV3("field 0")
        if wire == 0:
            out[num], i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise NotV3("length beyond the message")
            out[num] = buf[i : i + n]
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise NotV3(f"wire type {wire}")
    if i != len(buf):
        raise NotV3("overrun")
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def decode_v3(body: memoryview) -> tuple[str, int, int]:
    top = _fields(body)
    header = top.get(1)
    if not isinstance(header, memoryview):
        raise NotV3("no header")
    h = _fields(header)
    op_code = h.get(2)
    if not isinstance(op_code, int) or op_code not in V3_OPS or not isinstance(h.get(1), int):
        raise NotV3("no operation")
    op = V3_OPS[op_code]
    ledger = entry = -1
    sub = top.get(101) if op_code == 2 else top.get(100) if op_code == 1 else None
    if isinstance(sub, memoryview):
        f = _fields(sub)
        lv, ev, flag = f.get(1), f.get(2), f.get(100)
        ledger = _signed(lv) if isinstance(lv, int) else -1
        entry = _signed(ev) if isinstance(ev, int) else -1
        if flag == 1:
            op = "RECOVERY_ADD" if op_code == 2 else "FENCE_READ"
    return op, ledger, entry


def decode_v2(body: bytes | memoryview) -> tuple[str, int, int]:
    if len(body) < 4:
        return "V2_SHORT", -1, -1
    (header,) = struct.unpack_from(">i", body, 0)
    opcode, flags = (header >> 16) & 0xFF, header & 0xFFFF
    op = V2_OPS.get(opcode, f"V2_OP_{opcode}")
    ledger = entry = -1
    if opcode == 1 and len(body) >= 4 + 20 + 16:
        ledger, entry = struct.unpack_from(">qq", body, 24)
        if flags & V2_FLAG_RECOVERY_ADD:
            op = "RECOVERY_ADD"
    elif opcode in (2, 7) and len(body) >= 4 + 16:
        ledger, entry = struct.unpack_from(">qq", body, 4)
        if flags & V2_FLAG_DO_FENCING:
            op = "FENCE_READ"
    return op, ledger, entry


class RequestStream:
    """Feed it one connection's client -> bookie bytes in order; it calls `on_request` per whole frame."""

    def __init__(self, on_request: OnRequest) -> None:
        self.on_request = on_request
        self.protocol: str | None = None  # "v3" | "v2", from the first frame
        self.stopped: str | None = None  # why decoding stopped (TLS, a frame that cannot be one)
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> None:
        if self.stopped:
            return
        self._buf += chunk
        buf, i = self._buf, 0
        view = memoryview(buf)
        try:
            while len(buf) - i >= 4:
                (n,) = struct.unpack_from(">i", buf, i)
                if n < 0 or n > MAX_FRAME:
                    self.stopped = f"frame length {n}"
                    break
                if len(buf) - i - 4 < n:
                    break
                self._frame(view[i + 4 : i + 4 + n])
                i += 4 + n
                if self.stopped:
                    break
        finally:
            view.release()
        del buf[:i]
        if self.stopped:
            self._buf = bytearray()

    def _frame(self, body: memoryview) -> None:
        if self.protocol != "v2":
            try:
                op, ledger, entry = decode_v3(body)
                self.protocol = "v3"
            except NotV3:
                if self.protocol == "v3":
                    op, ledger, entry = "V3_UNPARSED", -1, -1
                else:
                    self.protocol = "v2"
                    op, ledger, entry = decode_v2(body)
        else:
            op, ledger, entry = decode_v2(body)
        self.on_request(op, ledger, entry)
        if op == "START_TLS":
            self.stopped = "START_TLS"
