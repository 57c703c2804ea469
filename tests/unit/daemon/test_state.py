"""FindingStore, TaskBoard, PauseControl and Leadership behaviour, with a controlled clock."""

from __future__ import annotations

import asyncio

import pytest

from auditor.board.findings import FindingStore
from auditor.board.tasks import TaskBoard, TaskState
from auditor.daemon.leadership import Leadership
from auditor.daemon.pause import PauseControl
from auditor.daemon.state import DaemonState
from auditor.durability.findings import Category, Finding
from auditor.durability.ids import LedgerId


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def finding(
    category: Category,
    ledger: int,
    bookie: str | None = "b1:3181",
    segment: int | None = 0,
    message: str = "m",
    **kw: object,
) -> Finding:
    return Finding.of(
        category,
        message,
        ledger=LedgerId.of(ledger),
        bookie=bookie,
        segment_index=segment,
        ensemble=("b1:3181", "b2:3181", "b3:3181"),
        **kw,
    )


# ------------------------------------------------------------------------------------------ findings


def test_add_dedups_and_tracks_sightings() -> None:
    clock = Clock()
    store = FindingStore(clock=clock)
    r1 = store.add(finding(Category.ENTRY_NO_REPLICA, 7, message="first"), check="scrutiny")
    assert (r1.times_seen, r1.first_seen, r1.last_seen, r1.active) == (1, 1000.0, 1000.0, True)
    clock.t = 1060
    r2 = store.add(finding(Category.ENTRY_NO_REPLICA, 7, message="second, more entries"), check="scrutiny")
    assert r2.key == r1.key
    assert (r2.times_seen, r2.first_seen, r2.last_seen) == (2, 1000.0, 1060.0)
    assert r2.finding.message == "second, more entries"  # the latest sighting is kept
    assert len(store) == 1
    # a different place is a different fault
    store.add(finding(Category.ENTRY_NO_REPLICA, 7, segment=1), check="scrutiny")
    store.add(finding(Category.ENTRY_BELOW_WRITE_QUORUM, 8, bookie="b2:3181"), check="scrutiny")
    assert len(store) == 3
    assert store.counts() == {"entry_no_replica": 2, "entry_below_write_quorum": 1}
    assert store.ledger_counts() == {"entry_no_replica": 1, "entry_below_write_quorum": 1}


def test_counts_follow_adds_and_resolves_as_a_recount_would() -> None:
    import random

    rng = random.Random(12)
    store = FindingStore(clock=Clock())
    cats = [Category.ENTRY_NO_REPLICA, Category.RISKY_QUORUM, Category.ENTRY_BELOW_ACK_QUORUM]
    for _ in range(1000):
        f = finding(rng.choice(cats), rng.randrange(40), segment=rng.randrange(3))
        if rng.random() < 0.6:
            store.add(f, check="scrutiny")
        else:
            store.resolve(f.dedup_key())
        active = store.query()
        recount: dict[str, int] = {}
        ledgers: dict[str, set[LedgerId]] = {}
        for rec in active:
            recount[rec.category] = recount.get(rec.category, 0) + 1
            ledgers.setdefault(rec.category, set()).add(rec.finding.ledger)  # type: ignore[arg-type]
        assert store.counts() == recount
        assert store.ledger_counts() == {c: len(v) for c, v in ledgers.items()}
        assert sorted(map(str, store.actionable_findings())) == sorted(
            str(r.finding) for r in active if r.finding.actionable
        )


def test_resolve_absent_after_a_complete_run() -> None:
    clock = Clock()
    store = FindingStore(clock=clock)
    a = store.add(finding(Category.ENTRY_NO_REPLICA, 1), check="scrutiny")
    b = store.add(finding(Category.ENTRY_BELOW_ACK_QUORUM, 2), check="scrutiny")
    c = store.add(finding(Category.BOOKIE_UNREACHABLE, 3), check="ledger_check")
    clock.t = 2000
    # the next full scrutiny run sees only `a` again
    resolved = store.resolve_absent("scrutiny", [a.key])
    assert [r.key for r in resolved] == [b.key]
    assert resolved[0].resolved_at == 2000 and not resolved[0].active
    assert b.key not in store and a.key in store and c.key in store  # other checks' findings untouched
    assert store.get(b.key) is not None and store.get(b.key).resolved_at == 2000
    assert [r.key for r in store.query(include_resolved=True) if not r.active] == [b.key]
    # seen again later: active again with a fresh first_seen
    clock.t = 3000
    again = store.add(finding(Category.ENTRY_BELOW_ACK_QUORUM, 2), check="scrutiny")
    assert (again.times_seen, again.first_seen, again.active) == (1, 3000, True)


