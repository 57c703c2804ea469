"""The chaos campaign: two `bk-auditor run` daemons against a real cluster, one fault per round, and
invariants checked against ground truth computed without bk-auditor's code (see truth.py).

A round: snapshot ZooKeeper; inject one fault (chosen by the seeded RNG) and undo it (restart, resume,
heal the link); wait for a complete pass of the checks that started after everything was back; then
check: findings and markers against the ground truth, planted losses found, leadership (exactly one
leader within the session timeout + 2 s after a leader fault or a ZooKeeper restart, never two), no
write outside the allow-list (zktree.py), every leader task alive. Finally heal what the round damaged
(delete and replace the damaged ledgers, clear the markers after they were verified) so that rounds are
independent, and diff ZooKeeper again over the heal.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from devcluster import ports
from devcluster.checks_util import ledger_path, marker_path
from devcluster.cluster import PROXY_HOST, Cluster, HarnessError
from devcluster.daemon_util import Daemon

from .monitor import Monitor
from .observe import Observer, Seen, read_markers
from .proxy import LinkFault, LinkProxy
from .truth import DURABILITY, Damage, LedgerRecord, census, readledger
from .zktree import Allowance, diff, snapshot

KINDS = (
    "bookie-kill",
    "bookie-stop",
    "bookie-wipe",
    "zk-restart",
    "leader-kill",
    "leader-stop",
    "link-slow",
    "link-lossy",
    "link-corrupt",
    "loss-copy",
    "loss-metadata",
    "loss-bookie-gone",
)
QUORUMS = ((3, 3, 2), (3, 2, 2), (5, 2, 2))
TASKS = ("scrutiny", "ledger", "open", "bookies")


@dataclass
class ChaosConfig:
    rounds: int = 200
    seed: int = 1
    first_round: int = 1  # run rounds first_round..rounds of the seed's plan (a campaign run in parts)
    workdir: Path | None = None
    results_dir: Path = Path("bench/results/chaos")
    ledgers_per_quorum: int = 80  # closed ledgers per quorum kind (QUORUMS)
    open_ledgers: int = 20
    num_bookies: int = 6
    db_bookies: tuple[int, ...] = (6,)
    proxied: int = 5  # the bookie registered behind our proxy (link faults)
    session_timeout: float = 4.0  # the daemons' ZooKeeper session timeout
    scrutiny_seconds: float = 10.0
    ledger_check_seconds: float = 30.0
    open_check_seconds: float = 20.0
    lost_bookie_delay: int = 60
    kinds: tuple[str, ...] = KINDS
    cycle: bool = False  # take the kinds in order (smoke test) instead of drawing them
    self_test: bool = True  # first show that the invariants can fail (Campaign.self_test)
    keep: bool = False  # keep the work directory (logs) after a clean run
    progress: Callable[[str], None] = print


@dataclass
class Round:
    n: int
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    fault_at: float = 0.0
    healed_at: float = 0.0  # processes/links back
    checked_at: float = 0.0
    finished: float = 0.0
    faulted_bookies: set[str] = field(default_factory=set)
    wiped: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    planted: dict[int, float] = field(default_factory=dict)  # ledger -> when its loss was in place
    unreportable: list[int] = field(default_factory=list)  # damaged, but no finding is due
    gone_bookie: str | None = None
    leader_before: str | None = None
    leader_after: str | None = None
    leader_fault: str | None = None  # victim daemon of a leader fault
    leader_deadline_from: float | None = None
    failover_seconds: float | None = None
    single_leader_after: float | None = None
    leader_observed_after: float | None = None  # when our 0.2 s poll first saw that leader
    resumed_at: float | None = None  # leader-stop: when the stopped leader was resumed
    passes: dict[str, float] = field(default_factory=dict)  # check -> seconds the verifying pass took
    findings_expected: int = 0
    findings_false: list[dict[str, Any]] = field(default_factory=list)
    findings_on_deleted: int = 0
    planted_found: dict[int, float] = field(default_factory=dict)  # ledger -> seconds to find
    planted_missed: list[dict[str, Any]] = field(default_factory=list)
    markers_expected: int = 0
    markers_false: list[dict[str, Any]] = field(default_factory=list)
    markers_checked: set[int] = field(default_factory=set)
    zk_violations: list[dict[str, str]] = field(default_factory=list)
    dual_leaders: int = 0
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    task_failures: dict[str, int] = field(default_factory=dict)
    errors_logged: int = 0

    def summary(self) -> dict[str, Any]:
        """Compact: per-ledger maps become counts (the report stays readable at 200 rounds)."""
        d = asdict(self)
        for k in ("faulted_bookies", "wiped", "written"):
            d[k] = sorted(d[k])
        found = list(self.planted_found.values())
        d["planted"] = len(self.planted)
        d["planted_found"] = {"count": len(found), "median_seconds": _median(found), "max_seconds": _max(found)}
        d["unreportable"] = len(self.unreportable)
        d["markers_checked"] = len(self.markers_checked)
        for k in ("started", "fault_at", "healed_at", "checked_at", "finished", "leader_deadline_from"):
            d[k] = round(d[k], 2) if d[k] else d[k]
        return d


class CampaignError(RuntimeError):
    """The campaign could not go on (a process would not come back, the cluster would not start)."""


class Campaign:
    # What aborts one round (a violation) rather than the campaign.
    ROUND_ERRORS: tuple[type[BaseException], ...] = (
        CampaignError,
        HarnessError,
        AssertionError,
        subprocess.TimeoutExpired,
    )

    def __init__(self, cfg: ChaosConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(f"{cfg.seed}/setup")
        # The fault of round n is drawn up front, and its parameters from an RNG of its own, so a round
        # does the same thing whatever happened before it.
        plan = random.Random(cfg.seed)
        self.plan = [cfg.kinds[i % len(cfg.kinds)] if cfg.cycle else plan.choice(cfg.kinds) for i in range(cfg.rounds)]
        self.workdir = (
            Path(cfg.workdir) if cfg.workdir else Path(os.environ.get("TMPDIR", "/tmp")) / f"bk-chaos-{os.getpid()}"
        )
        self.cluster: Cluster | None = None
        self.proxy: LinkProxy | None = None
        self.daemons: dict[str, Daemon] = {}
        self.monitor: Monitor | None = None
        self.observer: Observer | None = None
        self.pool: dict[int, LedgerRecord] = {}
        self.deleted: dict[int, float] = {}
        self.damage = Damage()
        self.snap: dict[str, Any] = {}
        self.rounds: list[Round] = []
        self.heal_violations: list[dict[str, str]] = []
        self.false_keys: set[tuple[Any, ...]] = set()
        self.judged: set[tuple[Any, ...]] = set()
        self.task_counts: dict[tuple[str, str], int] = {}  # (daemon, task) -> failures seen so far
        self.last_checked = 0.0  # end of the last findings check: the next one starts there
        self.started = time.time()
        self.baseline: dict[str, Any] = {}
        self.self_test_result: dict[str, bool] = {}

    # ================================================================== set-up
    @property
    def c(self) -> Cluster:
        assert self.cluster is not None
        return self.cluster

    @property
    def obs(self) -> Observer:
        assert self.observer is not None
        return self.observer

    @property
    def mon(self) -> Monitor:
        assert self.monitor is not None
        return self.monitor

    def log(self, msg: str) -> None:
        self.cfg.progress(f"[chaos {time.strftime('%H:%M:%S')}] {msg}")

    def start_cluster(self, decode_requests: bool = False) -> None:
        """ZooKeeper and the bookies, one of them behind our proxy (`decode_requests`: its requests logged)."""
        cfg = self.cfg
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cluster = Cluster(
            self.workdir,
            num_bookies=cfg.num_bookies,
            storage={n: "db" for n in cfg.db_bookies},
            zk_port=ports.CHAOS_ZK_PORT,
            port_base=ports.CHAOS_PORT_BASE,
            http_base=ports.CHAOS_HTTP_BASE,
            proxied=(cfg.proxied,),
            lost_bookie_recovery_delay=cfg.lost_bookie_delay,
        )
        t = time.time()
        self.c.start()
        b = self.c.bookie(cfg.proxied)
        self.proxy = LinkProxy(PROXY_HOST, b.host, b.port, decode_requests=decode_requests).start()
        self.log(
            f"cluster up in {time.time() - t:.0f}s: ZooKeeper {self.c.zk_hosts}, bookies "
            f"{[x.bookie_id for x in self.c.bookies]} ({b.bookie_id} behind the proxy)"
        )

    def daemon_settings(self) -> dict[str, Any]:
        cfg = self.cfg
        return {
            "zookeeper": {"session_timeout_seconds": cfg.session_timeout},
            "schedule": {
                "scrutiny_seconds": cfg.scrutiny_seconds,
                "ledger_check_seconds": cfg.ledger_check_seconds,
                "open_ledger_check_seconds": cfg.open_check_seconds,
                "bookie_check_seconds": 3600,
            },
            "recheck": {"delays_seconds": [1, 3], "attempts": 2},
            "bookie_client": {"timeout_seconds": 2, "requests_per_second": 0},
            "max_concurrent_ledgers": 16,
            "ledger_check": {"mark_under_replicated": True, "verification_percentage": 10},
        }

    def start_daemons(self, settings: dict[str, Any]) -> float:
        """Two `bk-auditor run` daemons (the first leads), the log observer and the leadership monitor;
        returns when the first was started."""
        base = ports.CHAOS_DAEMON_PORT_BASE
        for i, name in enumerate(("auditor-a", "auditor-b")):
            self.daemons[name] = Daemon(
                self.c, name, self.workdir, admin_port=base + 2 * i, metrics_port=base + 2 * i + 1, **settings
            )
        a, b2 = self.daemons["auditor-a"], self.daemons["auditor-b"]
        started = time.time()
        a.start()
        a.wait(a.is_leader, 60, "leadership")
        b2.start()
        b2.wait(lambda: b2.health("readiness") == "SERVING", 60, "standby readiness")
        self.observer = Observer(self.daemons)
        self.monitor = Monitor(
            {n: d.admin_port for n, d in self.daemons.items()},
            self.c.zk_hosts,
            self.c.ledgers_root,
            [x.bookie_id for x in self.c.bookies],
        ).start()
        return started

    def setup(self) -> None:
        cfg = self.cfg
        self.start_cluster()
        t = time.time()
        self.add_ledgers(
            [(q, False) for q in QUORUMS for _ in range(cfg.ledgers_per_quorum)]
            + [(QUORUMS[i % len(QUORUMS)], True) for i in range(cfg.open_ledgers)]
        )
        self.log(f"{len(self.pool)} ledgers written and verified by the Java census in {time.time() - t:.0f}s")
        started = self.start_daemons(self.daemon_settings())
        # Baseline: a complete pass of every check over the healthy pool reports nothing actionable.
        t0 = time.time()
        self.last_checked = started
        for check in ("scrutiny", "open", "ledger"):
            p = self.wait_pass(check, t0, self.pass_timeout(check))
            if p is None:
                raise CampaignError(f"no complete {check} pass within {self.pass_timeout(check):.0f}s at start")
        base_round = Round(0, "baseline", started=t0)
        self.check_findings(base_round, started)
        self.last_checked = time.time()
        self.check_markers(base_round)
        self.baseline = {
            "false_findings": base_round.findings_false,
            "false_markers": base_round.markers_false,
            "seconds": round(time.time() - t0, 1),
        }
        if base_round.findings_false or base_round.markers_false:
            self.log(
                f"baseline: FALSE findings/markers on the healthy pool: {base_round.findings_false[:5]} "
                f"{base_round.markers_false[:5]}"
            )
        self.snap = snapshot(self.c.kazoo)
        self.log(f"daemons up ({self.mon.current_leader()} leads); baseline passes done in {time.time() - t0:.0f}s")

    def add_ledgers(self, wanted: list[tuple[tuple[int, int, int], bool]], attempt: int = 1) -> list[LedgerRecord]:
        """Write ledgers with the real Java tool (closed ones in batches), census them, add them to the pool.

        On a loaded machine the Java writer sometimes loses a connection to one bookie mid-write; the ledger
        is then really under-replicated from birth. Such a ledger is deleted (with the real tool) and written
        again, at most three times, so the pool starts healthy by the census, not by assumption."""
        allowed = [b.bookie_id for b in self.c.bookies]
        made: list[dict[str, Any]] = []
        closed = Counter(q for q, is_open in wanted if not is_open)
        for q, n in sorted(closed.items()):
            while n > 0:
                k = min(n, 20)
                made += self.c.create_ledgers(
                    k,
                    ensemble=q[0],
                    write_quorum=q[1],
                    ack_quorum=q[2],
                    entries=self.rng.choice((5, 12, 20, 40)),
                    entry_size=self.rng.choice((64, 200, 1000)),
                    allowed=allowed,
                )
                n -= k
        for q, is_open in wanted:
            if is_open:
                made.append(
                    self.c.create_ledger(
                        ensemble=q[0],
                        write_quorum=q[1],
                        ack_quorum=q[2],
                        entries=self.rng.choice((6, 10, 20)),
                        entry_size=128,
                        allowed=allowed,
                        close=False,
                    )
                )
        recs = [LedgerRecord.from_tool(r) for r in made]
        rows = census(self.c, recs)
        bad = {lid: r for lid, r in rows.items() if not r.healthy}
        if bad and attempt >= 3:
            raise CampaignError(f"the Java census finds freshly written ledgers damaged: {list(bad.values())[:3]}")
        good = [r for r in recs if r.ledger_id not in bad]
        for r in good:
            self.pool[r.ledger_id] = r
        if bad:
            self.log(
                f"census: {len(bad)} freshly written ledger(s) damaged by the writer, deleted and written "
                f"again: {sorted(bad)} ({list(bad.values())[:1]})"
            )
            again = []
            for r in recs:
                if r.ledger_id in bad:
                    self.c.delete_ledger(r.ledger_id)
                    self.deleted[r.ledger_id] = time.time()
                    again.append(((r.ensemble_size, r.write_quorum, r.ack_quorum), r.open))
            good += self.add_ledgers(again, attempt + 1)
        return good

    # ================================================================== helpers
    def pass_timeout(self, check: str) -> float:
        every = {
            "scrutiny": self.cfg.scrutiny_seconds,
            "ledger": self.cfg.ledger_check_seconds,
            "open": self.cfg.open_check_seconds,
        }[check]
        durs = self.obs.pass_durations(check) if self.observer else []
        longest = max(durs[-20:], default=30.0)
        return every + 3 * max(longest, 30.0) + 2 * self.cfg.session_timeout + 30

    def wait_pass(self, check: str, after: float, timeout: float) -> Any:
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.obs.poll()
            p = self.obs.full_pass(check, after, len(self.pool))
            if p is not None:
                return p
            time.sleep(0.5)
        return None

    def leader(self, timeout: float = 30.0) -> Daemon:
        deadline = time.time() + timeout
        while time.time() < deadline:
            name = self.mon.current_leader()
            if name is not None:
                return self.daemons[name]
            time.sleep(0.2)
        raise CampaignError(f"no single leader for {timeout:.0f}s")

    def ensure_cluster_whole(self) -> None:
        """Every bookie running and registered, both daemons running (restart what is not), the link clean."""
        assert self.proxy is not None
        self.proxy.heal()
        for b in self.c.bookies:
            if b.paused:
                self.c.resume_bookie(b.index)
            if not b.running:
                self.c.start_bookie(b.index)
            self.c.wait_ready(b.index, 120)
        for d in self.daemons.values():
            if not d.running:
                d.start()
            d.resume()
        for d in self.daemons.values():
            d.wait(lambda d=d: d.health("readiness") == "SERVING", 90, "readiness")

    def trigger(self, *checks: str) -> None:
        try:
            lead = self.leader(10)
        except CampaignError:
            return
        for check in checks:
            try:
                lead._call("trigger", check)
            except Exception:
                pass

    # ================================================================== faults
    def fault(self, r: Round) -> None:
        getattr(self, "fault_" + r.kind.replace("-", "_"))(r)

    def _bookie_fault(self, r: Round, sorted_only: bool = False, **params: Any) -> int:
        """Draw the victim bookie, record it and the fault's parameters; the fault starts now."""
        n = self.rng.choice([b.index for b in self.c.bookies if not sorted_only or b.storage == "sorted"])
        b = self.c.bookie(n)
        r.params.update(bookie=b.bookie_id, **params)
        r.faulted_bookies.add(b.bookie_id)
        r.fault_at = time.time()
        return n

    def fault_bookie_kill(self, r: Round) -> None:
        down = round(self.rng.uniform(0, 10), 1)
        n = self._bookie_fault(r, down_seconds=down)
        self.c.kill_bookie(n)
        time.sleep(down)
        self.c.start_bookie(n, timeout=120)

    def fault_bookie_stop(self, r: Round) -> None:
        hold = round(self.rng.uniform(1, 20), 1)
        n = self._bookie_fault(r, stopped_seconds=hold)
        self.c.pause_bookie(n)
        time.sleep(hold)
        self.c.resume_bookie(n)
        self.c.wait_registered(n, 60)
        self.c.wait_ready(n, 60)

    def fault_bookie_wipe(self, r: Round) -> None:
        n = self._bookie_fault(r)
        b = self.c.bookie(n)
        affected = [rec for rec in self.pool.values() if b.bookie_id in rec.bookies]
        r.params.update(storage=b.storage, ledgers=len(affected))
        r.wiped.add(b.bookie_id)
        r.written.add(f"{self.c.ledgers_root}/cookies/{b.bookie_id}")
        self.c.stop_bookie(n)
        self.c.wipe_bookie(n)
        in_place = time.time()  # the copies are gone from here on
        self.c.start_bookie(n, timeout=120)
        for rec in affected:
            self.damage.add(rec.ledger_id, b.bookie_id, rec.expected_on(b.bookie_id))
            r.planted[rec.ledger_id] = in_place
        self.verify_plants(r, affected[:5], b.bookie_id)

    def fault_zk_restart(self, r: Round) -> None:
        down = round(self.rng.uniform(0, 3), 1)
        r.params.update(down_seconds=down)
        r.fault_at = time.time()
        self.c.restart_zookeeper(down_seconds=down)
        r.leader_deadline_from = time.time()

    def fault_leader_kill(self, r: Round) -> None:
        lead = self.leader()
        r.leader_fault = lead.name
        r.params.update(daemon=lead.name)
        r.fault_at = time.time()
        lead.kill()
        r.leader_deadline_from = r.fault_at
        self._await_failover(r, self.cfg.session_timeout + 2 + 10)
        lead.start()
        lead.wait(lambda: lead.health("readiness") == "SERVING", 90, "restarted daemon ready")

    def fault_leader_stop(self, r: Round) -> None:
        lead = self.leader()
        hold = round(self.rng.uniform(1, 20), 1)
        r.leader_fault = lead.name
        r.params.update(daemon=lead.name, stopped_seconds=hold)
        r.fault_at = time.time()
        lead.pause()
        r.leader_deadline_from = r.fault_at
        time.sleep(hold)
        lead.resume()
        r.resumed_at = time.time()
        time.sleep(self.cfg.session_timeout + 4)  # the resumed one may act: watch for a second leader

    def _await_failover(self, r: Round, timeout: float) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline and self.mon.first_single_leader(r.fault_at, time.time(), r.leader_fault) is None:
            time.sleep(0.2)

    def _link(self, r: Round, fault: LinkFault) -> None:
        assert self.proxy is not None
        hold = round(self.rng.uniform(10, 30), 1)
        b = self.c.bookie(self.cfg.proxied).bookie_id
        r.params.update(bookie=b, seconds=hold, link=fault.describe())
        r.faulted_bookies.add(b)
        r.fault_at = time.time()
        self.proxy.set_fault(fault)
        self.trigger("scrutiny", "ledger", "open")  # make sure checks run while the link is bad
        time.sleep(hold)
        self.proxy.heal()
        r.params["proxy"] = asdict(self.proxy.stats)

    def fault_link_slow(self, r: Round) -> None:
        self._link(r, LinkFault("slow", delay=round(self.rng.uniform(0.3, 3.0), 2), seed=self.rng.randrange(2**31)))

    def fault_link_lossy(self, r: Round) -> None:
        self._link(
            r,
            LinkFault(
                "lossy",
                stall_probability=round(self.rng.uniform(0.05, 0.3), 2),
                stall_seconds=round(self.rng.uniform(1, 6), 1),
                reset_probability=round(self.rng.uniform(0.02, 0.2), 2),
                seed=self.rng.randrange(2**31),
            ),
        )

    def fault_link_corrupt(self, r: Round) -> None:
        self._link(
            r,
            LinkFault(
                "corrupt", corrupt_probability=round(self.rng.uniform(0.05, 0.5), 2), seed=self.rng.randrange(2**31)
            ),
        )

    def _healthy_closed(self, on: str | None = None) -> list[LedgerRecord]:
        return [
            rec
            for lid, rec in sorted(self.pool.items())
            if not rec.open and lid not in self.damage.lacking and (on is None or on in rec.bookies)
        ]

    def fault_loss_copy(self, r: Round) -> None:
        """Remove one bookie's copy of 1-3 closed ledgers (their index files, bookie stopped cleanly)."""
        n = self._bookie_fault(r, sorted_only=True)
        b = self.c.bookie(n)
        candidates = self._healthy_closed(on=b.bookie_id)
        chosen = self.rng.sample(candidates, min(len(candidates), self.rng.randint(1, 3)))
        r.params.update(ledgers=[x.ledger_id for x in chosen])
        self.c.stop_bookie(n)
        for rec in chosen:
            lid = rec.ledger_id
            idx = b.ledger_dir / "current" / f"{(lid >> 8) & 0xFF:x}" / f"{lid & 0xFF:x}" / f"{lid:x}.idx"
            if idx.exists():
                idx.unlink()
            else:
                r.notes.append(f"no index file {idx} for ledger {lid}")
            r.planted[lid] = time.time()
        self.c.start_bookie(n, timeout=120)
        self.verify_plants(r, chosen, b.bookie_id)

    def fault_loss_metadata(self, r: Round) -> None:
        """Make one closed ledger's metadata name a bookie that never got its entries (same-length id,
        bytes swapped in the znode, version-checked), as a bad manual edit would."""
        bookies = [b.bookie_id for b in self.c.bookies if b.index != self.cfg.proxied]
        candidates = [
            rec
            for rec in self._healthy_closed()
            if len(rec.ensembles) == 1
            and any(x not in rec.bookies for x in bookies)
            and any(x in bookies for x in rec.bookies)
        ]
        rec = self.rng.choice(candidates)
        old = self.rng.choice(sorted(x for x in rec.bookies if x in bookies))
        new = self.rng.choice(sorted(x for x in bookies if x not in rec.bookies and len(x) == len(old)))
        path = ledger_path(self.c, rec.ledger_id)
        r.params.update(ledger=rec.ledger_id, named=old, now_names=new)
        r.written.add(path)
        r.fault_at = time.time()
        data, stat = self.c.kazoo.get(path)
        if data.count(old.encode()) != 1:
            raise CampaignError(f"{path}: expected the bookie id {old} once in the metadata")
        self.c.kazoo.set(path, data.replace(old.encode(), new.encode()), version=stat.version)
        r.planted[rec.ledger_id] = time.time()
        rec.ensembles = [(first, [new if x == old else x for x in ens]) for first, ens in rec.ensembles]
        shown = self.c.shell("ledgermetadata", "-l", str(rec.ledger_id)).stdout
        if new not in shown:
            raise CampaignError(f"the shell does not show {new} in ledger {rec.ledger_id}'s metadata:\n{shown[-1000:]}")
        self.verify_plants(r, [rec], new)

    def fault_loss_bookie_gone(self, r: Round) -> None:
        """A bookie that stays away past the lost-bookie delay: every ledger on it must be marked."""
        n = self._bookie_fault(r)
        b = self.c.bookie(n)
        on_it = sorted(lid for lid, rec in self.pool.items() if b.bookie_id in rec.bookies)
        r.params.update(ledgers=len(on_it))
        r.gone_bookie = b.bookie_id
        self.c.kill_bookie(n)
        self.c.wait_unregistered(n, 30)
        gone_at = time.time()
        deadline = gone_at + self.cfg.lost_bookie_delay + 30
        want = set(on_it)
        while time.time() < deadline:
            if want <= set(read_markers(self.c.kazoo, self.c.ledgers_root)):
                break
            time.sleep(1)
        markers = read_markers(self.c.kazoo, self.c.ledgers_root)
        r.params["marked_after_seconds"] = round(time.time() - gone_at, 1)
        for lid in on_it:
            if lid in markers and b.bookie_id in markers[lid][1]:
                r.planted_found[lid] = r.params["marked_after_seconds"]
            else:
                r.planted_missed.append(
                    {
                        "ledger": lid,
                        "why": f"no marker naming {b.bookie_id} within {self.cfg.lost_bookie_delay + 30}s of its loss",
                    }
                )
        self.c.start_bookie(n, timeout=120)

    def verify_plants(self, r: Round, recs: list[LedgerRecord], bookie: str) -> None:
        """Confirm a planted loss with the Java census (and one real `readledger -b`); the ground truth
        becomes what they saw. `r.planted` holds when each loss was made."""
        rows = census(self.c, recs)
        for i, rec in enumerate(recs):
            missing = set(rows[rec.ledger_id].missing.get(bookie, []))
            expected = rec.expected_on(bookie)
            if missing != expected:
                r.notes.append(
                    f"ledger {rec.ledger_id}: census sees {len(missing)} of {len(expected)} entries missing on {bookie}"
                )
            lack = self.damage.lacking.get(rec.ledger_id, {})
            lack[bookie] = missing
            self.damage.lacking[rec.ledger_id] = lack
            if not missing:
                del lack[bookie]
                if not lack:
                    del self.damage.lacking[rec.ledger_id]
                r.planted.pop(rec.ledger_id, None)
                continue
            if i == 0:
                ok, failed = readledger(self.c, rec, bookie)
                if ok & expected or not (failed & expected):
                    r.notes.append(
                        f"readledger -b {bookie} -l {rec.ledger_id} disagrees with the census: "
                        f"read {sorted(ok & expected)[:10]}, failed {sorted(failed & expected)[:10]}"
                    )

    # ================================================================== one round
    def run_round(self, r: Round) -> Round:
        r.leader_before = self.mon.current_leader()
        self.fault(r)
        r.healed_at = time.time()
        self.ensure_cluster_whole()
        self.verify(r)
        self.heal(r)
        r.finished = time.time()
        return r

    def verify(self, r: Round) -> None:
        # 1. A complete pass of each check that started after everything was back (and after any plant).
        after = max([r.healed_at, *r.planted.values()])
        checks = ["scrutiny"] + (["open"] if any(self.pool[lid].open for lid in r.planted if lid in self.pool) else [])
        for check in checks:
            p = self.wait_pass(check, after, self.pass_timeout(check))
            if p is None:
                r.violations.append(f"no complete {check} pass within {self.pass_timeout(check):.0f}s (audit stalled)")
            else:
                r.passes[check] = round(p.end - p.start, 1)
        r.checked_at = time.time()
        # 2. Leadership.
        self.check_leadership(r)
        # 3. Findings and markers against the ground truth; planted losses found.
        self.check_findings(r, self.last_checked)
        self.last_checked = r.checked_at
        self.check_planted(r)
        self.check_markers(r)
        # 4. Every leader task alive.
        self.check_tasks(r)
        # 5. ZooKeeper: nothing written outside the allow-list during the round.
        after_snap = snapshot(self.c.kazoo)
        allow = Allowance(
            self.c.ledgers_root, {b.bookie_id for b in self.c.bookies}, wiped=set(r.wiped), written=set(r.written)
        )
        r.zk_violations = [c.as_dict() for c in allow.violations(diff(self.snap, after_snap))]
        self.snap = after_snap
        r.errors_logged = len(self.obs.errors_between(r.started, time.time()))

    def check_leadership(self, r: Round) -> None:
        bound = self.cfg.session_timeout + 2
        r.dual_leaders = len(self.mon.dual_leaders(r.started, time.time()))
        if r.dual_leaders:
            r.violations.append(f"two daemons claimed leadership in {r.dual_leaders} samples")
        if r.leader_deadline_from is not None:
            t0 = r.leader_deadline_from
            moved = r.kind == "leader-kill" or (r.kind == "leader-stop" and r.params["stopped_seconds"] > bound)
            first = self.mon.first_single_leader(t0, time.time(), exclude=r.leader_fault if moved else None)
            if first is None:
                r.violations.append(f"no single leader after the {r.kind} (bound {bound:.0f}s)")
            else:
                # When the single leader took over: its own Status.leader_since if that is after the fault
                # (a leader that kept its place reports an earlier time), else when our poll saw it.
                since = first.since
                took_over = since if since is not None and since >= t0 else None
                r.single_leader_after = round((took_over or first.answered) - t0, 2)
                r.leader_observed_after = round(first.answered - t0, 2)
                if moved:
                    r.failover_seconds = r.single_leader_after
                if r.single_leader_after > bound:
                    r.violations.append(
                        f"no single leader within {bound:.0f}s (session timeout + 2 s) after the "
                        f"{r.kind}: {r.single_leader_after}s (poll saw it at {r.leader_observed_after}s)"
                    )
            if moved and r.resumed_at is not None:
                # Deposed while frozen: once resumed it must not say it leads (it lost its session).
                claims = self.mon.claims_by(
                    r.leader_fault or "", r.resumed_at, r.resumed_at + self.cfg.session_timeout + 4
                )
                if claims:
                    r.violations.append(
                        f"the resumed {r.leader_fault} claimed leadership in {len(claims)} answers "
                        f"({claims[0].answered - r.resumed_at:.2f}s after SIGCONT)"
                    )
        r.leader_after = self.mon.current_leader()
        if r.leader_after is None:
            r.violations.append("no single leader at the end of the round")
        elif r.leader_deadline_from is None and r.leader_before and r.leader_after != r.leader_before:
            r.notes.append(f"leadership moved from {r.leader_before} to {r.leader_after} without a leader fault")

    def classify(self, f: Seen, r: Round) -> str:
        """'expected', 'false', 'deleted' or 'info'."""
        if f.severity == "info":
            return "info"
        faulted = set(r.faulted_bookies)
        prev = self.rounds[-1] if self.rounds else None
        if prev is not None:
            faulted |= prev.faulted_bookies
        if f.category in DURABILITY:
            if f.ledger is None:
                return "false"
            if f.ledger in self.deleted and f.last_seen >= self.deleted[f.ledger] - 1:
                return "deleted"
            rec = self.pool.get(f.ledger)
            if rec is None:
                return "deleted" if f.ledger in self.deleted else "false"
            if f.category not in self.damage.allowed_categories(rec):
                return "false"
            claimed = set(f.claimed) | ({f.bookie} if f.bookie and f.category != "digest_mismatch" else set())
            if claimed - self.damage.bookies_lacking(f.ledger):
                return "false"
            return "expected"
        if f.category == "bookie_unreachable":
            return "expected" if f.bookie in faulted else "false"
        if f.category == "bookie_reincarnated":
            return "expected" if f.bookie in r.wiped else "false"
        return "false"

    def check_findings(self, r: Round, since: float) -> None:
        """Judge every finding reported or seen again since `since` (the end of the previous check, so heal
        windows are covered too); each one is counted once, in the round that first sees it."""
        for f in self.obs.findings(since):
            key = (f.daemon,) + f.key + (int(f.first_seen),)
            if key in self.judged:
                continue
            self.judged.add(key)
            verdict = self.classify(f, r)
            if verdict == "expected":
                r.findings_expected += 1
            elif verdict == "deleted":
                r.findings_on_deleted += 1
            elif verdict == "false":
                item = {
                    "daemon": f.daemon,
                    "category": f.category,
                    "severity": f.severity,
                    "ledger": f.ledger,
                    "bookie": f.bookie,
                    "claimed": sorted(f.claimed),
                    "check": f.check,
                    "first_seen": round(f.first_seen, 1),
                    "message": f.message,
                }
                if f.ledger is not None and f.ledger in self.pool and f.category in DURABILITY:
                    item["truth"] = self.spot_check(f)
                r.findings_false.append(item)
                self.false_keys.add(f.key)

    def spot_check(self, f: Seen) -> dict[str, Any]:
        """Ask the real Java tools about a finding we think is false, so the report carries evidence: the
        census (digests verified) and `readledger -b` (presence only) for each bookie the finding names."""
        rec = self.pool[f.ledger]  # type: ignore[index]
        row = census(self.c, [rec])[rec.ledger_id]
        out: dict[str, Any] = {}
        for b in sorted(f.claimed | ({f.bookie} if f.bookie else set()))[:2]:
            ok, failed = readledger(self.c, rec, b)
            exp = rec.expected_on(b)
            out[b] = {
                "expected": len(exp),
                "census_missing": len(row.missing.get(b, [])),
                "census_corrupt": len(row.corrupt.get(b, [])),
                "readledger_read": len(ok & exp),
                "readledger_failed": len(failed & exp),
            }
        return out

    def check_planted(self, r: Round) -> None:
        if r.kind == "loss-bookie-gone":
            return
        found: dict[int, float] = {}
        for f in self.obs.findings(min(r.planted.values(), default=r.started)):
            at = r.planted.get(f.ledger) if f.ledger is not None else None
            if at is None or f.last_seen < at or f.category not in DURABILITY or self.classify(f, r) != "expected":
                continue
            t = f.first_seen if f.first_seen >= at else f.last_seen
            found[f.ledger] = min(found.get(f.ledger, t), t)  # type: ignore[index]
        for lid, at in sorted(r.planted.items()):
            rec = self.pool[lid]
            required = self.damage.allowed_categories(rec) and (
                not rec.open or any(c < rec.ack_quorum for e, c in self.damage.copies(rec).items() if e < rec.end)
            )
            if lid in found:
                r.planted_found[lid] = round(found[lid] - at, 2)
            elif required:
                r.planted_missed.append(
                    {
                        "ledger": lid,
                        "kind": rec.kind,
                        "truth": self.damage.worst_category(rec),
                        "lacking": sorted(self.damage.bookies_lacking(lid)),
                    }
                )
            else:
                # Damaged, but nothing the auditor reports (e.g. one copy of an OPEN ledger with WQ 3,
                # AQ 2: below the write quorum is a finding for closed ledgers only).
                r.unreportable.append(lid)
        for lid in r.unreportable:
            del r.planted[lid]

    def check_markers(self, r: Round, skip: set[int] | None = None) -> None:
        cutoff = self.cfg.lost_bookie_delay
        for lid, (path, replicas) in read_markers(self.c.kazoo, self.c.ledgers_root).items():
            if skip is not None and lid in skip:
                continue
            r.markers_checked.add(lid)
            lacking = self.damage.bookies_lacking(lid)
            lost = {b for b in replicas if self.mon.longest_unregistered(b, r.started, time.time()) >= cutoff}
            if lid in self.deleted:
                continue
            if lid in self.pool and replicas and replicas <= (lacking | lost):
                r.markers_expected += 1
            else:
                r.markers_false.append({"ledger": lid, "replicas": sorted(replicas), "truth_lacking": sorted(lacking)})

    def check_tasks(self, r: Round) -> None:
        """Every leader task alive, or visibly failed and due for a restart (Status and the metrics)."""
        try:
            lead = self.leader(15)
            st = lead.status()
            metrics = scrape(lead.metrics_port)
        except Exception as exc:
            r.violations.append(f"leader status or metrics unavailable: {exc}")
            return
        now = time.time()
        # A new leader's tasks have not run yet: count from when it took over.
        since = st.leader_since if st.HasField("leader_since") else 0.0
        tasks = {t.name: t for t in st.tasks}
        for name in TASKS:
            t = tasks.get(name)
            if t is None:
                r.violations.append(f"task {name} missing from the leader's status")
                continue
            before = self.task_counts.get((lead.name, name), 0)
            self.task_counts[(lead.name, name)] = int(t.failures)  # per process: a restart starts at 0
            if t.failures > before:  # report what is new
                r.task_failures[name] = int(t.failures) - before
                r.notes.append(
                    f"task {name} on {lead.name}: {t.failures} failures, {t.restarts} restarts, "
                    f"state {t.state}, last error {t.last_error!r}"
                )
            if t.state == "failed":
                restart_at = t.restart_at if t.HasField("restart_at") else None
                if restart_at is None or now - restart_at > 120:
                    r.violations.append(f"task {name} failed and not restarted (restart_at {restart_at})")
                continue
            if name == "bookies":
                if t.state != "running":
                    r.violations.append(f"bookie watch not running and no visible failure (state {t.state})")
                continue
            every = t.interval_seconds if t.HasField("interval_seconds") else 0.0
            last = max(
                t.last_start if t.HasField("last_start") else 0.0,
                t.last_finish if t.HasField("last_finish") else 0.0,
                since,
            )
            if t.state != "running" and now - last > every + self.pass_timeout(name):
                r.violations.append(
                    f"task {name} silently idle: last ran {now - last:.0f}s ago "
                    f"(interval {every:.0f}s, state {t.state})"
                )
        for (metric, task), value in metrics.items():
            if (
                metric == "bk_auditor_task_up"
                and value == 0
                and not metrics.get(("bk_auditor_task_failures_total", task))
            ):
                r.violations.append(f"task {task} is down (bk_auditor_task_up 0) without a counted failure")

    # ================================================================== heal
    def heal(self, r: Round) -> None:
        """Delete and replace damaged ledgers, clear markers (each verified first), diff ZooKeeper."""
        before = self.snap
        damaged = sorted(self.damage.lacking)
        tool_paths = {ledger_path(self.c, lid) for lid in damaged}
        # Markers that appeared since the verification are verified too before they are cleared.
        self.check_markers(r, skip=r.markers_checked)
        wanted = [
            ((rec.ensemble_size, rec.write_quorum, rec.ack_quorum), rec.open)
            for rec in (self.pool.get(lid) for lid in damaged)
            if rec is not None
        ]
        for i in range(0, len(damaged), 200):
            self.c.ledger_tool("delete", "--ledger-id", ",".join(str(x) for x in damaged[i : i + 200]))
        now = time.time()
        for lid in damaged:
            self.deleted[lid] = now
            self.pool.pop(lid, None)
            self.damage.lacking.pop(lid, None)
        for lid, (path, _) in read_markers(self.c.kazoo, self.c.ledgers_root).items():
            self.c.kazoo.delete(path)
        replaced = self.add_ledgers(wanted) if wanted else []
        tool_paths |= {ledger_path(self.c, x.ledger_id) for x in replaced}
        after = snapshot(self.c.kazoo)
        allow = Allowance(
            self.c.ledgers_root, {b.bookie_id for b in self.c.bookies}, heal=True, tool_ledgers=tool_paths
        )
        bad = [c.as_dict() for c in allow.violations(diff(before, after))]
        if bad:
            self.heal_violations += [{**c, "round": r.n} for c in bad]
            r.zk_violations += [{**c, "window": "heal"} for c in bad]
        self.snap = after
        r.params["replaced_ledgers"] = len(replaced)

    # ================================================================== self-test
    def self_test(self) -> dict[str, bool]:
        """Show that the invariants can fail on this very cluster: a znode written outside the allow-list,
        a marker on a healthy ledger and a durability finding about a healthy ledger must all be flagged."""
        root = self.c.ledgers_root
        before = snapshot(self.c.kazoo)
        stray = f"{root}/chaos-self-test"
        rec = self._healthy_closed()[0]
        bookie = sorted(rec.bookies)[0]
        path = marker_path(self.c, rec.ledger_id)
        self.c.kazoo.create(stray, b"not allowed")
        self.c.kazoo.create(path, f'replica: "{bookie}"\nctime: {int(time.time() * 1000)}\n'.encode(), makepath=True)
        try:
            after = snapshot(self.c.kazoo)
            flagged = Allowance(root, {b.bookie_id for b in self.c.bookies}).violations(diff(before, after))
            probe = Round(0, "self-test", started=time.time())
            self.check_markers(probe)
            fake = Seen(
                "self-test",
                "entry_below_ack_quorum",
                "major",
                rec.ledger_id,
                None,
                frozenset({bookie}),
                time.time(),
                time.time(),
                "scrutiny",
                "planted by the self-test",
            )
            return {
                "stray_write_flagged": {c.path for c in flagged} == {stray, root},
                "false_marker_flagged": [m["ledger"] for m in probe.markers_false] == [rec.ledger_id],
                "false_finding_flagged": self.classify(fake, probe) == "false",
            }
        finally:
            self.c.kazoo.delete(stray)
            self.c.kazoo.delete(path)
            self.snap = snapshot(self.c.kazoo)

    # ================================================================== the campaign
    def run(self) -> dict[str, Any]:
        """Set up, self-test, the rounds (a round that cannot complete is a violation; three in a row, or a
        cluster that cannot be made whole, end the campaign), the report; always tear down."""
        report: dict[str, Any] = {}
        try:
            self.setup()
            if self.cfg.self_test:
                self.self_test_result = self.self_test()
                self.log(f"self-test: {self.self_test_result}")
            failures_in_a_row = 0
            for n in range(self.cfg.first_round, self.cfg.rounds + 1):
                t = time.time()
                r = self.new_round(n, self.plan[n - 1], t)
                self.rng = random.Random(f"{self.cfg.seed}/{n}")
                try:
                    self.run_round(r)
                    failures_in_a_row = 0
                except self.ROUND_ERRORS as exc:
                    r.notes.append("aborted")
                    r.violations.append(f"round could not complete: {str(exc).splitlines()[0][:300]}")
                    failures_in_a_row += 1
                    try:
                        self.recover(r)
                    except Exception as again:
                        r.violations.append(f"cluster could not be made whole: {str(again)[:300]}")
                        self.rounds.append(r)
                        break
                    if failures_in_a_row >= 3:
                        self.rounds.append(r)
                        break
                self.rounds.append(r)
                self.round_done(r, time.time() - t)
            report = self.report()
        finally:
            self.stop_extras()
            self.teardown(clean=bool(report) and not report.get("violations_total"))
        return report

    # Hooks of the round loop (the repair campaign overrides them).
    def new_round(self, n: int, kind: str, started: float) -> Round:
        return Round(n, kind, started=started)

    def recover(self, r: Round) -> None:
        """After an aborted round: everything back, the round's damage healed."""
        self.ensure_cluster_whole()
        self.heal(r)

    def round_done(self, r: Round, took: float) -> None:
        self.log(self.progress_line(r, took))

    def stop_extras(self) -> None:
        """What the campaign runs besides the cluster and the daemons (nothing here)."""

    def progress_line(self, r: Round, took: float) -> str:
        bits = [
            f"round {r.n}/{self.cfg.rounds} {r.kind}",
            json.dumps({k: v for k, v in r.params.items() if k not in ("proxy",)})[:140],
        ]
        if r.passes:
            bits.append("pass " + ",".join(f"{k} {v:.0f}s" for k, v in r.passes.items()))
        bits.append(f"findings expected {r.findings_expected} false {len(r.findings_false)}")
        if r.planted:
            bits.append(f"planted {len(r.planted)} found {len(r.planted_found)} missed {len(r.planted_missed)}")
        if r.markers_expected or r.markers_false:
            bits.append(f"markers ok {r.markers_expected} false {len(r.markers_false)}")
        if r.failover_seconds is not None:
            bits.append(f"failover {r.failover_seconds:.1f}s")
        if r.zk_violations:
            bits.append(f"ZK writes outside allow-list {len(r.zk_violations)}")
        if r.violations:
            bits.append("VIOLATIONS: " + "; ".join(r.violations))
        return " | ".join(bits) + f" | {took:.0f}s"

    def report(self) -> dict[str, Any]:
        rounds = [r for r in self.rounds]
        failovers = [r.failover_seconds for r in rounds if r.failover_seconds is not None]
        observed = [
            r.leader_observed_after
            for r in rounds
            if r.failover_seconds is not None and r.leader_observed_after is not None
        ]
        single = [r.single_leader_after for r in rounds if r.single_leader_after is not None]
        planted = sum(len(r.planted) for r in rounds if r.kind != "loss-bookie-gone") + sum(
            len(r.planted_found) + len(r.planted_missed) for r in rounds if r.kind == "loss-bookie-gone"
        )
        latencies = [v for r in rounds if r.kind != "loss-bookie-gone" for v in r.planted_found.values()]
        false_findings = [f for r in rounds for f in r.findings_false]
        unique_false = {(f["category"], f["ledger"], f["bookie"]) for f in false_findings}
        zk = [{**v, "round": r.n} for r in rounds for v in r.zk_violations]
        task_failures: Counter[str] = Counter()
        for r in rounds:
            task_failures.update(r.task_failures)
        machine = {
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        }
        out = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "seconds": round(time.time() - self.started),
            "seed": self.cfg.seed,
            "machine": machine,
            "config": {
                k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self.cfg).items() if k != "progress"
            },
            "ledgers": {"pool": len(self.pool), "replaced": len(self.deleted)},
            "baseline": self.baseline,
            "self_test": self.self_test_result,
            "rounds": len(rounds),
            "faults_per_kind": dict(Counter(r.kind for r in rounds)),
            "findings": {
                "expected": sum(r.findings_expected for r in rounds),
                "false": len(false_findings),
                "false_unique": len(unique_false),
                "on_deleted_ledgers": sum(r.findings_on_deleted for r in rounds),
            },
            "planted_losses": {
                "planted": planted,
                "found": sum(len(r.planted_found) for r in rounds),
                "damaged_without_a_due_finding": sum(len(r.unreportable) for r in rounds),
                "missed": sum(len(r.planted_missed) for r in rounds),
                "seconds_to_find_median": _median(latencies),
                "seconds_to_find_max": _max(latencies),
            },
            "markers": {
                "expected": sum(r.markers_expected for r in rounds),
                "false": sum(len(r.markers_false) for r in rounds),
            },
            "failover_seconds": {
                "count": len(failovers),
                "median": _median(failovers),
                "max": _max(failovers),
                "bound": self.cfg.session_timeout + 2,
                "all": failovers,
                "over_bound": sum(1 for x in failovers if x > self.cfg.session_timeout + 2),
                "observed_by_poll_median": _median(observed),
                "observed_by_poll_max": _max(observed),
            },
            "single_leader_seconds_after_leader_or_zk_fault": {
                "count": len(single),
                "median": _median(single),
                "max": _max(single),
            },
            "dual_leader_samples": sum(r.dual_leaders for r in rounds),
            "writes_outside_allowed_paths": len(zk),
            "task_failures_seen": dict(task_failures),
            "rounds_with_violations": sum(
                1
                for r in rounds
                if r.violations or r.findings_false or r.markers_false or r.planted_missed or r.zk_violations
            ),
            "violations_total": sum(len(r.violations) for r in rounds)
            + len(false_findings)
            + len(zk)
            + sum(len(r.markers_false) + len(r.planted_missed) for r in rounds)
            + len(self.baseline.get("false_findings", []))
            + len(self.baseline.get("false_markers", []))
            + sum(1 for ok in self.self_test_result.values() if not ok),
            "details": {
                "false_findings": false_findings[:200],
                "zk_writes_outside": zk[:200],
                "violations": [f"round {r.n} {r.kind}: {v}" for r in rounds for v in r.violations][:200],
                "missed": [{**m, "round": r.n, "kind": r.kind} for r in rounds for m in r.planted_missed][:200],
                "false_markers": [{**m, "round": r.n} for r in rounds for m in r.markers_false][:200],
                "notes": [f"round {r.n} {r.kind}: {x}" for r in rounds for x in r.notes][:200],
            },
            "per_round": [r.summary() for r in rounds],
        }
        return out

    def teardown(self, clean: bool) -> None:
        if self.monitor is not None:
            self.monitor.stop()
        for d in self.daemons.values():
            if d.running:
                d.resume()
                d.stop()
        if self.proxy is not None:
            self.proxy.stop()
        if self.cluster is not None:
            self.cluster.stop()
        if clean and not self.cfg.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            self.log(f"logs kept in {self.workdir}")


