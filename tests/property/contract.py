"""The contract every parser of outside data keeps, checked on each generated input.

* valid input round-trips (the caller checks that part: it knows the encoder);
* invalid input raises the module's own error type, whose message names the input (path, key, bookie);
* nothing else escapes (no IndexError, struct.error, UnicodeDecodeError, RecursionError, ...);
* bounded work: the call's peak Python memory stays under `max_bytes` (tracemalloc) and it returns
  within `max_seconds`. The time bound is generous on purpose: it catches stalls (seconds of work for a
  few bytes of input), not speed; speed is measured by the benchmarks in bench/.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_SECONDS = 2.0


class Outcome:
    """What one call did: `value` when it returned, `error` when it raised the expected error type."""

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error

    @property
    def ok(self) -> bool:
        return self.error is None


def parse_contract(
    call: Callable[[], T],
    errors: type[BaseException] | tuple[type[BaseException], ...],
    *,
    names: str | tuple[str, ...] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
) -> Outcome:
    """Run `call` under the contract. `names`: text(s) that an error message must contain (the input's
    name: a znode path, a config key, a bookie id)."""
    wanted = (names,) if isinstance(names, str) else names
    # The cyclic collector is paused for the call: a long campaign leaves a large heap (hypothesis's own
    # bookkeeping), and a full collection of it landing inside one call once took 2.6 s of a call that
    # only rejects a header. Pauses that are not the parser's are not what the time bound is for.
    collecting = gc.isenabled()
    gc.disable()
    tracemalloc.start()
    started = time.perf_counter()
    try:
        value = call()
        outcome = Outcome(value=value)
    except errors as exc:  # the module's own error: fine, if it says what it is about
        message = str(exc)
        for name in wanted:
            assert name in message, f"error {type(exc).__name__} does not name {name!r}: {message!r}"
        outcome = Outcome(error=exc)
    finally:
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        if collecting:
            gc.enable()
    assert peak <= max_bytes, f"peak memory {peak} bytes > {max_bytes} for one input"
    assert elapsed <= max_seconds, f"one input took {elapsed:.2f}s > {max_seconds}s"
    return outcome
