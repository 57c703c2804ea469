"""`references`: the ledgers Pulsar still lists against the ledgers BookKeeper has (deletion discipline;
the verdicts are `auditor.durability.references`).

One run: read everything Pulsar lists (managed ledgers, cursors, schemas), then scan every ledger's
metadata. A scanned ledger that Pulsar's own tags say is a topic's, a cursor's or a schema's, older than
the grace period, and listed by nobody is an orphan candidate; a listed ledger the scan did not meet is
a missing candidate. Nothing is reported before it is confirmed: the owner's znodes are read again (a
topic being deleted drops its ledgers before its znode; a ledger is created a moment before it is
recorded) and, for a missing ledger, its metadata is looked up once more. No bookie is asked.

On a cluster without Pulsar metadata the check says so and scans nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from auditor.durability.findings import Category, Finding, Method
from auditor.durability.ids import LedgerId
from auditor.durability.ranges import RangeSet
from auditor.durability.references import (
    SCHEMA,
    OrphanCandidate,
    Reference,
    References,
    missing_finding,
    orphan_candidate,
    orphan_finding,
)
from auditor.logging import get_logger
from auditor.metadata.errors import CorruptZnodeError, NoSuchLedgerError
from auditor.metadata.interfaces import LedgerRecord
from auditor.metadata.own.referencestate import SeenLedgers, SeenStore
from auditor.metadata.pulsar.references import PulsarReferenceReader
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.metadata.zk.connection import ZooKeeperConnection

from .context import AuditContext, RunStats
from .runner import LedgerOutcome

log = get_logger("auditor.checks")

NO_APPLICATION_METADATA = "no application metadata found"
LastSeen = Callable[[int], int | None]


def pulsar_root(ctx: AuditContext) -> str:
    """Pulsar's metadata root: the setting, else the parent of the ledgers root (`/ledgers` -> `/`)."""
    if ctx.options.pulsar_root:
        return ctx.options.pulsar_root
    store = ctx.store
    root = getattr(store, "root", "/ledgers")
    parent = root.rstrip("/").rsplit("/", 1)[0]
    return parent or "/"


