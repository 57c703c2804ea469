"""The harness's MlTool drives Pulsar's own managed-ledger library (4.0.x) against the session cluster.

What the library leaves behind is read back independently: znodes with kazoo (decoded here with a
minimal protobuf wire reader, so the field numbers of `pulsar-metadata.md` §2 are checked against the
real library), ledgers with our own ledger-metadata parser (`auditor.metadata.codecs.formats`).
"""

from __future__ import annotations

import uuid
import zlib
from pathlib import Path
from typing import Any

import pytest

from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState
from auditor.metadata.codecs import formats
from devcluster.checks_util import ledger_path
from devcluster.cluster import Cluster

pytestmark = pytest.mark.realcluster

RUN = uuid.uuid4().hex[:6]
WRAPPER_MAGIC = b"\x47\x78"
ZLIB = 2  # MLDataFormats.CompressionType


def ml_name(topic: str) -> str:
    return f"mltool-{RUN}/ns/persistent/{topic}"


# ---------------------------------------------------------------------------------- protobuf wire reading


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def wire_fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) in order: varints as unsigned ints, length-delimited fields as bytes."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        value: int | bytes
        if wire_type == 0:
            value, pos = _varint(buf, pos)
        elif wire_type == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise AssertionError(f"unexpected wire type {wire_type} (field {number}) in {buf.hex()}")
        out.append((number, value))
    return out


def signed64(value: int | bytes) -> int:
    assert isinstance(value, int)
    return value - (1 << 64) if value >= 1 << 63 else value


def unwrap(data: bytes) -> tuple[int | None, bytes]:
    """(compression type or None when plain, the ManagedLedgerInfo / ManagedCursorInfo bytes)."""
    if not data.startswith(WRAPPER_MAGIC):
        return None, data
    size = int.from_bytes(data[2:6], "big")
    meta = dict(wire_fields(data[6 : 6 + size]))
    body = data[6 + size :]
    kind = meta.get(1, 0)
    assert isinstance(kind, int)
    if kind == ZLIB:
        body = zlib.decompressobj().decompress(body)
    else:
        assert kind == 0, f"this test decodes ZLIB only, got compression type {kind}"
    assert len(body) == meta[2], "uncompressedSize"
    return kind, body


def ml_znode_ledgers(body: bytes) -> list[dict[str, Any]]:
    """ManagedLedgerInfo.ledgerInfo (field 1): id 1, entries 2, size 3, timestamp 4, offloadContext 5
    (complete 3, bookkeeperDeleted 4)."""
    ledgers = []
    for number, value in wire_fields(body):
        if number != 1:
            continue
        assert isinstance(value, bytes)
        f = dict(wire_fields(value))
        row: dict[str, Any] = {k: f.get(n) for k, n in (("ledgerId", 1), ("entries", 2), ("size", 3))}
        row["timestamp"] = f.get(4)
        offload = f.get(5)
        if offload is not None:
            assert isinstance(offload, bytes)
            o = dict(wire_fields(offload))
            row["offload"] = (bool(o.get(3, 0)), bool(o.get(4, 0)))
        else:
            row["offload"] = None
        ledgers.append(row)
    return ledgers


def cursor_znode(body: bytes) -> dict[str, int]:
    """ManagedCursorInfo: cursorsLedgerId 1 (int64, -1 = none), markDeleteLedgerId 2, markDeleteEntryId 3."""
    f = dict(wire_fields(body))
    return {"cursorsLedgerId": signed64(f[1]), "markDelete": [signed64(f[2]), signed64(f[3])]}


# ---------------------------------------------------------------------------------- cluster reads


def ml_path(name: str) -> str:
    return f"/managed-ledgers/{name}"


def ledger_metadata(cluster: Cluster, ledger_id: int) -> LedgerMetadata | None:
    path = ledger_path(cluster, ledger_id)
    if cluster.kazoo.exists(path) is None:
        return None
    data, stat = cluster.kazoo.get(path)
    return formats.parse_ledger_metadata(data, LedgerId(0, ledger_id), path, stat.version)


