"""The adaptive per-bookie rate: rises while the limiter holds callers back and answers are fast, halves on
overload, falls while answers are slow, stays within [floor, cap], one step per period."""

from __future__ import annotations

import pytest

from auditor.aio.adaptive import AdaptivePolicy, AdaptiveRate

P = AdaptivePolicy(start=50, floor=5, target_latency_s=0.1, hold_s=0.5)


def period(
    r: AdaptiveRate, t: float, *, waited: bool = True, latency: float | None = 0.002, overloaded: bool = False
) -> float:
    """One period: a wait for the limiter (if any), then one outcome after the hold; returns the time."""
    if waited:
        r.waited()
    r.observe(latency, overloaded, t + P.hold_s)
    return t + P.hold_s


def test_a_fast_busy_bookie_is_driven_up_to_the_cap_and_no_further() -> None:
    r = AdaptiveRate(P, cap=1000, now=0.0)
    assert r.rate == 50
    t, steps = 0.0, 0
    while r.rate < 1000:
        t = period(r, t)
        steps += 1
    assert r.rate == 1000 and steps == 14  # 50 * 1.25^14 > 1000
    period(r, t)
    assert r.rate == 1000


def test_nothing_rises_while_the_caller_is_the_bottleneck() -> None:
    r = AdaptiveRate(P, cap=1000, now=0.0)
    t = 0.0
    for _ in range(10):
        t = period(r, t, waited=False)
    assert r.rate == 50


def test_overload_halves_once_per_period_and_wins_over_room() -> None:
    r = AdaptiveRate(P, cap=1000, now=0.0)
    r.rate = 400
    r.waited()
    assert r.observe(None, True, 0.1) is None  # within the hold: remembered, not applied yet
    assert r.observe(None, True, 0.2) is None
    assert r.observe(0.001, False, 0.6) == 200  # one halving for the whole burst of refusals
    for _ in range(10):
        r.observe(None, True, 10.0 + _)
    assert r.rate == 5  # the floor


def test_slow_answers_lower_the_rate_until_they_are_fast_again() -> None:
    r = AdaptiveRate(P, cap=1000, now=0.0)
    r.rate = 100
    t = period(r, 0.0, latency=0.5)
    assert r.rate == 80 and r.latency_s == 0.5
    for _ in range(20):  # the average comes down only as fast answers accumulate
        t = period(r, t, latency=0.001)
    assert r.latency_s is not None and r.latency_s < P.target_latency_s and r.rate > 80


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
    ],
)
def test_policy_refuses_nonsense(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="adaptive rate"):
        AdaptivePolicy(**bad)
