"""BookKeeper metadata adapters: ZooKeeper (kazoo, bridged to asyncio) behind small interfaces."""

from auditor.metadata.bookkeeper.bookies import address_of, pulsar_racks
from auditor.metadata.bookkeeper.election import LeaderElection, VoteGuard, election_path
from auditor.metadata.codecs.paths import LedgerBatch, LedgerPaths, MarkerPaths
from auditor.metadata.errors import (
    ConcurrentUpdateError,
    CorruptZnodeError,
    LayoutMismatchError,
    MetadataConfigError,
    MetadataError,
    NoSuchLedgerError,
    NotLeaderError,
    UnsupportedLayoutError,
)
from auditor.metadata.interfaces import (
    BookieAddress,
    BookieRegistration,
    CookieRecord,
    CorruptLedger,
    LedgerRecord,
    MarkerRecord,
    MarkResult,
    MetadataStore,
    NodeStat,
    Registrations,
    ScanStats,
    WriteGuard,
)
from auditor.metadata.location import Driver, LedgerManager, MetadataLocation, from_settings, parse_service_uri
from auditor.metadata.store import ZooKeeperMetadataStore

__all__ = [
    "BookieAddress",
    "BookieRegistration",
    "ConcurrentUpdateError",
    "CookieRecord",
    "CorruptLedger",
    "CorruptZnodeError",
    "Driver",
    "LayoutMismatchError",
    "LedgerBatch",
    "LedgerManager",
    "LedgerPaths",
    "LedgerRecord",
    "MarkerPaths",
    "MarkerRecord",
    "MetadataConfigError",
    "MetadataError",
    "MetadataLocation",
    "MetadataStore",
    "NoSuchLedgerError",
    "NodeStat",
    "NotLeaderError",
    "Registrations",
    "UnsupportedLayoutError",
    "WriteGuard",
    "from_settings",
    "parse_service_uri",
    "LeaderElection",
    "VoteGuard",
    "election_path",
    "MarkResult",
    "ScanStats",
    "ZooKeeperMetadataStore",
    "address_of",
    "pulsar_racks",
]