def pulsar_keys(name: str, cursor: str | None = None) -> dict[str, bytes]:
    keys = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": name.encode()}
    if cursor is not None:
        keys["pulsar/cursor"] = cursor.encode()
    return keys


def written_ids(out: dict[str, Any]) -> list[int]:
    return [int(k) for k in out["written"]]


def ids(out: dict[str, Any]) -> list[int]:
    return [row["ledgerId"] for row in out["ledgers"]]


# ---------------------------------------------------------------------------------- tests


def test_create_writes_pulsar_znodes_and_ledgers_like_a_broker(cluster: Cluster) -> None:
    """A broker that wrote three full ledgers and crashed: the ML znode lists them and the open current
    ledger; each cursor znode names its cursor ledger; every ledger carries Pulsar's custom metadata."""
    name = ml_name("created")
    out = cluster.ml_create(name, ledgers=3, entries=4, cursors=["sub-a", "sub-b"], leave_open=True)
    data_ids = written_ids(out)
    assert list(out["written"].values()) == [4, 4, 4]
    # The library rolled to a fourth ledger after the third was full: listed with no entries, timestamp 0.
    assert ids(out)[:3] == data_ids and len(ids(out)) == 4
    current = ids(out)[3]

    data, stat = cluster.kazoo.get(ml_path(name))
    kind, body = unwrap(data)
    assert kind is None and stat.version == out["znode"]["version"] and len(data) == out["znode"]["bytes"]
    stored = ml_znode_ledgers(body)
    assert [r["ledgerId"] for r in stored] == ids(out)
    assert [(r["entries"], r["size"]) for r in stored[:3]] == [(4, 400)] * 3
    assert stored[3] == {"ledgerId": current, "entries": None, "size": None, "timestamp": 0, "offload": None}

    assert sorted(cluster.kazoo.get_children(ml_path(name))) == ["sub-a", "sub-b"]
    cursor_ledgers = {}
    for cursor, reported in out["cursors"].items():
        c = cursor_znode(unwrap(cluster.kazoo.get(f"{ml_path(name)}/{cursor}")[0])[1])
        assert c["cursorsLedgerId"] == reported["cursorsLedgerId"] >= 0
        # The znode still holds the position the cursor was created at; the mark-delete is in its ledger.
        assert c["markDelete"] == reported["markDelete"] == [data_ids[0], -1]
        cursor_ledgers[cursor] = c["cursorsLedgerId"]

    for lid in data_ids:
        md = ledger_metadata(cluster, lid)
        assert md is not None and md.state is LedgerState.CLOSED and md.last_entry_id == 3
        assert dict(md.custom_metadata) == pulsar_keys(name)
        assert (md.ensemble_size, md.write_quorum, md.ack_quorum, md.password) == (2, 2, 2, b"")
    md = ledger_metadata(cluster, current)
    assert md is not None and md.state is LedgerState.OPEN and dict(md.custom_metadata) == pulsar_keys(name)
    for cursor, lid in cursor_ledgers.items():
        md = ledger_metadata(cluster, lid)
        assert md is not None and md.state is LedgerState.OPEN
        assert dict(md.custom_metadata) == pulsar_keys(name, cursor)


def test_compressed_znodes_carry_pulsars_wrapper(cluster: Cluster) -> None:
    name = ml_name("zlib")
    out = cluster.ml_create(name, ledgers=2, entries=3, cursors=["s"], leave_open=True, compression="ZLIB")
    kind, body = unwrap(cluster.kazoo.get(ml_path(name))[0])
    assert kind == ZLIB and out["znode"]["wrapped"] is True
    assert [r["ledgerId"] for r in ml_znode_ledgers(body)] == ids(out)
    kind, body = unwrap(cluster.kazoo.get(f"{ml_path(name)}/s")[0])
    assert kind == ZLIB and out["cursors"]["s"]["znode"]["wrapped"] is True
    assert cursor_znode(body)["cursorsLedgerId"] == out["cursors"]["s"]["cursorsLedgerId"] >= 0
    # The library reads its wrapped znodes back (info opens nothing).
    info = cluster.ml_info(name)
    assert ids(info) == ids(out) and info["cursors"]["s"]["cursorsLedgerId"] == out["cursors"]["s"]["cursorsLedgerId"]