def test_resolve_absent_limited_to_covered_ledgers() -> None:
    store = FindingStore(clock=Clock())
    a = store.add(finding(Category.ENTRY_NO_REPLICA, 1), check="scrutiny")
    b = store.add(finding(Category.ENTRY_NO_REPLICA, 2), check="scrutiny")
    # a partial run that covered only ledger 2 and found nothing there
    resolved = store.resolve_absent("scrutiny", [], ledgers={LedgerId.of(2)})
    assert [r.key for r in resolved] == [b.key]
    assert a.key in store
    # category-limited
    store.add(finding(Category.PLACEMENT_VIOLATION, 5), check="scrutiny")
    resolved = store.resolve_absent("scrutiny", [], categories={"placement_violation"})
    assert [r.category for r in resolved] == ["placement_violation"] and a.key in store


def test_query_filters_order_and_limit() -> None:
    clock = Clock()
    store = FindingStore(clock=clock)
    store.add(finding(Category.ENTRY_BELOW_WRITE_QUORUM, 1, bookie="b1:3181"))
    clock.t += 1
    store.add(finding(Category.ENTRY_NO_REPLICA, 2, bookie="b2:3181"))
    clock.t += 1
    store.add(finding(Category.PLACEMENT_VIOLATION, 3, bookie=None, segment=None))
    clock.t += 1
    store.add(finding(Category.ENTRY_NO_REPLICA, 4, bookie="b9:3181"))
    # most severe first, then oldest first
    assert [r.finding.ledger.ledger for r in store.query()] == [2, 4, 1, 3]
    assert [r.finding.ledger.ledger for r in store.query(category="entry_no_replica")] == [2, 4]
    assert [r.finding.ledger.ledger for r in store.query(ledger=LedgerId.of(3))] == [3]
    # a bookie filter matches the finding's bookie or its ensemble
    assert [r.finding.ledger.ledger for r in store.query(bookie="b9:3181")] == [4]
    assert len(store.query(bookie="b3:3181")) == 4
    assert store.query(bookie="zz:1") == []
    assert len(store.query(limit=2)) == 2


def test_resolved_history_is_bounded() -> None:
    store = FindingStore(clock=Clock(), keep_resolved=2)
    keys = [store.add(finding(Category.ENTRY_NO_REPLICA, i)).key for i in range(4)]
    for k in keys:
        store.resolve(k)
    assert [r.key for r in store.query(include_resolved=True)] == keys[2:]
    assert store.resolve(keys[0]) is None


# ------------------------------------------------------------------------------------------ tasks


def test_task_lifecycle_progress_and_eta() -> None:
    clock = Clock(100.0)
    board = TaskBoard(clock=clock)
    board.register("scrutiny", interval_seconds=3600)
    board.register("open_ledger_check", enabled=False)
    assert board.get("scrutiny").state is TaskState.IDLE
    assert board.get("open_ledger_check").state is TaskState.DISABLED
    board.start("scrutiny", total=1000, cursor="0")
    clock.t = 110.0
    info = board.progress("scrutiny", 100, cursor="L100")
    assert info.cursor == "L100"
    snap = board.get("scrutiny")
    assert snap.state is TaskState.RUNNING and snap.runs == 1
    assert snap.rate_per_second == pytest.approx(10.0)
    assert snap.eta_seconds == pytest.approx(90.0)
    assert snap.fraction == pytest.approx(0.1)
    clock.t = 120.0
    board.advance("scrutiny", 100)
    assert board.get("scrutiny").eta_seconds == pytest.approx(80.0)  # 200 done in 20 s, 800 left
    board.schedule("scrutiny", 3720.0)
    clock.t = 130.0
    done = board.succeed("scrutiny")
    assert (done.state, done.last_success, done.last_finish, done.next_run) == (TaskState.IDLE, 130.0, 130.0, 3720.0)
    assert board.get("scrutiny").eta_seconds is None  # no ETA once finished
    board.start("scrutiny", total=10)
    clock.t = 140.0
    failed = board.fail("scrutiny", TimeoutError("bookie b1 did not answer"))
    assert failed.last_error == "TimeoutError: bookie b1 did not answer" and failed.last_error_at == 140.0
    assert failed.failures == 1 and failed.last_success == 130.0 and failed.runs == 2
    assert [t.name for t in board.snapshot()] == ["scrutiny", "open_ledger_check"]
    with pytest.raises(KeyError, match="unknown task 'nope'"):
        board.start("nope")


