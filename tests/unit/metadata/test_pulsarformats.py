"""Pulsar's managed-ledger, cursor and schema znodes: plain, in every compression wrapper, and hostile."""

from __future__ import annotations

import struct
import zlib

import cramjam
import pytest

from auditor._proto import pulsar_mledger_pb2 as pb
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.pulsar.formats import parse_cursor, parse_managed_ledger, parse_schema_locator

PATH = "/managed-ledgers/public/default/persistent/t"


def ml_info() -> bytes:
    m = pb.MlManagedLedgerInfo()
    a = m.ledger_info.add(ledger_id=5, entries=10, size=640, timestamp=1700000000000)
    a.offload_context.complete = True
    a.offload_context.bookkeeper_deleted = True
    m.ledger_info.add(ledger_id=7, timestamp=0)
    m.properties.add(key="PULSAR.SHADOW_SOURCE", value="persistent://public/default/src")
    return m.SerializeToString()


def wrap(codec: int, body: bytes) -> bytes:
    header = pb.MlCompressionHeader(compression_type=codec, uncompressed_size=len(body)).SerializeToString()
    if codec == 1:
        packed = bytes(cramjam.lz4.compress_block(body, store_size=False))
    elif codec == 2:
        c = zlib.compressobj()
        packed = c.compress(body) + c.flush(zlib.Z_SYNC_FLUSH)  # as Pulsar's deflater: not finished
    elif codec == 3:
        packed = bytes(cramjam.zstd.compress(body))
    elif codec == 4:
        packed = bytes(cramjam.snappy.compress_raw(body))
    else:
        packed = body
    return b"\x47\x78" + struct.pack(">i", len(header)) + header + packed


@pytest.mark.parametrize("codec", [None, 0, 1, 2, 3, 4])
def test_managed_ledger_info_plain_and_wrapped(codec: int | None) -> None:
    data = ml_info() if codec is None else wrap(codec, ml_info())
    ml = parse_managed_ledger("public/default/persistent/t", data, PATH, mzxid=9)
    assert [led.ledger_id for led in ml.ledgers] == [5, 7]
    first, current = ml.ledgers
    assert (first.entries, first.size, first.closed_at_ms) == (10, 640, 1700000000000)
    assert first.offloaded and first.bookkeeper_deleted and first.absence_expected
    assert current.closed_at_ms is None and current.entries is None and not current.offloaded
    assert ml.shadow_source == "persistent://public/default/src" and ml.mzxid == 9


def test_an_empty_managed_ledger_znode_lists_nothing() -> None:
    assert parse_managed_ledger("a/b/persistent/c", b"", PATH).ledgers == ()


def test_a_broken_wrapper_falls_back_and_then_fails_naming_the_znode() -> None:
    whole = wrap(2, ml_info())
    bad = whole[: len(whole) - 30]  # truncated compressed body: not a plain message either (magic 0x47)
    with pytest.raises(CorruptZnodeError) as e:
        parse_managed_ledger("a/b/persistent/c", bad, PATH)
    assert e.value.path == PATH


def test_a_wrapper_claiming_a_huge_size_is_refused() -> None:
    header = pb.MlCompressionHeader(compression_type=2, uncompressed_size=2**31 - 1).SerializeToString()
    data = b"\x47\x78" + struct.pack(">i", len(header)) + header + zlib.compress(b"\0" * 1000)
    with pytest.raises(CorruptZnodeError):
        parse_managed_ledger("a/b/persistent/c", data, PATH)


@pytest.mark.parametrize("data", [b"\xff\xff\xff", b"\x08", b"\x0a\x02\x10\x01"])
def test_hostile_managed_ledger_bytes(data: bytes) -> None:
    with pytest.raises(CorruptZnodeError):
        parse_managed_ledger("a/b/persistent/c", data, PATH)


def test_negative_ledger_ids_are_refused() -> None:
    m = pb.MlManagedLedgerInfo()
    m.ledger_info.add(ledger_id=-3)
    with pytest.raises(CorruptZnodeError, match="negative"):
        parse_managed_ledger("a/b/persistent/c", m.SerializeToString(), PATH)


def test_cursor_ledger_ids() -> None:
    c = pb.MlCursorInfo(cursors_ledger_id=12, mark_delete_ledger_id=5, mark_delete_entry_id=3)
    assert parse_cursor("m", "sub", c.SerializeToString(), PATH + "/sub").ledger_id == 12
    assert parse_cursor("m", "sub", wrap(3, c.SerializeToString()), PATH + "/sub").ledger_id == 12
    none = pb.MlCursorInfo(cursors_ledger_id=-1).SerializeToString()
    assert parse_cursor("m", "sub", none, PATH + "/sub").ledger_id is None
    with pytest.raises(CorruptZnodeError, match="no cursor ledger id"):
        parse_cursor("m", "sub", b"", PATH + "/sub")


def test_schema_locator_lists_every_version() -> None:
    loc = pb.SchemaLocator()
    loc.info.version = 2
    loc.info.position.ledger_id = 30
    for v, lid in ((0, -1), (1, 20), (2, 30)):
        e = loc.index.add(version=v)
        e.position.ledger_id = lid
    s = parse_schema_locator("public/default/t", loc.SerializeToString(), "/schemas/public/default/t")
    assert s.ledger_ids == (20, 30)


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_a_tiny_wrapper_claiming_a_huge_size_allocates_nothing_big(codec: int) -> None:
    """Found at 100,000 inputs: 20 bytes of ZSTD claiming 64 MiB made the codec allocate 64 MiB."""
    import tracemalloc

    header = pb.MlCompressionHeader(compression_type=codec, uncompressed_size=64 * 1024 * 1024 - 5).SerializeToString()
    empty = {
        1: cramjam.lz4.compress_block(b"", store_size=False),
        3: cramjam.zstd.compress(b""),
        4: cramjam.snappy.compress_raw(b""),
    }[codec]
    data = b"\x47\x78" + struct.pack(">i", len(header)) + header + bytes(empty)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptZnodeError):
            parse_managed_ledger("a/b/persistent/c", data, PATH)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024


def test_a_snappy_block_must_declare_the_claimed_size() -> None:
    body = ml_info()
    header = pb.MlCompressionHeader(compression_type=4, uncompressed_size=len(body) + 1).SerializeToString()
    packed = bytes(cramjam.snappy.compress_raw(body))
    data = b"\x47\x78" + struct.pack(">i", len(header)) + header + packed
    with pytest.raises(CorruptZnodeError):
        parse_managed_ledger("a/b/persistent/c", data, PATH)
