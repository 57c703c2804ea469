"""The adaptive per-bookie rate and window: a slow start (doubling) while requests wait for the limiter and
the bookie answers fast, then a quarter per period after the first sign of trouble; both halve on overload
and fall while the bookie's own latency is high (each period's fastest answer, so our own stalls do not
count); within [floor, cap] and [1, window cap], one step per period."""

from __future__ import annotations

import pytest

from auditor.aio.adaptive import AdaptivePolicy, AdaptiveRate

P = AdaptivePolicy(start=50, floor=5, target_latency_s=0.1, hold_s=0.5, window_cap=64)


def period(
    r: AdaptiveRate,
    t: float,
    *,
    waited: bool = True,
    full: bool = False,
    latency: float | None = 0.002,
    overloaded: bool = False,
) -> float:
    """One period: a wait for the limiter and/or the window (if any), then one outcome after the hold;
    returns the time."""
    if waited:
        r.waited()
    if full:
        r.window_full()
    r.observe(latency, overloaded, t + P.hold_s)
    return t + P.hold_s


def test_a_fast_busy_bookie_is_driven_up_to_the_cap_within_seconds_and_no_further() -> None:
    r = AdaptiveRate(P, cap=1000, now=0.0)
    assert r.rate == 50 and r.slow_start
    t, steps = 0.0, 0
    while r.rate < 1000:
        t = period(r, t)
        steps += 1
    assert r.rate == 1000 and steps == 5  # 50 * 2^5 > 1000: 2.5 s, where a quarter per period took 14 (7 s)
    period(r, t)
    assert r.rate == 1000 and r.slow_start  # no trouble seen: still in slow start


def test_after_the_first_sign_of_trouble_growth_is_gentle() -> None:
    r = AdaptiveRate(P, cap=1000, now=0.0)
    t = period(r, 0.0)  # 100
    t = period(r, t, overloaded=True)  # 50, slow start over
    assert r.rate == 50 and not r.slow_start
    t = period(r, t)
    assert r.rate == pytest.approx(62.5)  # x1.25, not x2
    t = period(r, t, latency=0.5)  # slow: a fifth down, and still no slow start
    assert not r.slow_start and r.rate == pytest.approx(50)


def test_nothing_rises_while_the_caller_is_the_bottleneck() -> None:
    r = AdaptiveRate(P, cap=1000, now=0.0, window=8)
    t = 0.0
    for _ in range(10):
        t = period(r, t, waited=False)
    assert r.rate == 50 and r.window == 8


def test_the_window_grows_when_it_is_what_holds_requests_back() -> None:
    # A bookie 100 ms away: 8 on the wire cap it at 80 requests/s (Little's law) whatever the rate says.
    r = AdaptiveRate(P, cap=1000, now=0.0, window=8)
    t = period(r, 0.0, waited=False, full=True, latency=0.09)
    assert r.window == 16 and r.rate == 50  # doubled; the rate held no one back, so it stays
    for _ in range(5):
        t = period(r, t, waited=False, full=True, latency=0.09)
    assert r.window == 64  # the cap
    t = period(r, t, waited=False, full=True, overloaded=True)
    assert r.window == 32 and not r.slow_start
    t = period(r, t, waited=False, full=True, latency=0.09)
    assert r.window == 40  # a quarter more


def test_without_a_window_cap_the_window_stays_as_configured() -> None:
    r = AdaptiveRate(AdaptivePolicy(), cap=1000, now=0.0, window=8)
    for i in range(5):
        r.window_full()
        r.observe(0.001, False, 0.5 * (i + 1))
    assert r.window == 8 and r.window_cap == 8


def test_overload_halves_once_per_period_and_wins_over_room() -> None:
    r = AdaptiveRate(P, cap=1000, now=0.0, window=8)
    r.rate = 400
    r.waited()
    assert r.observe(None, True, 0.1) is None  # within the hold: remembered, not applied yet
    assert r.observe(None, True, 0.2) is None
    change = r.observe(0.001, False, 0.6)  # one halving for the whole burst of refusals
    assert change is not None and change.rate == 200 and change.window == 4 and change.why == "overload"
    for _ in range(10):
        r.observe(None, True, 10.0 + _)
    assert r.rate == 5 and r.window == 1  # the floors


def test_slow_answers_lower_the_rate_until_they_are_fast_again() -> None:
    r = AdaptiveRate(P, cap=1000, now=0.0)
    r.rate = 100
    t = period(r, 0.0, latency=0.5)
    assert r.rate == 80 and r.latency_s == 0.5
    for _ in range(20):  # the average comes down as fast periods accumulate
        t = period(r, t, latency=0.001)
    assert r.latency_s is not None and r.latency_s < P.target_latency_s and r.rate > 80


def test_the_latency_judged_is_each_periods_fastest_answer_not_our_own_stalls() -> None:
    # Our event loop stalled: most replies waited in our socket (0.4 s), but the bookie itself answered
    # some at once. It is not slowed down for our stall.
    r = AdaptiveRate(P, cap=1000, now=0.0)
    for i in range(3):
        t0 = 0.5 * i
        r.waited()
        for k in range(20):
            r.observe(0.4 if k % 5 else 0.003, False, t0 + 0.01 * k)
        r.observe(0.4, False, t0 + 0.5)
    assert r.latency_s is not None and r.latency_s < 0.01 and r.rate == 400
    # A bookie whose queue is long answers every request slowly, the fastest too: backed off.
    r.waited()
    for k in range(20):
        r.observe(0.3, False, 1.5 + 0.01 * k)
    r.observe(0.3, False, 2.0)
    assert r.rate == 320 and not r.slow_start


def test_the_cap_wins_over_start_and_floor() -> None:
    r = AdaptiveRate(P, cap=2, now=0.0)
    assert r.rate == 2 and r.floor == 2
    period(r, 0.0, overloaded=True)
    assert r.rate == 2


@pytest.mark.parametrize(
    "bad",
    [
        dict(start=0),
        dict(floor=-1),
        dict(target_latency_s=0),
        dict(increase=1.0),
        dict(overload_decrease=1.0),
        dict(smoothing=0),
        dict(window_cap=0),
    ],
)
def test_policy_refuses_nonsense(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="adaptive rate"):
        AdaptivePolicy(**bad)  # type: ignore[arg-type]
