"""Reads of one bookie's copies of entries of one ledger, by the cheapest way the bookie serves them.

Batched on the v2 protocol (BATCH_READ_ENTRY, BookKeeper 4.17+, one request per run of consecutive
entries the bookie holds) where the pool offers a batch reader for the bookie (never on a TLS cluster: v2
has no START_TLS; on a bookie without batch reads it pipelines v2 READENTRY); else READ_ENTRY pipelined
on the v3 connection. Both answer one `ReadEntryResult` per entry asked, in order, so callers verify digests alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from auditor.bookie.results import ReadEntryResult
from auditor.durability.ids import LedgerId

from .context import AuditContext


async def read_copies(
    ctx: AuditContext, bookie: str, ledger_id: LedgerId, entries: Sequence[int], *, timeout: float | None = None
) -> list[ReadEntryResult]:
    """One result per entry of `entries` (ids of `ledger_id`), in order."""
    reader = ctx.bookies.batch_reader(bookie)
    if reader is not None:  # (it reads entry by entry on v2 where the bookie has no batch reads)
        return await reader.read_entries(ledger_id, list(entries), timeout=timeout)
    return await ctx.bookies.client(bookie).read_entries(ledger_id, list(entries), timeout=timeout)
