"""Pulsar's managed-ledger, cursor and schema znodes (auditor.metadata.pulsar.formats): what Pulsar writes
reads back as written, plain or in any compression wrapper; hostile bytes (and hostile wrappers) are a
CorruptZnodeError naming the znode, or a listing that keeps every invariant, within bounded work."""

from __future__ import annotations

import struct
import zlib

import cramjam
from hypothesis import given
from hypothesis import strategies as st

from auditor._proto import pulsar_mledger_pb2 as pb
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.pulsar.formats import parse_cursor, parse_managed_ledger, parse_schema_locator

from .contract import parse_contract
from .strategies import mutated

PATH = "/managed-ledgers/t/n/persistent/x"
INT64 = st.integers(-(2**63), 2**63 - 1)
IDS = st.integers(0, 2**63 - 1)


def pack(codec: int, body: bytes, claimed: int | None = None) -> bytes:
    header = pb.MlCompressionHeader(
        compression_type=codec, uncompressed_size=len(body) if claimed is None else claimed
    ).SerializeToString()
    if codec == 1:
        data = bytes(cramjam.lz4.compress_block(body, store_size=False))
    elif codec == 2:  # as Pulsar's deflater: flushed, not finished
        c = zlib.compressobj()
        data = c.compress(body) + c.flush(zlib.Z_SYNC_FLUSH)
    elif codec == 3:
        data = bytes(cramjam.zstd.compress(body))
    elif codec == 4:
        data = bytes(cramjam.snappy.compress_raw(body))
    else:  # NONE, or a codec Pulsar does not have
        data = body
    return b"\x47\x78" + struct.pack(">i", len(header)) + header + data


@st.composite
def managed_ledger_infos(draw: st.DrawFn) -> pb.MlManagedLedgerInfo:
    m = pb.MlManagedLedgerInfo()
    for lid in draw(st.lists(IDS, max_size=20)):
        li = m.ledger_info.add(ledger_id=lid)
        if draw(st.booleans()):
            li.entries, li.size, li.timestamp = draw(INT64), draw(INT64), draw(INT64)
        if draw(st.booleans()):
            li.offload_context.complete = draw(st.booleans())
            li.offload_context.bookkeeper_deleted = draw(st.booleans())
    for key, value in draw(st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=3)).items():
        m.properties.add(key=key, value=value)
    return m


@given(managed_ledger_infos(), st.sampled_from([None, 0, 1, 2, 3, 4]))
def test_managed_ledger_round_trip(m: pb.MlManagedLedgerInfo, codec: int | None) -> None:
    body = m.SerializeToString()
    ml = parse_managed_ledger("t/n/persistent/x", body if codec is None else pack(codec, body), PATH)
    assert [led.ledger_id for led in ml.ledgers] == [li.ledger_id for li in m.ledger_info]
    for led, li in zip(ml.ledgers, m.ledger_info, strict=True):
        assert led.closed_at_ms == (li.timestamp or None)
        assert led.offloaded == li.offload_context.complete
        assert led.bookkeeper_deleted == li.offload_context.bookkeeper_deleted
    assert ml.shadow_source == {kv.key: kv.value for kv in m.properties}.get("PULSAR.SHADOW_SOURCE")


def check(data: bytes) -> None:
    out = parse_contract(lambda: parse_managed_ledger("t/n/persistent/x", data, PATH), CorruptZnodeError, names=PATH)
    if out.ok:
        assert all(led.ledger_id >= 0 for led in out.value.ledgers)
    out = parse_contract(lambda: parse_cursor("t/n/persistent/x", "c", data, PATH), CorruptZnodeError, names=PATH)
    if out.ok:
        assert out.value.ledger_id is None or out.value.ledger_id >= 0
    out = parse_contract(lambda: parse_schema_locator("t/n/x", data, PATH), CorruptZnodeError, names=PATH)
    if out.ok:
        assert all(lid >= 0 for lid in out.value.ledger_ids)


@given(st.binary(max_size=600))
def test_hostile_bytes(data: bytes) -> None:
    check(data)


@given(st.data())
def test_mutated_valid_znodes(data: st.DataObject) -> None:
    body = data.draw(managed_ledger_infos()).SerializeToString()
    codec = data.draw(st.sampled_from([None, 0, 1, 2, 3, 4]))
    check(data.draw(mutated(body if codec is None else pack(codec, body))))


@given(managed_ledger_infos(), st.integers(0, 5), st.integers(-(2**31), 2**31 - 1))
def test_hostile_wrappers(m: pb.MlManagedLedgerInfo, codec: int, claimed: int) -> None:
    """A header whose codec or size lies: refused or read as what it really holds, never a huge buffer."""
    check(pack(codec, m.SerializeToString(), claimed))
