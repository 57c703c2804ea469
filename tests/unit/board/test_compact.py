"""The finding store's compact form for informational whole-ledger findings, and a run's seen keys (a
`FindingSummary` that keeps no finding).

The store must give back exactly what it was given (field for field, message, detail and Pulsar context
included), move a finding between the compact and the full form when it changes, resolve compact findings
like the others, and hold an informational finding in a fraction of the memory a full one takes.
"""

from __future__ import annotations

import gc
import random
import tracemalloc
from collections.abc import Callable

import pytest

from auditor.board import compact
from auditor.board.findings import FindingStore
from auditor.durability.findings import Category, Finding, FindingSummary, Severity
from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment
from auditor.durability.verdicts import risky_quorum_finding

BOOKIES = tuple(f"127.0.0.{i}:3181" for i in range(1, 7))
PULSAR = {
    b"application": b"pulsar",
    b"component": b"managed-ledger",
    b"pulsar/managed-ledger": b"tenant/ns/persistent/topic-7",
}


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def metadata(lid: LedgerId, e: int = 2, wq: int = 2, aq: int = 2, pulsar: bool = False) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=lid,
        ensemble_size=e,
        write_quorum=wq,
        ack_quorum=aq,
        state=LedgerState.CLOSED,
        last_entry_id=99,
        length=100 * 1024,
        digest_type=DigestType.CRC32C,
        password=b"",
        segments=(Segment(0, BOOKIES[:e]),),
        custom_metadata={k.decode(): v for k, v in PULSAR.items()} if pulsar else {},
    )


def risky(lid: LedgerId, **kw: object) -> Finding:
    f = risky_quorum_finding(metadata(lid, **kw))  # type: ignore[arg-type]
    assert f is not None and not f.actionable
    return f.confirm()


def test_findings_come_back_field_for_field() -> None:
    store = FindingStore(clock=Clock())
    ids = [LedgerId.of(n) for n in (0, 2, 3, 22, 2**40, 2**63 - 1)] + [LedgerId(5, 2), LedgerId(2**63 - 1, 7)]
    given = [risky(lid, pulsar=bool(i % 2)) for i, lid in enumerate(ids)]
    given.append(risky(LedgerId.of(9), e=3, wq=3, aq=3))  # another shape
    for f in given:
        store.add(f, check="scrutiny")
    assert len(store) == len(given) == len(store._compact)  # every one kept compactly
    for f in given:
        rec = store.get(f.dedup_key())
        assert rec is not None and rec.check == "scrutiny" and rec.key == f.dedup_key()
        assert rec.finding == f
        assert rec.finding.to_wire() == f.to_wire()  # message, detail and Pulsar context included
        assert f.dedup_key() in store
    # ledger 2's message names "2" as its E, WQ and AQ too: the id is cut where it stands, once
    two = store.get(risky(LedgerId.of(2)).dedup_key())
    assert two is not None and two.finding.message.startswith("ledger 2: ") and "E=2 WQ=2 AQ=2" in two.finding.message
    assert store.counts() == {"risky_quorum": len(given)}
    assert store.ledger_counts() == {"risky_quorum": len(given)}


def test_sightings_are_counted_and_a_changed_finding_moves_between_forms() -> None:
    clock = Clock()
    store = FindingStore(clock=clock)
    lid = LedgerId.of(41)
    info = risky(lid)
    first = store.add(info, check="scrutiny")
    assert (first.times_seen, first.first_seen, first.last_seen) == (1, 1000.0, 1000.0)
    clock.t = 1100
    again = store.add(info, check="scrutiny")
    assert (again.times_seen, again.first_seen, again.last_seen) == (2, 1000.0, 1100.0)
    # the same fault turns actionable (as when fewer bookies are writable than its ensemble): kept in full, history kept
    minor = Finding.of(Category.RISKY_QUORUM, f"ledger {lid}: now minor", ledger=lid, severity=Severity.MINOR)
    assert minor.dedup_key() == info.dedup_key()
    clock.t = 1200
    rec = store.add(minor, check="scrutiny")
    assert (rec.times_seen, rec.first_seen, rec.finding) == (3, 1000.0, minor)
    assert len(store._compact) == 0 and list(store.actionable_findings()) == [minor]
    assert store.counts() == {"risky_quorum": 1}
    # and back: a full record stays full, and its history with it
    clock.t = 1300
    rec = store.add(info, check="scrutiny")
    assert (rec.times_seen, rec.first_seen, rec.finding) == (4, 1000.0, info)
    assert list(store.actionable_findings()) == [] and store.counts() == {"risky_quorum": 1}


