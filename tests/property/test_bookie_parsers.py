"""Property tests for the parsers of what bookies send: entry lists, v3 frames and replies, stored entries
and LAC bodies, and the open-ledger end decided from them.

Each target keeps the contract in tests/property/contract.py: valid input round-trips, invalid input
raises the module's own error (EntryListError, FrameError/ProtocolError, EntryFormatError) or becomes a
CORRUPT verdict, nothing else escapes, and one input costs bounded memory and time. The pure parsers
raise without a bookie id; the client adds it (tests/unit/bookie/test_client_scripted_peer.py checks that).
`make test` runs the `ci` profile; `make fuzz` runs >= 100,000 inputs per target.
"""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.bookie import protocol as P
from auditor.durability.entry import (
    EntryFormatError,
    Verdict,
    build_entry,
    compute_digest,
    mac_key,
    parse_header,
    verify_entry,
    verify_lac_body,
)
from auditor.durability.entrylist import (
    MAX_ENTRY_ID,
    EntryList,
    EntryListError,
    answer_now,
    answer_steps,
    encode_entry_ids,
)
from auditor.durability.ids import LedgerId
from auditor.durability.ledgerend import Trust, decide_end, judge_read_lac
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment
from auditor.durability.ranges import RangeSet
from auditor.durability.steps import run_steps
from tests.property.contract import parse_contract
from tests.unit.durability.test_entrylist import periodic_lists

SMALL = 16 * 1024 * 1024  # bytes: no single input may cost more (the 88-byte answer once cost 1.4 GiB)
CHECKING = (DigestType.CRC32, DigestType.CRC32C, DigestType.HMAC)
INT64 = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, 1, 2, -1, 2**31, 2**62, 2**63 - 1]), st.integers(-3, 300)
)
INT32 = st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, 1, 2, -1, 2**31 - 1]), st.integers(-3, 40))


