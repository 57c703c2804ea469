"""The bookie client's connection handling against a scripted peer on loopback (scripted_peer.py):
outcomes, pipelining and the in-flight window, timeouts and late replies, hostile replies, reconnects,
silent and trickling peers, the entry-list capability, the same scenarios on uvloop, and its logging
and TLS wording. What real bookies do is checked in tests/realcluster/bookie/test_bookie_client.py."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.bookie import (
    BookieClient,
    BookieClientConfig,
    Capability,
    Op,
    Outcome,
    Status,
)
from auditor.bookie import protocol as P
from auditor.durability.entrylist import STEP, EntryList, encode_entry_ids, encode_ranges
from auditor.durability.ids import LedgerId
from auditor.durability.ranges import RangeSet
from tests.heartbeat import Heartbeat
from tests.unit.bookie.scripted_peer import (
    Peer,
    _client,
    _echo_ids,
    _eventually,
    _noop,
    _req,
    _response,
    _until,
    answer_ok,
    send,
)


async def test_basic_operations_and_outcomes() -> None:
    peer = await Peer(answer_ok).start()
    async with await _client(peer) as c:
        r = await c.read_entry(1, 3)
        assert r.outcome is Outcome.PRESENT and r.body == struct.pack(">q", 3) and r.max_lac == 9
        r = await c.read_entry(1, 10)
        assert r.outcome is Outcome.ABSENT and r.status is Status.ENOENTRY and not r.no_such_ledger
        r = await c.read_entry(LedgerId(0, 2), 0)
        assert r.outcome is Outcome.ABSENT and r.no_such_ledger
        info = await c.get_bookie_info()
        assert info.present and (info.total_disk_capacity, info.free_disk_space) == (100, 40)
        assert (await c.ping()).present
        lst = await c.get_entry_list(1)
        assert lst.present and lst.entries is not None and list(lst.entries) == list(range(10))
        assert c.entry_list_support is Capability.SUPPORTED
        lst = await c.get_entry_list(5)
        assert lst.absent and lst.entries is not None and lst.entries.total == 0
        lac = await c.read_lac(1)
        assert lac.absent and not lac.conclusive
        auth = await c.auth_probe()
        assert auth.present and auth.plugin_name == "AuthDisabledPlugin"
        with pytest.raises(ValueError):
            await c.read_entry(LedgerId(1, 1), 0)
    assert peer.connections == 1
    assert all(r.header.version == 3 and r.header.priority == 0 for r in peer.requests)
    await peer.stop()


@pytest.mark.parametrize(
    "status",
    [Status.EIO, Status.ETOOMANYREQUESTS, Status.EUNKNOWNLEDGERSTATE, Status.EUA, Status.EBADREQ, Status.EBADVERSION],
)
async def test_error_statuses_are_unknown(status: Status) -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        send(writer, _response(req, status, **_echo_ids(req)))

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        for r in (await c.read_entry(1, 0), await c.get_entry_list(1), await c.read_lac(1), await c.get_bookie_info()):
            assert r.outcome is Outcome.UNKNOWN and r.status is status and status.name in (r.error or "")
    await peer.stop()


async def test_odd_but_wellformed_replies_are_unknown() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        txn = req.header.txnId
        if txn == 1:  # EOK read without a body
            send(writer, _response(req, Status.EOK, **_echo_ids(req)))
        elif txn == 2:  # answer about another entry
            send(writer, _response(req, Status.ENOENTRY, ledgerId=1, entryId=99))
        elif txn == 3:  # unknown status value 508 at top level
            send(writer, bytes.fromhex("0a0608031001") + b"\x18\x03" + bytes.fromhex("10fc03"))
        elif txn == 4:  # EOK with no sub-response
            resp = pb.Response()
            resp.header.CopyFrom(req.header)
            resp.status = Status.EOK
            send(writer, resp)
        elif txn == 5:  # a list that is not a valid encoding
            send(writer, _response(req, Status.EOK, availabilityOfEntriesOfLedger=b"\x00" * 10, **_echo_ids(req)))
        elif txn == 6:  # READ_LAC: EIO, but a body came back: the body counts
            send(writer, _response(req, Status.EIO, lastEntryBody=b"x" * 40, **_echo_ids(req)))

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        r = await c.read_entry(1, 0)
        assert r.unknown and "without a body" in (r.error or "")
        r = await c.read_entry(1, 0)
        assert r.unknown and "entry 99" in (r.error or "")
        r = await c.read_entry(1, 0)
        assert r.unknown and "508" in (r.error or "")
        r = await c.read_entry(1, 0)
        assert r.unknown
        lst = await c.get_entry_list(1)
        assert lst.unknown and "invalid entry list" in (lst.error or "")
        lac = await c.read_lac(1)
        assert lac.present and lac.status is Status.EIO and lac.last_entry_body == b"x" * 40
        assert c.connected  # none of these is a protocol violation
    await peer.stop()


async def test_pipelined_out_of_order_replies_are_matched() -> None:
    held: list[pb.Request] = []

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        held.append(req)
        if len(held) == 50:  # answer all at once, newest first
            for r in reversed(held):
                e = r.readRequest.entryId
                send(writer, _response(r, Status.EOK, body=struct.pack(">q", e), **_echo_ids(r)))
            await writer.drain()

    peer = await Peer(handler).start()
    async with await _client(peer, max_in_flight=64) as c:
        results = await c.read_entries(1, list(range(50)))
        assert [struct.unpack(">q", r.body or b"")[0] for r in results] == list(range(50))
        assert all(r.present for r in results)
        assert c.stats.sent == 50 and c.stats.replies == 50
    assert peer.connections == 1
    txns = [r.header.txnId for r in peer.requests]
    assert len(set(txns)) == 50
    await peer.stop()


async def test_in_flight_window_is_bounded() -> None:
    outstanding = 0
    peak = 0

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        nonlocal outstanding, peak
        outstanding += 1
        peak = max(peak, outstanding)

        async def later() -> None:
            nonlocal outstanding
            await asyncio.sleep(0.01)
            outstanding -= 1
            send(writer, _response(req, Status.EOK, body=b"b", **_echo_ids(req)))

        asyncio.ensure_future(later())

    peer = await Peer(handler).start()
    async with await _client(peer, max_in_flight=4) as c:
        results = await c.read_entries(1, list(range(40)))
        assert all(r.present for r in results)
    assert peak == 4
    await peer.stop()


async def test_requests_sent_in_one_loop_iteration_go_out_in_one_write_with_no_task_each() -> None:
    peer = await Peer(answer_ok).start()
    async with await _client(peer, max_in_flight=8) as c:
        assert (await c.ping()).present  # connected
        writes: list[int] = []
        conn = c._conn
        assert conn is not None

        class CountingTransport:  # a proxy: uvloop's transports do not let `write` be replaced
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def write(self, data: bytes) -> None:
                writes.append(len(data))
                self.inner.write(data)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.inner, name)

        conn.transport = CountingTransport(conn.transport)  # type: ignore[assignment]
        # A client that knows the bookie lists entries (until it knows, one probe goes first and the others
        # wait for it: tests/unit/bookie/test_capability_probe.py).
        c.entry_list_support = Capability.SUPPORTED
        tasks_before = len(asyncio.all_tasks())
        sent = [c.send_get_entry_list(1) for _ in range(20)]
        assert len(asyncio.all_tasks()) == tasks_before  # queued, no task per request
        results = [await s.result() for s in sent]
        assert all(r.present and r.entries is not None for r in results)
        # 20 requests through a window of 8: a batch of 8 at once, then what each iteration's replies freed.
        assert sum(writes) == 20 * len(P.encode_request(P.entry_list_request(1, 1)))
        assert writes[0] == 8 * len(P.encode_request(P.entry_list_request(1, 1)))
        assert len(writes) < 20
    await peer.stop()


async def test_a_withdrawn_request_frees_its_slot_and_its_late_reply_is_dropped_quietly() -> None:
    held: list[tuple[pb.Request, asyncio.StreamWriter]] = []

    async def hold_first(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if len(peer.requests) == 1:
            held.append((req, writer))  # answered only after the client gave up on it
            return
        await answer_ok(peer, req, writer)

    peer = await Peer(hold_first).start()
    async with await _client(peer, max_in_flight=1) as c:
        first = c.send_get_entry_list(1)
        second = c.send_get_entry_list(1)
        await asyncio.sleep(0.05)
        assert len(peer.requests) == 1  # the window of one is taken by the first
        first.cancel()
        assert (await second.result()).present  # its slot went to the second
        req, writer = held[0]
        send(
            writer,
            _response(req, Status.EOK, availabilityOfEntriesOfLedger=encode_entry_ids(range(10)), **_echo_ids(req)),
        )
        assert (await c.ping()).present  # the late reply did not close the connection
        assert c.stats.late_replies == 1 and c.stats.protocol_errors == 0
    await peer.stop()


async def test_timeout_is_unknown_and_late_reply_is_dropped() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if req.header.txnId == 1:

            async def late() -> None:
                await asyncio.sleep(0.3)
                send(writer, _response(req, Status.EOK, body=b"late", **_echo_ids(req)))

            asyncio.ensure_future(late())
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        r = await c.read_entry(1, 0, timeout=0.1)
        assert r.unknown and "within 0.1 s" in (r.error or "") and "test-bookie" in (r.error or "")
        await asyncio.sleep(0.4)
        assert c.stats.late_replies == 1
        r = await c.read_entry(1, 1)
        assert r.present and c.connected
    assert peer.connections == 1
    await peer.stop()


async def test_reply_with_wrong_operation_is_dropped() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        wrong = _req(Op.READ_LAC, req.header.txnId)
        send(writer, _response(wrong, Status.ENOENTRY, ledgerId=1))
        await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        r = await c.read_entry(1, 2)
        assert r.present and c.stats.mismatched_replies == 1
    await peer.stop()


HOSTILE = {
    "unknown txn": lambda req: P.frame(
        _response(_req(Op.READ_ENTRY, 999_999), Status.EOK, body=b"x", ledgerId=1, entryId=0).SerializeToString()
    ),
    "garbage": lambda req: P.frame(b"\xff\xfe\xfd\xfc"),
    "negative length": lambda req: struct.pack(">i", -5) + b"xxxx",
    "over limit": lambda req: struct.pack(">i", 10_000_000),
    "missing fields": lambda req: P.frame(bytes.fromhex("0a06080310011801") + b"\x10\x00" + b"\xa2\x06\x02\x08\x00"),
    "empty frame": lambda req: P.frame(b""),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
async def test_hostile_reply_closes_the_connection(kind: str) -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if peer.connections == 1:
            writer.write(HOSTILE[kind](req))
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer, max_frame_size=1024 * 1024) as c:
        r1, r2 = await asyncio.gather(c.read_entry(1, 0), c.read_entry(1, 1))
        for r in (r1, r2):
            assert r.unknown, r
            assert "test-bookie" in (r.error or "")
        assert c.stats.protocol_errors == 1
        assert not c.connected
        # It reconnects (after a short backoff) and works again.
        assert (await _eventually(lambda: c.read_entry(1, 2))).present
    assert peer.connections == 2
    await peer.stop()


async def test_connect_refused_backs_off_then_recovers() -> None:
    peer = Peer(answer_ok)
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    c = BookieClient(
        "gone-bookie",
        ("127.0.0.1", port),
        BookieClientConfig(request_timeout=1, connect_timeout=1, backoff_initial=0.2, backoff_max=0.4),
    )
    r = await c.read_entry(1, 0)
    assert r.unknown and "cannot connect" in (r.error or "") and "gone-bookie" in (r.error or "")
    r = await c.read_entry(1, 0)  # within the backoff: fails fast without dialling
    assert r.unknown and "next attempt" in (r.error or "")
    assert c.stats.connect_failures == 1
    await peer.start(port)
    await asyncio.sleep(0.3)
    r = await c.read_entry(1, 0)
    assert r.present
    await c.close()
    await peer.stop()


async def test_silent_connection_is_replaced() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if peer.connections >= 2:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer, dead_after_timeouts=2) as c:
        assert (await c.read_entry(1, 0, timeout=0.05)).unknown
        assert c.connected
        assert (await c.read_entry(1, 0, timeout=0.05)).unknown
        assert not c.connected  # two silent timeouts: presumed dead
        assert (await _eventually(lambda: c.read_entry(1, 0))).present
    await peer.stop()


async def test_a_trickling_peer_that_never_answers_is_replaced() -> None:
    """A peer that keeps sending bytes of a frame it never finishes is as dead as a silent one: bytes
    that are not a reply must not keep the connection alive (every request would wait its full timeout
    forever)."""

    async def trickle(writer: asyncio.StreamWriter) -> None:
        writer.write(struct.pack(">i", 100_000))  # announces a frame, then drips it
        await writer.drain()

        async def drip() -> None:
            while True:
                await asyncio.sleep(0.02)
                writer.write(b"\x00")

        asyncio.ensure_future(drip())

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if peer.connections >= 2:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler, on_connect=lambda w: trickle(w) if peer.connections == 1 else _noop()).start()
    async with await _client(peer, dead_after_timeouts=2) as c:
        assert (await c.read_entry(1, 0, timeout=0.1)).unknown
        assert (await c.read_entry(1, 0, timeout=0.1)).unknown
        assert not c.connected  # two timeouts with no reply at all: presumed dead, bytes or not
        assert (await _eventually(lambda: c.read_entry(1, 0))).present
    await peer.stop()


async def test_a_peer_that_stops_reading_cannot_hold_a_request_past_its_timeout() -> None:
    """A peer that stops reading fills the socket buffers and the transport pauses writing; a request
    waiting to be written must still end (UNKNOWN) within its timeout instead of waiting forever for the
    link to drain. Loopback send buffers take megabytes (~150k requests), so the transport's own
    flow-control callback (`pause_writing`, what it calls when its buffer is full) stands for them."""

    async def silent(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        return None

    peer = await Peer(silent).start()
    async with await _client(peer, dead_after_timeouts=10**9) as c:
        assert (await c.read_entry(1, 0, timeout=0.05)).unknown  # connected
        conn = c._conn
        assert conn is not None
        conn.pause_writing()
        try:
            async with asyncio.timeout(10):  # a guard against the stall itself, not a speed goal
                r = await c.read_entry(1, 1, timeout=0.2)
        finally:
            conn.resume_writing()
        assert r.unknown and "0.2 s" in (r.error or ""), r
        assert len(peer.requests) == 1  # it was never written
    await peer.stop()


async def test_a_replayed_reply_closes_the_connection() -> None:
    """Each request gets one reply. A peer replaying one (endlessly, it costs the loop ~0.1 s per 256 KiB
    of frames) is not a bookie: the first duplicate closes the connection."""

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if peer.connections == 1:
            reply = _response(req, Status.ENOENTRY, **_echo_ids(req)).SerializeToString()
            writer.write(P.frame(reply) * 50_000)
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        r = await c.read_entry(1, 42)
        assert r.absent  # the first copy is the answer
        await _until(lambda: not c.connected)
        assert c.stats.protocol_errors == 1 and c.stats.replies == 1 and c.stats.late_replies == 0
        assert (await _eventually(lambda: c.read_entry(1, 2))).present
    await peer.stop()


async def test_repeated_wrong_operation_replies_close_the_connection() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if peer.connections == 1:
            wrong = _response(_req(Op.READ_LAC, req.header.txnId), Status.ENOENTRY, ledgerId=1)
            writer.write(P.frame(wrong.SerializeToString()) * 1000)
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        r = await c.read_entry(1, 2)
        assert r.unknown and "wrong operation" in (r.error or ""), r
        assert c.stats.mismatched_replies == 1 and c.stats.protocol_errors == 1
        assert (await _eventually(lambda: c.read_entry(1, 2))).present
    await peer.stop()


async def test_one_late_reply_per_expired_request_is_dropped_quietly() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if req.header.txnId == 1:

            async def late() -> None:
                await asyncio.sleep(0.2)
                reply = P.frame(_response(req, Status.EOK, body=b"late", **_echo_ids(req)).SerializeToString())
                writer.write(reply)
                await asyncio.sleep(0.5)
                writer.write(reply)  # and again: no request is waiting for it any more

            asyncio.ensure_future(late())
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        assert (await c.read_entry(1, 0, timeout=0.1)).unknown
        await _until(lambda: c.stats.late_replies == 1)
        assert c.connected and c.stats.protocol_errors == 0
        await _until(lambda: not c.connected)
        assert c.stats.protocol_errors == 1 and c.stats.late_replies == 1
    await peer.stop()


async def test_a_frame_limit_entry_list_is_decoded_without_holding_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 10, defect 3: the client decodes a large (legitimate) answer in steps; a heartbeat task gets
    a turn between every step of the decoding (ticks counted while the decoder runs, not time)."""
    n = (P.DEFAULT_MAX_FRAME_SIZE - 300) // 24
    listing = encode_ranges(RangeSet(tuple((3 * i, 3 * i + 1) for i in range(n))))

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        ids = _echo_ids(req)
        send(writer, _response(req, Status.EOK, availabilityOfEntriesOfLedger=listing, **ids))
        await writer.drain()

    beat = Heartbeat()
    during: list[int] = []
    real_steps = EntryList.decode_steps.__func__  # type: ignore[attr-defined]

    def counted(cls: type[EntryList], data: bytes, step: int = STEP) -> Any:
        start = beat.ticks
        result = yield from real_steps(cls, data, step)
        during.append(beat.ticks - start)
        return result

    monkeypatch.setattr(EntryList, "decode_steps", classmethod(counted))

    peer = await Peer(handler).start()
    try:
        async with beat, await _client(peer, request_timeout=10.0) as c:
            got = await c.get_entry_list(1)
    finally:
        await peer.stop()
    assert got.present and got.entries is not None and got.entries.total == 2 * n
    assert during and during[0] >= -(-n // STEP) - 1, during


async def test_entry_list_unsupported_is_detected_without_poisoning() -> None:
    """A DbLedgerStorage-like peer: never answers GET_LIST for ledger 1, answers everything else."""

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if (
            req.header.operation == Op.GET_LIST_OF_ENTRIES_OF_LEDGER
            and req.getListOfEntriesOfLedgerRequest.ledgerId == 1
        ):
            return
        await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        reads = asyncio.gather(*(c.read_entry(1, e) for e in range(10)))
        cap = await c.probe_entry_list_support(1, timeout=0.2)
        assert cap is Capability.UNSUPPORTED
        assert all(r.present for r in await reads)
        sent = len(peer.requests)
        r = await c.get_entry_list(1)
        assert r.unknown and r.unsupported and "DbLedgerStorage" in (r.error or "")
        assert len(peer.requests) == sent  # not even sent
        assert (await c.read_entry(1, 1)).present and c.connected
    await peer.stop()


async def test_slow_entry_list_answer_restores_the_capability() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if req.header.operation == Op.GET_LIST_OF_ENTRIES_OF_LEDGER:

            async def late() -> None:
                await asyncio.sleep(0.4)
                await answer_ok(peer, req, writer)

            asyncio.ensure_future(late())
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        assert await c.probe_entry_list_support(1, timeout=0.1) is Capability.UNSUPPORTED
        await asyncio.sleep(0.5)
        assert c.stats.late_replies == 1
        assert c.entry_list_support is Capability.SUPPORTED
        assert (await c.get_entry_list(1)).present
    await peer.stop()


async def test_entry_list_lost_connection_is_not_evidence() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if req.header.operation == Op.GET_LIST_OF_ENTRIES_OF_LEDGER and peer.connections == 1:
            writer.transport.abort()  # e.g. the bookie restarted
            return
        await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    async with await _client(peer) as c:
        assert (await c.ping()).present
        r = await c.get_entry_list(1)
        assert r.unknown and not r.unsupported
        assert c.entry_list_support is Capability.UNKNOWN
        assert (await _eventually(lambda: c.get_entry_list(1))).present
        assert c.entry_list_support is Capability.SUPPORTED
    await peer.stop()


async def test_entry_list_capability_stays_unknown_when_bookie_is_silent() -> None:
    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        return  # answers nothing (a SIGSTOPped bookie)

    peer = await Peer(handler).start()
    async with await _client(peer, liveness_timeout=0.1) as c:
        r = await c.get_entry_list(1, timeout=0.1)
        assert r.unknown and not r.unsupported
        assert c.entry_list_support is Capability.UNKNOWN
        # ENOLEDGER for a ledger the bookie does not hold says nothing about the capability either.
    await peer.stop()


async def test_closed_client_answers_unknown() -> None:
    peer = await Peer(answer_ok).start()
    c = await _client(peer)
    assert (await c.read_entry(1, 0)).present
    await c.close()
    r = await c.read_entry(1, 0)
    assert r.unknown and "closed" in (r.error or "")
    await peer.stop()


# ----- the same scenarios on uvloop (the daemon's event loop) --------------------------------------
UVLOOP_SCENARIOS: dict[str, Callable[[], Awaitable[None]]] = {
    "basic": test_basic_operations_and_outcomes,
    "pipelined": test_pipelined_out_of_order_replies_are_matched,
    "window": test_in_flight_window_is_bounded,
    "one write": test_requests_sent_in_one_loop_iteration_go_out_in_one_write_with_no_task_each,
    "withdrawn": test_a_withdrawn_request_frees_its_slot_and_its_late_reply_is_dropped_quietly,
    "late reply": test_timeout_is_unknown_and_late_reply_is_dropped,
    "hostile": lambda: test_hostile_reply_closes_the_connection("unknown txn"),
    "garbage": lambda: test_hostile_reply_closes_the_connection("garbage"),
    "silent": test_silent_connection_is_replaced,
    "db-like": test_entry_list_unsupported_is_detected_without_poisoning,
    "refused": test_connect_refused_backs_off_then_recovers,
}


@pytest.mark.parametrize("name", list(UVLOOP_SCENARIOS))
def test_scenarios_on_uvloop(name: str) -> None:
    import uvloop  # a dependency of the daemon, which runs on it

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(UVLOOP_SCENARIOS[name]())


async def test_closing_the_client_is_logged_at_debug_only(caplog: pytest.LogCaptureFixture) -> None:
    # The per-bookie "client closed" line came at info at the end of every check.
    peer = await Peer(answer_ok).start()
    with caplog.at_level(logging.DEBUG, logger="auditor.bookie.transport"):
        async with await _client(peer) as c:
            assert (await c.ping()).present
    closed = [r for r in caplog.records if "client closed" in r.getMessage()]
    assert closed and all(r.levelno == logging.DEBUG for r in closed)
    await peer.stop()


@pytest.mark.parametrize(
    "failure, has_cert, meaning",
    [
        ("TLS alert: [SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad certificate", False, "the bookie demands"),
        ("TLS alert: [SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED]", True, "the bookie rejected our client certificate"),
        # Under load the bookie's close can overtake its alert (the CI failure of test_bookie_tls).
        ("connection lost ([Errno 104] Connection reset by peer)", False, "most likely the bookie demands"),
        ("connection lost ([Errno 104] Connection reset by peer)", True, "most likely the bookie rejected"),
        ("timed out after 10s", False, None),
    ],
)
def test_a_refused_tls_session_names_the_likely_reason(failure: str, has_cert: bool, meaning: str | None) -> None:
    import ssl

    from auditor.bookie.tls import BookieTls, _alert_meaning

    text = _alert_meaning(failure, BookieTls(ssl.create_default_context(), client_certificate=has_cert))
    assert (meaning in text) if meaning else text == ""
