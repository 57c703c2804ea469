"""Pulsar's managed-ledger, cursor and schema-locator znodes, read into the pure model of
`auditor.durability.references` (our own proto subset: proto/pulsar_mledger.proto).

Managed-ledger and cursor znodes may carry Pulsar's compression wrapper: the magic 0x4778, a big-endian
int32 length, a header message (codec, uncompressed size), then the compressed message. Like Pulsar's
reader we fall back to the plain message when the wrapped one cannot be read. A znode that is neither is
`CorruptZnodeError` naming it; a 0-byte managed-ledger znode (created, not yet written) is an empty list.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from auditor._proto import pulsar_mledger_pb2 as pb
from auditor.durability.references import (
    SHADOW_SOURCE_PROPERTY,
    CursorListing,
    ListedLedger,
    ManagedLedgerListing,
    SchemaListing,
)
from auditor.metadata.errors import CorruptZnodeError

MAGIC = b"\x47\x78"
# Bound on what one znode may expand to: ZooKeeper's default znode limit is 1 MiB, and Pulsar compresses
# only large payloads; a header claiming more is hostile or corrupt.
MAX_UNCOMPRESSED = 64 * 1024 * 1024
# ... and on what a few compressed bytes may claim: the codecs size their output buffer by the header's
# claim, so a 20-byte znode claiming 64 MiB would make us allocate 64 MiB (found by the property tests).
# Pulsar's ledger and cursor lists compress far less than this; a znode beyond it is reported unreadable.
MAX_RATIO = 256
SMALL = 4096  # claims up to this are always allowed
CODECS = {0: "NONE", 1: "LZ4", 2: "ZLIB", 3: "ZSTD", 4: "SNAPPY"}

M = TypeVar("M", bound=Message)


def _inflate_zlib(data: bytes, size: int) -> bytes:
    d = zlib.decompressobj()  # Pulsar's deflater flushes without finishing the stream
    out = d.decompress(data, size + 1)
    return out


def _cramjam(codec: str) -> Callable[[bytes, int], bytes]:
    try:
        import cramjam
    except ImportError:  # pragma: no cover - a dependency of the package
        raise ValueError(f"{codec} compression needs the 'cramjam' package") from None
    if codec == "LZ4":
        return lambda data, size: bytes(cramjam.lz4.decompress_block(data, output_len=size))
    if codec == "ZSTD":
        return lambda data, size: bytes(cramjam.zstd.decompress(data, output_len=size))
    return lambda data, size: bytes(cramjam.snappy.decompress_raw(data))


def unwrap(data: bytes) -> bytes | None:
    """The message bytes inside Pulsar's compression wrapper; None when `data` is not wrapped (or the
    wrapper cannot be read: then, as Pulsar does, the caller parses `data` as it is)."""
    if len(data) < 6 or data[:2] != MAGIC:
        return None
    (n,) = struct.unpack(">i", data[2:6])
    if n < 0 or 6 + n > len(data):
        return None
    header = pb.MlCompressionHeader()
    try:
        header.ParseFromString(data[6 : 6 + n])
    except DecodeError:
        return None
    body = data[6 + n :]
    codec = CODECS.get(header.compression_type)
    size = header.uncompressed_size
    if codec is None or not 0 <= size <= min(MAX_UNCOMPRESSED, SMALL + MAX_RATIO * len(body)):
        return None
    if codec == "SNAPPY" and _snappy_length(body) != size:
        return None  # raw Snappy starts with its own length, which sizes the codec's buffer: it must agree
    if codec == "NONE":
        return body
    try:
        out = _inflate_zlib(body, size) if codec == "ZLIB" else _cramjam(codec)(body, size)
    except Exception:  # any codec failure: fall back like Pulsar (then the plain parse decides)
        return None
    return out if len(out) == size else None


def _snappy_length(body: bytes) -> int | None:
    """The uncompressed length a raw Snappy block declares (a little-endian base-128 varint, at most 5
    bytes: a 32-bit length)."""
    value = 0
    for i, b in enumerate(body[:5]):
        value |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return value
    return None


def _parse(msg: M, data: bytes, path: str, what: str) -> M:
    inner = unwrap(data)
    for candidate in (inner, data) if inner is not None else (data,):
        try:
            msg.ParseFromString(candidate)
            return msg
        except DecodeError:
            msg.Clear()
    raise CorruptZnodeError(path, f"not a Pulsar {what} (binary protobuf, plain or compressed)")


def _nonneg(value: int, path: str, what: str) -> int:
    if value < 0:
        raise CorruptZnodeError(path, f"{what} {value} is negative")
    return value


def parse_managed_ledger(name: str, data: bytes, path: str, mzxid: int = 0) -> ManagedLedgerListing:
    """A managed ledger's znode: its ledger list (0 bytes: created, nothing listed yet)."""
    msg = _parse(pb.MlManagedLedgerInfo(), data, path, "managed-ledger info") if data else pb.MlManagedLedgerInfo()
    ledgers = []
    for li in msg.ledger_info:
        if not li.HasField("ledger_id"):
            raise CorruptZnodeError(path, "a ledger entry has no ledger id")
        lid = _nonneg(li.ledger_id, path, "ledger id")
        oc = li.offload_context if li.HasField("offload_context") else None
        ledgers.append(
            ListedLedger(
                ledger_id=lid,
                entries=li.entries if li.HasField("entries") else None,
                size=li.size if li.HasField("size") else None,
                closed_at_ms=li.timestamp or None,
                offloaded=bool(oc and oc.complete),
                bookkeeper_deleted=bool(oc and oc.bookkeeper_deleted),
            )
        )
    props = {kv.key: kv.value for kv in msg.properties}
    return ManagedLedgerListing(name, path, tuple(ledgers), props.get(SHADOW_SOURCE_PROPERTY), mzxid)


def parse_cursor(managed_ledger: str, cursor: str, data: bytes, path: str) -> CursorListing:
    """A durable cursor's znode: its cursor ledger (-1: none)."""
    msg = _parse(pb.MlCursorInfo(), data, path, "cursor info")
    if not msg.HasField("cursors_ledger_id"):
        raise CorruptZnodeError(path, "no cursor ledger id")
    lid = msg.cursors_ledger_id
    if lid < -1:
        raise CorruptZnodeError(path, f"cursor ledger id {lid} is negative")
    return CursorListing(managed_ledger, cursor, path, None if lid == -1 else lid)


def parse_schema_locator(schema_id: str, data: bytes, path: str) -> SchemaListing:
    """A schema locator: one ledger per schema version (negative ids are placeholders, ignored)."""
    try:
        msg = pb.SchemaLocator()
        msg.ParseFromString(data)
    except DecodeError:
        raise CorruptZnodeError(path, "not a Pulsar schema locator (binary protobuf)") from None
    ids = [e.position.ledger_id for e in [msg.info, *msg.index] if e.HasField("position")]
    return SchemaListing(schema_id, path, tuple(sorted({i for i in ids if i >= 0})))
