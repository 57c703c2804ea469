"""Protobuf base-128 varints: the length prefix of Java's `writeDelimitedTo` (ledger metadata znodes) and
the fields of small messages decoded by hand (Pulsar's `MessageIdData` in ledger custom metadata).

Decoding reads at most 10 bytes (a 64-bit value) and raises `VarintTruncated` when the data ends inside a
varint, `VarintError` when 10 bytes still ask for more; both are `DataError`s (and `ValueError`s).
"""

from __future__ import annotations

from auditor.errors import DataError

__all__ = ["VarintError", "VarintTruncated", "decode", "encode", "fields"]

MAX_BYTES = 10  # a 64-bit value


class VarintError(DataError):
    """Malformed varint or message."""


class VarintTruncated(VarintError):
    """The data ends inside a varint."""


_ONE_BYTE = tuple(bytes((n,)) for n in range(0x80))


def encode(n: int) -> bytes:
    """An integer as a varint; a negative one as its 64-bit two's complement (protobuf's int64: 10 bytes).

    The lengths of a bookie request's ids (txn and ledger ids, one to four bytes) are spelled out: this
    runs twice for every request a scan sends."""
    if n < 0:
        n += 1 << 64
    if n < 0x80:
        return _ONE_BYTE[n]
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    if n < 0x200000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14))
    if n < 0x10000000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14 & 0x7F | 0x80, n >> 21))
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode(data: bytes, pos: int = 0) -> tuple[int, int]:
    """(value, offset after it) of the varint at `pos`. (Up to five bytes, values below 2^35 such as
    txn and ledger ids, it is read spelled out: this runs four times for every GET_LIST reply a scan
    receives.)"""
    if pos + 4 < len(data):
        b = data[pos]
        if b < 0x80:
            return b, pos + 1
        value = b & 0x7F
        b = data[pos + 1]
        if b < 0x80:
            return value | b << 7, pos + 2
        value |= (b & 0x7F) << 7
        b = data[pos + 2]
        if b < 0x80:
            return value | b << 14, pos + 3
        value |= (b & 0x7F) << 14
        b = data[pos + 3]
        if b < 0x80:
            return value | b << 21, pos + 4
        value |= (b & 0x7F) << 21
        b = data[pos + 4]
        if b < 0x80:
            return value | b << 28, pos + 5
    result = shift = 0
    for i in range(MAX_BYTES):
        if pos + i >= len(data):
            raise VarintTruncated("truncated varint")
        b = data[pos + i]
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, pos + i + 1
    raise VarintError("bad varint: more than 10 bytes")


def fields(data: bytes) -> dict[int, int]:
    """The varint fields of a protobuf message by field number (the other wire types are skipped);
    enough for MessageIdData's ledgerId / entryId."""
    out: dict[int, int] = {}
    i = 0
    while i < len(data):
        key, i = decode(data, i)
        field_no, wire = key >> 3, key & 7
        if wire == 0:
            out[field_no], i = decode(data, i)
        elif wire == 2:
            n, i = decode(data, i)
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise VarintError("unsupported wire type")
    if i != len(data):
        raise VarintTruncated("truncated")
    return out
