"""The bookie client's request rates (the token bucket, fixed and adaptive limits, rates carried from one
pool to the next) and the pool (one client per bookie, resolver failures), against a scripted peer."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.aio.adaptive import AdaptivePolicy
from auditor.bookie import (
    BookieClient,
    BookiePool,
    Status,
    TokenBucket,
)
from tests.unit.bookie.scripted_peer import FAST, Peer, _client, _echo_ids, _response, answer_ok, send


def test_token_bucket_arithmetic() -> None:
    b = TokenBucket(rate=10, burst=2)
    assert b.reserve() == 0 and b.reserve() == 0
    waits = [b.reserve() for _ in range(3)]
    assert waits[0] == pytest.approx(0.1, abs=0.02)
    assert waits[1] == pytest.approx(0.2, abs=0.02)
    assert waits[2] == pytest.approx(0.3, abs=0.02)


async def test_rate_limit_spaces_requests() -> None:
    peer = await Peer(answer_ok).start()
    async with await _client(peer, rate_limit=100.0, rate_burst=1.0) as c:
        t0 = time.monotonic()
        results = await c.read_entries(1, [0] * 21)
        elapsed = time.monotonic() - t0
    assert all(r.present for r in results)
    assert elapsed >= 0.18  # 20 waits of 10 ms; an upper bound would be a timing test
    await peer.stop()


async def test_pool_hands_out_one_client_per_bookie() -> None:
    peer = await Peer(answer_ok).start()
    calls: list[str] = []

    async def resolver(bookie_id: str) -> tuple[str, int]:
        calls.append(bookie_id)
        return peer.address

    async with BookiePool(resolver, FAST) as pool:
        a, b = pool.client("bk-a"), pool.client("bk-b")
        assert pool.client("bk-a") is a and pool["bk-b"] is b and len(pool) == 2
        assert (await a.read_entry(1, 0)).present and (await b.read_entry(1, 0)).present
        assert (await a.read_entry(1, 1)).present
    assert calls == ["bk-a", "bk-b"]
    assert peer.connections == 2
    with pytest.raises(RuntimeError):
        pool.client("bk-c")
    await peer.stop()


async def test_resolver_failure_is_unknown() -> None:
    def resolver(bookie_id: str) -> tuple[str, int]:
        raise LookupError(f"{bookie_id} is not registered")

    c = BookieClient("bk-x", resolver, FAST)
    r = await c.read_entry(1, 0)
    assert r.unknown and "not registered" in (r.error or "")
    await c.close()


async def test_adaptive_rate_rises_on_a_fast_bookie_and_halves_when_it_refuses() -> None:
    refusing = False

    async def handler(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        if refusing:
            send(writer, _response(req, Status.ETOOMANYREQUESTS, **_echo_ids(req)))
        else:
            await answer_ok(peer, req, writer)

    peer = await Peer(handler).start()
    policy = AdaptivePolicy(start=100, floor=10, hold_s=0.05)
    async with await _client(peer, rate_limit=400.0, rate_burst=1.0, adaptive=policy) as c:
        assert c._bucket is not None and c._bucket.rate == 100
        for _ in range(40):  # a scan's bounded fan-out, held back by the limiter, answered at once
            await c.read_entries(1, [0] * 8)
        assert c._bucket.rate == 400  # up to the cap
        refusing = True
        results = await c.read_entries(1, [0] * 30)
        assert all(r.unknown for r in results)
        assert c._bucket.rate <= 200  # halved (at least once) by the refusals
    await peer.stop()


async def test_without_adaptive_the_rate_stays_fixed() -> None:
    peer = await Peer(answer_ok).start()
    async with await _client(peer, rate_limit=300.0, rate_burst=1.0) as c:
        await c.read_entries(1, [0] * 60)
        assert c._bucket is not None and c._bucket.rate == 300 and c._adaptive is None
    await peer.stop()


async def test_a_new_pool_starts_each_bookie_where_an_earlier_pool_left_its_rate() -> None:
    peer = await Peer(answer_ok).start()

    async def resolver(bookie_id: str) -> tuple[str, int]:
        return peer.address

    adaptive = replace(FAST, rate_limit=400.0, rate_burst=1.0, adaptive=AdaptivePolicy(start=50, hold_s=0.05))
    async with BookiePool(resolver, adaptive) as first:
        c = first.client("bk-a")
        for _ in range(40):
            await c.read_entries(1, [0] * 8)
        reached = first.adapted_rates()
    assert reached["bk-a"] > 50  # it rose from the start
    async with BookiePool(resolver, adaptive, start_rates=reached) as second:
        again, fresh = second.client("bk-a"), second.client("bk-b")
        assert again.adapted_rate == reached["bk-a"] and again._bucket is not None
        assert again._bucket.rate == reached["bk-a"]
        assert fresh.adapted_rate == 50  # a bookie with no rate carried starts at the policy's start
    async with BookiePool(resolver, replace(FAST, rate_limit=400.0), start_rates=reached) as fixed:
        assert fixed.client("bk-a").adapted_rate is None and fixed.adapted_rates() == {}  # not adaptive: fixed
    await peer.stop()


async def test_a_batch_queued_at_the_start_rate_speeds_up_as_the_rate_rises() -> None:
    # Each request takes its token as it is sent: a turn reserved when it was queued kept the whole batch
    # at the start rate (400 reads at 50/s: 8 s) while the adaptive rate rose to its cap (issue 37).
    peer = await Peer(answer_ok).start()
    policy = AdaptivePolicy(start=50, floor=10, hold_s=0.1)
    async with await _client(peer, rate_limit=2000.0, adaptive=policy) as c:
        t0 = time.monotonic()
        results = await c.read_entries(1, [0] * 400)
        elapsed = time.monotonic() - t0
        assert c._bucket is not None and c._bucket.rate > 400
    assert all(r.present for r in results)
    assert elapsed < 4.0
    await peer.stop()


async def test_the_window_grows_past_max_in_flight_for_a_bookie_that_answers_slowly_but_has_room() -> None:
    # 50 ms per answer and 2 in flight: at most 40 requests/s (Little's law), whatever the rate allows.
    async def slow(peer: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        async def later() -> None:
            await asyncio.sleep(0.05)
            await answer_ok(peer, req, writer)

        asyncio.ensure_future(later())

    peer = await Peer(slow).start()
    policy = AdaptivePolicy(start=1000, hold_s=0.1, window_cap=32)
    async with await _client(peer, rate_limit=1000.0, max_in_flight=2, adaptive=policy) as c:
        t0 = time.monotonic()
        results = await c.read_entries(1, [0] * 200)
        elapsed = time.monotonic() - t0
        assert c.adapted_window is not None and 2 < c.adapted_window <= 32
    assert all(r.present for r in results)
    assert elapsed < 3.0  # at 2 in flight: 5 s
    await peer.stop()
