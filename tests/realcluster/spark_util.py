"""What the Spark sweep tests share: the ledgers they plant (once per cluster, whichever module runs
first), and how they compare a sweep with the one-shot checks."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from auditor.durability.findings import summarize
from auditor.durability.ids import LedgerId
from auditor.metadata.interfaces import LedgerRecord
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.processes.partitions import check_cover
from auditor.spark.sweep import SweepResult
from devcluster.checks_util import actionable, audit, ledger_path, rewrite_ensemble
from devcluster.cluster import Cluster

CHECKS = ["scrutiny", "ledger", "open"]
# Four leaf directories of our own, next to each other across the hybrid split (2^31 - 1), where no
# other test writes: legacy 21/4744 and 21/4745, long 000/0000/0021/4751 and .../4752. (Planted again,
# they are these plus the planting's "shift": see planted_ledgers.)
LEGACY_A, LEGACY_B = 2_147_440_001, 2_147_450_001
LONG_A, FAULTY = 2_147_510_003, 2_147_520_007
RANGE = (LedgerId(0, 2_147_440_000), LedgerId(0, 2_147_530_000))


_PLANTED: dict[int, dict[str, Any]] = {}


def planted_ledgers(cluster: Cluster) -> dict[str, Any]:
    """The sweep tests' ledgers on this cluster, written by the real Java client the first time asked."""
    kept = _PLANTED.get(id(cluster))
    shift = 0
    if kept is not None and kept["wipes"] != cluster.wipes:
        # A bookie was wiped since (a repair test's lost bookie, when pytest-xdist workers ran that module
        # in between): these ledgers lost copies, so they are deleted and written again. Under ids one
        # higher, in the same leaf directories: a real bookie keeps a deleted ledger's state (its fencing
        # too) until its garbage collection, so a new ledger under the old id can be refused.
        cluster.ledger_tool("delete", "--ledger-id", ",".join(str(i) for i in kept["ids"]))
        shift, kept = kept["shift"] + 1, None
    if kept is None:
        kept = _PLANTED[id(cluster)] = {**_plant(cluster, shift), "wipes": cluster.wipes, "shift": shift}
    return kept


def _plant(cluster: Cluster, shift: int) -> dict[str, Any]:
    b = [cluster.bookie(n).bookie_id for n in (1, 2, 3, 4)]
    generated = cluster.create_ledgers(3, entries=15)  # ids from the cluster's generator (00/0000 ...)
    legacy_a = cluster.create_ledger(ledger_id=LEGACY_A + shift, entries=12)
    legacy_b = cluster.create_ledger(ledger_id=LEGACY_B + shift, entries=12, ensemble=3, write_quorum=3)
    long_a = cluster.create_ledger(ledger_id=LONG_A + shift, entries=12)
    faulty = cluster.create_ledger(
        ledger_id=FAULTY + shift, ensemble=3, write_quorum=2, ack_quorum=2, entries=30, bookies=b[:3]
    )
    rewrite_ensemble(cluster, faulty["ledgerId"], b[2], b[3])
    faulty["ensembles"] = {"0": [b[0], b[1], b[3]]}
    ours = [*generated, legacy_a, legacy_b, long_a, faulty]
    return {
        "ids": [r["ledgerId"] for r in ours],
        "faulty": faulty,
        "fault_bookie": b[3],
        "dirs": [legacy_a, legacy_b, long_a, faulty],
    }


def qn(ledger_id: int) -> str:
    return LedgerId(0, ledger_id).qualified_name


def leaf_dir(cluster: Cluster, ledger_id: int) -> str:
    return ledger_path(cluster, ledger_id).rsplit("/", 1)[0]


def traced(result: SweepResult, check: str) -> list[tuple[int, str]]:
    """(partition index, qualified name) for every ledger the check was handed, over all partitions."""
    out = []
    for idx, ps in result.partition_stats.items():
        out += [(idx, name) for name in ps.ledgers(check) or []]
    return out


def finding_key(f: dict[str, Any]) -> tuple[Any, ...]:
    return (
        f["category"],
        f["severity"],
        f.get("qualifiedName"),
        f.get("segmentIndex"),
        f.get("bookieId"),
        f.get("entryId"),
        f.get("affectedEntries", 0),
        f.get("firstEntryId"),
        f.get("lastEntryId"),
    )


async def listed_ledgers(cluster: Cluster) -> tuple[set[str], set[str]]:
    """(readable ledgers, unparsable ones) as ZooKeeper has them now."""
    store = await ZooKeeperMetadataStore.connect(cluster.metadata_service_uri)
    readable, corrupt = set(), set()
    try:
        async for batch in store.scan_ledgers():
            for r in batch:
                if isinstance(r, LedgerRecord):
                    readable.add(r.metadata.ledger_id.qualified_name)
                else:
                    corrupt.add(r.ledger_id.qualified_name)
    finally:
        await store.close()
    return readable, corrupt


def assert_covers_every_ledger_once(cluster: Cluster, result: SweepResult, planted: dict[str, Any]) -> None:
    """Every readable ledger (ours and the other tests') was handed to every check exactly once, by the
    partition whose range holds it; unparsable ones are reported as metadata_unreadable instead."""
    parts = result.plan.partitions
    check_cover(parts)  # consecutive, no overlap, the whole id space
    readable, corrupt = asyncio.run(listed_ledgers(cluster))
    for check in CHECKS:
        seen = traced(result, check)
        names = Counter(name for _, name in seen)
        assert [n for n, c in names.items() if c > 1] == []  # nobody twice
        assert set(names) == readable and not set(names) & corrupt, check
        for idx, name in seen:
            assert parts[idx].contains(LedgerId.parse(name))
        run = next(r for r in result.runs if r["check"] == check)
        assert run["ledgersVisited"] == len(seen) and run["partitions"] == len(parts)
    for name in planted["ids"]:
        assert qn(name) in readable


def assert_agrees_with_one_shot(cluster: Cluster, result: SweepResult, planted: dict[str, Any]) -> None:
    """The sweep's findings on our ledgers are exactly what `bk-auditor check` finds on them."""
    findings, stats = audit(cluster, planted["ids"], checks=CHECKS)
    one_shot = summarize(findings)  # as `bk-auditor check` deduplicates
    expected = sorted(finding_key(f.to_log_dict()) for f in one_shot.findings)
    ours = {qn(i) for i in planted["ids"]}
    swept = sorted(finding_key(f) for f in result.summary.findings if f.get("qualifiedName") in ours)
    assert swept == expected
    assert len(actionable(one_shot.findings)) == 1
    assert Counter(k[0] for k in swept) == Counter(f.category.value for f in one_shot.findings)
    for check in CHECKS:
        assert stats[check].ledgers_seen == len(planted["ids"])
