"""Healing bit rot: the corrupt copies of one ledger found by reading, rewritten, and read back.

BP-31: no repair in the read path. The repair worker heals the corrupt copies its copies met, and, for a
marked ledger whose every copy is where it belongs, the ones a read of every copy finds
(`Healer.corrupt_copies`: entry lists carry no digest, so a `digest_mismatch` the auditor's reads found
shows only to a read). Each corrupt copy on a writable bookie of its segment is overwritten by
RECOVERY_ADD of a verified copy from another replica, through the one write path of the attempt (the
`write` it is given: the repair gate, under the ledger's lock), then read back until it verifies. A
bookie that keeps serving the corrupt copy after the re-add (SortedLedgerStorage reads its flushed copy
before its memtable, until the memtable fills) is replaced in that segment (`replace`: its stripe copied
to another bookie, the ensemble updated version-checked), as Java's ReplicationWorker replaces a bad
fragment's bookie: readers, the auditor and Java's census would otherwise keep meeting the rot, and the
auditor keep marking the ledger, until a flush that may be hours away. Everything here but those writes is
read-only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator

from auditor.aio.tasks import gather_all
from auditor.bookie.pool import BookiePool
from auditor.durability.entry import EntryVerification, Verdict, verify_entry
from auditor.durability.model import LedgerMetadata
from auditor.durability.ranges import RangeSet
from auditor.durability.repackage import LedgerCredentials, depends_on_credentials
from auditor.durability.repairplan import Action, ActionKind
from auditor.durability.schedule import write_set
from auditor.durability.striped import StripedSet
from auditor.logging import get_logger
from auditor.metadata.repair.lock import LockGuard

from .attempt import Tally
from .copy import CorruptReplica
from .evidence import BookieStates
from .metrics import RepairMetrics

log = get_logger("auditor.repair")

# The credentials one ledger is read and repaired with, for the given entries (the worker's, proven once).
CredentialsFor = Callable[[LedgerMetadata, Iterable[int]], Awaitable[LedgerCredentials]]
# The attempt's one write path: a HEAL action copied through the repair gate under the lock's lease.
HealWrite = Callable[[LedgerMetadata, Action, Tally, LockGuard], Awaitable[LedgerMetadata]]
# The attempt's replacement of one member of one segment (segment, index, bookie), the metadata after it.
ReplaceMember = Callable[[LedgerMetadata, int, int, str, Tally, LockGuard], Awaitable[LedgerMetadata]]


class Healer:
    """Finds and heals the corrupt copies of the ledgers one worker repairs."""

    def __init__(
        self,
        bookies: BookiePool,
        states: BookieStates,
        credentials: CredentialsFor,
        write: HealWrite,
        replace: ReplaceMember,
        metrics: RepairMetrics | None,
    ) -> None:
        self._bookies = bookies
        self._states = states  # the worker's, refreshed before each assessment
        self._credentials = credentials
        self._write = write
        self._replace = replace
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

    async def heal(self, md: LedgerMetadata, tally: Tally, guard: LockGuard, verify_s: float) -> LedgerMetadata:
        """Heal the bit rot the copies met (`tally.corrupt`): each corrupt copy on a writable bookie of
        the segment is overwritten by RECOVERY_ADD of a verified copy from another replica, then read
        back until it verifies (for `verify_s`); a bookie still serving the corrupt copy then is replaced
        in that segment. A bookie that is not writable keeps its corrupt copy (logged; its replacement,
        when it goes, copies from the good ones). Returns the metadata after the replacements."""
        places: dict[tuple[int, int, str], set[int]] = {}
        for segment, c in tally.corrupt:
            ensemble = md.segments[segment].ensemble
            if c.bookie_id not in ensemble or c.bookie_id not in self._states.writable:
                log.warning(
                    "corrupt copy not healed: the bookie is not a writable member of the segment",
                    ledgerId=str(md.ledger_id),
                    bookieId=c.bookie_id,
                    entryId=c.entry_id,
                    problem=c.detail,
                )
                self._count_corrupt("not_healed", 1)
                continue
            places.setdefault((segment, ensemble.index(c.bookie_id), c.bookie_id), set()).add(c.entry_id)
        tally.corrupt.clear()
        for (segment, index, bookie), entries in sorted(places.items()):
            stripe = StripedSet.from_rangeset(RangeSet.from_ids(entries))
            first = md.segments[segment].first_entry_id
            md = await self._write(md, Action(ActionKind.HEAL, segment, first, index, bookie, stripe), tally, guard)
            still = await self._verified_in_time(md, bookie, sorted(entries), verify_s)
            fields = {"ledgerId": str(md.ledger_id), "bookieId": bookie, "segment": segment}
            healed = sorted(set(entries) - set(still))
            if healed:
                tally.healed += len(healed)
                log.warning("corrupt copies healed", entries=RangeSet.from_ids(healed).to_text(), **fields)
                self._count_corrupt("healed", len(healed))
            if not still:
                continue
            # Acknowledged (journaled) but not served: move the member's stripe off it.
            log.warning(
                "corrupt copies re-added, not served yet: a bookie with SortedLedgerStorage serves its "
                "flushed copy until its next memtable flush (at skipListSizeLimit or shutdown); replacing it "
                "in the segment",
                entries=RangeSet.from_ids(still).to_text(),
                waitedSeconds=verify_s,
                **fields,
            )
            md = await self._replace(md, segment, index, bookie, tally, guard)
            self._count_corrupt("replaced", len(still))
        return md

    def _count_corrupt(self, outcome: str, copies: int) -> None:
        if self._metrics is not None:
            self._metrics.corrupt(outcome, copies)

    async def _verified_in_time(
        self, md: LedgerMetadata, bookie: str, entries: list[int], verify_s: float
    ) -> list[int]:
        """Read the healed entries back until they verify, for at most `verify_s`; the ones that do not.
        DbLedgerStorage and InterleavedLedgerStorage serve the last write at once; SortedLedgerStorage
        (4.17's default) serves its flushed copy before its memtable, and flushes the memtable only when
        it is full (skipListSizeLimit) or the bookie shuts down, so there the new copy may show much later."""
        deadline = time.monotonic() + verify_s
        delay = 0.25
        while True:
            entries = await self._unverified(md, bookie, entries)
            if not entries or time.monotonic() + delay > deadline:
                return entries
            await asyncio.sleep(delay)
            delay = min(delay * 2, 4.0)

    async def _unverified(self, md: LedgerMetadata, bookie: str, entries: list[int]) -> list[int]:
        """The entries `bookie` does not return with a verified digest (read back after a heal)."""
        creds = await self._credentials(md, entries)
        bad = []
        for e in entries:
            check = await self._read_verified(md, creds, bookie, e)
            if check is None or check.verdict is not Verdict.OK:
                bad.append(e)
        return bad

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
