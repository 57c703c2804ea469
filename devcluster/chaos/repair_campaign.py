"""The repair chaos campaign (issue 39, docs/reliability.md "Repair under chaos"): the repair role on, live
writers, one fault per round on top of a bookie lost for good, healed by our repair alone.

The cluster is the auditor campaign's (campaign.py): ZooKeeper, 6 real bookies (one DbLedgerStorage, one
registered behind our TCP proxy) and two `bk-auditor run` daemons, here each with a repair worker beside it
(`repair.workers_beside_auditor: 1`, `recover_open_ledgers: true`). Real Java writers (writers.py) keep
writing ledgers that roll and are trimmed, and log every acknowledged entry. A round:

1. SIGKILL one writer process (its ledgers stay open: open-ledger recovery has work), start a new one;
2. SIGKILL a bookie and keep it away: its ledgers must be repaired to the others;
3. the round's fault, once a repair is under way (a lock is held): a worker SIGKILLed or SIGSTOPped past
   its session timeout, the copy's target bookie SIGSTOPped, ZooKeeper restarted, Java's own
   ReplicationWorker beside ours, the ledger being repaired deleted, a second bookie lost, or (before the
   loss) bit rot on a surviving copy;
4. wait until durability is restored by repair itself: no marker, no lock, and the Java census says every
   closed ledger's every entry has its write quorum of verified copies and every open one's acknowledged
   entries their ack quorum; or the SLA (`sla_seconds`) runs out, a violation;
5. check the invariants from ground truth independent of our code (the writers' acknowledgement logs read
   back by the real Java client, the census, ZooKeeper's own transaction log, the proxy's request log):
   no acknowledged entry lost or changed; no ledger closed short of its acknowledged end; no ledger
   metadata change and no RECOVERY_ADD outside a held lock, no deleted ledger re-created; no false marker
   or finding, none left behind; one leader; every task alive;
6. bring the lost bookie back empty (and a second one with its disks) for the next round.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kazoo.exceptions import NoNodeError

from devcluster.checks_util import corrupt_entry_on_disk, ledger_path

from .campaign import Campaign, CampaignError, ChaosConfig, Round, _max, _median
from .observe import Seen, read_markers
from .truth import DURABILITY
from .writers import WriterFleet
from .zklog import (
    SessionSampler,
    TxnLog,
    adds_without_lock,
    list_ledgers,
    metadata_writes_without_lock,
    recreated_ledgers,
    writer_sessions_of,
)

REPAIR_KINDS = (
    "lost",
    "worker-kill",
    "worker-stop",
    "target-stop",
    "zk-restart",
    "java-worker",
    "trim",
    "second-loss",
    "bitrot",
)
# Faults that wait for a repair under way (a lock held) before they act.
DURING_REPAIR = {"worker-kill", "worker-stop", "target-stop", "zk-restart", "java-worker", "trim", "second-loss"}
SHAPES = ((3, 3, 2), (3, 2, 2), (5, 2, 2))
LOCK_RE_PREFIX = "urL"  # a lock and a marker leaf: urL<ledger id, 10 digits>


@dataclass
class RepairConfig(ChaosConfig):
    rounds: int = 200
    ledgers_per_quorum: int = 20  # the static pool of closed ledgers (besides the writers' own)
    open_ledgers: int = 0
    kinds: tuple[str, ...] = REPAIR_KINDS
    lost_bookie_delay: int = 10
    writer_processes: int = 3
    writers_per_process: int = 7  # 21 ledgers written at a time
    writer_rate: float = 8.0  # entries per second per writer
    # SLA: from the loss to durability restored; the fault's own hold time (a second bookie away, a
    # worker stopped) comes on top. Bytes at risk per round are tens of MB, so the per-GB part is small.
    sla_base_seconds: float = 150.0
    sla_seconds_per_gb: float = 120.0
    results_dir: Path = Path("bench/results/chaos-repair")


@dataclass
class RepairRound(Round):
    lost: list[str] = field(default_factory=list)
    rotted: dict[str, list[int]] = field(default_factory=dict)  # bookie -> [ledger, entry] planted corrupt
    stopped: set[str] = field(default_factory=set)  # bookies stopped for a while this round (not lost)
    killed_writer_ledgers: list[int] = field(default_factory=list)
    fault_applied: bool = False
    fault_detail: dict[str, Any] = field(default_factory=dict)
    sla_seconds: float = 0.0
    restored_seconds: float | None = None
    bytes_at_risk: int = 0
    marked: set[int] = field(default_factory=set)  # ledgers with a marker during the round
    census_rounds: int = 0
    acked: int = 0
    verified: int = 0
    acked_lost: list[dict[str, Any]] = field(default_factory=list)
    closed_short: list[int] = field(default_factory=list)
    recovered: list[int] = field(default_factory=list)  # open ledgers closed during the round (not by a writer)
    left_open: list[int] = field(default_factory=list)
    lock_violations: list[dict[str, Any]] = field(default_factory=list)
    recovery_adds: int = 0
    deleted_by_campaign: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        d = super().summary()
        d["stopped"] = sorted(self.stopped)
        d["marked"] = len(self.marked)
        d["recovered"] = len(self.recovered)
        return d


class RepairCampaign(Campaign):
    """Reuses the auditor campaign's cluster, leadership and task checks; rounds and invariants are its own."""

    cfg: RepairConfig
    # The writers' and observers' processes and sockets too: a round they fail is a violation, not the end.
    ROUND_ERRORS = (*Campaign.ROUND_ERRORS, OSError)

    def __init__(self, cfg: RepairConfig) -> None:
        super().__init__(cfg)
        self._fleet: WriterFleet | None = None
        self.sessions: Any = None  # zklog session -> pid sampler
        self.java_worker: Any = None
        self.txnlog: Any = None  # zklog.TxnLog, read incrementally
        self.campaign_writes: dict[str, float] = {}  # ledger path -> when the campaign itself wrote or deleted it
        self.txn_from_zxid = 0
        self.wiped_bookies: set[str] = set()  # ever brought back empty (bookie_reincarnated expected)

    # ================================================================== set-up
    def setup(self) -> None:
        cfg = self.cfg
        self.start_cluster(decode_requests=True)
        t = time.time()
        self.add_ledgers([(q, False) for q in SHAPES for _ in range(cfg.ledgers_per_quorum)])
        self.log(f"{len(self.pool)} static ledgers written and censused in {time.time() - t:.0f}s")
        self.sessions = SessionSampler(self.c).start()
        self.txnlog = TxnLog(self.c)
        settings = self.daemon_settings()
        # Every entry read by the ledger check (bit rot found), and a repair worker beside each daemon.
        settings["ledger_check"] = {"mark_under_replicated": True, "verification_percentage": 100}
        settings["repair"] = {
            "workers_beside_auditor": 1,
            "recover_open_ledgers": True,
            "open_ledger_grace_seconds": 5,
            "poll_seconds": 2,
            "backoff_cap_seconds": 10,
        }
        self.start_daemons(settings)
        self._fleet = WriterFleet(
            self.c,
            self.workdir / "writers",
            processes=cfg.writer_processes,
            writers=cfg.writers_per_process,
            rate=cfg.writer_rate,
            seed=cfg.seed,
        )
        self.fleet.start()
        # Every writer JVM started and writing (a JVM takes tens of seconds to start on a loaded machine).
        self.fleet.wait_acked(cfg.writer_processes * cfg.writers_per_process * 5, 300)
        self.last_checked = time.time()
        self.log(f"daemons with repair workers up ({self.mon.current_leader()} leads); writers writing")

    @property
    def fleet(self) -> WriterFleet:
        assert self._fleet is not None
        return self._fleet

    # ================================================================== ground truth helpers
    def locks(self) -> dict[int, int]:
        """ledger -> the session holding its repair lock, now."""
        base = f"{self.c.ledgers_root}/underreplication/locks"
        try:
            names = self.c.kazoo.get_children(base)
        except NoNodeError:
            return {}
        out = {}
        for n in names:
            if not (n.startswith(LOCK_RE_PREFIX) and n[3:].isdigit()):
                continue
            st = self.c.kazoo.exists(f"{base}/{n}")
            if st is not None:
                out[int(n[3:])] = st.ephemeralOwner
        return out

    def wait_lock(self, timeout: float) -> tuple[int, int] | None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            held = self.locks()
            if held:
                lid = self.rng.choice(sorted(held))
                return lid, held[lid]
            time.sleep(0.1)
        return None

    def worker_pids(self) -> list[int]:
        out = []
        for d in self.daemons.values():
            if d.proc is None or d.proc.poll() is not None:
                continue
            try:
                kids = Path(f"/proc/{d.pid}/task/{d.pid}/children").read_text().split()
            except OSError:
                continue
            out += [int(k) for k in kids]
        return out

    def existing_ledgers(self) -> set[int]:
        """Every ledger in ZooKeeper now (the listing of the ledgers tree, parsed by path shape)."""
        return list_ledgers(self.c.kazoo, self.c.ledgers_root)

    def census_specs(self) -> tuple[list[str], dict[int, int]]:
        """Census specs for every existing ledger: closed ones by their metadata, open ones up to their
        highest acknowledged entry (beyond it nothing was promised). Returns (specs, open ledger -> end)."""
        acked = self.fleet.acked()
        exists = self.existing_ledgers()
        specs, open_end = [], {}
        for lid in sorted(exists):
            if lid in self.pool:
                specs.append(str(lid))
                continue
            info = acked.get(lid)
            if info is None:
                continue  # created by a writer that had no entry acknowledged yet
            if info.closed_last is not None:
                specs.append(str(lid))
            elif info.max_acked >= 0:
                specs.append(f"{lid}:{info.max_acked}")
                open_end[lid] = info.max_acked
        return specs, open_end

    def durability_restored(self, r: RepairRound) -> tuple[bool, list[str]]:
        """By the Java census: closed ledgers whole on their write quorum, open ones (up to their last
        acknowledged entry) on their ack quorum."""
        specs, _ = self.census_specs()
        r.census_rounds += 1
        rows = self.c.copies(specs, timeout=900)
        bad = []
        for row in rows:
            lid = row["ledgerId"]
            if row.get("metadataError"):
                if lid in self.existing_ledgers():
                    bad.append(f"{lid}: {row['metadataError'][:80]}")
                continue
            closed = row.get("state") == "CLOSED"
            short = row.get("belowWriteQuorum", 0) if closed else row.get("belowAckQuorum", 0)
            if short:
                first = row.get("belowWriteFirst" if closed else "belowAckFirst", [])[:5]
                where = {
                    kind: {b: len(es) for b, es in row.get(kind, {}).items()}
                    for kind in ("missing", "corrupt", "unreadable")
                    if row.get(kind)
                }
                bad.append(f"{lid} ({row.get('state')}): {short} entries short, e.g. {first}; {where}")
        return not bad, bad

    # ================================================================== a round
    def run_round(self, r: Round) -> Round:
        assert isinstance(r, RepairRound)
        cfg = self.cfg
        r.leader_before = self.mon.current_leader()
        txn_start = time.time()
        self.trim_abandoned()
        # 1. A writer dies mid-ledger: its open ledgers are left for recovery.
        w = self.rng.randrange(cfg.writer_processes)
        r.killed_writer_ledgers = sorted(self.fleet.kill(w))
        self.fleet.restart(w)
        time.sleep(1)
        # 2. (bit rot first: a surviving copy corrupt before the loss)
        survivors = [b for b in self.c.bookies if b.index != cfg.proxied]
        victim = self.rng.choice(survivors)
        if r.kind == "bitrot":
            self.plant_bitrot(r, victim.bookie_id)
        # 3. The loss.
        r.lost.append(victim.bookie_id)
        r.faulted_bookies.add(victim.bookie_id)
        r.params.update(victim=victim.bookie_id, writer_killed=w)
        r.bytes_at_risk = self.bytes_on(victim.bookie_id)
        # Lost for good until restore_cluster brings it back empty: nothing may restart it with its disks
        # meanwhile (a ZooKeeper restart's heal_bookies did: it then took new writes, and wiping it at the
        # round's end destroyed copies no repair had been asked to make).
        self.c.held_down.add(victim.index)
        self.c.kill_bookie(victim.index)
        r.fault_at = time.time()
        hold = 0.0
        if r.kind in DURING_REPAIR:
            hold = self.fault_during_repair(r, victim.index)
        r.sla_seconds = round(
            cfg.lost_bookie_delay + cfg.sla_base_seconds + hold + cfg.sla_seconds_per_gb * r.bytes_at_risk / 1e9, 1
        )
        # 4. Healing by repair itself.
        self.await_restored(r)
        r.healed_at = time.time()
        self.stop_java_worker()
        # 5. Invariants.
        self.verify_round(r, txn_start)
        # 6. Back to six bookies: the lost one empty, a second one with its disks.
        self.restore_cluster(r)
        r.finished = time.time()
        return r

    def trim_abandoned(self) -> None:
        """Delete the ledgers the previous round's killed writer left (verified in that round), as Pulsar
        trims a dead producer's ledgers: otherwise they pile up round after round."""
        prev = self.rounds[-1] if self.rounds else None
        if not isinstance(prev, RepairRound) or not prev.killed_writer_ledgers:
            return
        exists = self.existing_ledgers()
        gone = [lid for lid in prev.killed_writer_ledgers if lid in exists]
        if not gone:
            return
        now = time.time()
        for lid in gone:
            self.campaign_writes[ledger_path(self.c, lid)] = now
        self.c.ledger_tool("delete", "--ledger-id", ",".join(str(x) for x in gone))
        for lid in gone:
            self.deleted[lid] = time.time()

    def bytes_on(self, bookie: str) -> int:
        """Entry bytes the bookie should hold (its disk usage is a fair measure; journal excluded)."""
        b = next(x for x in self.c.bookies if x.bookie_id == bookie)
        return sum(f.stat().st_size for f in b.ledger_dir.rglob("*") if f.is_file())

    def plant_bitrot(self, r: RepairRound, victim: str) -> None:
        """Corrupt one entry's copy on a surviving SortedLedgerStorage bookie, of a closed WQ3 ledger the
        victim also holds (so its third copy is the only good one the repair may copy from)."""
        cands = [
            rec
            for rec in self.pool.values()
            if rec.write_quorum == 3 and not rec.open and victim in rec.bookies and rec.end >= 0
        ]
        sorted_bookies = {
            b.bookie_id: b for b in self.c.bookies if b.storage == "sorted" and b.index != self.cfg.proxied
        }
        for rec in self.rng.sample(cands, len(cands)):
            entry = self.rng.randint(0, rec.end)
            holders = [x for x in rec.write_set(entry) if x in sorted_bookies and x != victim]
            if not holders:
                continue
            b = sorted_bookies[self.rng.choice(holders)]
            self.c.stop_bookie(b.index)
            changed = corrupt_entry_on_disk(b.ledger_dir, rec.ledger_id, entry, b.journal_dir)
            self.c.start_bookie(b.index, timeout=120)
            r.rotted[b.bookie_id] = [rec.ledger_id, entry]
            r.params.update(rotted=b.bookie_id, rot_ledger=rec.ledger_id, rot_entry=entry, rot_copies=changed)
            # The auditor's ledger check reads every copy: it finds the rot and marks it.
            self.trigger("ledger")
            return
        r.notes.append("no ledger to rot")

    def fault_during_repair(self, r: RepairRound, victim: int) -> float:
        """Wait for a repair under way (a lock held), then apply the round's fault. Returns the seconds
        the fault itself holds durability back (added to the SLA)."""
        cfg = self.cfg
        got = self.wait_lock(cfg.lost_bookie_delay + 60)
        if r.kind == "java-worker":
            self.java_worker = self.c.start_replication_worker(seconds=3600)
            r.fault_applied = True
            r.fault_detail = {"java_worker_pid": self.java_worker.pid}
            return 0.0
        if got is None:
            r.notes.append("no repair lock seen: the fault found nothing under way")
            return 0.0
        lid, session = got
        r.fault_detail = {"ledger": lid, "session": f"{session:x}"}
        if r.kind in ("worker-kill", "worker-stop"):
            pid = self.sessions.wait_for(session, 3.0)
            if pid is None or pid not in self.worker_pids():
                r.notes.append(f"lock of {lid} held by session {session:x}, pid {pid}: not one of our workers")
                return 0.0
            r.fault_detail["pid"] = pid
            r.fault_applied = True
            if r.kind == "worker-kill":
                os.kill(pid, signal.SIGKILL)
                return 0.0
            hold = round(cfg.session_timeout + self.rng.uniform(1, 5), 1)
            r.fault_detail["stopped_seconds"] = hold
            os.kill(pid, signal.SIGSTOP)
            time.sleep(hold)
            os.kill(pid, signal.SIGCONT)
            r.resumed_at = time.time()
            return hold
        if r.kind == "target-stop":
            target = self.recovery_target()
            if target is None:
                r.notes.append("no bookie receiving recovery adds")
                return 0.0
            hold = round(self.rng.uniform(2, 10), 1)
            b = self.c.bookie(target)
            r.fault_detail.update(target=b.bookie_id, stopped_seconds=hold)
            r.stopped.add(b.bookie_id)
            r.faulted_bookies.add(b.bookie_id)
            r.fault_applied = True
            self.c.pause_bookie(target)
            time.sleep(hold)
            self.c.resume_bookie(target)
            return hold
        if r.kind == "zk-restart":
            down = round(self.rng.uniform(0, 3), 1)
            r.fault_detail["down_seconds"] = down
            r.fault_applied = True
            r.leader_deadline_from = time.time()
            self.c.restart_zookeeper(down_seconds=down)
            return down + 2 * cfg.session_timeout
        if r.kind == "trim":
            path = ledger_path(self.c, lid)
            self.campaign_writes[path] = time.time()
            r.deleted_by_campaign.append(lid)
            self.c.delete_ledger(lid)
            self.pool.pop(lid, None)
            self.deleted[lid] = time.time()
            r.fault_applied = True
            return 0.0
        if r.kind == "second-loss":
            others = [
                b for b in self.c.bookies if b.index not in (victim, self.cfg.proxied) and b.running and not b.paused
            ]
            b = self.rng.choice(others)
            away = round(cfg.lost_bookie_delay + self.rng.uniform(5, 20), 1)
            r.fault_detail.update(second=b.bookie_id, away_seconds=away)
            r.lost.append(b.bookie_id)
            r.faulted_bookies.add(b.bookie_id)
            r.fault_applied = True
            self.c.kill_bookie(b.index)
            time.sleep(away)
            self.c.start_bookie(b.index, timeout=120)  # with its disks: its copies come back
            return away
        raise CampaignError(f"unknown fault {r.kind}")

    def recovery_target(self) -> int | None:
        """The bookie whose recovery-add count grows fastest over half a second (its own counters)."""

        def counts() -> dict[int, float]:
            out = {}
            for b in self.c.bookies:
                if not b.running or b.paused:
                    continue
                try:
                    status, text = self.c.http_get(b.index, "/metrics", timeout=3)
                except OSError:
                    continue
                if status != 200:
                    continue
                total = 0.0
                for line in text.splitlines():
                    # BOOKIE_RECOVERY_ADD_ENTRY: the bookie's own count of recovery adds it stored.
                    name = line.split("{", 1)[0].split(" ", 1)[0]
                    if "RECOVERY_ADD_ENTRY" in name and name.endswith("_count"):
                        try:
                            total += float(line.rsplit(" ", 1)[1])
                        except ValueError:
                            pass
                out[b.index] = total
            return out

        a = counts()
        time.sleep(0.5)
        z = counts()
        grown = {n: z[n] - a.get(n, 0.0) for n in z}
        if not grown or max(grown.values()) <= 0:
            return None
        return max(grown, key=lambda n: grown[n])

    def await_restored(self, r: RepairRound) -> None:
        """Until no marker, no lock and the census says durability is whole again, or the SLA runs out."""
        deadline = r.fault_at + r.sla_seconds
        last_bad: list[str] = []
        while time.time() < deadline:
            markers = read_markers(self.c.kazoo, self.c.ledgers_root)
            self.judge_markers(r, markers)
            if markers or self.locks():
                time.sleep(0.3)
                continue
            if time.time() - r.fault_at < self.cfg.lost_bookie_delay + 2:
                time.sleep(1)  # before the delay nothing is marked yet
                continue
            ok, last_bad = self.durability_restored(r)
            if ok:
                # The census is the clock's last step: a clean one that ends past the SLA is still late.
                r.restored_seconds = round(time.time() - r.fault_at, 1)
                if r.restored_seconds > r.sla_seconds:
                    r.violations.append(
                        f"durability restored after {r.restored_seconds}s, past the SLA of {r.sla_seconds:.0f}s"
                    )
                return
            time.sleep(2)
        r.violations.append(
            f"durability not restored within the SLA of {r.sla_seconds:.0f}s: markers "
            f"{len(read_markers(self.c.kazoo, self.c.ledgers_root))}, locks {len(self.locks())}, "
            f"census {last_bad[:3]}"
        )

    def judge_markers(self, r: RepairRound, markers: dict[int, tuple[str, set[str]]]) -> None:
        """A marker must name a bookie lost for the delay or a bookie really lacking (the rotted copy)."""
        for lid, (_, replicas) in markers.items():
            if lid in r.marked:
                continue
            r.marked.add(lid)
            allowed = set(r.lost) | set(r.rotted)
            prev = self.rounds[-1] if self.rounds else None
            if prev is not None and isinstance(prev, RepairRound):
                allowed |= set(prev.lost)
            if replicas and replicas <= allowed:
                r.markers_expected += 1
            else:
                r.markers_false.append({"ledger": lid, "replicas": sorted(replicas), "allowed": sorted(allowed)})

    def stop_java_worker(self) -> None:
        if self.java_worker is not None:
            self.java_worker.stop()
            self.java_worker = None

    # ================================================================== invariants
    def verify_round(self, r: RepairRound, txn_start: float) -> None:
        # 1 + 3. Every acknowledged entry read back by the Java client, bytes identical; none closed short.
        rows = self.fleet.verify()
        for row in rows:
            if row.get("state") == "GONE":
                continue
            r.acked += int(row.get("acked", 0))
            r.verified += int(row.get("verified", 0))
            if row.get("missing") or row.get("changed"):
                r.acked_lost.append(
                    {k: row.get(k) for k in ("ledgerId", "state", "missing", "changed", "errors", "ackedMax")}
                )
            if row.get("closedShort"):
                r.closed_short.append(row["ledgerId"])
            if row["ledgerId"] in r.killed_writer_ledgers:
                # Left open by its killed writer: closed now only by a recovery (ours, under the lock).
                (r.left_open if row.get("state") == "OPEN" else r.recovered).append(row["ledgerId"])
        if r.acked_lost:
            r.violations.append(
                f"acknowledged entries lost or changed in {len(r.acked_lost)} ledgers: {r.acked_lost[:2]}"
            )
        if r.closed_short:
            r.violations.append(f"ledgers closed short of their acknowledged end: {r.closed_short[:10]}")
        # 4. No write without the lock (ZooKeeper's own transaction log and the proxy's request log).
        self.check_locks(r, txn_start)
        # 5. Findings, leadership, tasks.
        after = r.healed_at
        p = self.wait_pass("scrutiny", after, self.pass_timeout("scrutiny"))
        if p is None:
            r.violations.append("no complete scrutiny pass after the heal (audit stalled)")
        else:
            r.passes["scrutiny"] = round(p.end - p.start, 1)
        r.checked_at = time.time()
        self.check_leadership(r)
        self.judge_findings(r, self.last_checked)
        self.last_checked = r.checked_at
        self.check_left_over(r)
        self.check_tasks(r)
        r.errors_logged = len(self.obs.errors_between(r.started, time.time()))

    def check_locks(self, r: RepairRound, since: float) -> None:
        records = self.txnlog.records()
        root = self.c.ledgers_root
        # Every ledger marked during the round, from the log (our 0.3 s samples may miss a short-lived one).
        marks = f"{root}/underreplication/ledgers/"
        for rec in records:
            if (
                rec.applied
                and rec.type == "create"
                and rec.time / 1000 >= since - 1
                and (rec.path or "").startswith(marks)
            ):
                leaf = (rec.path or "").rsplit("/", 1)[-1]
                if leaf.startswith(LOCK_RE_PREFIX) and leaf[3:].isdigit():
                    r.marked.add(int(leaf[3:]))
        # A writer whose session expired (a ZooKeeper restart) goes on under a new session of the same
        # process: every session of a writer process counts as that writer.
        sessions = self.sessions.snapshot()
        writer_pids = set(self.fleet.pids_ever())
        writer_sessions = {s for s, p in sessions.items() if p in writer_pids}
        extra = {key: writer_sessions for key in writer_sessions_of(records, root)}
        bad = metadata_writes_without_lock(records, root, extra)
        bad = [
            v
            for v in bad
            if not (
                v.get("path") in self.campaign_writes
                and abs(v.get("time", 0) / 1000 - self.campaign_writes[v["path"]]) < 120
            )
        ]
        bad = [v for v in bad if v.get("time", 0) / 1000 >= since - 1]
        again = [v for v in recreated_ledgers(records, root) if v.get("time", 0) / 1000 >= since - 1]
        assert self.proxy is not None
        adds = [a for a in self.proxy.recovery_adds() if a.time >= since - 1]
        r.recovery_adds = len(adds)
        unlocked = adds_without_lock(adds, records, self.sessions.snapshot(), root)
        # For the diagnosis of a violation: which connection (client address as the proxy saw it) sent it.
        by_add = {(a.ledger, a.entry, round(a.time, 6)): a for a in adds}
        for v in unlocked:
            a = by_add.get((int(v["ledger"]), int(v["entry"]), round(float(v["time"]), 6)))
            if a is not None:
                v["peer"], v["connection"], v["protocol"] = list(a.peer), a.connection, a.protocol
        r.lock_violations = [*bad, *again, *unlocked]
        if r.lock_violations:
            r.violations.append(f"writes without the lock: {r.lock_violations[:3]}")

    def judge_findings(self, r: RepairRound, since: float) -> None:
        faulted = set(r.faulted_bookies) | set(r.rotted)
        prev = self.rounds[-1] if self.rounds else None
        if prev is not None:
            faulted |= prev.faulted_bookies
        for f in self.obs.findings(since):
            key = (f.daemon,) + f.key + (int(f.first_seen),)
            if key in self.judged or f.severity == "info":
                continue
            self.judged.add(key)
            if self.finding_true(f, r, faulted):
                r.findings_expected += 1
            else:
                r.findings_false.append(
                    {
                        "daemon": f.daemon,
                        "category": f.category,
                        "ledger": f.ledger,
                        "bookie": f.bookie,
                        "claimed": sorted(f.claimed),
                        "message": f.message,
                    }
                )

    def finding_true(self, f: Seen, r: RepairRound, faulted: set[str]) -> bool:
        if f.category in DURABILITY:
            claimed = set(f.claimed) | ({f.bookie} if f.bookie else set())
            return bool(claimed) and claimed <= faulted
        if f.category == "bookie_unreachable":
            return f.bookie in faulted
        if f.category == "bookie_reincarnated":
            return f.bookie in self.wiped_bookies
        # The repair role's own reports (a ledger blocked, recovery waiting) are true while a fault holds.
        return f.category.startswith("repair_") or f.category in ("under_replicated_stuck", "ledger_open_too_long")

    def check_left_over(self, r: RepairRound) -> None:
        markers = read_markers(self.c.kazoo, self.c.ledgers_root)
        if markers:
            r.violations.append(f"{len(markers)} markers left behind after the heal: {sorted(markers)[:5]}")
        held = self.locks()
        if held:
            r.violations.append(f"{len(held)} repair locks held after the heal: {sorted(held)[:5]}")
        if len(self.worker_pids()) < 2:
            r.violations.append(f"repair workers running: {len(self.worker_pids())} of 2")

    # ================================================================== back to whole
    def restore_cluster(self, r: RepairRound) -> None:
        for bid in r.lost[:1]:
            b = next(x for x in self.c.bookies if x.bookie_id == bid)
            if b.running:
                # Its disks may hold acknowledged entries written since it came back: wiping them would be
                # the campaign's own data loss, charged to the repair in a later round.
                raise CampaignError(f"the lost bookie {bid} of round {r.n} is running again: something restarted it")
            self.c.wipe_bookie(b.index)
            self.wiped_bookies.add(bid)
            self.c.held_down.discard(b.index)
            self.c.start_bookie(b.index, timeout=120)
        self.ensure_cluster_whole()

    # ================================================================== self-test
    def self_test(self) -> dict[str, bool]:
        """Show on this very cluster that the invariants can fail: a marker naming a healthy bookie, a
        durability finding about one, an acknowledged entry whose bytes differ, and a ledger-metadata write
        made without the lock must each be flagged."""
        rec = next(iter(sorted(self.pool.values(), key=lambda x: x.ledger_id)))
        healthy = sorted(rec.bookies)[0]
        probe = RepairRound(0, "self-test", started=time.time())
        self.judge_markers(probe, {rec.ledger_id: ("planted", {healthy})})
        fake = Seen(
            "self-test",
            "entry_below_write_quorum",
            "major",
            rec.ledger_id,
            None,
            frozenset({healthy}),
            time.time(),
            time.time(),
            "scrutiny",
            "planted by the self-test",
        )
        changed = self.fleet.tampered_entry_flagged()
        # A version-checked write of the same bytes, by the campaign's own session, holding no lock.
        path = ledger_path(self.c, rec.ledger_id)
        data, stat = self.c.kazoo.get(path)
        since = time.time()
        self.campaign_writes[path] = since  # ours: not a violation of the round that follows
        self.c.kazoo.set(path, data, version=stat.version)
        time.sleep(0.5)
        unlocked = [
            v
            for v in metadata_writes_without_lock(self.txnlog.records(), self.c.ledgers_root)
            if v["path"] == path and v["time"] / 1000 >= since - 1
        ]
        return {
            "false_marker_flagged": [m["ledger"] for m in probe.markers_false] == [rec.ledger_id],
            "false_finding_flagged": not self.finding_true(fake, probe, set()),
            "changed_entry_flagged": changed,
            "unlocked_write_flagged": len(unlocked) == 1,
        }

    # ================================================================== the round loop's hooks
    def new_round(self, n: int, kind: str, started: float) -> Round:
        return RepairRound(n, kind, started=started)

    def recover(self, r: Round) -> None:
        assert isinstance(r, RepairRound)
        self.stop_java_worker()
        self.restore_cluster(r)

    def round_done(self, r: Round, took: float) -> None:
        assert isinstance(r, RepairRound)
        self.log(self.round_line(r, took))
        self.write_partial()

    def report(self) -> dict[str, Any]:
        return self.repair_report()

    def stop_extras(self) -> None:
        if self._fleet is not None:
            try:
                self.fleet.stop_all()
            except Exception as exc:
                self.log(f"stopping the writers: {exc}")
        if self.sessions is not None:
            self.sessions.stop()
        self.stop_java_worker()

    def write_partial(self) -> None:
        """The report so far, rewritten after every round: a campaign of hours that is stopped early still
        says what its rounds found."""
        part = f"-from{self.cfg.first_round}" if self.cfg.first_round > 1 else ""
        path = self.cfg.results_dir / f"chaos-repair-seed{self.cfg.seed}{part}-partial.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.repair_report(), indent=1, sort_keys=True, default=str))
        tmp.replace(path)

    def round_line(self, r: RepairRound, took: float) -> str:
        bits = [
            f"round {r.n}/{self.cfg.rounds} {r.kind}",
            f"lost {','.join(r.lost)}",
            json.dumps(r.fault_detail)[:120] if r.fault_detail else "",
            f"marked {len(r.marked)}",
            f"restored {r.restored_seconds}s (SLA {r.sla_seconds:.0f}s)",
            f"acked {r.acked} verified {r.verified}",
            f"adds via proxy {r.recovery_adds}",
        ]
        if r.recovered or r.left_open:
            bits.append(f"killed writer's ledgers: recovered {len(r.recovered)}, still open {len(r.left_open)}")
        if r.findings_false or r.markers_false:
            bits.append(f"FALSE findings {len(r.findings_false)} markers {len(r.markers_false)}")
        if r.violations:
            bits.append("VIOLATIONS: " + "; ".join(v[:200] for v in r.violations))
        return " | ".join(b for b in bits if b) + f" | {took:.0f}s"

    def repair_report(self) -> dict[str, Any]:
        segment = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "seconds": round(time.time() - self.started),
            "first_round": self.cfg.first_round,
            "self_test": self.self_test_result,
            "written_total": self._fleet.written_total() if self._fleet is not None else None,
        }
        config = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self.cfg).items() if k != "progress"}
        rounds = [r.summary() for r in self.rounds if isinstance(r, RepairRound)]
        return report_from_rounds(self.cfg.seed, config, [segment], rounds)