def seen_keys() -> FindingSummary:
    return FindingSummary(keep=lambda _: False)  # what the daemon counts a run's findings in


@pytest.mark.parametrize("seen_kind", ["summary", "set"])
def test_a_complete_pass_resolves_what_it_no_longer_sees(seen_kind: str) -> None:
    clock = Clock()
    store = FindingStore(clock=clock)
    ids = [LedgerId.of(n) for n in range(1, 11)] + [LedgerId(1, 1)]
    for lid in ids:
        store.add(risky(lid), check="scrutiny")
    store.add(risky(LedgerId.of(50)), check="other")  # another check's: not this pass's to resolve
    summary, keys = seen_keys(), set()
    for lid in ids[::2]:
        summary.add(risky(lid))
        keys.add(risky(lid).dedup_key())
    seen = summary if seen_kind == "summary" else keys
    clock.t = 2000
    # limited to ledgers 1..4: only 2 and 4 there are unseen
    done = store.resolve_absent("scrutiny", seen, ledgers={LedgerId.of(n) for n in range(1, 5)})
    assert sorted(r.finding.ledger.ledger for r in done) == [2, 4]  # type: ignore[union-attr]
    assert all(r.resolved_at == 2000 and not r.active for r in done)
    done = store.resolve_absent("scrutiny", seen)
    assert sorted(str(r.finding.ledger) for r in done) == sorted(str(lid) for lid in ids[1::2] if lid.ledger > 4)
    assert len(store) == len(ids[::2]) + 1
    gone = store.get(risky(LedgerId.of(2)).dedup_key())
    assert gone is not None and not gone.active  # among the resolved the API still shows
    assert risky(LedgerId.of(2)).dedup_key() not in store
    # seen again after it was resolved: active again, first seen restarts
    clock.t = 3000
    back = store.add(risky(LedgerId.of(2)), check="scrutiny")
    assert (back.times_seen, back.first_seen) == (1, 3000)


def test_query_filters_compact_and_full_findings_alike() -> None:
    store = FindingStore(clock=Clock())
    for n in range(1, 6):
        store.add(risky(LedgerId.of(n)), check="scrutiny")
    loss = Finding.of(Category.ENTRY_NO_REPLICA, "lost", ledger=LedgerId.of(3), bookie=BOOKIES[0], segment_index=0)
    store.add(loss, check="scrutiny")
    everything = store.query()
    assert [r.finding for r in everything][0] == loss  # most severe first
    assert len(everything) == 6
    assert [r.finding.ledger for r in store.query(ledger=LedgerId.of(3))] == [LedgerId.of(3)] * 2
    assert len(store.query(category="risky_quorum")) == 5
    assert store.query(category="risky_quorum", ledger=LedgerId.of(9)) == []
    assert len(store.query(bookie=BOOKIES[1])) == 0  # risky_quorum names no bookie; the loss names BOOKIES[0]
    assert store.ledger_counts() == {"risky_quorum": 5, "entry_no_replica": 1}


def test_past_the_shape_limit_findings_are_kept_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compact, "SHAPES_MAX", 3)
    store = FindingStore(clock=Clock())
    given = [
        Finding.of(Category.ORPHAN_LEDGER, f"ledger {n}: no reference for {n * 7} hours", ledger=LedgerId.of(n))
        for n in range(1, 8)
    ]
    for f in given:
        store.add(f, check="references")
    assert len(store._compact) == 3 and len(store) == 7
    for f in given:
        rec = store.get(f.dedup_key())
        assert rec is not None and rec.finding == f and rec.finding.to_wire() == f.to_wire()


