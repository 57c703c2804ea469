"""An adaptive per-bookie request rate: fast while the bookie is idle, slower as soon as it struggles.

The rate starts at `AdaptivePolicy.start` and moves between `floor` and the configured cap (the
bookie client's `rate_limit`) on the bookie's own signals, at most one step per `hold_s`:

* **overload** (the bookie answered ETOOMANYREQUESTS, or a request timed out): the rate halves;
* **slow** (the smoothed latency of its answers is above `target_latency_s`): the rate falls by a fifth;
* **room** (callers waited for the limiter in the last period, i.e. the rate was what held them back,
  and the smoothed latency is under the target): the rate grows by a quarter.

A bookie that answers fast is thus driven at the cap within seconds (50 -> 1,000 requests/s in about 14
periods), and one that answers slowly or refuses is backed off at once; nothing rises while the scan
itself is the bottleneck. Decreases win over increases within a period. Pure arithmetic on the times it
is given: the bookie client feeds it and retunes its token bucket with what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AdaptivePolicy:
    start: float = 50.0  # requests/s before anything is known
    floor: float = 5.0  # never below (the cap wins when it is lower)
    target_latency_s: float = 0.1  # smoothed answer latency above which the bookie counts as struggling
    hold_s: float = 0.5  # at most one change per period
    increase: float = 1.25
    slow_decrease: float = 0.8
    overload_decrease: float = 0.5
    smoothing: float = 0.2  # weight of each new latency in the moving average

    def __post_init__(self) -> None:
        if not (self.start > 0 and self.floor > 0 and self.target_latency_s > 0 and self.hold_s > 0):
            raise ValueError("adaptive rate: start, floor, target latency and hold must be > 0")
        if not (self.increase > 1 and 0 < self.slow_decrease < 1 and 0 < self.overload_decrease < 1):
            raise ValueError("adaptive rate: increase must be > 1, decreases in (0, 1)")
        if not 0 < self.smoothing <= 1:
            raise ValueError("adaptive rate: smoothing must be in (0, 1]")


class AdaptiveRate:
    """The current rate of one bookie, between `policy.floor` and `cap`."""

    def __init__(self, policy: AdaptivePolicy, cap: float, now: float) -> None:
        self.policy = policy
        self.cap = cap
        self.floor = min(policy.floor, cap)
        self.rate = min(max(policy.start, self.floor), cap)
        self.latency_s: float | None = None  # smoothed
        self._period_start = now
        self._waited = False
        self._overloaded = False

    def waited(self) -> None:
        """A caller had to wait for a token: the rate, not the caller, set the pace."""
        self._waited = True

    def observe(self, latency_s: float | None, overloaded: bool, now: float) -> float | None:
        """One request's outcome (`latency_s` None: no answer); returns the new rate when it changes."""
        if overloaded:
            self._overloaded = True
        elif latency_s is not None:
            a = self.policy.smoothing
            self.latency_s = latency_s if self.latency_s is None else (1 - a) * self.latency_s + a * latency_s
        if now - self._period_start < self.policy.hold_s:
            return None
        p = self.policy
        if self._overloaded:
            new = self.rate * p.overload_decrease
        elif self.latency_s is not None and self.latency_s > p.target_latency_s:
            new = self.rate * p.slow_decrease
        elif self._waited:
            new = self.rate * p.increase
        else:
            new = self.rate
        self._period_start = now
        self._waited = self._overloaded = False
        new = min(max(new, self.floor), self.cap)
        if new == self.rate:
            return None
        self.rate = new
        return new