def report_from_rounds(
    seed: int, config: dict[str, Any], segments: list[dict[str, Any]], per_round: list[dict[str, Any]]
) -> dict[str, Any]:
    """The report, from the rounds' summaries (`RepairRound.summary`) and the runs ("segments") they came
    from: one for a campaign run in one go, several for one run in parts (`--first-round`, `--combine`)."""
    rounds = sorted(per_round, key=lambda r: r["n"])
    restored = [r["restored_seconds"] for r in rounds if r["restored_seconds"] is not None]
    self_test_failures = sum(1 for seg in segments for ok in (seg["self_test"] or {}).values() if not ok)
    written = [seg["written_total"] for seg in segments]
    return {
        "date": segments[0]["date"],
        "seconds": sum(seg["seconds"] for seg in segments),
        "seed": seed,
        "config": config,
        "segments": segments,
        "self_test": segments[0]["self_test"] if len(segments) == 1 else [seg["self_test"] for seg in segments],
        "rounds": len(rounds),
        "faults_per_kind": dict(Counter(r["kind"] for r in rounds)),
        "faults_applied": dict(
            Counter(r["kind"] for r in rounds if r["fault_applied"] or r["kind"] in ("lost", "bitrot"))
        ),
        "entries": {
            "acknowledged_verified": sum(r["verified"] for r in rounds),
            "acknowledged_checked": sum(r["acked"] for r in rounds),
            "written_total": None if None in written else sum(written),
        },
        "ledgers_marked": sum(r["marked"] for r in rounds),
        "open_ledgers_recovered": sum(r["recovered"] for r in rounds),
        "open_ledgers_left_open": sum(len(r["left_open"]) for r in rounds),
        "recovery_adds_seen_at_proxy": sum(r["recovery_adds"] for r in rounds),
        "restore_seconds": {
            "median": _median(restored),
            "p90": round(statistics.quantiles(restored, n=10)[-1], 1) if len(restored) > 1 else _max(restored),
            "max": _max(restored),
            "count": len(restored),
            "sla_max": max((r["sla_seconds"] for r in rounds), default=None),
        },
        "markers": {
            "expected": sum(r["markers_expected"] for r in rounds),
            "false": sum(len(r["markers_false"]) for r in rounds),
        },
        "findings": {
            "expected": sum(r["findings_expected"] for r in rounds),
            "false": sum(len(r["findings_false"]) for r in rounds),
        },
        "acknowledged_lost_or_changed": sum(len(r["acked_lost"]) for r in rounds),
        "closed_short": sum(len(r["closed_short"]) for r in rounds),
        "writes_without_lock": sum(len(r["lock_violations"]) for r in rounds),
        "dual_leader_samples": sum(r["dual_leaders"] for r in rounds),
        "rounds_with_violations": sum(
            1 for r in rounds if r["violations"] or r["findings_false"] or r["markers_false"]
        ),
        "violations_total": sum(
            len(r["violations"]) + len(r["findings_false"]) + len(r["markers_false"]) for r in rounds
        )
        + self_test_failures,
        "details": {
            "violations": [f"round {r['n']} {r['kind']}: {v}" for r in rounds for v in r["violations"]][:200],
            "false_findings": [{**f, "round": r["n"]} for r in rounds for f in r["findings_false"]][:200],
            "false_markers": [{**m, "round": r["n"]} for r in rounds for m in r["markers_false"]][:200],
            "notes": [f"round {r['n']} {r['kind']}: {x}" for r in rounds for x in r["notes"]][:200],
        },
        "per_round": rounds,
    }


