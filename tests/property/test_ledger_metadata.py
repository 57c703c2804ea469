"""Ledger metadata formats 1, 2 and 3 (auditor.metadata.codecs.formats): every Java-writable ledger round-trips;
hostile bytes are a CorruptZnodeError naming the znode, or metadata that keeps every invariant."""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from auditor._proto import bookkeeper_formats_pb2 as pb
from auditor.durability import varint
from auditor.durability.model import LedgerMetadata
from auditor.metadata.codecs import formats as f
from auditor.metadata.errors import CorruptZnodeError

from .contract import parse_contract
from .strategies import bookie_ids, ledger_metadata, mutated, weird_numbers

PATH = "/ledgers/00/0000/L0007"
HEADERS = [f.HEADER_KEY + v + b"\n" for v in (b"1", b"2", b"3", b"+3", b"03", b"4", b"-1", b"")] + [b""]


def parse(data: bytes) -> LedgerMetadata | None:
    """The contract on one blob; the metadata if it was accepted (then it must be sane)."""
    out = parse_contract(lambda: f.parse_ledger_metadata(data, 7, PATH), CorruptZnodeError, names=PATH)
    if out.ok:
        assert_sane(out.value)
        return out.value
    assert out.error.path == PATH
    return None


def assert_sane(md: LedgerMetadata) -> None:
    f.validate(md, PATH)  # accepted metadata keeps every invariant
    assert all(-(2**31) <= n < 2**31 for n in (md.ensemble_size, md.write_quorum, md.ack_quorum))
    assert -1 <= md.last_entry_id < 2**63 and 0 <= md.length < 2**63
    if md.format_version == 1 or md.digest_type is not None:
        # What we accepted, we can write back, and read again as the same thing.
        again = f.parse_ledger_metadata(f.serialize_ledger_metadata(md), md.ledger_id, PATH)
        # (the writers normalise cToken as Java's do: always in format 3, never in format 2)
        assert again == replace(md, version=again.version, creator_token=again.creator_token)


@given(ledger_metadata(fmt=1))
def test_v1_round_trip(md: LedgerMetadata) -> None:
    assert f.parse_ledger_metadata(f.serialize_ledger_metadata(md), md.ledger_id, PATH) == md


@given(ledger_metadata(fmt=2))
def test_v2_round_trip(md: LedgerMetadata) -> None:
    assert f.parse_ledger_metadata(f.serialize_ledger_metadata(md), md.ledger_id, PATH) == md


@given(ledger_metadata(fmt=3))
def test_v3_round_trip(md: LedgerMetadata) -> None:
    assert f.parse_ledger_metadata(f.serialize_ledger_metadata(md), md.ledger_id, PATH) == md


@given(st.sampled_from(HEADERS), st.binary(max_size=400))
def test_hostile_bytes(header: bytes, tail: bytes) -> None:
    parse(header + tail)


@given(st.data(), st.sampled_from([1, 2, 3]))
def test_mutated_valid_metadata(data: st.DataObject, fmt: int) -> None:
    md = data.draw(ledger_metadata(fmt=fmt))
    parse(data.draw(mutated(f.serialize_ledger_metadata(md))))


# Format 1 text from its grammar, with Java-unfriendly numbers, bookie ids and line breaks.
v1_token = st.one_of(weird_numbers, bookie_ids, st.sampled_from(["CLOSED", "closed", "", "a:1\n", "a:1 ", "readonly"]))
v1_line = st.lists(v1_token, min_size=1, max_size=5).map("\t".join)
v1_break = st.sampled_from(["\n", "\r\n", "\r", "\n\n"])


@given(st.lists(v1_line, min_size=0, max_size=8), v1_break, st.booleans())
def test_v1_hostile_text(lines: list[str], brk: str, valid_head: bool) -> None:
    head = ["2", "3", "1280"] if valid_head else []
    text = brk.join(head + lines)
    parse(f.HEADER_KEY + b"1\n" + text.encode("utf-8", "surrogatepass"))


# Format 2: Java's text proto with each field's value drawn from hostile numbers.
_FIELDS = ["quorumSize", "ensembleSize", "length", "lastEntryId", "state", "ackQuorumSize", "ctime", "digestType"]


@st.composite
def v2_text(draw: st.DrawFn) -> str:
    lines = []
    for name in draw(st.lists(st.sampled_from(_FIELDS), max_size=10)):
        value = draw(st.one_of(weird_numbers, st.sampled_from(["OPEN", "CLOSED", "IN_RECOVERY", "CRC32C", "BOGUS"])))
        lines.append(f"{name}: {value}")
    for _ in range(draw(st.integers(0, 3))):
        members = " ".join(
            f"ensembleMember: {json.dumps(b)}"  # a JSON string is a valid proto text string
            for b in draw(st.lists(st.one_of(bookie_ids, st.text(max_size=8)), max_size=4))
        )
        lines.append(f"segment {{ {members} firstEntryId: {draw(weird_numbers)} }}")
    if draw(st.booleans()):
        lines.append('password: "pw"')
    return "\n".join(lines)


@given(v2_text())
def test_v2_hostile_text(text: str) -> None:
    parse(f.HEADER_KEY + b"2\n" + text.encode())


@st.composite
def v3_message(draw: st.DrawFn) -> bytes:
    """A binary LedgerMetadataFormat with every field free (negative, huge, duplicate bookies...)."""
    msg = pb.LedgerMetadataFormat(
        quorumSize=draw(st.integers(-3, 8)),
        ensembleSize=draw(st.integers(-3, 8)),
        length=draw(st.integers(-(2**63), 2**63 - 1)),
        lastEntryId=draw(st.integers(-(2**63), 2**63 - 1)),
        state=draw(st.sampled_from([1, 2, 3])),
    )
    if draw(st.booleans()):
        msg.ackQuorumSize = draw(st.integers(-3, 8))
    pool = draw(st.lists(bookie_ids, min_size=1, max_size=4))
    for _ in range(draw(st.integers(0, 3))):
        msg.segment.add(
            ensembleMember=draw(st.lists(st.sampled_from(pool), max_size=6)), firstEntryId=draw(st.integers(-5, 50))
        )
    if draw(st.booleans()):
        msg.password = b"pw"
        msg.digestType = draw(st.sampled_from([1, 2, 3, 4]))
    body = msg.SerializePartialToString()
    return f.HEADER_KEY + b"3\n" + varint.encode(len(body)) + body


@given(v3_message())
def test_v3_free_fields(data: bytes) -> None:
    parse(data)


@given(st.binary(max_size=40))
def test_the_v3_header_is_read_as_the_general_path_reads_it(tail: bytes) -> None:
    """The written-by-every-BookKeeper header takes a shortcut; a version spelled another way (leading
    zeros) takes the general path to the same version."""
    key = f.HEADER_KEY
    assert f.read_header(key + b"3\n" + tail, "/l") == (3, len(key) + 2)
    assert f.read_header(key + b"003\n" + tail, "/l") == (3, len(key) + 4)
    assert f.read_header(key + b"2\n" + tail, "/l") == (2, len(key) + 2)
