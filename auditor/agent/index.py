"""DbLedgerStorage's RocksDB indexes (`ledgers`, `locations`), read beside the running bookie.

Each database is opened as a RocksDB *secondary* instance: unlike a read-only open, which is a snapshot
of the moment it was opened, a secondary follows the primary's MANIFEST and WAL on
`try_catch_up_with_primary`, so one long-lived open keeps up with the bookie; and unlike a second
read-write open it takes no LOCK and never compacts or flushes. Its own files (the secondary's info log,
its OPTIONS) go to the agent's scratch directory.

The binding (rocksdict) writes a `rocksdict-config.json` into the directory it opens, even for a secondary
or read-only open, so we never open the bookie's directory itself: we open a mirror in our scratch
directory that holds one symbolic link per file of the bookie's database (re-synced before each catch-up,
as the bookie adds and deletes SST and WAL files). RocksDB reads through the links; whatever it or the
binding writes lands in the mirror. The bookie's own directory is only ever listed and read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rocksdict import AccessType, Options, Rdict, ReadOptions

from auditor.durability.ranges import RangeSet
from auditor.errors import DataError

from .codecs import LOCATION_KEY, ledger_key, location_key, parse_location, parse_location_key

# Not linked: the bookie's info logs (LOG, LOG.old.*) and LOCK, which a secondary does not read, and the
# binding's own config file, which it (re)writes: a link to one found in the bookie's directory (left by
# some other rocksdict user) would have it write through the link into the bookie's directory.
_SKIPPED = ("LOG", "LOCK", "rocksdict-config.json")


class IndexReadError(DataError):  # the bookie's files: bytes from outside
    """The index could not be read (missing directory, RocksDB error): the answer is UNKNOWN."""


@dataclass(frozen=True, slots=True)
class Located:
    """Where one indexed entry is: which directory pair, which entry log, which offset."""

    entry_id: int
    dir_index: int
    log_id: int
    offset: int


def _sync_mirror(primary: Path, mirror: Path) -> None:
    """Make `mirror` hold a link to each file of `primary` (and no link to a file that is gone)."""
    try:
        names = {n for n in os.listdir(primary) if not n.startswith(_SKIPPED)}
    except OSError as exc:
        raise IndexReadError(f"{primary}: cannot list the index directory: {exc.strerror or exc}") from None
    mirror.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(mirror):
        if entry.is_symlink() and (entry.name not in names or entry.name.startswith(_SKIPPED)):
            os.unlink(entry.path)
    for name in names:
        link = mirror / name
        if not link.is_symlink():
            with contextlib.suppress(FileExistsError):
                os.symlink(primary / name, link)


class _Database:
    """One RocksDB database of the bookie, as a secondary instance over a mirror in `scratch`."""

    def __init__(self, primary: Path, scratch: Path) -> None:
        self.primary = primary
        self.scratch = scratch
        self._db: Rdict | None = None
        self._identity: bytes | None = None  # the database's IDENTITY when we opened it

    def _read_identity(self) -> bytes:
        """RocksDB's IDENTITY file: a unique id written when the database is created. A bookie that lost
        its disks and started afresh has a new database under the same path, with new ids."""
        try:
            return (self.primary / "IDENTITY").read_bytes()
        except OSError as exc:
            raise IndexReadError(f"{self.primary}: cannot read the index's IDENTITY: {exc.strerror or exc}") from None

    def _open(self) -> Rdict:
        mirror, secondary, logs = self.scratch / "mirror", self.scratch / "secondary", self.scratch / "log"
        for d in (secondary, logs):
            d.mkdir(parents=True, exist_ok=True)
        _sync_mirror(self.primary, mirror)
        options = Options(raw_mode=True)
        options.create_if_missing(False)
        options.set_max_open_files(-1)  # a secondary instance requires it
        options.set_db_log_dir(str(logs))
        identity = self._read_identity()
        try:
            db = Rdict(str(mirror), options, access_type=AccessType.secondary(str(secondary)))
        except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
            raise IndexReadError(f"{self.primary}: cannot open the RocksDB index: {exc}") from None
        self._identity = identity
        return db

    @property
    def db(self) -> Rdict:
        if self._db is None:
            self._db = self._open()
        return self._db

    def refresh(self) -> None:
        """Catch up with the bookie. A file the bookie created between our sync and the catch-up makes
        it fail: sync again and retry once."""
        if self._db is not None and self._read_identity() != self._identity:
            # Another database now lives at this path (the bookie was wiped and formatted again): catching
            # up would keep our view of the old one, whose files we still hold open. Start over.
            self.close()
            shutil.rmtree(self.scratch / "mirror", ignore_errors=True)  # links into the old database
            shutil.rmtree(self.scratch / "secondary", ignore_errors=True)
        if self._db is None:
            self._db = self._open()
            return
        for attempt in (1, 2):
            _sync_mirror(self.primary, self.scratch / "mirror")
            try:
                self._db.try_catch_up_with_primary()
                return
            except Exception as exc:
                if attempt == 2:
                    raise IndexReadError(f"{self.primary}: cannot catch up with the bookie's index: {exc}") from None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


class DirectoryIndex:
    """The two databases of one index directory (`<indexDir>/current/{ledgers,locations}`)."""

    def __init__(self, dir_index: int, index_dir: Path, scratch: Path) -> None:
        self.dir_index = dir_index
        self.index_dir = index_dir
        current = index_dir / "current"
        self.ledgers = _Database(current / "ledgers", scratch / f"dir{dir_index}" / "ledgers")
        self.locations = _Database(current / "locations", scratch / f"dir{dir_index}" / "locations")

    def refresh(self) -> None:
        self.ledgers.refresh()
        self.locations.refresh()

    def knows(self, ledger_id: int) -> bool:
        return self.ledgers.db.get(ledger_key(ledger_id)) is not None

    def located(self, ledger_id: int, first: int = 0, last: int = (1 << 63) - 1) -> Iterator[Located]:
        """The indexed entries of `ledger_id` with ids in [first, last], ascending."""
        read = ReadOptions()
        read.set_iterate_upper_bound(location_key(ledger_id, last) + b"\x00")
        it = self.locations.db.iter(read)
        it.seek(location_key(ledger_id, max(first, 0)))
        while it.valid():
            key = it.key()
            if len(key) != LOCATION_KEY.size:
                raise IndexReadError(f"{self.locations.primary}: a key of {len(key)} bytes (16 expected)")
            found_ledger, entry_id = parse_location_key(key)
            if found_ledger != ledger_id:
                break
            log_id, offset = parse_location(it.value())
            yield Located(entry_id, self.dir_index, log_id, offset)
            it.next()

    def close(self) -> None:
        self.ledgers.close()
        self.locations.close()


@dataclass(frozen=True, slots=True)
class LedgerIndexAnswer:
    """What the indexes say of one ledger: `known` = the ledgers index or the locations index has it."""

    ledger_id: int
    known: bool
    entries: RangeSet


class BookieIndex:
    """All index directories of one bookie, merged (DbLedgerStorage puts each ledger in one of them, by
    ledger id modulo their number; we ask all, so a changed directory list cannot hide a ledger).

    Thread-safe by one lock: the gRPC service calls it from a worker thread. `max_age` bounds how old the
    view may be when a question is answered: an older one is refreshed first."""

    def __init__(self, index_dirs: list[Path], scratch: Path, max_age: float = 1.0) -> None:
        if not index_dirs:
            raise ValueError("no index directory")
        self.dirs = [DirectoryIndex(i, d, scratch) for i, d in enumerate(index_dirs)]
        self.max_age = max_age
        self.as_of = 0.0  # unix time the last successful refresh started: the view is at least this new
        self.refreshes = 0
        self.refresh_failures = 0
        self.on_refresh: Callable[[str], None] | None = None  # told "ok" or "failed" (the agent's metric)
        self._lock = threading.Lock()

    def age(self) -> float:
        return time.time() - self.as_of if self.as_of else float("inf")

    def _fresh(self) -> None:
        if self.age() <= self.max_age:
            return
        started = time.time()
        try:
            for d in self.dirs:
                d.refresh()
        except IndexReadError:
            self.refresh_failures += 1
            if self.on_refresh is not None:
                self.on_refresh("failed")
            raise
        self.refreshes += 1
        self.as_of = started
        if self.on_refresh is not None:
            self.on_refresh("ok")

    def refresh(self) -> float:
        """Catch up now; the new `as_of`."""
        with self._lock:
            self.as_of = 0.0
            self._fresh()
            return self.as_of

    def entries(self, ledger_id: int) -> LedgerIndexAnswer:
        with self._lock:
            self._fresh()
            known = False
            runs: list[list[int]] = []
            try:
                for d in self.dirs:
                    known = known or d.knows(ledger_id)
                    for loc in d.located(ledger_id):
                        known = True
                        if runs and loc.entry_id == runs[-1][1] + 1:
                            runs[-1][1] = loc.entry_id
                        else:
                            runs.append([loc.entry_id, loc.entry_id])
            except IndexReadError:
                raise
            except Exception as exc:  # a RocksDB read error
                raise IndexReadError(f"ledger {ledger_id}: the index could not be read: {exc}") from None
            return LedgerIndexAnswer(ledger_id, known, RangeSet.of((a, b) for a, b in runs))

    def locations(self, ledger_id: int, first: int, last: int) -> tuple[bool, list[Located]]:
        """(known, the indexed entries of [first, last] with their locations)."""
        with self._lock:
            self._fresh()
            try:
                known = any(d.knows(ledger_id) for d in self.dirs)
                found = [loc for d in self.dirs for loc in d.located(ledger_id, first, last)]
            except IndexReadError:
                raise
            except Exception as exc:
                raise IndexReadError(f"ledger {ledger_id}: the index could not be read: {exc}") from None
            found.sort(key=lambda loc: loc.entry_id)
            return known or bool(found), found

    def close(self) -> None:
        with self._lock:
            for d in self.dirs:
                d.close()
