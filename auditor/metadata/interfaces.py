"""Small interfaces the rest of the auditor codes against, so that another metadata store (Oxia, etcd)
can be added beside the ZooKeeper one. Records here are store-neutral.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata
from auditor.metadata.codecs.formats import BookieServiceInfo, Cookie
from auditor.metadata.codecs.paths import LedgerBatch

if TYPE_CHECKING:
    from kazoo.protocol.states import ZnodeStat


@dataclass(frozen=True, slots=True)
class NodeStat:
    """The parts of a store's per-key version info we use (ZooKeeper: the znode Stat)."""

    version: int
    czxid: int = 0
    mzxid: int = 0
    ctime_ms: int = 0
    mtime_ms: int = 0
    ephemeral_owner: int = 0

    @classmethod
    def from_zk(cls, stat: ZnodeStat) -> NodeStat:
        return cls(stat.version, stat.czxid, stat.mzxid, stat.ctime, stat.mtime, stat.ephemeralOwner)


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    """Ledger metadata as read, with where and at which version."""

    metadata: LedgerMetadata
    path: str
    stat: NodeStat

    @property
    def effective_ctime(self) -> int:
        """Creation time as Java reports it: the stored ctime, else the znode's creation time."""
        return self.metadata.ctime if self.metadata.ctime is not None else self.stat.ctime_ms


@dataclass(frozen=True, slots=True)
class CorruptLedger:
    """A ledger whose metadata could not be parsed: listed, counted, never fatal to a scan."""

    ledger_id: LedgerId
    path: str
    problem: str


@dataclass(frozen=True, slots=True)
class BookieRegistration:
    bookie_id: str
    read_only: bool
    info: BookieServiceInfo | None
    stat: NodeStat
    info_error: str | None = None  # set when the registration data could not be parsed


@dataclass(frozen=True, slots=True)
class Registrations:
    writable: Mapping[str, BookieRegistration]
    read_only: Mapping[str, BookieRegistration]

    @property
    def available(self) -> frozenset[str]:
        """Writable or read-only: what the Java auditor calls available."""
        return frozenset(self.writable) | frozenset(self.read_only)


@dataclass(frozen=True, slots=True)
class CookieRecord:
    cookie: Cookie | None
    stat: NodeStat
    error: str | None = None

    @property
    def incarnation(self) -> tuple[int, int]:
        """(czxid, mzxid): changes when the bookie is reformatted or its cookie is re-stamped."""
        return self.stat.czxid, self.stat.mzxid


@dataclass(frozen=True, slots=True)
class BookieAddress:
    host: str
    port: int
    best_effort: bool  # True when parsed from the id because no registration data said otherwise


@dataclass(frozen=True, slots=True)
class MarkerRecord:
    ledger_id: LedgerId
    path: str
    replicas: tuple[str, ...]
    ctime: int  # -1 when the marker has none
    stat: NodeStat


@dataclass(frozen=True, slots=True)
class LockRecord:
    """A replication worker's lock on a marked ledger: who holds it (Java writes its host) and since when."""

    ledger_id: LedgerId
    path: str
    holder: str
    ctime_ms: int


@dataclass(frozen=True, slots=True)
class HeldLock:
    """A repair worker's lock on one marked ledger, and the marker version captured when it was taken
    (the only version `mark_replicated` deletes)."""

    ledger_id: LedgerId
    marker_path: str
    lock_path: str
    marker_version: int
    holder: str


class ReleaseOutcome(enum.Enum):
    MARKER_DELETED = "marker_deleted"  # re-checked clean, marker deleted at the captured version
    MARKER_KEPT = "marker_kept"  # re-marked meanwhile (version changed): it stays for another pass
    MARKER_GONE = "marker_gone"  # someone else removed it already


class MarkResult(enum.Enum):
    CREATED = "created"
    MERGED = "merged"  # existing marker, new replicas added (ctime refreshed)
    UNCHANGED = "unchanged"  # existing marker already listed every replica: nothing written


