"""Entry bytes at an indexed location (auditor/agent/entrylog.py): the frame checked, every problem an
EntryLogError naming the file and offset, the file opened read-only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from auditor.agent.entrylog import EntryLogError, EntryLogReader, names_entry


def _entry(ledger: int, entry: int, payload: bytes) -> bytes:
    return ledger.to_bytes(8, "big") + entry.to_bytes(8, "big") + b"\x00" * 16 + payload


def _log(tmp_path: Path, log_id: int, entries: list[bytes]) -> tuple[Path, list[int]]:
    """An entry log as DefaultEntryLogger lays it out: a 1024-byte header, then length-prefixed entries."""
    current = tmp_path / "ledgers" / "current"
    current.mkdir(parents=True, exist_ok=True)
    data, offsets = bytearray(b"BKLO" + b"\x00" * 1020), []
    for e in entries:
        data += len(e).to_bytes(4, "big")
        offsets.append(len(data))
        data += e
    (current / f"{log_id:x}.log").write_bytes(bytes(data))
    return tmp_path / "ledgers", offsets


def test_reads_the_entry_at_its_offset(tmp_path: Path) -> None:
    entries = [_entry(5, i, bytes([i]) * (10 + i)) for i in range(3)]
    ledger_dir, offsets = _log(tmp_path, 0x1A, entries)
    reader = EntryLogReader([ledger_dir])
    try:
        for e, off in zip(entries, offsets, strict=True):
            data = reader.read(0, 0x1A, off)
            assert data == e and names_entry(data, 5, e[15])
        assert not names_entry(reader.read(0, 0x1A, offsets[1]), 5, 0)
    finally:
        reader.close()


def test_problems_are_entry_log_errors(tmp_path: Path) -> None:
    ledger_dir, offsets = _log(tmp_path, 1, [_entry(5, 0, b"x" * 20)])
    reader = EntryLogReader([ledger_dir])
    try:
        with pytest.raises(EntryLogError, match="no such entry log"):
            reader.read(0, 2, offsets[0])
        with pytest.raises(EntryLogError, match="header"):
            reader.read(0, 1, 100)
        with pytest.raises(EntryLogError, match="implausible entry length"):
            reader.read(0, 1, offsets[0] + 8)  # inside the entry: its bytes read as a length
        path = ledger_dir / "current" / "1.log"
        os.truncate(path, offsets[0] + 10)
        reader.forget(0, 1)
        with pytest.raises(EntryLogError, match="short read"):
            reader.read(0, 1, offsets[0])
    finally:
        reader.close()


def test_the_file_is_opened_read_only(tmp_path: Path) -> None:
    ledger_dir, offsets = _log(tmp_path, 3, [_entry(1, 0, b"y" * 30)])
    before = os.stat(ledger_dir / "current" / "3.log")
    reader = EntryLogReader([ledger_dir])
    try:
        reader.read(0, 3, offsets[0])
        [fd] = reader._fds.values()
        import fcntl

        assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
    finally:
        reader.close()
    after = os.stat(ledger_dir / "current" / "3.log")
    assert (before.st_mtime_ns, before.st_size) == (after.st_mtime_ns, after.st_size)