def scrape(port: int) -> dict[tuple[str, str], float]:
    """A daemon's Prometheus samples by (name, task label) for the task metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[tuple[str, str], float] = {}
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            if sample.name.startswith("bk_auditor_task_"):
                out[(sample.name, sample.labels.get("task", ""))] = sample.value
    return out


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 2) if xs else None


def _max(xs: list[float]) -> float | None:
    return round(max(xs), 2) if xs else None


def write_report(report: dict[str, Any], results_dir: Path) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"chaos-{time.strftime('%Y%m%d-%H%M%S')}-seed{report['seed']}.json"
    path.write_text(json.dumps(report, indent=1, sort_keys=True, default=str))
    return path


def summary_text(report: dict[str, Any]) -> str:
    f, p, fo = report["findings"], report["planted_losses"], report["failover_seconds"]
    lines = [
        f"chaos campaign: {report['rounds']} rounds, seed {report['seed']}, {report['seconds']}s, "
        f"{report['ledgers']['pool']} ledgers in the pool ({report['ledgers']['replaced']} replaced)",
        "faults per kind: " + ", ".join(f"{k} {v}" for k, v in sorted(report["faults_per_kind"].items())),
        f"findings: expected {f['expected']}, false {f['false']} ({f['false_unique']} unique), "
        f"on deleted ledgers {f['on_deleted_ledgers']}",
        f"planted losses: {p['planted']}, found {p['found']}, missed {p['missed']} "
        f"(seconds to find: median {p['seconds_to_find_median']}, max {p['seconds_to_find_max']})",
        f"markers: expected {report['markers']['expected']}, false {report['markers']['false']}",
        f"failover: {fo['count']} times, median {fo['median']}s, max {fo['max']}s (bound {fo['bound']}s, "
        f"{fo['over_bound']} over; seen by our poll: median {fo['observed_by_poll_median']}s, max "
        f"{fo['observed_by_poll_max']}s); "
        f"dual-leader samples {report['dual_leader_samples']}",
        f"writes outside allowed paths: {report['writes_outside_allowed_paths']}",
        f"task failures seen: {report['task_failures_seen'] or 'none'}",
        f"rounds with a violation: {report['rounds_with_violations']}",
    ]
    for v in report["details"]["violations"][:20]:
        lines.append("  " + v)
    return "\n".join(lines)
