"""Typed errors of the metadata adapters. Every error names the znode (or file) it is about.

All derive from `auditor.errors.MetadataError` (the tree is drawn in auditor/errors.py)."""

from __future__ import annotations

from auditor.errors import MetadataError

__all__ = [
    "ConcurrentUpdateError",
    "CorruptZnodeError",
    "LayoutMismatchError",
    "MetadataConfigError",
    "MetadataError",
    "MissingZnodeError",
    "NoSuchLedgerError",
    "NotALedgersRootError",
    "NotLeaderError",
    "RepairLockLostError",
    "UnsupportedLayoutError",
    "ZooKeeperUnreachableError",
]


class MetadataConfigError(MetadataError):
    """The configuration (service URI, legacy settings, rack file or script) is unusable."""


class NotALedgersRootError(MetadataConfigError):
    """The configured ledgers root is not a BookKeeper cluster's (no LAYOUT and no `available` znode):
    a wrong metadataServiceUri path or zkLedgersRootPath. Nothing is audited, nothing is created."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path


class ZooKeeperUnreachableError(MetadataError, TimeoutError):
    """No ZooKeeper server answered within the connect timeout; names the servers tried."""

    def __init__(self, servers: str, timeout: float, how: str = "") -> None:
        # `how`: TLS and credentials, when any (a failing TLS handshake looks like no answer at all).
        shown = f"{servers} ({how})" if how else servers
        super().__init__(f"cannot reach ZooKeeper at {shown} within {timeout:g}s (zookeeper.connect_timeout_seconds)")
        self.servers = servers


class MissingZnodeError(MetadataError):
    """A znode that every BookKeeper cluster has (e.g. `<root>/available`) is missing: reading it as
    empty would make an unreadable cluster look healthy."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path


class UnsupportedLayoutError(MetadataError):
    """The cluster uses a ledger manager this auditor cannot read (e.g. MetaStore, a custom class)."""


class LayoutMismatchError(MetadataError):
    """The configured ledger manager and the cluster's LAYOUT znode disagree (Java refuses too)."""


class CorruptZnodeError(MetadataError):
    """A znode's content cannot be parsed. `path` is the znode, `problem` says what is wrong."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class NotLeaderError(MetadataError):
    """A guarded write was refused: the writer is not (or no longer) the elected leader."""


class RepairLockLostError(NotLeaderError):
    """A repair write was refused: the worker's `locks/urL<id>` lock is no longer held by this session
    (released, or the session that created it expired). Names the lock znode."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path


class ConcurrentUpdateError(MetadataError):
    """A compare-and-set write lost: the znode changed (or vanished) since it was read."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class MetadataVersionChangedError(ConcurrentUpdateError):
    """A write conditioned on a ledger's metadata version was refused: the ledger changed (or was
    deleted) since that version was read, so the caller must re-read it before deciding again."""


class NoSuchLedgerError(MetadataError):
    """The ledger's znode does not exist (never created, or deleted)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: no such ledger")
        self.path = path
