"""An adaptive per-bookie request rate and window: fast while the bookie is idle, slower as soon as it struggles.

Two limits move together on the bookie's own signals: the request rate (between `AdaptivePolicy.floor` and
the configured cap, the bookie client's `rate_limit`) and the window of requests on the wire at once
(between one and `window_cap`, from the client's `max_in_flight`), at most one step per `hold_s`:

* **overload** (the bookie answered ETOOMANYREQUESTS, or a request timed out): both halve;
* **slow** (the bookie's service latency is above `target_latency_s`): both fall by a fifth;
* **room** (in the last period requests waited for the limiter, or for a free place in the window, and the
  latency is under the target): what held them back grows.

Growth is a slow start, as TCP's: each limit doubles per period until the first sign of trouble (overload
or slow), and grows by a quarter per period from then on. A bookie that answers fast is thus driven at the
cap within seconds (50 -> 1,000 requests/s in 5 periods, 2.5 s), one that answers slowly or refuses is
backed off at once, and nothing rises while the scan itself is the bottleneck. The window grows with the
rate so that Little's law (rate = window / latency) never caps a bookie that answers slowly but is not
loaded. Decreases win over increases within a period.

The latency judged is the bookie's, not ours: each period's *fastest* answer, smoothed over periods. A
reply that waited in our socket while our event loop was busy (decoding, verifying digests, a starved
CPU) only makes the slower answers slower; a bookie whose queue is long makes every answer slow, the
fastest included. Time a request spent in our own queue never counts (the client measures from the write).

Pure arithmetic on the times it is given: the bookie client feeds it and retunes its token bucket and
window with what it returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AdaptivePolicy:
    start: float = 50.0  # requests/s before anything is known
    floor: float = 5.0  # never below (the cap wins when it is lower)
    target_latency_s: float = 0.1  # service latency above which the bookie counts as struggling
    hold_s: float = 0.5  # at most one change per period
    increase: float = 1.25  # per period once out of slow start
    slow_start: bool = True  # double per period until the first sign of trouble
    slow_decrease: float = 0.8
    overload_decrease: float = 0.5
    smoothing: float = 0.5  # weight of each period's fastest answer in the moving average
    window_cap: int | None = None  # the most requests on the wire at once (None: the start window, fixed)

    def __post_init__(self) -> None:
        if not (self.start > 0 and self.floor > 0 and self.target_latency_s > 0 and self.hold_s > 0):
            raise ValueError("adaptive rate: start, floor, target latency and hold must be > 0")
        if not (self.increase > 1 and 0 < self.slow_decrease < 1 and 0 < self.overload_decrease < 1):
            raise ValueError("adaptive rate: increase must be > 1, decreases in (0, 1)")
        if not 0 < self.smoothing <= 1:
            raise ValueError("adaptive rate: smoothing must be in (0, 1]")
        if self.window_cap is not None and self.window_cap < 1:
            raise ValueError("adaptive rate: window_cap must be >= 1")


@dataclass(frozen=True, slots=True)
class Change:
    """What a period changed: the new rate and window (each as it now is), and why."""

    rate: float
    window: int
    why: str  # "overload", "slow" or "room"


class AdaptiveRate:
    """The current rate (between `floor` and `cap`) and window (between 1 and the window cap) of one bookie."""

    def __init__(self, policy: AdaptivePolicy, cap: float, now: float, window: int = 1) -> None:
        self.policy = policy
        self.cap = cap
        self.floor = min(policy.floor, cap)
        self.rate = min(max(policy.start, self.floor), cap)
        self.window_cap = max(window, policy.window_cap or window)
        self.window = min(max(1, window), self.window_cap)
        self.latency_s: float | None = None  # smoothed per-period fastest answer
        self.slow_start = policy.slow_start
        self._period_start = now
        self._period_min: float | None = None
        self._waited = False
        self._window_full = False
        self._overloaded = False

    def waited(self) -> None:
        """A request had to wait for a token: the rate, not the caller, set the pace."""
        self._waited = True

    def window_full(self) -> None:
        """A request had to wait for a place in the window: the window, not the caller, set the pace."""
        self._window_full = True

    def observe(self, latency_s: float | None, overloaded: bool, now: float) -> Change | None:
        """One request's outcome (`latency_s` None: no answer); returns the change when a period ends with
        one."""
        if overloaded:
            self._overloaded = True
        elif latency_s is not None and (self._period_min is None or latency_s < self._period_min):
            self._period_min = latency_s
        if now - self._period_start < self.policy.hold_s:
            return None
        return self._end_period(now)

    def _end_period(self, now: float) -> Change | None:
        p = self.policy
        if self._period_min is not None:
            a = p.smoothing
            m = self._period_min
            self.latency_s = m if self.latency_s is None else (1 - a) * self.latency_s + a * m
        rate, window = self.rate, self.window
        if self._overloaded:
            why = "overload"
            rate, window = rate * p.overload_decrease, math.floor(window * p.overload_decrease)
            self.slow_start = False
        elif self.latency_s is not None and self.latency_s > p.target_latency_s:
            why = "slow"
            rate, window = rate * p.slow_decrease, math.floor(window * p.slow_decrease)
            self.slow_start = False
        else:
            why = "room"
            grow = 2.0 if self.slow_start else p.increase
            if self._waited:
                rate = rate * grow
            if self._window_full:
                window = max(window + 1, math.floor(window * grow))
        self._period_start = now
        self._period_min = None
        self._waited = self._window_full = self._overloaded = False
        rate = min(max(rate, self.floor), self.cap)
        window = min(max(window, 1), self.window_cap)
        if rate == self.rate and window == self.window:
            return None
        self.rate, self.window = rate, window
        return Change(rate, window, why)
