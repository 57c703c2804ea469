"""Test helpers: run the real checks against the real cluster, restricted to the ledgers a test made.

Expected values are derived here independently of the product code: by brute force over entry ids
from the round-robin rule (bookie index i holds entry e iff (i - e) mod E < WQ).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from auditor.bookie.pool import BookiePool
from auditor.checks.build import audit_context
from auditor.checks.per_ledger import CHECKS
from auditor.checks.runner import CheckRun
from auditor.durability.findings import Finding, Severity
from auditor.durability.ids import LedgerId
from auditor.metadata.codecs import formats
from auditor.settings import Settings
from devcluster.cluster import Cluster


def settings_for(cluster: Cluster, **over: Any) -> Settings:
    base: dict[str, Any] = {
        "metadata_service_uri": cluster.metadata_service_uri,
        "recheck": {"delays_seconds": [0.5, 1.0], "attempts": 2},
        "bookie_client": {"timeout_seconds": 2.0, "requests_per_second": 0},
        "racks": {"source": "pulsar"},
    }
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            base[k] = {**base[k], **v}
        else:
            base[k] = v
    return Settings(**base)


async def audit_async(
    cluster: Cluster,
    ledger_ids: Iterable[int],
    checks: Iterable[str] = ("scrutiny",),
    records: list[Any] | None = None,
    settings: Settings | None = None,
    redirect: Mapping[str, tuple[str, int]] | None = None,
    **options: Any,
) -> tuple[list[Finding], dict[str, Any]]:
    """`redirect`: bookie id -> (host, port) of a stand-in to reach instead of that bookie (e.g. a proxy
    that rewrites its replies), as if the bookie were registered at that address."""
    settings = settings or settings_for(cluster)
    findings: list[Finding] = []
    stats: dict[str, Any] = {}
    async with audit_context(settings, one_shot=True, **options) as (ctx, locations), _redirected(ctx, redirect):
        for name in checks:
            check = CHECKS[name](ctx, locations)
            run = CheckRun(ctx, check, findings.append)
            if not await run.begin():  # as every run does: e.g. the marker listing of skip_marked checks
                stats[name] = run.stats
                continue
            if records is None:
                got = await ctx.store.read_ledgers([LedgerId(0, i) for i in ledger_ids])
                recs = [r for r in got if r is not None]
            else:
                recs = records

            async def source() -> Any:
                yield recs

            await run.scan(records=source())
            await run.drain_rechecks()
            stats[name] = run.stats
    return findings, stats


@asynccontextmanager
async def _redirected(ctx: Any, redirect: Mapping[str, tuple[str, int]] | None) -> AsyncIterator[None]:
    if not redirect:
        yield
        return
    registered = ctx.store.address_resolver()

    async def resolve(bookie_id: str) -> tuple[str, int]:
        return redirect[bookie_id] if bookie_id in redirect else await registered(bookie_id)

    ctx.bookies = BookiePool(resolve, ctx.bookies.config)
    try:
        yield
    finally:
        await ctx.bookies.close()


def audit(
    cluster: Cluster, ledger_ids: Iterable[int], checks: Iterable[str] = ("scrutiny",), **kw: Any
) -> tuple[list[Finding], dict[str, Any]]:
    return asyncio.run(audit_async(cluster, list(ledger_ids), tuple(checks), **kw))


def actionable(findings: Iterable[Finding]) -> list[Finding]:
    """Everything but informational findings (e.g. WQ == AQ risky_quorum)."""
    return [f for f in findings if f.severity is not Severity.INFO]


def holds(index: int, entry: int, e: int, wq: int) -> bool:
    return (index - entry) % e < wq


def expected_entries(result: dict[str, Any], bookie: str, end: int | None = None) -> set[int]:
    """Entries `bookie` should hold, from the tool's report, by brute force."""
    e, wq = result["ensembleSize"], result["writeQuorum"]
    last = result["lastEntryId"] if end is None else end
    starts = sorted((int(k), v) for k, v in result["ensembles"].items())
    out: set[int] = set()
    for n, (first, ens) in enumerate(starts):
        stop = starts[n + 1][0] - 1 if n + 1 < len(starts) else last
        for entry in range(first, min(stop, last) + 1):
            for i, b in enumerate(ens):
                if b == bookie and holds(i, entry, e, wq):
                    out.add(entry)
    return out


def copies_without(result: dict[str, Any], lost: set[str], end: int | None = None) -> dict[int, int]:
    """Per entry, copies left when the bookies in `lost` hold nothing."""
    e, wq = result["ensembleSize"], result["writeQuorum"]
    last = result["lastEntryId"] if end is None else end
    starts = sorted((int(k), v) for k, v in result["ensembles"].items())
    out: dict[int, int] = {}
    for n, (first, ens) in enumerate(starts):
        stop = starts[n + 1][0] - 1 if n + 1 < len(starts) else last
        for entry in range(first, min(stop, last) + 1):
            out[entry] = sum(1 for i, b in enumerate(ens) if holds(i, entry, e, wq) and b not in lost)
    return out


