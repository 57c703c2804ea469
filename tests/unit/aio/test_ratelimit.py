"""TokenBucket.retune: a new rate and burst from now on, what accrued at the old rate kept up to the new
burst (the repair workers' run-time byte rate)."""

from __future__ import annotations

import pytest

from auditor.aio import ratelimit
from auditor.aio.ratelimit import TokenBucket


def test_retune_takes_the_new_rate_and_burst(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(ratelimit.time, "monotonic", lambda: now[0])
    bucket = TokenBucket(1000.0)  # burst 1000
    assert bucket.reserve(1000) == 0.0  # the full burst, at once
    now[0] += 0.5  # 500 tokens accrue at the old rate
    bucket.retune(100.0)  # burst now 100: the 500 are capped at 100
    assert (bucket.rate, bucket.capacity) == (100.0, 100.0)
    assert bucket.reserve(100) == 0.0
    assert bucket.reserve(50) == pytest.approx(0.5)  # 50 tokens at 100/s
    bucket.retune(10_000.0, burst=20_000.0)
    now[0] += 0.1  # at the new rate: 1000 tokens, minus the 50 owed
    assert bucket.reserve(950) == pytest.approx(0.0)
    assert bucket.reserve(1) == pytest.approx(1 / 10_000)
