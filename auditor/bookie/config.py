"""What a bookie client is told: where the bookie is (`Address`, a `Resolver`, or the legacy reading of
its id), and its options (`BookieClientConfig`: timeouts, window, rate limit, backoff, TLS)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from auditor.aio.adaptive import AdaptivePolicy

from . import protocol as P
from .tls import BookieTls

Address = tuple[str, int]
Resolver = Callable[[str], Address | Awaitable[Address]]


@dataclass(frozen=True, slots=True)
class BookieClientConfig:
    request_timeout: float = 5.0  # per request, from write to reply (Java default read timeout: 5 s)
    connect_timeout: float = 5.0
    max_in_flight: int = 128  # concurrency limit: requests on the wire at once
    rate_limit: float | None = None  # requests per second; None = only the concurrency limit
    rate_burst: float | None = None  # token bucket size; default max(1, rate_limit)
    adaptive: AdaptivePolicy | None = None  # with rate_limit: the rate adapts below it (None: fixed)
    max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE
    backoff_initial: float = 0.1
    backoff_max: float = 10.0
    backoff_multiplier: float = 2.0
    liveness_timeout: float = 2.0  # for the GET_BOOKIE_INFO ping that tells "alive" from "silent"
    entry_list_probe_timeout: float = 1.0  # for probe_entry_list_support
    dead_after_timeouts: int = 3  # consecutive timeouts with nothing received -> reconnect
    keepalive: bool = True
    tls: BookieTls | None = None  # None: plaintext; set: START_TLS on every connection, never plaintext

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        if self.rate_limit is not None and self.rate_limit <= 0:
            raise ValueError("rate_limit must be > 0 or None")
        if self.max_frame_size < 64:
            raise ValueError("max_frame_size is unreasonably small")


def parse_bookie_id_address(bookie_id: str) -> Address:
    """The legacy reading of a bookie id as `host:port` (spec §7). Only a fallback: since BookKeeper
    4.12 ids can be arbitrary names and must be resolved through ZooKeeper registrations."""
    host, sep, port = bookie_id.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bookie id {bookie_id!r} is not host:port; it needs a resolver")
    return host, int(port)
