"""BookKeeper metadata adapters: ZooKeeper (kazoo, bridged to asyncio) behind small interfaces."""
from .errors import (ConcurrentUpdateError, CorruptZnodeError, LayoutMismatchError, MetadataConfigError,
                     MetadataError, NoSuchLedgerError, NotLeaderError, UnsupportedLayoutError)
from .interfaces import (BookieAddress, BookieRegistration, CookieRecord, CorruptLedger, LedgerRecord,
                         MarkerRecord, MetadataStore, NodeStat, Registrations, WriteGuard)
from .location import Driver, LedgerManager, MetadataLocation, from_settings, parse_service_uri
from .paths import LedgerBatch, LedgerPaths, MarkerPaths

__all__ = [
    "BookieAddress", "BookieRegistration", "ConcurrentUpdateError", "CookieRecord", "CorruptLedger",
    "CorruptZnodeError", "Driver", "LayoutMismatchError", "LedgerBatch", "LedgerManager", "LedgerPaths",
    "LedgerRecord", "MarkerPaths", "MarkerRecord", "MetadataConfigError", "MetadataError", "MetadataLocation",
    "MetadataStore", "NoSuchLedgerError", "NodeStat", "NotLeaderError", "Registrations",
    "UnsupportedLayoutError", "WriteGuard", "from_settings", "parse_service_uri",
]