def ledger_path(cluster: Cluster, ledger_id: int) -> str:
    d = f"{ledger_id:010d}"
    if ledger_id < 2**31 - 1:
        return f"{cluster.ledgers_root}/{d[:2]}/{d[2:6]}/L{d[6:]}"
    d = f"{ledger_id:019d}"
    return f"{cluster.ledgers_root}/{d[:3]}/{d[3:7]}/{d[7:11]}/{d[11:15]}/L{d[15:]}"


def rewrite_ensemble(cluster: Cluster, ledger_id: int, old: str, new: str) -> None:
    """Plant a fault the way an operator's bad metadata edit would: name `new` instead of `old`."""
    path = ledger_path(cluster, ledger_id)
    data, stat = cluster.kazoo.get(path)
    md = formats.parse_ledger_metadata(data, LedgerId(0, ledger_id), path, stat.version)
    from dataclasses import replace

    from auditor.durability.model import Segment

    segs = tuple(Segment(s.first_entry_id, tuple(new if b == old else b for b in s.ensemble)) for s in md.segments)
    cluster.kazoo.set(path, formats.serialize_ledger_metadata(replace(md, segments=segs)), version=stat.version)


def marker_leaves(cluster: Cluster) -> set[str]:
    """Every under-replication marker's path (the tree walked; a small test cluster)."""
    from kazoo.exceptions import NoNodeError

    out: set[str] = set()

    def walk(path: str) -> None:
        try:
            children = cluster.kazoo.get_children(path)
        except NoNodeError:
            return
        for c in children:
            (out.add(f"{path}/{c}") if c.startswith("urL") else walk(f"{path}/{c}"))

    walk(f"{cluster.ledgers_root}/underreplication/ledgers")
    return out


def remove_markers(cluster: Cluster, leaves: Iterable[str]) -> None:
    from kazoo.exceptions import NoNodeError

    for leaf in leaves:
        try:
            cluster.kazoo.delete(leaf)
        except NoNodeError:
            pass


def marker_path(cluster: Cluster, lid: int) -> str:
    return (
        f"{cluster.ledgers_root}/underreplication/ledgers/{(lid >> 48) & 0xFFFF:04x}/{(lid >> 32) & 0xFFFF:04x}/"
        f"{(lid >> 16) & 0xFFFF:04x}/{lid & 0xFFFF:04x}/urL{lid:010d}"
    )


def corrupt_entry_on_disk(ledger_dir: Path, ledger_id: int, entry_id: int, journal_dir: Path | None = None) -> int:
    """Flip the last payload byte of (ledger, entry) in a stopped bookie's entry logs (Sorted storage).

    Entry log: a 1024-byte header, then records `int32 size | entry`; an entry starts with ledger id
    and entry id (8 bytes each). The journal holds the same entry bytes; a restart may replay the
    journal past the last checkpoint and serve a fresh copy, so identical copies found in the journal
    files are flipped too. Returns how many entry-log copies were changed.
    """
    changed = 0
    originals: list[bytes] = []
    for log in sorted((ledger_dir / "current").glob("*.log")):
        data = bytearray(log.read_bytes())
        pos = 1024
        hit = False
        while pos + 4 <= len(data):
            (size,) = struct.unpack_from(">i", data, pos)
            if size <= 0 or pos + 4 + size > len(data):
                break
            lid, eid = struct.unpack_from(">qq", data, pos + 4)
            if lid == ledger_id and eid == entry_id:
                originals.append(bytes(data[pos + 4 : pos + 4 + size]))
                data[pos + 4 + size - 1] ^= 0xFF
                changed += 1
                hit = True
            pos += 4 + size
        if hit:
            log.write_bytes(bytes(data))
    if journal_dir is not None:
        for journal in sorted((journal_dir / "current").glob("*.txn")):
            data = bytearray(journal.read_bytes())
            hit = False
            for original in originals:
                at = data.find(original)
                while at >= 0:
                    data[at + len(original) - 1] ^= 0xFF
                    hit = True
                    at = data.find(original, at + len(original))
            if hit:
                journal.write_bytes(bytes(data))
    return changed


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


@contextmanager
def bookie_lost(cluster: Cluster, n: int, ledgers: Iterable[dict[str, Any]]) -> Iterator[None]:
    """Bookie `n` stopped and wiped for the block; then back (empty, same id) and `ledgers` deleted:
    ledgers left with lost entries must not show up in later modules' whole-cluster audits. Held down
    for the whole block: the session fixture's healing, which runs before each test, leaves it down (a
    module-scoped block had its bookie restarted, empty, before its first test)."""
    cluster.held_down.add(n)
    cluster.stop_bookie(n)
    cluster.wipe_bookie(n)
    try:
        yield
    finally:
        cluster.held_down.discard(n)
        cluster.start_bookie(n)
        left = [r["ledgerId"] for r in ledgers if cluster.kazoo.exists(ledger_path(cluster, r["ledgerId"]))]
        if left:  # (a test may have deleted some itself)
            cluster.ledger_tool("delete", "--ledger-id", ",".join(str(lid) for lid in left))