def flip(data: bytes, bit: int) -> bytes:
    b = bytearray(data)
    b[bit // 8] ^= 0x80 >> (bit % 8)
    return bytes(b)


@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    """A valid encoding with bits flipped, bytes cut off or junk appended."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(0, 3))):
        if data:
            data[draw(st.integers(0, len(data) - 1))] ^= 1 << draw(st.integers(0, 7))
    if data and draw(st.booleans()):
        del data[draw(st.integers(0, len(data))) :]
    if draw(st.booleans()):
        data += draw(st.binary(max_size=40))
    return bytes(data)


# ----- entry lists ---------------------------------------------------------------------------------
@st.composite
def hostile_entry_lists(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["records", "bytes", "mutated"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "mutated":
        ids = draw(st.lists(st.integers(0, 200), max_size=40))
        return draw(mutated(encode_entry_ids(ids)))
    recs = draw(st.lists(st.tuples(INT64, INT64, INT32, INT32), max_size=6))
    version = draw(st.sampled_from([0, 0, 0, 1, -1]))
    count = len(recs) if draw(st.booleans()) else draw(st.integers(-2, 8))
    body = struct.pack(">ii", version, count) + bytes(56)
    body += b"".join(struct.pack(">qqii", *r) for r in recs)
    return body


@given(st.lists(st.integers(0, 10**6), max_size=80), periodic_lists(), st.integers(-1, 120))
def test_entry_list_round_trips(ids: list[int], records: list[tuple[int, int, int, int]], end: int) -> None:
    data = encode_entry_ids(ids)
    el = EntryList.decode(data)
    assert el.encode() == data and set(el) == set(ids) and el.total == len(set(ids))
    assert el.to_rangeset() == RangeSet.from_ids(ids)
    periodic = EntryList(records)
    again = EntryList.decode(periodic.encode())
    assert again == periodic
    plain = set(periodic)
    assert set(run_steps(answer_steps(periodic, end))) == (
        {e for e in plain if e <= end} if periodic.has_periodic_groups else plain
    )
    assert set(periodic.missing(RangeSet.span(0, end))) == set(range(end + 1)) - plain


@given(hostile_entry_lists(), st.one_of(st.integers(-1, 300), st.just(MAX_ENTRY_ID), st.integers(0, 2**62)))
def test_entry_list_hostile_bytes_are_rejected_or_bounded(data: bytes, end: int) -> None:
    decoded = parse_contract(lambda: EntryList.decode(data), EntryListError, max_bytes=SMALL)
    if not decoded.ok:
        return
    el = decoded.value
    assert el.encode() == data[:8] + bytes(56) + data[64:]  # accepted bytes are exactly the records (reserved aside)
    converted = parse_contract(lambda: run_steps(answer_steps(el, end)), EntryListError, max_bytes=SMALL)
    if converted.ok and el.total <= 5000:
        plain = set(el)
        got = set(converted.value)
        assert got == ({e for e in plain if e <= end} if el.has_periodic_groups else plain)


@given(
    st.one_of(
        hostile_entry_lists(),
        st.lists(st.integers(0, 10**6), max_size=60).map(encode_entry_ids),
        periodic_lists().map(lambda records: EntryList(records).encode()),
    ),
    st.one_of(st.integers(-1, 300), st.just(MAX_ENTRY_ID)),
)
def test_the_one_pass_decode_is_the_stepwise_decode(data: bytes, end: int) -> None:
    """`EntryList.decode` takes lists as real bookies send them in one pass: the same records, totals and
    answers as the stepwise decode, and the same error for everything it leaves to it."""
    try:
        slow = run_steps(EntryList.decode_steps(data))
    except EntryListError as exc:
        with pytest.raises(EntryListError, match=re.escape(str(exc))):
            EntryList.decode(data)
        return
    fast = EntryList.decode(data)
    assert fast == slow and fast.total == slow.total and fast.has_periodic_groups == slow.has_periodic_groups
    try:
        want = run_steps(answer_steps(slow, end))
    except EntryListError:
        assert answer_now(fast, end) is None
        return
    assert run_steps(answer_steps(fast, end)) == want
    now = answer_now(fast, end)
    assert now is None or now == want


# ----- v3 frames -----------------------------------------------------------------------------------
@given(
    st.lists(st.binary(max_size=300), max_size=8),
    st.lists(st.integers(1, 64), max_size=30),
    st.integers(5, 400),
    st.integers(0, 7),
    st.sampled_from([-1, 0, 1, None]),
)
def test_frames_round_trip_in_any_chunks_and_respect_the_limit(
    bodies: list[bytes], cuts: list[int], limit: int, pick: int, edge: int | None
) -> None:
    if bodies and edge is not None:  # right at the limit: a frame of exactly the limit passes, one more byte fails
        limit = max(5, len(bodies[pick % len(bodies)]) + 4 + edge)
    stream = b"".join(P.frame(b) for b in bodies)
    decoder = P.FrameDecoder(limit)
    got: list[bytes] = []
    pos = 0
    sizes = cuts + [len(stream)]
    try:
        for size in sizes:
            got += decoder.feed(stream[pos : pos + size])
            pos += size
            if pos >= len(stream):
                break
    except P.FrameError as exc:
        first_too_long = next((i for i, b in enumerate(bodies) if len(b) + 4 > limit), None)
        assert first_too_long is not None, exc  # only an over-limit frame may fail
        assert len(got) <= first_too_long and got == bodies[: len(got)]
        return
    assert got == bodies
    assert all(len(b) + 4 <= limit for b in bodies)
    assert decoder.buffered == 0


@given(st.binary(max_size=600), st.lists(st.integers(1, 50), max_size=20))
def test_frame_decoder_on_hostile_streams(data: bytes, cuts: list[int]) -> None:
    decoder = P.FrameDecoder(256)

    def feed_all() -> list[bytes]:
        out: list[bytes] = []
        pos = 0
        for size in cuts + [len(data)]:
            out += decoder.feed(data[pos : pos + size])
            pos += size
        return out

    outcome = parse_contract(feed_all, P.FrameError, max_bytes=SMALL)
    if outcome.ok:
        assert all(len(b) <= 252 for b in outcome.value)
    assert decoder.buffered < 256  # never holds more than one frame's worth


# ----- v3 replies ----------------------------------------------------------------------------------
STATUSES = [s for s in P.Status]
OPS = list(P.SAFE_OPERATIONS)


@st.composite
def responses(draw: st.DrawFn) -> tuple[pb.Response, P.Op, P.Status]:
    op = draw(st.sampled_from(OPS))
    status = draw(st.sampled_from(STATUSES))
    resp = pb.Response()
    resp.header.version = pb.VERSION_THREE
    resp.header.operation = int(op)
    resp.header.txnId = draw(st.integers(0, 2**64 - 1))
    resp.status = status
    sub = getattr(resp, P._RESPONSE_FIELD[op])
    lid = draw(st.integers(0, 2**63 - 1))
    if op is P.Op.READ_ENTRY:
        sub.status, sub.ledgerId, sub.entryId = status, lid, draw(st.integers(-1, 2**63 - 1))
        if draw(st.booleans()):
            sub.body = draw(st.binary(max_size=100))
    elif op is P.Op.READ_LAC:
        sub.status, sub.ledgerId = status, lid
        if draw(st.booleans()):
            sub.lastEntryBody = draw(st.binary(max_size=80))
    elif op is P.Op.GET_LIST_OF_ENTRIES_OF_LEDGER:
        sub.status, sub.ledgerId = status, lid
        sub.availabilityOfEntriesOfLedger = encode_entry_ids(draw(st.lists(st.integers(0, 100), max_size=10)))
    elif op is P.Op.GET_BOOKIE_INFO:
        sub.status = status
        sub.freeDiskSpace = draw(st.integers(0, 2**63 - 1))
    elif op is P.Op.START_TLS:
        sub.SetInParent()  # an empty message: present, no fields
    else:
        sub.authPluginName, sub.payload = draw(st.text(max_size=20)), draw(st.binary(max_size=20))
    return resp, op, status


@given(responses())
def test_replies_round_trip(case: tuple[pb.Response, P.Op, P.Status]) -> None:
    resp, op, status = case
    reply = P.decode_response(resp.SerializeToString())
    assert (reply.txn_id, reply.op) == (resp.header.txnId, op)
    assert reply.status is status and reply.problem is None
    assert reply.sub is not None


@st.composite
def hostile_replies(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    resp, _, _ = draw(responses())
    return draw(mutated(resp.SerializePartialToString()))


@given(hostile_replies())
def test_hostile_replies_are_protocol_errors_or_untrusted_replies(body: bytes) -> None:
    outcome = parse_contract(lambda: P.decode_response(body), P.ProtocolError, max_bytes=SMALL)
    if outcome.ok:
        reply = outcome.value
        assert isinstance(reply.op, P.Op)
        assert reply.status is None or isinstance(reply.status, P.Status)
        if reply.status is None:
            assert reply.problem  # an untrusted reply always says why


# ----- stored entries and LAC bodies --------------------------------------------------------------------
ids64 = st.integers(0, 2**63 - 1)


@st.composite
def built_entries(draw: st.DrawFn) -> tuple[bytes, LedgerId, int, DigestType, bytes]:
    digest = draw(st.sampled_from(list(DigestType)))
    version = draw(st.sampled_from([1, 2]))
    lid = LedgerId(draw(ids64) if version == 2 else 0, draw(ids64))
    entry = draw(st.integers(0, 2**63 - 1))
    password = draw(st.binary(max_size=12))
    body = build_entry(
        lid,
        entry,
        draw(st.integers(-1, 2**63 - 1)),
        draw(st.integers(0, 2**63 - 1)),
        draw(st.binary(max_size=64)),
        digest,
        password,
        format_version=version,
    )
    return body, lid, entry, digest, password


@given(built_entries(), st.data())
def test_built_entries_verify_and_any_bit_flip_is_caught(
    case: tuple[bytes, LedgerId, int, DigestType, bytes], data: st.DataObject
) -> None:
    body, lid, entry, digest, password = case
    ok = verify_entry(body, ledger_id=lid, entry_id=entry, digest_type=digest, password=password)
    assert ok.verdict is Verdict.OK, ok.detail
    bit = data.draw(st.integers(0, len(body) * 8 - 1))
    bad = verify_entry(flip(body, bit), ledger_id=lid, entry_id=entry, digest_type=digest, password=password)
    # the ids the reader compares: v1 ledger + entry (bytes 0-15); v2 scope + ledger + entry (bytes 1-24)
    ids = range(1, 25) if body[0] & 0x80 else range(16)
    if digest in CHECKING or bit // 8 in ids:
        assert bad.verdict is Verdict.CORRUPT, (digest, bit, bad.detail)
    else:  # DUMMY: a flags, LAC, length or payload bit cannot be detected, but it never raises
        assert bad.verdict in (Verdict.OK, Verdict.CORRUPT)


@given(st.binary(max_size=120), st.sampled_from([*DigestType, None]), ids64, st.integers(-1, 50))
def test_entry_bytes_never_raise_beyond_the_header_error(
    data: bytes, digest: DigestType | None, lid: int, entry: int
) -> None:
    parse_contract(lambda: parse_header(data), EntryFormatError, max_bytes=SMALL)
    v = parse_contract(
        lambda: verify_entry(data, ledger_id=lid, entry_id=entry, digest_type=digest, password=b"pw"),
        (),
        max_bytes=SMALL,
    ).value
    assert v.verdict in (Verdict.OK, Verdict.CORRUPT, Verdict.UNVERIFIABLE)
    lac = parse_contract(
        lambda: verify_lac_body(data, ledger_id=lid, digest_type=digest, password=b"pw"), (), max_bytes=SMALL
    ).value
    assert lac.verdict in (Verdict.OK, Verdict.CORRUPT, Verdict.UNVERIFIABLE)


def lac_body(lid: int, lac: int, digest: DigestType, password: bytes) -> bytes:
    head = struct.pack(">qq", lid, lac)
    return head + compute_digest(digest, head, b"", mac_key(password) if digest is DigestType.HMAC else None)


@given(ids64, st.integers(-1, 2**63 - 1), st.sampled_from(list(DigestType)), st.binary(max_size=12), st.data())
def test_lac_bodies_verify_and_any_bit_flip_is_caught(
    lid: int, lac: int, digest: DigestType, password: bytes, data: st.DataObject
) -> None:
    body = lac_body(lid, lac, digest, password)
    ok = verify_lac_body(body, ledger_id=lid, digest_type=digest, password=password)
    assert ok.verdict is Verdict.OK and ok.lac == lac
    bit = data.draw(st.integers(0, len(body) * 8 - 1))
    bad = verify_lac_body(flip(body, bit), ledger_id=lid, digest_type=digest, password=password)
    if digest in CHECKING or bit < 64:
        assert bad.verdict is Verdict.CORRUPT, (digest, bit)
    else:
        assert bad.verdict is Verdict.OK and bad.lac != lac  # DUMMY: a LAC bit is undetectable


# ----- the open-ledger end ----------------------------------------------------------------------------
@st.composite
def hostile_read_lac(draw: st.DrawFn) -> tuple[LedgerMetadata, dict[str, tuple[bytes | None, bytes | None]], int, str]:
    e = draw(st.integers(1, 5))
    wq = draw(st.integers(1, e))
    digest = draw(st.sampled_from([*DigestType, None]))
    ens = tuple(f"10.0.0.{i}:3181" for i in range(e))
    md = LedgerMetadata(
        LedgerId(0, draw(st.integers(0, 2**40))),
        e,
        wq,
        min(wq, 2),
        LedgerState.OPEN,
        -1,
        0,
        (Segment(0, ens),),
        digest_type=digest,
        password=b"pw",
    )
    written = draw(st.integers(0, 40))
    answers: dict[str, tuple[bytes | None, bytes | None]] = {}
    honest_lacs = []
    for i, b in enumerate(ens):
        held = [x for x in range(written) if (i - x) % e < wq]
        if held:
            lac = held[-1] - 1 - draw(st.integers(0, 2))  # a LAC trailing the entry, as writers piggyback
            lac = max(-1, lac)
            honest_lacs.append(lac)
            answers[b] = (
                None,
                build_entry(md.ledger_id, held[-1], lac, written, b"x", digest or DigestType.CRC32C, b"pw"),
            )
    victim = draw(st.sampled_from(ens))
    kind = draw(st.sampled_from(["bytes", "mutated", "lac_body", "claim"]))
    _, last = answers.get(victim, (None, None))
    if kind == "bytes":
        answers[victim] = (draw(st.one_of(st.none(), st.binary(max_size=40))), draw(st.binary(max_size=80)))
    elif kind == "mutated" and last is not None:
        answers[victim] = (None, draw(mutated(last)))
    elif kind == "lac_body":
        forged = struct.pack(">qq", md.ledger_id.ledger, draw(INT64)) + draw(st.binary(max_size=24))
        answers[victim] = (forged, last)
    else:  # a consistent-looking claim of a far entry, with a real digest only when there is none to check
        far = draw(st.integers(written, 2**62))
        answers[victim] = (
            None,
            build_entry(md.ledger_id, far, far - 1, 0, b"x", DigestType.DUMMY, b"")
            if digest in (DigestType.DUMMY, None)
            else draw(mutated(last or b"")),
        )
    honest = max(honest_lacs, default=-1)
    return md, answers, honest, victim


@given(hostile_read_lac())
def test_one_hostile_bookie_never_raises_the_open_ledger_end(
    case: tuple[LedgerMetadata, dict[str, tuple[bytes | None, bytes | None]], int, str],
) -> None:
    md, answers, honest, victim = case

    def decide() -> object:
        evidence = [ev for b, (lac, last) in answers.items() for ev in judge_read_lac(b, lac, last, md)]
        return decide_end(md, evidence, True)

    got = parse_contract(decide, (), max_bytes=SMALL).value
    assume(got is not None)
    assert got.end is not None and got.end <= max(honest, -1), (got, honest)
    assert all(r.bookie == victim for r in got.rejected)
    assert all(r.trust is Trust.CORRUPT for r in got.rejected)


@given(
    st.integers(0, P.MAX_TXN_ID),
    st.integers(0, P.MAX_LONG),
    st.integers(-1, P.MAX_LONG),
)
def test_pre_gated_frames_are_the_gated_encoding(txn: int, ledger: int, entry: int) -> None:
    """The scan's pre-encoded GET_LIST and READ_ENTRY frames are byte for byte what the gate passes."""
    assert P.entry_list_frame(txn, ledger).frame == P.encode_request(P.entry_list_request(txn, ledger))
    assert P.read_entry_frame(txn, ledger, entry).frame == P.encode_request(P.read_entry_request(txn, ledger, entry))


@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=P.MAX_LONG + 1)), st.integers(-(2**70), 2**70))
def test_pre_gated_frames_refuse_what_the_builders_refuse(bad_ledger: int, txn: int) -> None:
    with pytest.raises(ValueError):
        P.entry_list_frame(0, bad_ledger)
    with pytest.raises(ValueError):
        P.read_entry_frame(0, bad_ledger, 0)
    if not 0 <= txn <= P.MAX_TXN_ID:
        with pytest.raises(ValueError):
            P.entry_list_frame(txn, 1)
