"""Async, read-only client for BookKeeper bookies (the v3 protocol).

    async with BookiePool(resolver) as pool:
        r = await pool.client("127.0.0.1:3181").read_entry(ledger_id, entry_id)
        if r.present: r.verify(digest_type, password)

Outcomes are `results.Outcome` PRESENT / ABSENT / UNKNOWN values, never exceptions. The encoder
refuses every operation except READ_ENTRY, READ_LAC, GET_BOOKIE_INFO, GET_LIST_OF_ENTRIES_OF_LEDGER,
the AUTH probe and START_TLS, which opens a TLS connection (`protocol.UnsafeRequestError`).

Beside it, on a v2 connection of its own, `pool.batch_reader(bookie)` reads many entries a request
(BATCH_READ_ENTRY, BookKeeper 4.17+; batch.py), its gate as strict (v2.py: plain reads only).
"""

from auditor.aio.ratelimit import TokenBucket

from .batch import BatchReader
from .client import BookieClient
from .config import BookieClientConfig, parse_bookie_id_address
from .pending import Sent
from .pool import BookieClients, BookiePool, legacy_resolver
from .protocol import Op, ProtocolError, Status, UnsafeRequestError
from .results import (
    AuthProbeResult,
    BatchReadResult,
    BookieInfoResult,
    BookieResult,
    Capability,
    EntryListResult,
    Outcome,
    ReadEntryResult,
    ReadLacResult,
)
from .tls import BookieTls
from .transport import ClientStats

__all__ = [
    "AuthProbeResult",
    "BatchReadResult",
    "BatchReader",
    "BookieClient",
    "BookieClientConfig",
    "BookieClients",
    "BookieInfoResult",
    "BookiePool",
    "BookieResult",
    "BookieTls",
    "Capability",
    "ClientStats",
    "EntryListResult",
    "Op",
    "Outcome",
    "ProtocolError",
    "ReadEntryResult",
    "ReadLacResult",
    "Sent",
    "Status",
    "TokenBucket",
    "UnsafeRequestError",
    "legacy_resolver",
    "parse_bookie_id_address",
]
