"""DbLedgerStorage's on-disk formats, as BookKeeper 4.17 writes them (pure: bytes in, numbers out).

Checked against release-4.17.3 (`EntryLocationIndex`, `LedgerMetadataIndex`, `LongPairWrapper`,
`LongWrapper`, `ArrayUtil`, `DefaultEntryLogger`):

* `locations` RocksDB: key = ledger id (8 bytes, big-endian) + entry id (8 bytes, big-endian); value = one
  big-endian long, the entry log id in the high 32 bits and the byte offset in it in the low 32;
* `ledgers` RocksDB: key = ledger id (8 bytes, big-endian); value = a `LedgerData` protobuf (we only ask
  whether the key exists);
* both live in `<indexDir>/current/{ledgers,locations}` (`indexDirectories` defaults to
  `ledgerDirectories`, and each directory gets BookKeeper's `current/` suffix);
* an entry log is `<ledgerDir>/current/<log id in lower-case hex>.log`; at an indexed offset `pos` the
  entry's bytes start, preceded at `pos - 4` by their length (a big-endian int). The bytes are the entry
  as the client sent it (ledger id, entry id, LAC, length, digest, payload: auditor/durability/entry.py).
"""

from __future__ import annotations

import struct

LOCATION_KEY = struct.Struct(">qq")
LEDGER_KEY = struct.Struct(">q")
LOCATION_VALUE = struct.Struct(">q")
FRAME_SIZE = struct.Struct(">i")
# DefaultEntryLogger's MIN_SANE_ENTRY_SIZE: ledger id and entry id at least
MIN_ENTRY_SIZE = 16
# The file header every entry log starts with: no entry is ever stored before it.
ENTRY_LOG_HEADER_SIZE = 1024
MAX_LONG = (1 << 63) - 1


def location_key(ledger_id: int, entry_id: int) -> bytes:
    return LOCATION_KEY.pack(ledger_id, entry_id)


def parse_location_key(key: bytes) -> tuple[int, int]:
    """(ledger id, entry id) of a `locations` key; ValueError unless it is 16 bytes."""
    if len(key) != LOCATION_KEY.size:
        raise ValueError(f"a locations key is {LOCATION_KEY.size} bytes, got {len(key)}")
    ledger, entry = LOCATION_KEY.unpack(key)
    return int(ledger), int(entry)


def ledger_key(ledger_id: int) -> bytes:
    return LEDGER_KEY.pack(ledger_id)


def parse_location(value: bytes) -> tuple[int, int]:
    """(entry log id, offset) of a `locations` value; ValueError unless it is 8 bytes."""
    if len(value) != LOCATION_VALUE.size:
        raise ValueError(f"a location is {LOCATION_VALUE.size} bytes, got {len(value)}")
    (location,) = LOCATION_VALUE.unpack(value)
    return (location >> 32) & 0xFFFFFFFF, location & 0xFFFFFFFF


def entry_log_name(log_id: int) -> str:
    """The file name of entry log `log_id` (Java's Long.toHexString: lower case, no leading zeros)."""
    return f"{log_id:x}.log"


def parse_frame_size(header: bytes) -> int:
    """The entry length stored in the 4 bytes before an entry."""
    (size,) = FRAME_SIZE.unpack(header)
    return int(size)
