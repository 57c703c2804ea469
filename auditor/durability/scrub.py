"""The digest scrub's decisions: which copies a pass verifies, how fast each bookie is read, where a pass
is and how much of the cluster it has covered.

The scrub verifies every copy of every closed ledger (each write-set bookie's copy of each entry) once
per period (`period_s`, like HDFS's block scanner and Ceph's deep scrub). A *pass* walks the ledgers in
id order from its cursor (the last ledger it finished), so a new leader or a restarted daemon resumes
where the last one stopped; a pass that ends before its period is up waits for the next period to
begin. Each bookie is read within a byte budget (`ByteBudget`: a token bucket counted in bytes, which
may run into debt by one read, so the budget holds on average whatever the size of the entries).

Pure arithmetic on the times it is given (seconds, or milliseconds since the epoch where state is
persisted); the runner (auditor/checks/scrub.py) and the daemon's loop (auditor/daemon/scrub_loop.py)
do the I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from .ids import LedgerId
from .model import LedgerMetadata
from .ranges import RangeSet
from .schedule import expected_by_bookie

# A bookie's copies of one ledger are read in chunks of at most this many entries: a chunk is the unit
# the byte budget is charged by, and what one cancelled read loses.
CHUNK_ENTRIES = 256


@dataclass(frozen=True, slots=True)
class CopyPlan:
    """One bookie's copy of one ledger: the entries it should hold."""

    bookie: str
    entries: RangeSet


def copies_of(md: LedgerMetadata) -> list[CopyPlan]:
    """The copies a pass verifies of one ledger, in a stable order (bookie id): each write-set bookie's
    share of its entries (`expected_by_bookie`). A ledger that is not closed has none yet: its end is
    not fixed, and a later pass verifies it once it is."""
    if not md.is_closed or md.last_entry_id < 0:
        return []
    shares = expected_by_bookie(md)
    return [CopyPlan(b, shares[b].to_rangeset()) for b in sorted(shares)]


def copy_entries(md: LedgerMetadata) -> int:
    """How many entry copies of `md` a pass verifies (the sum of `copies_of`' shares)."""
    if not md.is_closed or md.last_entry_id < 0:
        return 0
    return sum(s.count() for s in expected_by_bookie(md).values())


def chunks(entries: RangeSet, size: int = CHUNK_ENTRIES) -> Iterator[RangeSet]:
    """`entries` cut into consecutive sets of at most `size` entries, ascending."""
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    picked: list[tuple[int, int]] = []
    room = size
    for a, b in entries.ranges:
        while a <= b:
            take = min(room, b - a + 1)
            picked.append((a, a + take - 1))
            a += take
            room -= take
            if room == 0:
                yield RangeSet(tuple(picked))
                picked, room = [], size
    if picked:
        yield RangeSet(tuple(picked))