def test_a_summary_knows_the_keys_of_what_it_counted() -> None:
    rng = random.Random(7)
    findings: list[Finding] = []
    for _ in range(3000):
        lid = LedgerId(rng.choice([0, 0, 0, 3]), rng.randrange(2**63))
        category = rng.choice([Category.RISKY_QUORUM, Category.ORPHAN_LEDGER, Category.ENTRY_NO_REPLICA])
        if rng.random() < 0.7:
            findings.append(Finding.of(category, "m", ledger=lid))
        else:
            findings.append(Finding.of(category, "m", ledger=lid, segment_index=rng.randrange(3), bookie=BOOKIES[0]))
    seen, plain = seen_keys(), set()
    for f in findings[:2000]:
        seen.add(f)
        seen.add(f)  # twice: still once
        plain.add(f.dedup_key())
    assert seen.total == len(plain) and seen.findings == []
    assert all((f.dedup_key() in seen) == (f.dedup_key() in plain) for f in findings)
    assert ("risky_quorum", "not an id", None, None, None) not in seen and "x" not in seen
    counts: dict[str, int] = {}
    for key in plain:
        counts[key[0]] = counts.get(key[0], 0) + 1
    assert seen.counts() == counts


def held_per_finding(n: int, make: Callable[[LedgerId], Finding]) -> float:
    """Bytes the store and a run's seen keys hold per finding of `make`, made while traced (as a scan makes
    them: the store keeps what it is given)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store = FindingStore(clock=Clock())
        seen = seen_keys()
        for i in range(n):
            f = make(LedgerId.of(1000 + i))
            store.add(f, check="scrutiny")
            seen.add(f)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(store) == n and seen.total == n
    return held / n


def test_an_informational_finding_and_its_seen_key_are_held_in_a_few_hundred_bytes() -> None:
    # Kept in full (SHAPES_MAX 0), one took 1,316 bytes here with its seen key, 1,814 with a Pulsar context.
    # What is left per ledger: its sighting and time, the dict slot and int key (the shape and the Pulsar
    # context are shared), and about 9 bytes of seen key: 142 bytes when written.
    assert held_per_finding(20_000, risky) < 250
    assert held_per_finding(20_000, lambda lid: risky(lid, pulsar=True)) < 250


def test_a_page_is_the_head_of_the_whole_query() -> None:
    clock = Clock()
    store = FindingStore(clock=clock)
    rng = random.Random(3)
    for n in rng.sample(range(1, 400), 120):
        clock.t = float(rng.randrange(5))  # many ties: the key decides among them
        lid = LedgerId(rng.choice([0, 0, 2]), n)
        store.add(risky(lid, pulsar=rng.random() < 0.5), check=rng.choice(["scrutiny", "other"]))
        if rng.random() < 0.2:
            store.add(risky(lid, e=3, wq=3, aq=3), check="scrutiny")  # a second sighting, another shape
        if rng.random() < 0.2:
            store.add(
                Finding.of(Category.ENTRY_NO_REPLICA, "lost", ledger=lid, bookie=BOOKIES[n % 3], segment_index=0),
                check="scrutiny",
            )
        if rng.random() < 0.1:
            store.add(Finding.of(Category.ORPHAN_LEDGER, f"ledger {lid}: orphan", ledger=lid), check="references")
    assert len(store._compact) > 100 and len(store._active) >= 15
    some = next(iter(store.query(category="risky_quorum"))).finding.ledger
    filters: list[dict[str, object]] = [
        {},
        {"category": "risky_quorum"},
        {"category": "orphan_ledger"},
        {"check": "other"},
        {"bookie": BOOKIES[1]},
        {"ledger": some},
        {"category": "entry_no_replica", "check": "scrutiny"},
    ]
    for kw in filters:
        whole = store.query(**kw)  # type: ignore[arg-type]
        for limit in (None, 1, 7, 50, 1000):
            page = store.page(limit=limit, **kw)  # type: ignore[arg-type]
            assert page.total == len(whole), kw
            assert [r.key for r in page.records] == [r.key for r in whole[:limit]], (kw, limit)


def test_keys_the_store_did_not_make_are_not_found() -> None:
    store = FindingStore(clock=Clock())
    store.add(risky(LedgerId.of(5)), check="scrutiny")
    for key in [("risky_quorum", "not an id", None, None, None), ("risky_quorum", 5, None, None, None), "x", ()]:
        assert key not in store and store.get(key) is None and store.resolve(key) is None
    assert len(store) == 1
