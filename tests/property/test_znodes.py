"""The other znode payloads BookKeeper writes: under-replication markers and U/LAYOUT, LAYOUT, cookies,
bookie registrations (BookieServiceInfo), check times, worker locks and votes, lostBookieRecoveryDelay.
Valid content round-trips; anything else is a CorruptZnodeError naming the znode (or sane content)."""

from __future__ import annotations

import re
from types import MappingProxyType

from hypothesis import given
from hypothesis import strategies as st

from auditor.metadata.codecs import formats as f
from auditor.metadata.codecs.layout import LedgerLayout, parse_layout
from auditor.metadata.errors import CorruptZnodeError

from .contract import parse_contract
from .strategies import bookie_ids, int32, int64, mutated, weird_numbers

MARKER = "/ledgers/underreplication/ledgers/0000/0000/0000/0007/urL0000000007"
UR_LAYOUT = "/ledgers/underreplication/LAYOUT"
LAYOUT = "/ledgers/LAYOUT"
COOKIE = "/ledgers/cookies/127.0.0.1:3181"
REG = "/ledgers/available/127.0.0.1:3181"
DELAY = "/ledgers/underreplication/lostBookieRecoveryDelay"
text_no_nul = st.text(max_size=30)


def contract(call, path: str):
    out = parse_contract(call, CorruptZnodeError, names=path)
    if not out.ok:
        assert out.error.path == path
    return out


# ------------------------------------------------------------------ markers, U/LAYOUT, locks, votes, check times


@given(st.lists(text_no_nul, max_size=6), st.none() | int64)
def test_marker_round_trip(replicas: list[str], ctime: int | None) -> None:
    got = f.parse_marker(f.serialize_marker(replicas, ctime), MARKER)
    assert got == f.UnderreplicatedLedger(tuple(replicas), -1 if ctime is None else ctime)


valid_markers = st.builds(f.serialize_marker, st.lists(bookie_ids, max_size=3), st.none() | int64)


@given(st.one_of(st.binary(max_size=200), valid_markers.flatmap(mutated)))
def test_marker_hostile(data: bytes) -> None:
    out = contract(lambda: f.parse_marker(data, MARKER), MARKER)
    if out.ok:
        assert all(isinstance(r, str) for r in out.value.replicas) and isinstance(out.value.ctime, int)


@given(st.one_of(st.just(f.serialize_ur_layout()), st.binary(max_size=100), mutated(f.serialize_ur_layout())))
def test_underreplication_layout(data: bytes) -> None:
    out = contract(lambda: f.check_ur_layout(data, UR_LAYOUT), UR_LAYOUT)
    if out.ok:  # only BASIC version 1 passes, however it is spelled
        from google.protobuf import text_format

        from auditor._proto import bookkeeper_formats_pb2 as pb

        msg = text_format.Parse(data.decode(), pb.LedgerRereplicationLayoutFormat())
        assert (msg.type, msg.version) == ("BASIC", 1)


@given(bookie_ids)
def test_vote_and_lock_round_trip(bookie: str) -> None:
    assert f.parse_vote(f.serialize_vote(bookie), "/v") == bookie
    assert f.parse_lock(f.serialize_vote(bookie), "/l") == bookie  # same text shape: bookieId: "..."


@given(st.binary(max_size=120))
def test_vote_lock_ctime_hostile(data: bytes) -> None:
    contract(lambda: f.parse_vote(data, "/v"), "/v")
    contract(lambda: f.parse_lock(data, "/l"), "/l")
    for name in f.CTIME_MESSAGES:
        contract(lambda: f.parse_check_ctime(name, data, "/c"), "/c")


@given(st.sampled_from(sorted(f.CTIME_MESSAGES)), int64)
def test_check_ctime_round_trip(name: str, ms: int) -> None:
    assert f.parse_check_ctime(name, f.serialize_check_ctime(name, ms), "/c") == ms


@given(int32)
def test_lost_bookie_recovery_delay_round_trip(seconds: int) -> None:
    assert f.parse_lost_bookie_recovery_delay(str(seconds).encode(), DELAY) == seconds


@given(st.one_of(weird_numbers.map(lambda s: s.encode("utf-8", "surrogatepass")), st.binary(max_size=30)))
def test_lost_bookie_recovery_delay_hostile(data: bytes) -> None:
    out = contract(lambda: f.parse_lost_bookie_recovery_delay(data, DELAY), DELAY)
    if out.ok:  # Integer.parseInt would take it too, and mean the same number
        assert re.fullmatch(rb"[+-]?[0-9]+", data) and int(data) == out.value


