"""Our requests-per-second limiter (auditor/aio/ratelimit.py, the bookie client's and the ZooKeeper
bridge's) against aiolimiter, the maintained one on PyPI (issue 15: "a maintained ... rate limiter if
it fits"). A plain script, not a test:

    python -m bench.bench_ratelimit [--tasks N] [--seconds S]          (from the repository root)

aiolimiter is not a dependency of bk-auditor; `pip install aiolimiter` to run this. All in one run, on
the same event loop, each limiter measured in turn (interleaved rounds, best round kept):

* contended: N tasks acquiring as fast as they can from one limiter at a rate the loop can sustain; the
  achieved rate as a ratio to the configured one (accuracy), and CPU time per acquire (what a limiter
  costs the daemon's single event loop);
* uncontended: one task, a rate never reached (the bookie client's common case: the limit is a ceiling,
  not a pace), CPU time per acquire;
* semantics our callers rely on: burst (ours: `burst` tokens up front; aiolimiter: `max_rate` per
  `time_period`), arrival order of waiters, what a cancelled waiter costs (ours keeps its reservation: a
  cancelled request still counted against the bookie; aiolimiter gives it back), and changing the rate at
  run time.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

from auditor.aio.ratelimit import TokenBucket

Acquire = Callable[[], Awaitable[None]]


def ours(rate: float, burst: float) -> Acquire:
    return TokenBucket(rate, burst).acquire


def aiolimiter(rate: float, burst: float) -> Acquire:
    from aiolimiter import AsyncLimiter

    # `burst` acquisitions per burst/rate seconds: the same long-run rate and the same burst as ours.
    return AsyncLimiter(burst, burst / rate).acquire


LIMITERS: dict[str, Callable[[float, float], Acquire]] = {"ours": ours, "aiolimiter": aiolimiter}


async def contended(
    make: Callable[[float, float], Acquire], rate: float, burst: float, tasks: int, seconds: float
) -> tuple[float, float]:
    """(achieved rate / configured rate, CPU microseconds per acquire) with `tasks` tasks competing. The
    burst is spent first and not counted (the measurement starts after it)."""
    acquire = make(rate, burst)
    for _ in range(int(burst)):
        await acquire()
    done = 0
    stop = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < stop:
            await acquire()
            done += 1

    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    return done / wall / rate, cpu / done * 1e6


async def uncontended(make: Callable[[float, float], Acquire], n: int) -> float:
    """CPU microseconds per acquire when the limit is never reached."""
    acquire = make(1e12, 1e9)
    cpu = time.process_time()
    for _ in range(n):
        await acquire()
    return (time.process_time() - cpu) / n * 1e6


async def arrival_order(make: Callable[[float, float], Acquire]) -> bool:
    acquire = make(200.0, 1.0)
    order: list[int] = []

    async def one(i: int) -> None:
        await acquire()
        order.append(i)

    tasks = []
    for i in range(20):
        tasks.append(asyncio.ensure_future(one(i)))
        await asyncio.sleep(0)  # each starts waiting before the next arrives
    await asyncio.gather(*tasks)
    return order == sorted(order)


async def cancelled_waiter_cost(make: Callable[[float, float], Acquire]) -> float:
    """Seconds the next acquire waits after 10 waiters were cancelled (rate 100/s, burst 1)."""
    acquire = make(100.0, 1.0)
    await acquire()
    waiters = [asyncio.ensure_future(acquire()) for _ in range(10)]
    await asyncio.sleep(0)
    for w in waiters:
        w.cancel()
    await asyncio.gather(*waiters, return_exceptions=True)
    t = time.monotonic()
    await acquire()
    return time.monotonic() - t


async def main_async(args: argparse.Namespace) -> None:
    # burst 1: the strictest pacing; burst = rate: the bookie client's default (bookie_config: no rate_burst)
    bursts = (1.0, args.rate)
    best: dict[tuple[str, float], list[float]] = {(n, b): [0.0, float("inf")] for n in LIMITERS for b in bursts}
    idle: dict[str, float] = dict.fromkeys(LIMITERS, float("inf"))
    for _ in range(args.rounds):  # interleaved rounds: a busier moment of the machine hits both alike
        for name, make in LIMITERS.items():
            for burst in bursts:
                accuracy, cpu = await contended(make, args.rate, burst, args.tasks, args.seconds)
                b = best[(name, burst)]
                b[0], b[1] = max(b[0], accuracy), min(b[1], cpu)
            idle[name] = min(idle[name], await uncontended(make, 50_000))
    print(
        f"{args.tasks} tasks on one limiter at {args.rate:g}/s for {args.seconds:g}s, best of {args.rounds} rounds; "
        "uncontended: 50,000 acquires"
    )
    for name in LIMITERS:
        for burst in bursts:
            accuracy, cpu = best[(name, burst)]
            print(
                f"{name:11s} burst {burst:6g}: achieved/configured {accuracy:5.3f}  CPU/acquire {cpu:6.1f} us "
                f"(x{cpu / best[('ours', burst)][1]:4.2f} ours)"
            )
    for name, make in LIMITERS.items():
        fifo = await arrival_order(make)
        cost = await cancelled_waiter_cost(make)
        print(
            f"{name:11s} uncontended CPU/acquire {idle[name]:5.2f} us (x{idle[name] / idle['ours']:4.2f} ours)  "
            f"arrival order kept {fifo!s:5s}  wait after 10 cancelled waiters {cost * 1000:5.1f} ms (at 100/s)"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
