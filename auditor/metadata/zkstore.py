"""The ZooKeeper implementation of the metadata store: one connection (zkconnection) with the recipes for
each part of BookKeeper's tree, composed into the one class callers use.

    zkconnection  kazoo bridged to asyncio: connect (LAYOUT check), reads, watches, guarded writes
    zkledgers     ledger metadata: listing, scans, reads (never written)
    zkbookies     registrations, cookies, bookie addresses, Pulsar's rack map
    zkmarkers     under-replication markers (Java's format), the disable flag, lostBookieRecoveryDelay
    zkownstate    our own znodes under `<root>/bk-auditor`

Reads never create anything. Every write is a ZooKeeper multi-op whose first op checks that the
leader's guard znode (its election vote) still exists, so a deposed leader's write fails atomically.
"""

from __future__ import annotations

from .zkbookies import BookieRegistry
from .zkledgers import LedgerReads
from .zkmarkers import UnderReplicationMarkers
from .zkownstate import OwnZnodes


class ZooKeeperMetadataStore(LedgerReads, BookieRegistry, UnderReplicationMarkers, OwnZnodes):
    """BookKeeper's ZooKeeper metadata, read (and carefully written) as Java does (`connect()` to open)."""
