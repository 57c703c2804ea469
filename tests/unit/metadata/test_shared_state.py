"""The findings the leader saves for a failover and the cluster-wide pause (`auditor.metadata.own`
findingstate.py, pausestate.py) read back exactly and are parsed strictly; a reader re-reads only the
shards that moved; an oversized shard keeps its most severe findings; and the daemon's `SharedState`
round-trips a store's actionable findings (first/last seen, count, check) through them, as a standby and a
new leader see them. The store is an in-memory stand-in for our own subtree (the ZooKeeper side is
tests/realcluster/daemon/test_operator_truth.py)."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from auditor.board.findings import FindingStore
from auditor.daemon.metrics import AuditorMetrics
from auditor.daemon.shared_state import SharedState
from auditor.daemon.state import DaemonState
from auditor.durability.findings import Category, Finding
from auditor.durability.ids import LedgerId
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.own import findingstate
from auditor.metadata.own.findingstate import SavedFinding, SavedFindings, Snapshot, parse_manifest, parse_shard
from auditor.metadata.own.pausestate import PauseState

ROOT = "/ledgers/bk-auditor"


class MemoryOwn:
    """Our own subtree in memory, counting reads and writes."""

    own_subtree = ROOT

    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}
        self.reads: list[str] = []
        self.writes: list[str] = []

    async def read_own(self, path: str) -> bytes | None:
        self.reads.append(path)
        return self.nodes.get(path)

    async def put(self, path: str, data: bytes, guard: WriteGuard) -> None:
        assert path.startswith(ROOT + "/")
        self.writes.append(path)
        self.nodes[path] = data

    async def delete_own(self, path: str, guard: WriteGuard) -> bool:
        return self.nodes.pop(path, None) is not None

    async def own_children(self, path: str) -> list[str]:
        return sorted(p.rsplit("/", 1)[1] for p in self.nodes if p.rsplit("/", 1)[0] == path)


class Vote:
    guard_path = "/ledgers/bk-auditor/election/V_0000000000"

    def check(self) -> None:
        pass


GUARD: WriteGuard = Vote()


def finding(ledger: int, category: Category = Category.ENTRY_BELOW_ACK_QUORUM, bookie: str | None = None) -> Finding:
    return Finding.of(category, f"ledger {ledger}: planted", ledger=LedgerId(0, ledger), bookie=bookie)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_saved_findings_read_back_exactly_and_only_moved_shards_are_rewritten_and_reread() -> None:
    own = MemoryOwn()
    saver = SavedFindings(own)
    items = [
        SavedFinding(finding(i), "scrutiny", 1_700_000_000.123456 + i, 1_700_000_100.5 + i, i + 1) for i in range(100)
    ]
    run(saver.save(items, "auditor-a", 1_700_000_200_000, GUARD))
    # the shards holding findings (100 ledgers fill all 64), then the manifest
    assert len(own.writes) == findingstate.SHARDS + 1
    held = Snapshot()
    assert run(saver.refresh(held))
    got = sorted(held.findings(), key=lambda s: s.finding.ledger)  # type: ignore[arg-type, return-value]
    assert [(s.finding.to_wire(), s.check, s.first_seen, s.last_seen, s.times_seen) for s in got] == [
        (s.finding.to_wire(), s.check, s.first_seen, s.last_seen, s.times_seen) for s in items
    ]
    assert held.manifest is not None and held.manifest.saved_by == "auditor-a"
    # One finding's sighting moves: one shard and the manifest are written, one shard re-read.
    own.writes.clear()
    own.reads.clear()
    items[7] = SavedFinding(items[7].finding, "scrutiny", items[7].first_seen, items[7].last_seen + 60, 9)
    run(saver.save(items, "auditor-a", 1_700_000_300_000, GUARD))
    assert own.writes == [saver.shard_path(findingstate.shard_of(items[7].finding)), saver.manifest_path]
    assert run(saver.refresh(held))
    assert own.reads == [saver.manifest_path, saver.shard_path(findingstate.shard_of(items[7].finding))]
    assert [s.times_seen for s in held.findings() if s.finding.ledger == LedgerId(0, 7)] == [9]
    own.reads.clear()
    assert not run(saver.refresh(held))  # nothing moved: the manifest only
    assert own.reads == [saver.manifest_path]


def test_an_oversized_shard_keeps_its_most_severe_findings_and_counts_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(findingstate, "SHARD_BYTES_MAX", 600)
    lost = [SavedFinding(finding(64 * i, Category.ENTRY_NO_REPLICA), "ledger", 1.0, 2.0, 1) for i in range(5)]
    minor = [
        SavedFinding(finding(64 * i, Category.ENTRY_BELOW_WRITE_QUORUM), "ledger", 1.0, 2.0, 1) for i in range(200)
    ]
    data, dropped = findingstate.encode_shard(minor + lost)
    assert len(data) <= 600 and dropped > 0
    kept = parse_shard(data, "/p")
    assert len(kept) == 205 - dropped
    assert {s.finding.category for s in kept[:5]} == {Category.ENTRY_NO_REPLICA}


@pytest.mark.parametrize(
    "data, problem",
    [
        (b"not zlib", "not zlib-compressed"),
        (zlib.compress(b"[]"), '"v": 1'),
        (zlib.compress(b'{"v": 1, "findings": [5]}'), "not a saved finding"),
        (zlib.compress(b'{"v": 1, "findings": [{"f": {}, "c": null, "fs": 1, "ls": 1, "n": 1}]}'), "does not parse"),
        (
            zlib.compress(b'{"v": 1, "findings": [{"f": {}, "c": null, "fs": "x", "ls": 1, "n": 1}]}'),
            "fs is not a time",
        ),
        (zlib.compress(b'{"v": 1, "findings": [{"f": {}, "c": 3, "fs": 1, "ls": 1, "n": 1}]}'), "check name"),
        (zlib.compress(b'{"v": 1, "findings": [{"f": {}, "c": null, "fs": 1, "ls": 1, "n": 0}]}'), "sighting count"),
    ],
)
def test_a_corrupt_shard_is_named(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptZnodeError, match="/ledgers/bk-auditor/findings/s-03") as exc:
        parse_shard(data, "/ledgers/bk-auditor/findings/s-03")
    assert problem in str(exc.value)


@pytest.mark.parametrize(
    "data, problem",
    [
        (b"{}", '"v": 1'),
        (b'{"v": 1, "savedBy": 5, "savedAtMs": 1, "shards": {}}', "savedBy"),
        (b'{"v": 1, "savedBy": "a", "savedAtMs": 1, "shards": {"99": 1}}', "shard number"),
        (b'{"v": 1, "savedBy": "a", "savedAtMs": 1, "shards": {"01": -1}}', "crc32"),
        (b'{"v": 1, "savedBy": "a", "savedAtMs": -1, "shards": {}}', "savedAtMs"),
    ],
)
def test_a_corrupt_manifest_is_named(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptZnodeError, match="manifest") as exc:
        parse_manifest(data, "/ledgers/bk-auditor/findings/manifest")
    assert problem in str(exc.value)


@pytest.mark.parametrize(
    "data, problem",
    [
        (b'{"paused": "yes"}', "paused is not true or false"),
        (b'{"paused": true, "reason": 5}', "reason"),
        (b'{"paused": true, "sinceMs": -5}', "sinceMs"),
        (b"[]", "not a JSON object"),
    ],
)
def test_pause_reads_back_and_a_corrupt_one_is_named(data: bytes, problem: str) -> None:
    state = PauseState(True, "disk swap", "auditor-a", 1_700_000_000_000)
    assert PauseState.parse(state.to_json(), "/p") == state
    with pytest.raises(CorruptZnodeError, match=problem):
        PauseState.parse(data, "/ledgers/bk-auditor/pause")


def daemon(identity: str) -> tuple[DaemonState, SharedState, MemoryOwn]:
    own = MemoryOwn()
    state = DaemonState(identity)
    return state, SharedState(state, AuditorMetrics(cluster="c", checks=["scrutiny"]), lambda: own), own


def test_a_standby_holds_what_the_leader_saved_and_a_new_leader_starts_from_it() -> None:
    leader, shared, own = daemon("auditor-a")
    t = [100.0]
    leader.findings = FindingStore(clock=lambda: t[0])
    leader.findings.add(finding(1), "scrutiny")
    leader.findings.add(finding(2, Category.OVERREPLICATED), "scrutiny")  # informational: not saved
    assert run(shared.save(GUARD)) and not run(shared.save(GUARD))  # saved once; unchanged: not again
    t[0] = 160.0
    leader.findings.add(finding(1), "scrutiny")  # only sighted again: saved later, or when stepping down
    assert not run(shared.save(GUARD))
    assert run(shared.save(GUARD, sightings_too=True))
    run(shared.set_pause(True, "disk swap", GUARD))

    standby, follower, _ = daemon("auditor-b")
    follower._zk = lambda: own  # the same subtree
    run(follower.follow())
    src = standby.findings_source
    assert (src.kind, src.saved_by) == ("persisted", "auditor-a")
    [rec] = standby.findings.query()
    assert (rec.check, rec.first_seen, rec.last_seen, rec.times_seen) == ("scrutiny", 100.0, 160.0, 2)
    assert (standby.pause.paused, standby.pause.reason, standby.pause.by) == (True, "disk swap", "auditor-a")
    # The leader resolves it: the standby follows.
    leader.findings.resolve(rec.key)
    run(shared.save(GUARD))
    run(follower.follow())
    assert standby.findings.query() == [] and standby.findings.counts() == {}
    # Taking over: the saved state is the new leader's, and it says it leads.
    leader.findings.add(finding(3), "ledger")
    run(shared.save(GUARD))
    run(follower.take_over())
    assert [r.finding.ledger for r in standby.findings.query()] == [LedgerId(0, 3)]
    assert standby.findings_source.kind == "leader" and standby.pause.paused
    run(follower.set_pause(False, "", GUARD))
    assert not standby.pause.paused
    run(shared.follow())  # the old leader, now standing by, follows the new one's resume
    assert not leader.pause.paused


def test_store_flagged_ledgers_and_a_recheck_does_not_resolve_what_was_seen_since() -> None:
    t = [100.0]
    store = FindingStore(clock=lambda: t[0])
    store.add(finding(1), "scrutiny")
    store.add(finding(1, Category.ENTRY_NO_REPLICA, bookie="b:1"), "ledger")
    store.add(finding(2, Category.OVERREPLICATED), "scrutiny")
    assert store.flagged_ledgers() == {LedgerId(0, 1): {"scrutiny", "ledger"}}
    version, sightings = store.actionable_version, store.sightings_version
    t[0] = 200.0
    store.add(finding(1), "scrutiny")  # sighted again by a re-check during a pass that began at 150
    assert (store.actionable_version, store.sightings_version) == (version, sightings + 1)
    # Only what was not sighted since 150 goes (the informational finding of ledger 2).
    assert [r.key for r in store.resolve_absent("scrutiny", set(), seen_before=150.0)] == [
        finding(2, Category.OVERREPLICATED).dedup_key()
    ]
    assert [r.key for r in store.resolve_absent("scrutiny", set(), seen_before=250.0)] == [finding(1).dedup_key()]
