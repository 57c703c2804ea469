"""A directory laid out as a DbLedgerStorage bookie's (`current/ledgers`, `current/locations`, entry logs),
written here with RocksDB itself (the key and value formats of codecs.py), for the agent's unit tests.
The real bookie's layout is tested in tests/realcluster/agent/."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rocksdict import Options, Rdict

from auditor.agent.codecs import ledger_key, location_key
from auditor.durability.entry import compute_digest
from auditor.durability.model import DigestType


@dataclass
class FakeBookieDir:
    """A primary RocksDB pair and one entry log, written entry by entry as the bookie would."""

    root: Path
    ledgers: Rdict
    locations: Rdict
    log: bytearray = field(default_factory=lambda: bytearray(b"BKLO" + b"\x00" * 1020))

    def add(self, ledger: int, entry: int, payload: bytes = b"p" * 40, digest: DigestType = DigestType.CRC32C) -> int:
        header = ledger.to_bytes(8, "big") + entry.to_bytes(8, "big") + (entry - 1).to_bytes(8, "big", signed=True)
        header += (len(payload) * (entry + 1)).to_bytes(8, "big")
        body = header + compute_digest(digest, header, payload) + payload
        self.log += len(body).to_bytes(4, "big")
        offset = len(self.log)
        self.log += body
        (self.root / "current" / "0.log").write_bytes(bytes(self.log))
        self.ledgers[ledger_key(ledger)] = b"\x08\x01"  # a LedgerData with exists=true
        self.locations[location_key(ledger, entry)] = offset.to_bytes(8, "big")  # log 0
        return offset

    def flush(self) -> None:
        self.ledgers.flush()
        self.locations.flush()


@pytest.fixture
def bookie_dir(tmp_path: Path) -> Iterator[FakeBookieDir]:
    root = tmp_path / "bookie" / "ledgers"
    (root / "current").mkdir(parents=True)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    d = FakeBookieDir(
        root, Rdict(str(root / "current" / "ledgers"), opts), Rdict(str(root / "current" / "locations"), opts)
    )
    try:
        yield d
    finally:
        d.ledgers.close()
        d.locations.close()