def test_pause_all_and_resume_all_keep_disabled_tasks() -> None:
    board = TaskBoard(clock=Clock())
    board.register("a")
    board.register("b")
    board.register("c", enabled=False)
    board.start("b")
    board.pause_all()
    assert [t.state for t in board.snapshot()] == [TaskState.PAUSED, TaskState.PAUSED, TaskState.DISABLED]
    # a run that ends while paused stays paused
    board.succeed("b")
    assert board.get("b").state is TaskState.PAUSED
    board.start("a")  # a run that starts while paused shows as running, and resume keeps it running
    board.pause_all()
    board.resume_all()
    assert [t.state for t in board.snapshot()] == [TaskState.RUNNING, TaskState.IDLE, TaskState.DISABLED]


# ------------------------------------------------------------------------------------------ pause / leader


async def test_pause_blocks_waiters_until_resume() -> None:
    clock = Clock(50.0)
    p = PauseControl(clock=clock)
    await asyncio.wait_for(p.wait_resumed(), 1)  # not paused: returns at once
    assert p.pause("maintenance") is True
    assert (p.paused, p.reason, p.since) == (True, "maintenance", 50.0)
    clock.t = 60.0
    assert p.pause("still maintenance") is False and p.since == 50.0 and p.reason == "still maintenance"
    waiter = asyncio.create_task(p.wait_resumed())
    await asyncio.sleep(0.05)
    assert not waiter.done()
    assert p.resume() is True
    await asyncio.wait_for(waiter, 1)
    assert (p.paused, p.reason, p.since) == (False, "", None)
    assert p.resume() is False


def test_leadership_flag_and_listeners() -> None:
    clock = Clock(5.0)
    lead = Leadership("pod-0", clock=clock)
    heard: list[bool] = []
    lead.add_listener(heard.append)
    assert lead.set(False, leader="pod-1") is False
    assert (lead.is_leader, lead.leader) == (False, "pod-1")
    assert lead.set(True) is True and lead.leader == "pod-0" and lead.since == 5.0
    assert lead.set(True) is False
    assert lead.set(False, leader=None) is True
    assert heard == [True, False] and lead.changes == 2


def test_leadership_is_unconfirmed_after_a_loop_stall_until_confirmed() -> None:
    mono = Clock(50.0)
    lead = Leadership("pod-0", clock=Clock(5.0), monotonic=mono)
    assert lead.status == "standby" and not lead.confirmed and not lead.suspect()  # a standby has nothing to suspect
    lead.set(True, vote_path="/r/bk-auditor/election/V_0000000001")
    assert lead.confirmed and lead.status == "leader" and lead.vote_path == "/r/bk-auditor/election/V_0000000001"
    mono.t += 3600  # no stall limit: never stalled
    assert lead.confirmed
    lead.stall_limit = 1.0
    assert lead.stalled and not lead.confirmed and lead.status == "unconfirmed"
    assert lead.beat() == 3600 and not lead.stalled
    assert lead.suspect() and not lead.suspect()  # once
    assert not lead.confirmed and lead.unconfirmed_since == 5.0
    lead.confirm()
    assert lead.confirmed
    mono.t += 0.5
    assert lead.confirmed  # a short lag is no stall
    lead.suspect()
    lead.set(False, leader="pod-1")  # stepping down clears everything
    assert (lead.status, lead.vote_path, lead.unconfirmed_since) == ("standby", None, None)
    lead.set(True)
    assert lead.confirmed  # a new election is a confirmation


def test_task_crash_and_restart_on_the_board() -> None:
    clock = Clock(10.0)
    board = TaskBoard(clock=clock)
    board.register("scrutiny", interval_seconds=60)
    board.start("scrutiny")
    info = board.crash("scrutiny", ValueError("boom"), restart_at=12.0)
    assert (info.state, info.last_error, info.last_error_at, info.failures, info.restart_at) == (
        TaskState.FAILED,
        "ValueError: boom",
        10.0,
        1,
        12.0,
    )
    info = board.restarted("scrutiny")
    assert (info.state, info.restarts, info.restart_at, info.failures) == (TaskState.IDLE, 1, None, 1)
    info = board.note_error("scrutiny", "/r/bk-auditor/checks/scrutiny: corrupt (replaced with a fresh state)")
    assert info.failures == 1 and info.state is TaskState.IDLE and "replaced" in (info.last_error or "")


def test_daemon_state_bundle() -> None:
    st = DaemonState("pod-0", recheck_depth=lambda: 3)
    assert st.leadership is not None and st.leadership.identity == "pod-0"
    assert st.recheck_depth() == 3 and len(st.findings) == 0 and st.tasks.names() == []
