"""Failover distribution: how long after the leader dies does the standby lead? (docs/reliability.md)

    BK_TEST_PORT_SLOT=0 .venv/bin/python -m bench.failover                 # 12 SIGKILLs, session 4 s
    BK_TEST_PORT_SLOT=0 .venv/bin/python -m bench.failover --fault stop    # SIGSTOP past the session timeout
    .venv/bin/python -m bench.failover --rounds 30 --session-timeout 6

Starts its own one-bookie cluster (the "second cluster" ports of devcluster/ports.py) and two
real `bk-auditor run` daemons. Each round kills (or freezes) whichever daemon leads and measures, on
one clock:
* expiry   - fault -> the leader's vote znode deleted by ZooKeeper (session expiry on the server),
* reaction - vote deleted -> the standby's admin API status says it leads,
* total    - fault -> the standby leads.
With `--fault stop` the frozen leader is resumed after the standby leads and every poll of both
daemons (admin API status and the bk_auditor_is_leader metric) until it has stepped down counts how
many claimed to lead (must never be 2).
The killed / frozen daemon then comes back as the standby of the next round. Prints one line per round
and the summary (n, median, p90, max). Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from auditor.admin.client import AdminClient, AdminClientError
from bench.harness import second_cluster
from devcluster.cluster import Cluster
from devcluster.daemon_util import Daemon

POLL_SECONDS = 0.02


async def _claims(d: Daemon, metric: bool = False) -> tuple[bool, float]:
    """(claims to lead, when the answer arrived): by its admin API status (and, with `metric`, by its
    bk_auditor_is_leader metric); a daemon that cannot answer claims nothing."""
    try:
        async with AdminClient(f"127.0.0.1:{d.admin_port}", timeout=1) as c:
            st = await c.status()
        claims = bool(st.leader)
        if metric:
            claims = claims or bool(await asyncio.to_thread(d.metric, "bk_auditor_is_leader"))
        return claims, time.monotonic()
    except (AdminClientError, OSError):
        return False, time.monotonic()


def election_votes(cluster: Cluster) -> list[str]:
    children = cluster.kazoo.get_children(f"{cluster.ledgers_root}/bk-auditor/election")
    return sorted(children, key=lambda c: int(c.rsplit("_", 1)[1]))


def start_daemon(cluster: Cluster, name: str, workdir: Path, session: float) -> Daemon:
    return Daemon(cluster, name, workdir, zookeeper={"session_timeout_seconds": session}).start()


def wait_standby(cluster: Cluster, d: Daemon) -> None:
    d.wait(lambda: d.health("readiness") == "SERVING", 60, "readiness")
    d.wait(lambda: len(election_votes(cluster)) == 2, 60, "its vote")


def one_round(cluster: Cluster, leader: Daemon, standby: Daemon, fault: str, session: float) -> dict[str, Any]:
    vote = f"{cluster.ledgers_root}/bk-auditor/election/{election_votes(cluster)[0]}"
    deleted = threading.Event()
    vote_gone: list[float] = []

    def on_vote(event: Any) -> None:  # kazoo thread
        vote_gone.append(time.monotonic())
        deleted.set()

    assert cluster.kazoo.exists(vote, watch=on_vote) is not None
    t0 = time.monotonic()
    os.kill(leader.pid, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
    both_claimed = polls = 0

    async def watch() -> float:
        while True:
            lead, at = await _claims(standby)
            if lead:
                return at
            await asyncio.sleep(POLL_SECONDS)

    led_at = asyncio.run(watch())
    out = {"total": led_at - t0}
    if deleted.wait(10):
        out["expiry"] = vote_gone[0] - t0
        out["reaction"] = led_at - vote_gone[0]
    if fault == "kill":
        assert leader.proc is not None
        leader.proc.wait(10)
    else:
        os.kill(leader.pid, signal.SIGCONT)

        async def both() -> None:
            nonlocal both_claimed, polls
            deadline = time.monotonic() + 3 * session + 10
            while time.monotonic() < deadline:
                (a, _), (b, _) = await asyncio.gather(_claims(leader, True), _claims(standby, True))
                polls += 1
                both_claimed += a and b
                if not a and b and len(election_votes(cluster)) == 2:
                    return
                await asyncio.sleep(POLL_SECONDS)

        asyncio.run(both())
        out["polls"] = polls
        out["both_claimed"] = both_claimed
    return out


def summary(name: str, xs: list[float]) -> str:
    if not xs:
        return f"{name}: no samples"
    q = statistics.quantiles(xs, n=10) if len(xs) >= 2 else xs
    return (
        f"{name:9s} n={len(xs)} median={statistics.median(xs):.2f}s p90={q[-1]:.2f}s "
        f"min={min(xs):.2f}s max={max(xs):.2f}s"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--session-timeout", type=float, default=4.0)
    ap.add_argument("--fault", choices=("kill", "stop"), default="kill")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bk-auditor-failover-"))
    cluster = second_cluster(workdir)
    daemons: list[Daemon] = []
    rows: list[dict[str, Any]] = []
    try:
        cluster.start()
        a = start_daemon(cluster, "failover-a", workdir, args.session_timeout)
        daemons.append(a)
        a.wait(a.is_leader, 60, "leadership")
        b = start_daemon(cluster, "failover-b", workdir, args.session_timeout)
        daemons.append(b)
        wait_standby(cluster, b)
        leader, standby = a, b
        for i in range(args.rounds):
            time.sleep(1.0 + (i % 5) * 0.37)  # spread the fault over the leader's ping cycle
            row = one_round(cluster, leader, standby, args.fault, args.session_timeout)
            rows.append(row)
            print(
                f"round {i + 1:3d}: "
                + " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
                flush=True,
            )
            if args.fault == "kill":
                leader = start_daemon(cluster, leader.name, workdir, args.session_timeout)
                daemons.append(leader)
            wait_standby(cluster, leader)
            leader, standby = standby, leader
        print(f"\nfault={args.fault} session timeout={args.session_timeout}s (ZooKeeper tickTime 1 s)")
        for key in ("expiry", "reaction", "total"):
            print(summary(key, [r[key] for r in rows if key in r]))
        if args.fault == "stop":
            print(
                f"polls of both daemons after resume: {sum(r['polls'] for r in rows)}, "
                f"polls where both claimed to lead: {sum(r['both_claimed'] for r in rows)}"
            )
        over = [r["total"] for r in rows if r["total"] > args.session_timeout + 2]
        print(f"rounds over session timeout + 2 s: {len(over)}")
        return 0
    finally:
        for d in daemons:
            if d.running:
                d.resume()
                d.kill()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