# ------------------------------------------------------------------ LAYOUT

layout_classes = st.text(st.characters(blacklist_characters=":\n", blacklist_categories=("Cs",)), max_size=60)


@given(st.sampled_from([1, 2]), layout_classes, int32)
def test_layout_round_trip(fmt: int, cls: str, version: int) -> None:
    data = f"{fmt}\n{cls}:{version}".encode()  # LedgerLayout.serialize's shape
    assert parse_layout(data, LAYOUT) == LedgerLayout(fmt, cls, version)


@st.composite
def layout_text(draw: st.DrawFn) -> bytes:
    fmt, ver = draw(weird_numbers), draw(weird_numbers)
    cls = draw(st.sampled_from(["org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory", "", "a:b", "x\ny"]))
    sep = draw(st.sampled_from(["\n", "\r\n", "\n\n", ":"]))
    return f"{fmt}{sep}{cls}:{ver}".encode("utf-8", "surrogatepass")


@given(st.one_of(layout_text(), st.binary(max_size=120)))
def test_layout_hostile(data: bytes) -> None:
    out = contract(lambda: parse_layout(data, LAYOUT), LAYOUT)
    if out.ok:
        assert out.value.format_version in (1, 2) and -(2**31) <= out.value.manager_version < 2**31


# ------------------------------------------------------------------ cookies

line_text = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=20)


@st.composite
def cookies(draw: st.DrawFn) -> f.Cookie:
    if draw(st.booleans()):
        return f.Cookie(3, draw(line_text), draw(line_text), draw(line_text))
    opt = st.none() | st.text(min_size=1, max_size=20)
    return f.Cookie(
        draw(st.integers(4, 5)), draw(text_no_nul), draw(text_no_nul), draw(text_no_nul), draw(opt), draw(opt)
    )


@given(cookies())
def test_cookie_round_trip(cookie: f.Cookie) -> None:
    assert f.parse_cookie(f.serialize_cookie(cookie), COOKIE) == cookie


@given(
    st.one_of(
        st.binary(max_size=200),
        cookies().flatmap(lambda c: mutated(f.serialize_cookie(c))),
        st.tuples(weird_numbers, text_no_nul).map(lambda t: f"{t[0]}\n{t[1]}".encode("utf-8", "surrogatepass")),
    )
)
def test_cookie_hostile(data: bytes) -> None:
    out = contract(lambda: f.parse_cookie(data, COOKIE), COOKIE)
    if out.ok:
        assert out.value.layout_version >= 3


# ------------------------------------------------------------------ registrations (BookieServiceInfo)

endpoints = st.builds(
    f.Endpoint,
    text_no_nul,
    text_no_nul,
    int32,
    st.sampled_from(["bookie-rpc", "http", "x"]),
    st.lists(text_no_nul, max_size=2).map(tuple),
    st.lists(text_no_nul, max_size=2).map(tuple),
)
service_infos = st.builds(
    f.BookieServiceInfo,
    st.lists(endpoints, max_size=3).map(tuple),
    st.dictionaries(text_no_nul, text_no_nul, max_size=3).map(MappingProxyType),
)


@given(service_infos)
def test_registration_round_trip(info: f.BookieServiceInfo) -> None:
    data = f.serialize_bookie_service_info(info)
    assert f.parse_bookie_service_info(data, REG) == (info if data else None)


@given(st.one_of(st.binary(max_size=200), service_infos.flatmap(lambda i: mutated(f.serialize_bookie_service_info(i)))))
def test_registration_hostile(data: bytes) -> None:
    out = contract(lambda: f.parse_bookie_service_info(data, REG), REG)
    if out.ok and out.value is not None:
        for e in out.value.endpoints:
            assert isinstance(e.host, str) and -(2**31) <= e.port < 2**31


# ------------------------------------------------------------------ bookie ids and host:port


@given(st.one_of(bookie_ids, st.text(max_size=30), bookie_ids.map(lambda b: b + "\n")))
def test_bookie_id_rule_is_javas(text: str) -> None:
    java = re.fullmatch(r"[a-zA-Z0-9:-_.\-]+", text, flags=re.ASCII) is not None and text.lower() != "readonly"
    assert f.is_valid_bookie_id(text) is java
    hp = f.parse_host_port(text)
    if hp is not None:
        host, port = hp
        # Java reads the port with Integer.parseInt, so `0:01` is port 1 (found by the 100,000-input run).
        assert 0 < port < 65536 and int(text.rsplit(":", 1)[1]) == port
        assert host and not any(c.isspace() for c in host)