def combine_repair_reports(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One report of a campaign run in parts: the same seed and fault plan, rounds that do not overlap
    (each part started with `--first-round` where the one before stopped)."""
    if not reports:
        raise ValueError("no reports to combine")
    seeds = {r["seed"] for r in reports}
    if len(seeds) != 1:
        raise ValueError(f"reports of different seeds: {sorted(seeds)}")
    plans = {(r["config"]["rounds"], tuple(r["config"]["kinds"]), r["config"]["cycle"]) for r in reports}
    if len(plans) != 1:
        raise ValueError("reports of different fault plans (--rounds, --kinds or --cycle differ)")
    seen: dict[int, int] = {}
    for i, rep in enumerate(reports):
        for r in rep["per_round"]:
            if r["n"] in seen:
                raise ValueError(f"round {r['n']} is in reports {seen[r['n']] + 1} and {i + 1}")
            seen[r["n"]] = i
    segments = [seg for rep in reports for seg in _segments(rep)]
    return report_from_rounds(
        reports[0]["seed"], reports[0]["config"], segments, [r for rep in reports for r in rep["per_round"]]
    )


def _segments(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs a report came from; a report written before reports named them was one run from round 1."""
    if "segments" in report:
        return list(report["segments"])
    return [
        {
            "date": report["date"],
            "seconds": report["seconds"],
            "first_round": 1,
            "self_test": report["self_test"],
            "written_total": report["entries"]["written_total"],
        }
    ]


def write_repair_report(report: dict[str, Any], results_dir: Path, suffix: str = "") -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"chaos-repair-{time.strftime('%Y%m%d-%H%M%S')}-seed{report['seed']}{suffix}.json"
    path.write_text(json.dumps(report, indent=1, sort_keys=True, default=str))
    return path


def repair_summary_text(report: dict[str, Any]) -> str:
    e, rs = report["entries"], report["restore_seconds"]
    lines = [
        f"repair chaos campaign: {report['rounds']} rounds, seed {report['seed']}, {report['seconds']}s"
        + (f" in {len(report['segments'])} parts" if len(report.get("segments", ())) > 1 else ""),
        "faults per kind: " + ", ".join(f"{k} {v}" for k, v in sorted(report["faults_per_kind"].items())),
        f"acknowledged entries verified by the Java client: {e['acknowledged_verified']} of "
        f"{e['acknowledged_checked']} checked; lost or changed in {report['acknowledged_lost_or_changed']} ledgers",
        f"ledgers marked and repaired: {report['ledgers_marked']}; closed short: {report['closed_short']}",
        f"time to durability restored: median {rs['median']}s, max {rs['max']}s (SLA up to {rs['sla_max']}s)",
        f"writes without the lock: {report['writes_without_lock']} "
        f"(recovery adds seen at the proxy: {report['recovery_adds_seen_at_proxy']})",
        f"markers expected {report['markers']['expected']}, false {report['markers']['false']}; "
        f"findings expected {report['findings']['expected']}, false {report['findings']['false']}",
        f"rounds with a violation: {report['rounds_with_violations']}",
    ]
    for v in report["details"]["violations"][:20]:
        lines.append("  " + v)
    return "\n".join(lines)