class ReferencesCheck:
    """Missing ledgers (listed, gone) and orphan ledgers (tagged, unlisted) of Pulsar's topics."""

    name = "references"
    use_placement = False
    whole_run = True  # reads the application's metadata before the scan: not split across a sweep

    def __init__(
        self, ctx: AuditContext, locations: Any = None, marker: Any = None, *, last_seen: LastSeen | None = None
    ) -> None:
        self.ctx = ctx
        self.refs: References | None = None
        self.by_ledger: dict[int, list[Reference]] = {}
        self.present: set[int] = set()
        self._last_seen = last_seen
        self.seen: SeenLedgers | None = None  # what the leader's last complete pass found present
        store = ctx.store
        if not isinstance(store, ZooKeeperConnection):
            raise ValueError("the references check reads Pulsar's metadata from ZooKeeper")
        self.reader = PulsarReferenceReader(store, pulsar_root(ctx))

    async def prepare(self, stats: RunStats) -> bool:
        """Read what Pulsar lists; False (nothing to scan) when there is no application metadata."""
        refs = await self.reader.read()
        self.refs = refs
        self.seen = await self._read_seen()
        self.by_ledger = refs.by_ledger()
        if not refs.found:
            stats.note = f"{NO_APPLICATION_METADATA} under {self.reader.root}"
            log.info(NO_APPLICATION_METADATA, check=self.name, root=self.reader.root)
            return False
        log.info(
            "application references read",
            check=self.name,
            root=self.reader.root,
            managedLedgers=len(refs.managed_ledgers),
            cursors=len(refs.cursors),
            schemas=len(refs.schemas),
            ledgersListed=len(self.by_ledger),
            unreadable=len(refs.unreadable),
        )
        return True

    async def _read_seen(self) -> SeenLedgers | None:
        if not isinstance(self.ctx.store, ZooKeeperMetadataStore):
            return None
        try:
            return await SeenStore(self.ctx.store).get()
        except CorruptZnodeError as exc:  # only "last seen" is lost; the next pass rewrites it
            log.warning("references state unreadable: last-seen times unknown", path=exc.path, problem=exc.problem)
            return None

    def last_seen(self, ledger_id: int) -> int | None:
        """When the ledger's metadata was last seen present: by this leader (its watch or pass), else by
        the last complete pass of whichever leader recorded it."""
        mine = self._last_seen(ledger_id) if self._last_seen is not None else None
        stored = self.seen.last_seen(ledger_id) if self.seen is not None else None
        return max((t for t in (mine, stored) if t is not None), default=None)

    def seen_now(self, pass_ms: int) -> SeenLedgers:
        """What this pass found listed and present, to be stored by the leader."""
        return SeenLedgers(pass_ms, RangeSet.from_ids(set(self.by_ledger) & self.present))

    def unreadable_findings(self) -> list[Finding]:
        assert self.refs is not None
        return [
            Finding.of(
                Category.METADATA_UNREADABLE,
                f"Pulsar metadata at {path} cannot be parsed: {problem}; ledgers it lists are not judged",
                method=Method.METADATA,
                confirmed=True,
                detail={"path": path, "problem": problem},
            )
            for path, problem in sorted(self.refs.unreadable.items())
        ]

    async def check(self, record: LedgerRecord, stats: RunStats, attempt: int, last_attempt: bool) -> LedgerOutcome:
        assert self.refs is not None
        md = record.metadata
        if md.ledger_id.scope == 0:
            self.present.add(md.ledger_id.ledger)
        candidate = orphan_candidate(md, record.effective_ctime)
        if candidate is None:
            return LedgerOutcome(skipped="not an application's")
        finding = await self._orphan(candidate, self.refs)
        if finding is not None:
            # Confirm against a fresh read of its owner (it may have been recorded since our walk).
            fresh = await self.reader.read_owner(candidate.owner_kind == SCHEMA, candidate.owner)
            finding = await self._orphan(candidate, fresh)
        return LedgerOutcome(findings=[finding] if finding else [])

    async def _orphan(self, c: OrphanCandidate, refs: References) -> Finding | None:
        referenced = self.by_ledger if refs is self.refs else refs.by_ledger()
        return orphan_finding(
            c,
            refs,
            now_ms=int(time.time() * 1000),
            grace_seconds=self.ctx.options.orphan_grace_seconds,
            referenced=referenced,
        )

    async def finish(self, stats: RunStats) -> list[Finding]:
        """The listed ledgers the scan did not meet, each confirmed; and the unreadable Pulsar znodes."""
        out = self.unreadable_findings()
        for lid in sorted(set(self.by_ledger) - self.present):
            f = await self.confirm_missing(lid, self.by_ledger[lid])
            if f is not None:
                out.append(f)
        return out

    async def confirm_missing(self, ledger_id: int, refs: list[Reference]) -> Finding | None:
        """A missing-ledger finding only if the ledger is still gone and still listed, by a fresh read."""
        if missing_finding(ledger_id, refs) is None:
            return None  # offloaded: absence expected
        try:
            await self.ctx.store.read_ledger(LedgerId(0, ledger_id))
            return None  # it exists (created after... or the scan raced a listing)
        except CorruptZnodeError:
            return None  # it exists; unreadable metadata is reported by the scan
        except NoSuchLedgerError:
            pass
        still: list[Reference] = []
        for owner in sorted({(r.kind == SCHEMA, r.owner) for r in refs}):
            fresh = await self.reader.read_owner(*owner)
            still += fresh.by_ledger().get(ledger_id, [])
        return missing_finding(ledger_id, still, self.last_seen(ledger_id)) if still else None
