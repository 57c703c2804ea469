"""Znode payload codecs: ledger metadata v1/v2/v3, markers, cookies, registrations, check times.
Round trips and hostile input at scale: tests/property/."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest

from auditor._proto import bookkeeper_formats_pb2 as pb
from auditor.durability import varint
from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment
from auditor.metadata.codecs import formats as f
from auditor.metadata.errors import CorruptZnodeError

PATH = "/ledgers/00/0000/L0007"
B = ["127.0.0.1:3181", "127.0.0.2:3182", "127.0.0.3:3183", "127.0.0.4:3184"]


def _md(**kw) -> LedgerMetadata:
    base = dict(
        ledger_id=LedgerId(0, 7),
        ensemble_size=3,
        write_quorum=2,
        ack_quorum=2,
        state=LedgerState.CLOSED,
        last_entry_id=19,
        length=1280,
        segments=(Segment(0, tuple(B[:3])), Segment(10, (B[0], B[3], B[2]))),
        digest_type=DigestType.CRC32C,
        password=b"pw",
        creator_token=0,
    )
    base.update(kw)
    return LedgerMetadata(**base)


def test_v3_bytes_match_java_layout() -> None:
    md = _md(custom_metadata=MappingProxyType({"k": b"v"}), ctime=1700000000000, creator_token=42)
    data = f.serialize_ledger_metadata(md)
    assert data.startswith(b"BookieMetadataFormatVersion\t3\n")
    size, start = f._decode_varint32(data, len(b"BookieMetadataFormatVersion\t3\n"), PATH)
    body = data[start:]
    assert size == len(body) == 140 and start - len(f.HEADER_KEY) - 2 == 2
    # Fields in number order, as protobuf-java writes them: 1,2,3,4,5,6,6,7,8,9,10,11,12.
    msg = pb.LedgerMetadataFormat.FromString(body)
    assert [fd.number for fd, _ in msg.ListFields()] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    assert body[:2] == b"\x08\x02" and body[2:4] == b"\x10\x03"


def test_open_ledger_written_like_java() -> None:
    md = _md(state=LedgerState.OPEN, last_entry_id=-1, length=0, segments=(Segment(0, tuple(B[:3])),))
    data = f.serialize_ledger_metadata(md)
    size, start = f._decode_varint32(data, len(f.HEADER_KEY) + 2, PATH)
    msg = pb.LedgerMetadataFormat.FromString(data[start:])
    assert msg.lastEntryId == -1 and msg.length == 0 and msg.HasField("cToken") and not msg.HasField("ctime")
    assert b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01" in data  # -1 as a 10-byte varint


def test_v2_text_read() -> None:
    text = (
        b"BookieMetadataFormatVersion\t2\nquorumSize: 2\nensembleSize: 3\nlength: 1280\nlastEntryId: 19\n"
        b'state: CLOSED\nsegment {\n  ensembleMember: "127.0.0.1:3181"\n  ensembleMember: "127.0.0.2:3182"\n'
        b'  ensembleMember: "127.0.0.3:3183"\n  firstEntryId: 0\n}\ndigestType: HMAC\npassword: "pw"\n'
        b'ackQuorumSize: 2\nctime: 1600000000000\ncustomMetadata {\n  key: "app"\n  value: "x\\001"\n}\n'
    )
    md = f.parse_ledger_metadata(text, 7, PATH, version=4)
    assert md.format_version == 2 and md.version == 4
    assert md.digest_type is DigestType.HMAC and md.password == b"pw" and md.ctime == 1600000000000
    assert dict(md.custom_metadata) == {"app": b"x\x01"} and md.creator_token is None
    assert md.segments == (Segment(0, tuple(B[:3])),) and md.last_entry_id == 19 and md.length == 1280


def test_v2_without_ack_quorum_or_password() -> None:
    text = (
        b"BookieMetadataFormatVersion\t2\nquorumSize: 2\nensembleSize: 2\nlength: 0\nlastEntryId: 5\n"
        b'state: OPEN\nsegment {\n  ensembleMember: "a:1"\n  ensembleMember: "b:2"\n  firstEntryId: 0\n}\n'
    )
    md = f.parse_ledger_metadata(text, 9, PATH)
    assert md.ack_quorum == 2 and md.digest_type is None and md.password is None
    assert md.state is LedgerState.OPEN and md.last_entry_id == -1  # not meaningful while open (as Java)


def test_v1_read() -> None:
    text = b"BookieMetadataFormatVersion\t1\n2\n3\n1280\n0\ta:1\tb:2\tc:3\n10\ta:1\td:4\tc:3\n19\tCLOSED"
    md = f.parse_ledger_metadata(text, 7, PATH)
    assert (md.write_quorum, md.ensemble_size, md.ack_quorum, md.length) == (2, 3, 2, 1280)
    assert md.state is LedgerState.CLOSED and md.last_entry_id == 19 and md.format_version == 1
    assert md.segments[1] == Segment(10, ("a:1", "d:4", "c:3")) and md.digest_type is None
    rec = f.parse_ledger_metadata(b"BookieMetadataFormatVersion\t1\n2\n3\n0\n0\ta:1\tb:2\tc:3\n-102\tCLOSED", 7, PATH)
    assert rec.state is LedgerState.IN_RECOVERY
    opened = f.parse_ledger_metadata(b"BookieMetadataFormatVersion\t1\n2\n3\n0\n0\ta:1\tb:2\tc:3\n", 7, PATH)
    assert opened.state is LedgerState.OPEN


@pytest.mark.parametrize("fmt", [1, 2, 3])
def test_every_format_round_trips(fmt: int) -> None:
    md = _md(format_version=fmt)
    if fmt == 1:
        md = replace(md, digest_type=None, password=None, creator_token=None)
    if fmt == 2:
        md = replace(md, creator_token=None)
    assert f.parse_ledger_metadata(f.serialize_ledger_metadata(md), 7, PATH) == md


@pytest.mark.parametrize(
    "data, problem",
    [
        (b"", "truncated header"),
        (b"BookieMetadataFormatVersion\t4\n", "not supported"),
        (b"BookieMetadataFormatVersion 3\n", "header"),
        (b"BookieMetadataFormatVersion\tx\n", "not a number"),
        (b"BookieMetadataFormatVersion\t3", "end of the metadata format version"),
        (b"BookieMetadataFormatVersion\t3\n\x10\x08\x02", "truncated"),
        (b"BookieMetadataFormatVersion\t3\n\x02\x08\x02", "required"),
        (b"BookieMetadataFormatVersion\t2\nquorumSize: 2\n", "required"),
        (b"BookieMetadataFormatVersion\t2\nbogus: 1\n", "bad text"),
    ],
)
def test_corrupt_is_a_typed_error_naming_the_znode(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptZnodeError) as err:
        f.parse_ledger_metadata(data, 7, PATH)
    assert err.value.path == PATH and problem in err.value.problem


def test_invariants_checked() -> None:
    for bad in (
        _md(segments=()),
        _md(write_quorum=4),
        _md(ack_quorum=3),
        _md(segments=(Segment(0, tuple(B[:2])),)),
        _md(segments=(Segment(5, tuple(B[:3])), Segment(5, tuple(B[:3])))),
        _md(segments=(Segment(0, ("readonly", B[1], B[2])),)),
    ):
        raw = f._to_proto(bad)
        raw.cToken = 0
        body = raw.SerializePartialToString()
        data = f.HEADER_KEY + b"3\n" + varint.encode(len(body)) + body
        with pytest.raises(CorruptZnodeError):
            f.parse_ledger_metadata(data, 7, PATH)


def test_marker_text_matches_java() -> None:
    assert f.serialize_marker(["10.0.0.7:3181"], 1700000000000) == b'replica: "10.0.0.7:3181"\nctime: 1700000000000\n'
    assert f.parse_marker(b'replica: "a:1"\nreplica: "b:2"\n', "/m") == f.UnderreplicatedLedger(("a:1", "b:2"), -1)
    assert f.serialize_marker([], None) == b""
    with pytest.raises(CorruptZnodeError):
        f.parse_marker(b"replica: 5 5", "/m")


def test_merge_replicas_like_java() -> None:
    assert f.merge_replicas(["a", "b"], ["b", "c"]) == (["a", "b", "c"], True)
    assert f.merge_replicas(["a"], ["a"]) == (["a"], False)
    assert f.merge_replicas([], []) == ([], False)


def test_check_ctime_binary() -> None:
    assert f.serialize_check_ctime("checkallledgersctime", 1700000000000).hex() == "0880d095ffbc31"
    for name in f.CTIME_MESSAGES:
        assert f.parse_check_ctime(name, f.serialize_check_ctime(name, 123), "/x") == 123
    with pytest.raises(CorruptZnodeError):
        f.parse_check_ctime("replicascheckctime", b"\xff", "/x")


def test_ur_layout_and_lock_and_vote() -> None:
    assert f.serialize_ur_layout() == b'type: "BASIC"\nversion: 1\n'
    f.check_ur_layout(b'type: "BASIC"\nversion: 1\n', "/U/LAYOUT")
    with pytest.raises(CorruptZnodeError):
        f.check_ur_layout(b'type: "FANCY"\nversion: 1\n', "/U/LAYOUT")
    assert f.parse_lock(b'bookieId: "host-1"\n', "/l") == "host-1"
    assert f.serialize_vote("10.0.0.5:3181") == b'bookieId: "10.0.0.5:3181"\n'
    assert f.parse_vote(f.serialize_vote("x:1"), "/v") == "x:1"


def test_cookie_versions() -> None:
    v5 = b'5\nbookieHost: "127.0.0.1:3181"\njournalDir: "/j"\nledgerDirs: "1\\t/l"\ninstanceId: "0f8e"\n'
    c = f.parse_cookie(v5, "/c")
    assert (c.layout_version, c.bookie_id, c.journal_dirs, c.ledger_dirs, c.instance_id) == (
        5,
        "127.0.0.1:3181",
        "/j",
        "1\t/l",
        "0f8e",
    )
    assert f.Cookie.split_dirs(c.ledger_dirs) == ["/l"]
    assert f.serialize_cookie(c) == v5
    c3 = f.parse_cookie(b"3\nhost:1\n/j\n/l\n", "/c")
    assert (c3.bookie_id, c3.journal_dirs, c3.ledger_dirs) == ("host:1", "/j", "/l")
    with pytest.raises(CorruptZnodeError):
        f.parse_cookie(b"x\n", "/c")
    with pytest.raises(CorruptZnodeError):
        f.parse_cookie(b'4\nbookieHost: "a"\n', "/c")


def test_bookie_service_info() -> None:
    info = f.BookieServiceInfo(
        (
            f.Endpoint("httpserver", "h", 8080, "http"),
            f.Endpoint("bookie", "10.0.0.1", 3181, "bookie-rpc", (), ("tls",)),
        ),
        MappingProxyType({"k": "v"}),
    )
    data = f.serialize_bookie_service_info(info)
    back = f.parse_bookie_service_info(data, "/r")
    assert back == info and back.rpc_endpoint.port == 3181
    assert f.parse_bookie_service_info(b"", "/r") is None
    with pytest.raises(CorruptZnodeError):
        f.parse_bookie_service_info(b"\x32\x05\x0a", "/r")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("127.0.0.1:3181", ("127.0.0.1", 3181)),
        ("bk-1.example:3181", ("bk-1.example", 3181)),
        ("[::1]:3181", ("::1", 3181)),
        ("custom-id", None),
        ("h:0", None),
        ("h:99999", None),
        ("a:b:1", None),
    ],
)
def test_host_port(text: str, expected) -> None:
    assert f.parse_host_port(text) == expected


def test_bookie_id_rule() -> None:
    assert f.is_valid_bookie_id("127.0.0.1:3181") and f.is_valid_bookie_id("auditor-py-h:1")
    assert not f.is_valid_bookie_id("ReadOnly") and not f.is_valid_bookie_id("a b") and not f.is_valid_bookie_id("")


# ------------------------------------------------------------------ what Java refuses (issue 10, defect 4)

V1 = b"BookieMetadataFormatVersion\t1\n"


@pytest.mark.parametrize(
    "body, problem",
    [
        (b"2\n3\n1280\n0\ta:1\tb:2\tc:3\n99999999999999999999990\tCLOSED", "out of range for a Java long"),
        (b"2\n3\n1_280\n0\ta:1\tb:2\tc:3\n19\tCLOSED", "length: '1_280' is not a decimal number"),
        (b"2\n3\n1280\n0\ta:1\tb:2\tc:3\n1_9\tCLOSED", "entry id: '1_9' is not a decimal number"),
        ("2\n3\n1280\n0\ta:1\tb:2\tc:3\n\u0661\u0669\tCLOSED".encode(), "is not a decimal number"),
        ("\u0662\n3\n0\n0\ta:1\tb:2\tc:3\n".encode(), "write quorum"),
        (b" 2\n3\n0\n0\ta:1\tb:2\tc:3\n", "write quorum: ' 2' is not a decimal number"),
        (b"2\n3\n1280\n0\ta:1\tb:2\tc:3\n-7\tCLOSED", "last entry id -7 (below -1)"),
        (b"2\n3\n-5\n0\ta:1\tb:2\tc:3\n4\tCLOSED", "negative length -5"),
        (b"2\n3\n0\n-1\ta:1\tb:2\tc:3\n", "first ensemble starts at entry -1"),
        (b"2\n3\n0\n0\ta:1\tb:2\tc:3\n-4\ta:1\tb:2\tc:3\n", "do not increase"),
        (b"2\n3\n0\n0\ta:1\tb:2\tb:2\n", "bookie b:2 appears twice"),
        (b"2\n3\n0\n0\ta:1\tb:2\n", "has 2 bookies"),
        (b"2\n3\n0\n0 a:1 b:2 c:3\n", "no TAB-separated fields"),
        (b"2\n3\n9223372036854775808\n", "length: '9223372036854775808' is out of range"),
        (b"2147483648\n3\n0\n", "write quorum: '2147483648' is out of range for a Java int"),
        (b"2\n3\n", "lacks the quorum/ensemble/length"),
    ],
)
def test_v1_refuses_what_java_refuses_or_no_writer_writes(body: bytes, problem: str) -> None:
    with pytest.raises(CorruptZnodeError) as err:
        f.parse_ledger_metadata(V1 + body, 7, PATH)
    assert err.value.path == PATH and problem in err.value.problem, err.value.problem


def test_v1_line_breaks_and_trailing_tabs_as_java_reads_them() -> None:
    # Java's readLine splits on \r\n, \r and \n; String.split("\t") drops trailing empty fields.
    md = f.parse_ledger_metadata(V1 + b"2\r\n3\r0\n0\ta:1\tb:2\tc:3\t\t\r\n+4\tCLOSED\r\nignored", 7, PATH)
    assert md.segments == (Segment(0, ("a:1", "b:2", "c:3")),) and md.last_entry_id == 4


def _v3(md: LedgerMetadata) -> bytes:
    raw = f._to_proto(md)
    raw.cToken = 0
    body = raw.SerializePartialToString()
    return f.HEADER_KEY + b"3\n" + varint.encode(len(body)) + body


def _v2(md: LedgerMetadata) -> bytes:
    from google.protobuf import text_format

    return f.HEADER_KEY + b"2\n" + text_format.MessageToString(f._to_proto(md)).encode()


@pytest.mark.parametrize("encode", [_v2, _v3], ids=["v2", "v3"])
@pytest.mark.parametrize(
    "md, problem",
    [
        (_md(length=-1280), "negative length -1280"),
        (_md(last_entry_id=-7), "last entry id -7 (below -1)"),
        (_md(segments=(Segment(0, (B[0], B[1], B[0])),)), f"bookie {B[0]} appears twice"),
        (_md(segments=(Segment(3, tuple(B[:3])),)), "first ensemble starts at entry 3, not 0"),
        (_md(segments=(Segment(0, (B[0] + "\n", B[1], B[2])),)), "invalid bookie id"),
        (_md(ensemble_size=0, write_quorum=0, ack_quorum=0, segments=(Segment(0, ()),)), "ack quorum 0 < 1"),
    ],
)
def test_v2_v3_refuse_what_no_writer_writes(encode, md: LedgerMetadata, problem: str) -> None:
    with pytest.raises(CorruptZnodeError) as err:
        f.parse_ledger_metadata(encode(md), 7, PATH)
    assert err.value.path == PATH and problem in err.value.problem, err.value.problem


def test_a_closed_empty_ledger_is_fine() -> None:
    md = _md(last_entry_id=-1, length=0, segments=(Segment(0, tuple(B[:3])),))
    assert f.parse_ledger_metadata(_v3(md), 7, PATH).last_entry_id == -1


def test_bookie_id_is_matched_whole_like_java() -> None:
    # Java's String.matches() covers the whole id; Python's `$` also matches before a trailing newline.
    for bad in ("127.0.0.1:3181\n", "a:1\n\n", "a\n:1", "\u0661:1", "a:1 "):
        assert not f.is_valid_bookie_id(bad), repr(bad)
    assert f.is_valid_bookie_id("a;b<c>@[x]^_:1")  # ':'..'_' is a range in Java's pattern too


def test_host_port_ascii_whole() -> None:
    assert f.parse_host_port("h:3181\n") is None and f.parse_host_port("h:\u0663\u0661") is None
    assert f.parse_host_port("h h:1") is None


@pytest.mark.parametrize("data", [b"60\n", b" 60", b"6_0", "\u0666\u0660".encode(), b"2147483648", b""])
def test_lost_bookie_recovery_delay_read_like_integer_parse_int(data: bytes) -> None:
    with pytest.raises(CorruptZnodeError) as err:
        f.parse_lost_bookie_recovery_delay(data, "/ledgers/underreplication/lostBookieRecoveryDelay")
    assert err.value.path.endswith("lostBookieRecoveryDelay")
    assert f.parse_lost_bookie_recovery_delay(b"-3", "/x") == -3  # Java takes a sign


def test_cookie_numbers_and_layout_3_round_trip() -> None:
    for bad in (b"1_0\n", "\u0665\n".encode(), b"99999999999\n"):
        with pytest.raises(CorruptZnodeError):
            f.parse_cookie(bad, "/c")
    c3 = f.Cookie(3, "host:1", "/j", "/l")
    assert f.parse_cookie(f.serialize_cookie(c3), "/c") == c3
    assert f.parse_cookie(b"\t 3 \nhost:1\n/j\n/l\n", "/c") == c3  # Java trims the version line


def test_registration_with_a_non_utf8_property_name_is_corrupt() -> None:
    """Found by the fuzz campaign: protobuf decodes map keys lazily and raised UnicodeDecodeError."""
    data = b"\x3a\x05\x0a\x01\xff\x12\x00"  # properties (field 7): {b"\xff": ""}
    with pytest.raises(CorruptZnodeError) as err:
        f.parse_bookie_service_info(data, "/ledgers/available/b:1")
    assert err.value.path == "/ledgers/available/b:1" and "not UTF-8" in err.value.problem


def test_v1_cannot_write_an_ensemble_led_by_a_bookie_named_closed() -> None:
    """Found by the fuzz campaign: `CLOSED` is a valid bookie id, but `0\\tCLOSED` is format 1's close line
    (Java reads it so too), so such metadata must not be written in format 1."""
    md = _md(
        format_version=1,
        digest_type=None,
        password=None,
        creator_token=None,
        ack_quorum=2,
        segments=(Segment(0, ("CLOSED", B[1], B[2])),),
    )
    with pytest.raises(ValueError, match="CLOSED"):
        f.serialize_ledger_metadata(md)
    assert f.serialize_ledger_metadata(replace(md, format_version=3, digest_type=DigestType.CRC32C, password=b"p"))
