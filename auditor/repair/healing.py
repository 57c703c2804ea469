"""Healing bit rot: the corrupt copies of one ledger found by reading, and the bookies holding them moved.

BP-31: no repair in the read path. The repair worker heals the corrupt copies its copies met, and, for a
marked ledger whose every copy is where it belongs, the ones a read of every copy finds
(`Healer.corrupt_copies`: entry lists carry no digest, so a `digest_mismatch` the auditor's reads found
shows only to a read). A bookie holding a corrupt copy is replaced in that copy's segment (`move`, the
attempt's MOVE: its stripe copied to another bookie from verified copies, the ensemble updated
version-checked), as Java's ReplicationWorker replaces the bookie of a bad fragment. Re-adding a good copy over the corrupt one, in
place, is not a repair: a real bookie keeps serving the corrupt bytes. SortedLedgerStorage reads its
flushed copy before its memtable and flushes the memtable only when it is full or at shutdown;
DbLedgerStorage serves the new copy from its write cache only until the cache is flushed, and then the
stale corrupt copy from its read-ahead cache (filled by the reads that found the rot) until that is
evicted. Everything here but the replacement is read-only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator

from auditor.aio.tasks import gather_all
from auditor.bookie.pool import BookiePool
from auditor.durability.entry import EntryVerification, Verdict, verify_entry
from auditor.durability.model import LedgerMetadata
from auditor.durability.ranges import RangeSet
from auditor.durability.repackage import LedgerCredentials, depends_on_credentials
from auditor.durability.schedule import write_set
from auditor.logging import get_logger
from auditor.metadata.repair.lock import LockGuard

from .attempt import Tally
from .copy import CorruptReplica
from .evidence import BookieStates
from .metrics import RepairMetrics

log = get_logger("auditor.repair")

# The credentials one ledger is read and repaired with, for the given entries (the worker's, proven once).
CredentialsFor = Callable[[LedgerMetadata, Iterable[int]], Awaitable[LedgerCredentials]]
# The attempt's MOVE of one member of one segment (segment, index, its corrupt copies): the metadata after.
MoveMember = Callable[[LedgerMetadata, int, int, RangeSet, Tally, LockGuard], Awaitable[LedgerMetadata]]


class Healer:
    """Finds and heals the corrupt copies of the ledgers one worker repairs."""

    def __init__(
        self,
        bookies: BookiePool,
        states: BookieStates,
        credentials: CredentialsFor,
        move: MoveMember,
        metrics: RepairMetrics | None,
    ) -> None:
        self._bookies = bookies
        self._states = states  # the worker's, refreshed before each assessment
        self._credentials = credentials
        self._move = move
        self._metrics = metrics

    async def corrupt_copies(self, md: LedgerMetadata, in_flight: int) -> list[tuple[int, CorruptReplica]]:
        """Every copy of every entry the copy path may rewrite (a closed ledger's segments; an open
        ledger's all but its last, which is the writer's), read from each writable member of its write
        set and verified; the ones that fail, by segment. Read-only, `in_flight` at once."""
        creds = await self._credentials(md, ())
        writable = set(self._states.writable)
        found: list[tuple[int, CorruptReplica]] = []

        def copies() -> Iterator[tuple[int, str, int]]:
            last = len(md.segments) if md.is_closed else len(md.segments) - 1
            for i in range(last):
                first = md.segments[i].first_entry_id
                end = md.segments[i + 1].first_entry_id - 1 if i + 1 < len(md.segments) else md.last_entry_id
                ensemble = md.segments[i].ensemble
                for e in range(first, end + 1):
                    for k in write_set(e, md.ensemble_size, md.write_quorum):
                        if ensemble[k] in writable:
                            yield i, ensemble[k], e

        todo = copies()

        async def reader() -> None:
            for segment, bookie, entry in todo:  # one shared iterator: each copy read once
                check = await self._read_verified(md, creds, bookie, entry)
                # None: absent or no answer (the entry lists judged presence; this looks for rot only)
                # A failure only the recovery settings' guess explains is unverified, not rot to heal.
                if check is not None and check.verdict is not Verdict.OK and not depends_on_credentials(check, creds):
                    found.append((segment, CorruptReplica(entry, bookie, f"{check.verdict.value}: {check.detail}")))

        await gather_all(reader() for _ in range(in_flight))
        return sorted(found, key=lambda f: (f[0], f[1].entry_id, f[1].bookie_id))

    async def heal(self, md: LedgerMetadata, tally: Tally, guard: LockGuard) -> LedgerMetadata:
        """Move the bit rot the copies met (`tally.corrupt`) off its bookies: each member of a segment
        that holds a corrupt copy is replaced in that segment, its stripe copied from the verified copies
        of the other replicas and its own. A segment the copy path may not rewrite (an open ledger's last)
        keeps it (logged). Returns the metadata after the replacements."""
        places: dict[tuple[int, int, str], set[int]] = {}
        tally.rotten.update(c.bookie_id for _, c in tally.corrupt)
        for segment, c in tally.corrupt:
            ensemble = md.segments[segment].ensemble
            if c.bookie_id not in ensemble:
                continue  # replaced in that segment already (it was gone, or read-only)
            places.setdefault((segment, ensemble.index(c.bookie_id), c.bookie_id), set()).add(c.entry_id)
        tally.corrupt.clear()
        for (segment, index, bookie), entries in sorted(places.items()):
            fields = {"ledgerId": str(md.ledger_id), "bookieId": bookie, "segment": segment}
            if not md.is_closed and segment == len(md.segments) - 1:
                log.warning("corrupt copies not healed: the open ledger's last segment", **fields)
                self._count_corrupt("not_healed", len(entries))
                continue
            md = await self._move(md, segment, index, RangeSet.from_ids(entries), tally, guard)
        return md

    def _count_corrupt(self, outcome: str, copies: int) -> None:
        if self._metrics is not None:
            self._metrics.corrupt(outcome, copies)

    async def _read_verified(
        self, md: LedgerMetadata, creds: LedgerCredentials, bookie: str, entry: int
    ) -> EntryVerification | None:
        """`bookie`'s copy of `entry` read (read-only) and verified; None when it has none or no answer."""
        got = await self._bookies.client(bookie).read_entry(md.ledger_id.ledger, entry)
        if not got.present or got.body is None:
            return None
        return verify_entry(
            got.body, ledger_id=md.ledger_id.ledger, entry_id=entry, digest_type=creds.digest_type, key=creds.mac_key
        )