@dataclass(slots=True)
class ScanStats:
    """Counters of one ledger scan; `last_ledger` is the cursor to resume from."""

    directories: int = 0
    listed: int = 0
    read: int = 0
    vanished: int = 0  # listed, then gone before we read it (deleted mid-scan)
    corrupt: int = 0
    skipped_names: int = 0  # non-ledger znodes met in ledger directories
    last_ledger: LedgerId | None = None  # resume cursor: scan again from last_ledger + 1


@runtime_checkable
class WriteGuard(Protocol):
    """What a write needs to prove the writer is the current leader.

    `check()` raises NotLeaderError at once when leadership is known to be lost locally;
    `guard_path` must still exist for the store to apply the write (checked atomically with it).
    """

    @property
    def guard_path(self) -> str: ...

    def check(self) -> None: ...


@runtime_checkable
class ProvingGuard(WriteGuard, Protocol):
    """A guard whose writes must prove more than one znode still exists (the repair lock: the session's
    proof node and the lock, `repair.lock.LockGuard`): every path of `guard_paths` is checked, in order,
    inside the write's multi-op, and a failed check raises `refused(path, problem)`."""

    @property
    def guard_paths(self) -> tuple[str, ...]: ...

    def refused(self, path: str, problem: str) -> Exception: ...


class MetadataStore(Protocol):
    """The reads (and leader-guarded writes) the checks and the daemon need from a BookKeeper metadata store
    (what `AuditContext.store` offers)."""

    def list_ledgers(
        self, start: LedgerId | None = None, end: LedgerId | None = None
    ) -> AsyncIterator[LedgerBatch]: ...

    def scan_ledgers(
        self, start: LedgerId | None = None, end: LedgerId | None = None, *, stats: ScanStats | None = None
    ) -> AsyncIterator[list[LedgerRecord | CorruptLedger]]: ...

    async def read_ledger(self, ledger_id: LedgerId) -> LedgerRecord: ...

    async def read_ledgers(self, ids: Iterable[LedgerId]) -> list[LedgerRecord | CorruptLedger | None]: ...

    async def ledger_versions(self, ids: Iterable[LedgerId]) -> list[int | None]: ...

    async def registrations(self) -> Registrations: ...

    async def cookies(self) -> Mapping[str, CookieRecord]: ...

    async def resolve_bookie(self, bookie_id: str) -> BookieAddress | None: ...

    async def read_marker(self, ledger_id: LedgerId) -> MarkerRecord | None: ...

    async def read_lock(self, ledger_id: LedgerId) -> LockRecord | None: ...

    def list_markers(self) -> AsyncIterator[MarkerRecord]: ...

    async def marked_ids(self) -> set[LedgerId]: ...

    async def mark_underreplicated(
        self,
        ledger_id: LedgerId,
        replicas: Iterable[str],
        guard: WriteGuard,
        *,
        if_metadata_version: int | None = None,
    ) -> MarkResult: ...

    async def is_replication_disabled(self) -> bool: ...

    async def lost_bookie_recovery_delay(self) -> int | None: ...

    def watch_lost_bookie_recovery_delay(self, callback: Callable[[int | None], None]) -> Callable[[], None]: ...


class RepairLockProtocol(Protocol):
    """The repair worker's side of Java's under-replication work protocol (markers, `locks/urL<id>`,
    `disable`): what a repair worker codes against (ZooKeeper: `repair.lock.RepairLocks`)."""

    def markers(self) -> AsyncIterator[MarkerRecord]: ...

    async def locked(self) -> frozenset[str]: ...

    async def is_disabled(self) -> bool: ...

    async def wait_enabled(self, timeout: float | None = None) -> bool: ...

    async def try_lock(self, ledger_id: LedgerId) -> HeldLock | None: ...

    async def mark_replicated(self, held: HeldLock) -> ReleaseOutcome: ...

    async def release(self, held: HeldLock) -> None: ...


@runtime_checkable
class LeaderElection(Protocol):
    @property
    def is_leader(self) -> bool: ...

    @property
    def guard(self) -> WriteGuard: ...

    async def wait_leader(self) -> None: ...
