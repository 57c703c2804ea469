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

from auditor.daemon.admin import AdminClient, AdminClientError


@dataclass(frozen=True)
class Sample:
    t_start: float                    # time.time() when both were asked
    t: float                          # time.time() when both answers were in
    claims: dict[str, bool | None]    # daemon name -> leader? (None: did not answer in time)
    since: dict[str, float]           # for a claimant: when it says it became the leader (Status.leader_since)


class Monitor:
    def __init__(self, daemons: dict[str, int], zk_hosts: str, ledgers_root: str, bookie_ids: list[str],
                 period: float = 0.2, rpc_timeout: float = 1.0) -> None:
        self.daemons = daemons            # name -> admin port
        self.period = period
        self.rpc_timeout = rpc_timeout
        self.samples: list[Sample] = []
        self.registered: dict[str, list[tuple[float, bool]]] = {b: [] for b in bookie_ids}
        self._zk = KazooClient(hosts=zk_hosts, timeout=10.0)
        self._available = join(ledgers_root, "available")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._leaders, name="chaos-leaders", daemon=True),
                         threading.Thread(target=self._bookies, name="chaos-bookies", daemon=True)]

    def start(self) -> "Monitor":
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
        asyncio.run(self._poll_leaders())

    async def _poll_leaders(self) -> None:
        clients = {n: AdminClient(f"127.0.0.1:{port}", timeout=self.rpc_timeout) for n, port in self.daemons.items()}
        try:
            while not self._stop.is_set():
                started, asked = time.monotonic(), time.time()
                answers = await asyncio.gather(*(self._claim(c) for c in clients.values()))
                claims = {n: a[0] for n, a in zip(clients, answers)}
                since = {n: a[1] for n, a in zip(clients, answers) if a[0] and a[1] is not None}
                with self._lock:
                    self.samples.append(Sample(asked, time.time(), claims, since))
                    if len(self.samples) > 200_000:
                        del self.samples[:100_000]
                await asyncio.sleep(max(0.0, self.period - (time.monotonic() - started)))
        finally:
            for c in clients.values():
                await c.close()

    @staticmethod
    async def _claim(client: AdminClient) -> tuple[bool | None, float | None]:
        try:
            st = await client.status()
        except Exception:  # unreachable, frozen, restarting: no claim
            return None, None
        return bool(st.leader), (st.leader_since if st.HasField("leader_since") else None)

    def window(self, t0: float, t1: float | None = None) -> list[Sample]:
        with self._lock:
            return [s for s in self.samples if s.t >= t0 and (t1 is None or s.t <= t1)]

    def leaders_at(self, s: Sample) -> list[str]:
        return [n for n, c in s.claims.items() if c]

    def first_single_leader(self, t0: float, t1: float, exclude: str | None = None) -> Sample | None:
        """The first sample asked at or after t0 (and answered by t1) in which exactly one daemon (not
        `exclude`) claims leadership. Samples asked before t0 do not count: an answer sent just before a
        fault says nothing about after it."""
        for s in self.window(t0, t1):
            if s.t_start < t0:
                continue
            ls = self.leaders_at(s)
            if len(ls) == 1 and ls[0] != exclude:
                return s
        return None

    def dual_leaders(self, t0: float, t1: float | None = None) -> list[Sample]:
        return [s for s in self.window(t0, t1) if len(self.leaders_at(s)) > 1]

    def current_leader(self) -> str | None:
        with self._lock:
            recent = self.samples[-1] if self.samples else None
        if recent is None:
            return None
        ls = self.leaders_at(recent)
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