class ByteBudget:
    """A token bucket counted in bytes: `rate` bytes/s, at most `burst` bytes saved up (rate 0 = no limit).

    A read is charged after it is done (its size is known only then): `charge` takes its bytes, letting
    the bucket go into debt, and returns how long to wait before the next read so that the debt is paid.
    Over any stretch of reads the bytes read are thus at most `burst + rate * elapsed` plus one read."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        if rate < 0 or burst < 0:
            raise ValueError(f"byte budget: rate and burst must be >= 0, got {rate}, {burst}")
        self.rate = float(rate)
        self.burst = float(burst)
        self.tokens = float(burst)
        self._at = now

    def _refill(self, now: float) -> None:
        if now > self._at:
            self.tokens = min(self.burst, self.tokens + (now - self._at) * self.rate)
            self._at = now

    def wait(self, now: float) -> float:
        """Seconds to wait at `now` before the next read may start (0 when the bucket is not in debt)."""
        if self.rate <= 0:
            return 0.0
        self._refill(now)
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def charge(self, nbytes: int, now: float) -> float:
        """Take `nbytes` just read; the seconds to wait before the next read."""
        if nbytes < 0:
            raise ValueError(f"cannot charge {nbytes} bytes")
        if self.rate <= 0:
            return 0.0
        self._refill(now)
        self.tokens -= nbytes
        return self.wait(now)


@dataclass(frozen=True, slots=True)
class ScrubProgress:
    """Where the scrub is, as persisted (times in epoch milliseconds; counts of the current pass).

    `cursor`: the last ledger the current pass finished (None: it starts at the first ledger).
    `planned_entries`: the entry copies the pass was planned with when it began (None: not counted).
    `previous_started_ms`: when the last complete pass began (every copy it verified is at most that
    old); None before the first pass completes, when `first_started_ms` says since when copies wait."""

    pass_started_ms: int | None = None
    cursor: LedgerId | None = None
    ledgers: int = 0
    copies: int = 0
    entries: int = 0
    bytes: int = 0
    unverified_entries: int = 0  # entries of copies that did not answer (UNKNOWN): not verified
    corrupt: int = 0
    planned_entries: int | None = None
    previous_started_ms: int | None = None
    previous_finished_ms: int | None = None
    first_started_ms: int | None = None
    passes: int = 0  # complete passes so far

    @property
    def in_pass(self) -> bool:
        return self.pass_started_ms is not None

    def begin(self, now_ms: int, planned_entries: int | None) -> ScrubProgress:
        """A new pass from the first ledger, at `now_ms`."""
        return replace(
            self,
            pass_started_ms=now_ms,
            cursor=None,
            ledgers=0,
            copies=0,
            entries=0,
            bytes=0,
            unverified_entries=0,
            corrupt=0,
            planned_entries=planned_entries,
            first_started_ms=self.first_started_ms if self.first_started_ms is not None else now_ms,
        )

    def ledger_done(
        self, ledger: LedgerId, *, copies: int, entries: int, nbytes: int, unverified: int, corrupt: int
    ) -> ScrubProgress:
        """The pass finished `ledger` (every later ledger id is still to come)."""
        return replace(
            self,
            cursor=ledger,
            ledgers=self.ledgers + 1,
            copies=self.copies + copies,
            entries=self.entries + entries,
            bytes=self.bytes + nbytes,
            unverified_entries=self.unverified_entries + unverified,
            corrupt=self.corrupt + corrupt,
        )

    def finish(self, now_ms: int) -> ScrubProgress:
        """The pass reached the last ledger: its start is now the age of the oldest verification."""
        return replace(
            self,
            pass_started_ms=None,
            cursor=None,
            previous_started_ms=self.pass_started_ms,
            previous_finished_ms=now_ms,
            passes=self.passes + 1,
        )


def next_pass_in(progress: ScrubProgress, now_ms: int, period_ms: int) -> float:
    """Seconds until the next pass should begin: 0 while a pass is under way (resume it) or when none ever
    ran; else one period after the last complete pass began (at once when that pass overran)."""
    if progress.in_pass or progress.previous_started_ms is None:
        return 0.0
    return max(0.0, (progress.previous_started_ms + period_ms - now_ms) / 1000.0)


def coverage_ratio(progress: ScrubProgress) -> float:
    """The share of the pass's planned entry copies verified: of the current pass while one is under way,
    else of the last complete one (its counts stay until the next begins); 0.0 before any pass, or in a
    pass whose plan could not be counted."""
    if not progress.in_pass and not progress.passes:
        return 0.0
    planned = progress.planned_entries
    if planned is None:
        if progress.in_pass:
            return 0.0
        planned = progress.entries + progress.unverified_entries
    return _ratio(progress.entries, planned)


def _ratio(done: int, total: int) -> float:
    return 1.0 if total <= 0 else min(1.0, done / total)


def oldest_verification_age_s(progress: ScrubProgress, now_ms: int) -> float | None:
    """How long the copies verified longest ago (or never) have waited: since the last complete pass
    began (every copy past the cursor was last verified then); before any pass completed, since the
    scrub first began. None before any pass began."""
    since = progress.previous_started_ms if progress.previous_started_ms is not None else progress.first_started_ms
    return None if since is None else max(0.0, (now_ms - since) / 1000.0)


def pass_seconds(bytes_per_bookie: int, bytes_per_second: float) -> float | None:
    """The cost formula: how long one pass takes on a bookie holding `bytes_per_bookie` bytes of copies at
    `bytes_per_second` (None: unlimited, bounded only by how fast the bookie reads)."""
    return None if bytes_per_second <= 0 else bytes_per_bookie / bytes_per_second