def test_trim_deletes_the_consumed_ledgers(cluster: Cluster) -> None:
    name = ml_name("trimmed")
    out = cluster.ml_create(name, ledgers=3, entries=3, cursors=["sub"])
    # A clean close keeps the cursor's position in its znode only and deletes the cursor ledger.
    assert out["cursors"]["sub"]["cursorsLedgerId"] == -1
    assert cursor_znode(cluster.kazoo.get(f"{ml_path(name)}/sub")[0])["cursorsLedgerId"] == -1
    first, second, third = written_ids(out)

    trimmed = cluster.ml_trim(name, through_ledger=second)
    assert trimmed["removed"] == [first, second] and third in trimmed["remaining"]
    stored = [r["ledgerId"] for r in ml_znode_ledgers(cluster.kazoo.get(ml_path(name))[0])]
    assert stored == trimmed["remaining"] == ids(trimmed)
    assert ledger_metadata(cluster, first) is None and ledger_metadata(cluster, second) is None
    md = ledger_metadata(cluster, third)
    assert md is not None and dict(md.custom_metadata) == pulsar_keys(name)
    assert cursor_znode(cluster.kazoo.get(f"{ml_path(name)}/sub")[0])["markDelete"] == [second, 2]


def test_delete_removes_the_ml_its_cursors_and_their_ledgers(cluster: Cluster) -> None:
    name = ml_name("deleted")
    out = cluster.ml_create(name, ledgers=2, entries=3, cursors=["sub"], leave_open=True)
    cursor_ledger = out["cursors"]["sub"]["cursorsLedgerId"]
    before = [*ids(out), cursor_ledger]
    assert all(ledger_metadata(cluster, lid) is not None for lid in before)

    gone = cluster.ml_delete(name)
    assert gone["znodeExists"] is False and gone["stillInBookKeeper"] == []
    assert gone["cursors"]["sub"]["cursorsLedgerId"] == cursor_ledger
    assert cluster.kazoo.exists(ml_path(name)) is None
    assert cluster.kazoo.exists(f"{ml_path(name)}/sub") is None
    for lid in {*before, *ids(gone)}:
        assert ledger_metadata(cluster, lid) is None, lid


def test_offload_keeps_ledgers_listed_and_deletes_their_bookkeeper_copies(cluster: Cluster, tmp_path: Path) -> None:
    name = ml_name("offloaded")
    out = cluster.ml_create(name, ledgers=3, entries=3, cursors=["sub"])
    first, second, third = written_ids(out)

    off = cluster.ml_offload(name, 2, tmp_path)
    assert off["offloaded"] == off["bookkeeperDeleted"] == [first, second]
    stored = {r["ledgerId"]: r for r in ml_znode_ledgers(cluster.kazoo.get(ml_path(name))[0])}
    assert stored[first]["offload"] == stored[second]["offload"] == (True, True)
    assert stored[first]["entries"] == 3 and stored[third]["offload"] is None
    assert ledger_metadata(cluster, first) is None and ledger_metadata(cluster, second) is None
    assert ledger_metadata(cluster, third) is not None
    files = sorted(p.name.split("-", 1)[0] for p in tmp_path.glob("*.entries"))
    assert files == sorted([str(first), str(second)])

    # The library reads the offloaded ledgers from the offloader, the third from the bookies.
    read = cluster.ml_read(name, offload_dir=tmp_path)
    assert read["badContent"] == [] and read["read"] == 9
    assert read["readPerLedger"] == {str(first): 3, str(second): 3, str(third): 3}

    gone = cluster.ml_delete(name, offload_dir=tmp_path)
    assert gone["znodeExists"] is False and gone["stillInBookKeeper"] == []
    assert list(tmp_path.glob("*.entries")) == []
