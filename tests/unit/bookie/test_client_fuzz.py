"""Fuzz: a scripted peer answers the bookie client with random bytes, random well-framed bodies and
plausible but wrong responses; every result is a valid outcome and nothing escapes."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.bookie import (
    BookieClient,
    BookieClientConfig,
    Op,
    Outcome,
    Status,
)
from auditor.bookie import protocol as P
from auditor.durability.entrylist import encode_entry_ids
from tests.unit.bookie.scripted_peer import Peer, _varint


# ----- fuzz: a peer that answers with random bytes --------------------------------------------------
async def _fuzz_once(payload: bytes, chunks: int, then_close: bool) -> list[Any]:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        step = max(1, len(payload) // chunks)
        for i in range(0, len(payload), step):
            writer.write(payload[i : i + step])
            await writer.drain()
        if then_close:
            writer.close()

    peer = await Peer(handler).start()
    cfg = BookieClientConfig(
        request_timeout=0.3,
        connect_timeout=0.5,
        backoff_initial=0.01,
        backoff_max=0.02,
        liveness_timeout=0.1,
        max_frame_size=4096,
    )
    c = BookieClient("fuzz-bookie", peer.address, cfg)
    try:
        async with asyncio.timeout(5):  # a hang is a failure
            return list(
                await asyncio.gather(c.read_entry(1, 0), c.get_entry_list(1), c.read_lac(1), c.get_bookie_info())
            )
    finally:
        await c.close()
        await peer.stop()


def _check_fuzz_results(results: list[Any]) -> None:
    for r in results:
        # Random bytes can never make a bookie "answer": anything but UNKNOWN would be a bug here,
        # except an astronomically unlikely valid frame (then ABSENT/PRESENT must carry a status).
        assert r.outcome in (Outcome.UNKNOWN, Outcome.ABSENT, Outcome.PRESENT)
        if r.outcome is not Outcome.UNKNOWN:
            assert r.status is not None
        else:
            assert r.error


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600), st.integers(1, 8), st.booleans())
def test_fuzz_random_bytes(payload: bytes, chunks: int, then_close: bool) -> None:
    _check_fuzz_results(asyncio.run(_fuzz_once(payload, chunks, then_close)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=80), max_size=6), st.integers(1, 4), st.booleans())
def test_fuzz_well_framed_random_bodies(bodies: list[bytes], chunks: int, then_close: bool) -> None:
    _check_fuzz_results(asyncio.run(_fuzz_once(b"".join(P.frame(b) for b in bodies), chunks, then_close)))


@st.composite
def plausible_responses(draw: st.DrawFn) -> bytes:
    """Structurally valid Responses with random txn ids, operations, statuses and sub-fields."""
    resp = pb.Response()
    resp.header.version = draw(st.sampled_from([1, 2, 3, 3, 3]))
    resp.header.operation = draw(st.sampled_from(list(Op)))
    resp.header.txnId = draw(st.integers(0, 8))
    if draw(st.booleans()):
        resp.status = draw(st.sampled_from(list(Status)))
    which = draw(
        st.sampled_from(
            ["readResponse", "readLacResponse", "getBookieInfoResponse", "getListOfEntriesOfLedgerResponse", None]
        )
    )
    data = resp.SerializePartialToString()
    if which:
        sub = getattr(pb.Response(), which).__class__()
        if draw(st.booleans()):
            sub.status = draw(st.sampled_from(list(Status)))
        for name in ("ledgerId", "entryId"):
            if name in sub.DESCRIPTOR.fields_by_name and draw(st.booleans()):
                setattr(sub, name, draw(st.integers(-1, 3)))
        if which == "getListOfEntriesOfLedgerResponse" and draw(st.booleans()):
            sub.availabilityOfEntriesOfLedger = draw(
                st.one_of(st.binary(max_size=100), st.just(encode_entry_ids([0, 1, 5])))
            )
        if which == "readResponse" and draw(st.booleans()):
            sub.body = draw(st.binary(max_size=50))
        field = pb.Response.DESCRIPTOR.fields_by_name[which].number
        raw = sub.SerializePartialToString()
        data += _varint(field << 3 | 2) + _varint(len(raw)) + raw
    return P.frame(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(plausible_responses(), min_size=1, max_size=6), st.booleans())
def test_fuzz_plausible_but_wrong_responses(frames: list[bytes], then_close: bool) -> None:
    results = asyncio.run(_fuzz_once(b"".join(frames), 1, then_close))
    _check_fuzz_results(results)
    for r in results:
        if r.outcome is Outcome.ABSENT:
            assert r.status in (Status.ENOENTRY, Status.ENOLEDGER)
