"""BookKeeper metadata adapters: ZooKeeper (kazoo, bridged to asyncio) behind small interfaces."""

from .election import LeaderElection, VoteGuard, election_path
from .errors import (
    ConcurrentUpdateError,
    CorruptZnodeError,
    LayoutMismatchError,
    MetadataConfigError,
    MetadataError,
    NoSuchLedgerError,
    NotLeaderError,
    UnsupportedLayoutError,
)
from .interfaces import (
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
from .location import Driver, LedgerManager, MetadataLocation, from_settings, parse_service_uri
from .paths import LedgerBatch, LedgerPaths, MarkerPaths
from .zkbookies import address_of, pulsar_racks
from .zkstore import ZooKeeperMetadataStore

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
