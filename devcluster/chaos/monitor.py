"""A background observer: both daemons' view of leadership (admin API `Status`) and the bookies'
registrations in ZooKeeper, sampled several times a second, so the campaign can tell when leadership
moved, whether two daemons ever claimed it at once, and how long each bookie was unregistered."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from posixpath import join

from kazoo.client import KazooClient

from auditor.admin.client import AdminClient


@dataclass(frozen=True)
class Answer:
    """One daemon's answer to one `Status` poll."""

    daemon: str
    asked: float  # time.time() when asked
    answered: float  # when the answer (or the timeout) came
    leader: bool | None  # None: no answer within the RPC timeout (frozen, down, restarting)
    since: float | None = None  # Status.leader_since, for a claimant


class Monitor:
    def __init__(
        self,
        daemons: dict[str, int],
        zk_hosts: str,
        ledgers_root: str,
        bookie_ids: list[str],
        period: float = 0.2,
        rpc_timeout: float = 1.0,
    ) -> None:
        self.daemons = daemons  # name -> admin port
        self.period = period
        self.rpc_timeout = rpc_timeout
        self.answers: dict[str, list[Answer]] = {n: [] for n in daemons}
        self.registered: dict[str, list[tuple[float, bool]]] = {b: [] for b in bookie_ids}
        self._zk = KazooClient(hosts=zk_hosts, timeout=10.0)
        self._available = join(ledgers_root, "available")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._leaders, name="chaos-leaders", daemon=True),
            threading.Thread(target=self._bookies, name="chaos-bookies", daemon=True),
        ]

    def start(self) -> Monitor:
        self._zk.start(timeout=30)
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)
        try:
            self._zk.stop()
            self._zk.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ leadership
    def _leaders(self) -> None:
        async def main() -> None:
            await asyncio.gather(*(self._poll(n, port) for n, port in self.daemons.items()))

        asyncio.run(main())

    async def _poll(self, name: str, port: int) -> None:
        """One loop per daemon, so a frozen one (its RPCs time out) does not slow the other's sampling."""
        client = AdminClient(f"127.0.0.1:{port}", timeout=self.rpc_timeout)
        try:
            while not self._stop.is_set():
                asked = time.time()
                try:
                    st = await client.status()
                    leader: bool | None = bool(st.leader)
                    since = st.leader_since if st.leader and st.HasField("leader_since") else None
                except Exception:  # unreachable, frozen, restarting: no claim
                    leader, since = None, None
                with self._lock:
                    hist = self.answers[name]
                    hist.append(Answer(name, asked, time.time(), leader, since))
                    if len(hist) > 200_000:
                        del hist[:100_000]
                await asyncio.sleep(max(0.0, self.period - (time.time() - asked)))
        finally:
            await client.close()

    def _claims(self, t0: float, t1: float | None = None) -> list[Answer]:
        with self._lock:
            out = [
                a
                for hist in self.answers.values()
                for a in hist
                if a.leader and a.asked >= t0 and (t1 is None or a.answered <= t1)
            ]
        return sorted(out, key=lambda a: a.answered)

    def _claim_near(self, daemon: str, t: float) -> bool:
        """Did `daemon` claim leadership in an answer overlapping [t - period, t + period]?"""
        with self._lock:
            return any(
                a.leader and a.asked <= t + self.period and a.answered >= t - self.period for a in self.answers[daemon]
            )

    def first_single_leader(self, t0: float, t1: float, exclude: str | None = None) -> Answer | None:
        """The first claim of leadership asked at or after t0 (answered by t1) by a daemon other than
        `exclude` while no other daemon claimed it. Answers asked before t0 do not count: an answer sent
        just before a fault says nothing about after it."""
        for a in self._claims(t0, t1):
            if a.daemon != exclude and not any(self._claim_near(o, a.answered) for o in self.daemons if o != a.daemon):
                return a
        return None

    def dual_leaders(self, t0: float, t1: float | None = None) -> list[Answer]:
        """Claims answered within one poll period of a claim by another daemon."""
        return [
            a
            for a in self._claims(t0, t1)
            if any(self._claim_near(o, a.answered) for o in self.daemons if o != a.daemon)
        ]

    def claims_by(self, daemon: str, t0: float, t1: float) -> list[Answer]:
        return [a for a in self._claims(t0, t1) if a.daemon == daemon]

    def current_leader(self) -> str | None:
        """The one daemon whose latest answer (within 3 s) claims leadership, if exactly one does."""
        now = time.time()
        with self._lock:
            latest = [h[-1] for h in self.answers.values() if h and now - h[-1].answered < 3]
        ls = [a.daemon for a in latest if a.leader]
        return ls[0] if len(ls) == 1 else None

    # ------------------------------------------------------------------ bookie registrations
    def _bookies(self) -> None:
        while not self._stop.is_set():
            try:
                now = set(self._zk.get_children(self._available))
                ro_path = join(self._available, "readonly")
                now |= set(self._zk.get_children(ro_path)) if self._zk.exists(ro_path) else set()
            except Exception:
                self._stop.wait(0.5)
                continue
            t = time.time()
            with self._lock:
                for b, hist in self.registered.items():
                    up = b in now
                    if not hist or hist[-1][1] != up:
                        hist.append((t, up))
            self._stop.wait(0.3)

    def longest_unregistered(self, bookie: str, t0: float, t1: float) -> float:
        """Longest stretch within [t0, t1] during which `bookie` was not registered."""
        with self._lock:
            hist = list(self.registered.get(bookie, []))
        longest, down_since = 0.0, None
        state_at_t0 = True
        for t, up in hist:
            if t <= t0:
                state_at_t0 = up
        if not state_at_t0:
            down_since = t0
        for t, up in hist:
            if t <= t0 or t > t1:
                continue
            if not up and down_since is None:
                down_since = t
            elif up and down_since is not None:
                longest = max(longest, t - down_since)
                down_since = None
        if down_since is not None:
            longest = max(longest, t1 - down_since)
        return longest
