"""The exact audit on DbLedgerStorage (Pulsar's storage) against SortedLedgerStorage, Java's checks and
the read floor, on real clusters (issue 37, docs/benchmarks.md "DbLedgerStorage (Pulsar's storage)").

    BK_TEST_PORT_SLOT=7 BK_TEST_DAEMON_PORT_BASE=20700 .venv/bin/python -m bench.db_storage      # 300 ledgers
    ... -m bench.db_storage --ledgers 6 --bookies 2 --shapes 2/2 --entry-counts 10,50 --skip ours-defaults

Two real clusters, one after the other, on the slot's "second cluster" ports (bench/profile_scan.py's
`scan_cluster`: ZooKeeper and `--bookies` real 4.17.3 bookies, Prometheus stats on): first every bookie on
SortedLedgerStorage, then every bookie on DbLedgerStorage with a real `bk-auditor agent` beside it (bearer
token required). On each the real Java client writes the same `--ledgers` closed ledgers: equal shares of
`--shapes` (default E2/WQ2, Pulsar's default, E3/WQ2 and E3/WQ3, ack quorum 2), entry counts cycling over
`--entry-counts` (default 100, 1,000, 5,000) from one batch of ledgers to the next, `--entry-size`-byte
entries. Then each side runs once (ours in a child process, bench/scan_child.py or this file's `--child`):
* sorted cluster: **sorted-ours**, `check --checks scrutiny` with the bookie and ZooKeeper limits off;
* DbLedgerStorage cluster: **java-replicas** and **java-checkall** (bench/java/JavaAuditorChecks.java:
  the 4.17.3 Auditor's replicas check and checkAllLedgers, the task's own time); **ours-agent**, the same
  scrutiny with `agent.addresses` and `agent.token_file` set (each bookie's index answers); **ours-remote**,
  without agents and `fallback_read_budget` raised above any bookie's share of a ledger
  (BENCH_FALLBACK_READ_BUDGET: every expected entry read, so the verdicts are exact); **ours-defaults**,
  without agents at the shipped settings (limits on, budget 2,000: large ledgers only sampled);
  **ours-ledger**, `check --checks ledger`; **scrub-agent** and **scrub-remote**, `bk-auditor scrub`'s pass
  with the byte budget off (`bytes_per_second` 0), through the agents and without them (batched v2
  reads); **floor**, the read floor: every copy's entries read by one BatchReader per bookie (each
  copy's batches pipelined, the bookies in parallel, digests not checked; the metadata read before the
  clock starts), what no remote scrub on this client stack can beat.
Each row has the seconds, ledgers/s, entries/s (entries = every expected copy: each entry once per
write-set bookie), the bookies' requests from their own counters (`bookkeeper_server_*_REQUEST`) and per
(ledger, bookie) pair, the agents' requests (their `bk_auditor_agent_requests`), the CPU seconds of the
bookies, the agents and the client (ours or the JVM, reaped-children rusage: start-up included), and for
java-replicas what it saw (its gauges, its GET_LISTs, the UnsupportedOperationException lines the bookies
logged). The summary has the ratios (agent/sorted, scrub/floor, ours/Java) and the cost of a
`--target-ledgers` x `--target-entries` cluster (1M x 50,000, E2/WQ2) computed from them. Saved with
bench/harness.py `save_results`; one JSON line on stdout. Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.harness import save_results
from bench.profile_scan import one_run, run_child, scan_cluster, write_ledgers
from bench.repair import counters
from bench.replicas_check import cpu_times, java_run, process_cpu_s, requests_of
from bench.scan_child import run_loop, rusage_cpu, settings_for

ROOT = Path(__file__).resolve().parent.parent
BUDGET_OVER_ANY_SHARE = 10**9  # a fallback read budget no bookie's share of a ledger reaches: exact reads
TOKEN = "bench-db-storage-token"
SORTED_SIDES = ("sorted-ours",)
DB_SIDES = (
    "java-replicas",
    "java-checkall",
    "ours-agent",
    "ours-remote",
    "ours-ledger",
    "scrub-agent",
    "scrub-remote",
    "floor",
    "ours-defaults",  # last: at the shipped rate limits the longest
)


# ---------------------------------------------------------------------------------------------- child side
def scrub_child(uri: str, loop: str, logs: Path) -> dict[str, Any]:
    """One `bk-auditor scrub` pass (every closed ledger, byte budget off) in this process: its summary,
    wall time and CPU."""
    from auditor.checks import scrub_oneshot
    from auditor.logging import configure_logging

    settings = settings_for(uri, 8, 100, loop)
    out = io.StringIO()
    with logs.open("a") as log_stream:
        configure_logging(settings.log.level, settings.log.format, stream=log_stream)
        t0, (u0, s0) = time.perf_counter(), rusage_cpu()
        code = run_loop(loop, lambda: scrub_oneshot.main(settings, "json", bytes_per_second=0, out=out, err=log_stream))
        wall, (u1, s1) = time.perf_counter() - t0, rusage_cpu()
    lines = [json.loads(x) for x in out.getvalue().splitlines() if x.strip()]
    summary = next((x["summary"]["scrub"] for x in lines if "summary" in x), None)
    if summary is None:
        raise RuntimeError(f"the scrub printed no summary (exit {code}); logs in {logs}")
    return {"exit": code, "wall_s": round(wall, 3), "cpu_s": round(u1 - u0 + s1 - s0, 3), "scrub": summary}


def floor_child(uri: str) -> dict[str, Any]:
    """The read floor: every closed ledger's copies (`durability.scrub.copies_of`) read by one BatchReader
    per bookie with the client settings ours use, one copy at a time per bookie (its batches pipelined), the
    bookies in parallel; digests not checked. The clock runs from the first read to the last answer."""
    from auditor.bookie.batch import BatchReader
    from auditor.checks.build import bookie_config, connect_store
    from auditor.durability.scrub import copies_of
    from auditor.metadata.interfaces import LedgerRecord

    settings = settings_for(uri, 8, 100)

    async def go() -> dict[str, Any]:
        store = await connect_store(settings)
        try:
            ids = [lid async for batch in store.list_ledgers() for lid in batch.ledger_ids]
            records = await store.read_ledgers(ids)
            work: dict[str, list[tuple[int, list[int]]]] = {}
            for r in records:
                if isinstance(r, LedgerRecord):
                    for copy in copies_of(r.metadata):
                        work.setdefault(copy.bookie, []).append((r.metadata.ledger_id.ledger, list(copy.entries)))
            config = bookie_config(settings)
            readers = {b: BatchReader(b, store.address_resolver(), config) for b in work}
            got = {"entries": 0, "bytes": 0, "not_present": 0}

            async def one_bookie(b: str) -> None:
                for lid, entries in work[b]:
                    for res in await readers[b].read_entries(lid, entries):
                        if res.body is None:
                            got["not_present"] += 1
                        else:
                            got["entries"] += 1
                            got["bytes"] += len(res.body)

            t0, (u0, s0) = time.perf_counter(), _cpu()
            try:
                await asyncio.gather(*(one_bookie(b) for b in work))
            finally:
                seconds, (u1, s1) = time.perf_counter() - t0, _cpu()
                await asyncio.gather(*(r.close() for r in readers.values()))
            requests = sum(r.batches_sent + r.reads_sent for r in readers.values())
            return {
                "ledgers": len(ids),
                "seconds": round(seconds, 3),
                "cpu_s": round(u1 - u0 + s1 - s0, 3),
                "requests": requests,
                **got,
            }
        finally:
            await store.close()

    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(go())


def _cpu() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


# --------------------------------------------------------------------------------------------- parent side
def agent_requests(agents: dict[int, Any]) -> int:
    """Calls the agents answered so far (their `bk_auditor_agent_requests` counters, summed)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    total = 0
    for a in agents.values():
        with urllib.request.urlopen(f"http://127.0.0.1:{a.metrics_port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            if family.name == "bk_auditor_agent_requests":
                total += sum(int(s.value) for s in family.samples if s.name.endswith("_total"))
    return total


def unsupported_logged(cluster: Any, bookies: list[int]) -> int:
    """Lines of the bookies' logs naming UnsupportedOperationException (GET_LIST on DbLedgerStorage)."""
    n = 0
    for b in bookies:
        path = cluster.logs_dir / f"bookie{b}.log"
        if path.exists():
            with path.open(errors="replace") as f:
                n += sum("UnsupportedOperationException" in line for line in f)
    return n


def jvm_log(stderr: str) -> dict[str, Any]:
    """What a Java check logged (WARN and above): its lines by level, the replicas check's failed
    GET_LISTs ("Unable to GetListOfEntriesOfLedger", one per ledger and bookie) and the exceptions named."""
    lines = stderr.splitlines()
    exceptions: dict[str, int] = {}
    for line in lines:
        for word in line.replace(":", " ").split():
            if word.endswith("Exception") and "." in word:
                name = word.rsplit(".", 1)[1].rsplit("$", 1)[-1]
                exceptions[name] = exceptions.get(name, 0) + 1
    return {
        "warn_lines": sum(" WARN " in x for x in lines),
        "error_lines": sum(" ERROR " in x for x in lines),
        "unable_to_get_list": sum("Unable to GetListOfEntriesOfLedger" in x for x in lines),
        # The replicas check's report at the end: one ERROR line per ledger whose GET_LISTs failed.
        "unavailable_bookies_reported": sum("has following unavailable bookies" in x for x in lines),
        "exceptions": exceptions,
    }


@contextmanager
def environ(**values: str) -> Iterator[None]:
    """These environment variables set for the children started meanwhile."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def copies_and_pairs(made: list[dict[str, Any]]) -> tuple[int, int]:
    """(entry copies the ledgers should have, (ledger, bookie) pairs that should hold some entry)."""
    from devcluster.checks_util import expected_entries

    copies = pairs = 0
    for r in made:
        for b in {b for ens in r["ensembles"].values() for b in ens}:
            held = len(expected_entries(r, b))
            copies += held
            pairs += held > 0
    return copies, pairs


def run_side(
    side: str,
    cluster: Any,
    workdir: Path,
    args: argparse.Namespace,
    agents: dict[int, Any],
    agent_settings: dict[str, Any],
    classes: Path,
) -> dict[str, Any]:
    """One run of `side`: what it reports (bench/scan_child.py's row, the Java runner's, a child's here)."""

    uri = cluster.metadata_service_uri
    logs = workdir / f"{side}.jsonl"
    tree = str(ROOT)
    if side.startswith("java-"):
        got = java_run(cluster, side.removeprefix("java-"), classes, keep_stderr=True)
        return {**got, "jvm_log": jvm_log(got.pop("stderr"))}
    if side == "floor":
        return run_child(Path(__file__), ["--child", "floor", uri], tree, "the read floor")
    env: dict[str, str] = {}
    if side.endswith("-agent"):
        env["BENCH_SETTINGS"] = json.dumps(agent_settings)
    if side == "ours-remote":
        env["BENCH_FALLBACK_READ_BUDGET"] = str(BUDGET_OVER_ANY_SHARE)
    if side == "ours-defaults":
        env["BENCH_SHIPPED_LIMITS"] = "1"
    with environ(**env):
        if side.startswith("scrub-"):
            return run_child(Path(__file__), ["--child", "scrub", uri, args.loop, str(logs)], tree, f"the {side}")
        check = "ledger" if side == "ours-ledger" else "scrutiny"
        return one_run(uri, args.loop, args, logs, tree=tree, check=check)


def seconds_of(side: str, detail: dict[str, Any]) -> float:
    if side.startswith("java-") or side == "floor":
        return float(detail["seconds"])
    return float(detail["wall_s"])


def measured(
    side: str,
    cluster: Any,
    workdir: Path,
    args: argparse.Namespace,
    agents: dict[int, Any],
    agent_settings: dict[str, Any],
    classes: Path,
    shape: tuple[int, int, int],
) -> dict[str, Any]:
    """`side` run once with the bookies' and agents' counters and CPU read around it: its row."""

    n, copies, pairs = shape
    bookies = list(range(1, args.bookies + 1))
    before, agent0, logged0 = counters(cluster, bookies), agent_requests(agents), unsupported_logged(cluster, bookies)
    bookies0 = sum(process_cpu_s(cluster.bookie(b).pid) for b in bookies)
    agents0 = sum(process_cpu_s(a.proc.pid) for a in agents.values())
    client0, (busy0, total0) = children_cpu_s(), cpu_times()
    detail = run_side(side, cluster, workdir, args, agents, agent_settings, classes)
    client1, (busy1, total1) = children_cpu_s(), cpu_times()
    bookies1 = sum(process_cpu_s(cluster.bookie(b).pid) for b in bookies)
    agents1 = sum(process_cpu_s(a.proc.pid) for a in agents.values())
    asked = requests_of(before, counters(cluster, bookies))
    requests = sum(v for k, v in asked.items() if k.isupper())
    seconds = seconds_of(side, detail)
    row: dict[str, Any] = {
        "side": side,
        "storage": "sorted" if side.startswith("sorted") else "db",
        "seconds": round(seconds, 3),
        "ledgers_per_s": round(n / seconds, 1),
        "entries_per_s": round(copies / seconds),
        "bookie_requests": asked,
        "bookie_requests_per_pair": round(requests / pairs, 3),
        "agent_requests": agent_requests(agents) - agent0,
        "bookies_cpu_s": round(bookies1 - bookies0, 2),
        "agents_cpu_s": round(agents1 - agents0, 2),
        "client_cpu_s": round(client1 - client0, 2),
        "machine_busy": round((busy1 - busy0) / max(1, total1 - total0), 2),
        "detail": detail,
    }
    for who in ("bookies", "agents", "client"):  # per expected copy, in µs
        row[f"{who}_cpu_us_per_copy"] = round(row[f"{who}_cpu_s"] / copies * 1e6, 2)
    if side == "java-replicas":
        row["bookie_unsupported_logged"] = unsupported_logged(cluster, bookies) - logged0
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def write(cluster: Any, args: argparse.Namespace) -> list[dict[str, Any]]:

    shapes = [(int(e), int(w)) for e, w in (x.split("/") for x in args.shapes.split(",") if x.strip())]
    counts = [int(x) for x in args.entry_counts.split(",") if x.strip()]
    per_batch = max(1, -(-args.ledgers // (len(shapes) * len(counts))))  # each shape gets each count
    t0 = time.monotonic()
    made = write_ledgers(cluster, args.ledgers, shapes, counts, args.entry_size, batch=per_batch)
    print(f"wrote {len(made)} ledgers in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)
    return made


SUMMARY_KEYS = (
    "seconds",
    "ledgers_per_s",
    "entries_per_s",
    "bookie_requests_per_pair",
    "agent_requests",
    "bookies_cpu_us_per_copy",
    "agents_cpu_us_per_copy",
    "client_cpu_us_per_copy",
)


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def summarize(rows: list[dict[str, Any]], args: argparse.Namespace, written: dict[str, Any]) -> dict[str, Any]:
    by = {r["side"]: r for r in rows}

    def rate(side: str, key: str) -> float | None:
        return by[side][key] if side in by else None

    out: dict[str, Any] = {
        "written": written,
        "bookies": args.bookies,
        "shapes": args.shapes,
        "entry_counts": args.entry_counts,
        "entry_size": args.entry_size,
        "loop": args.loop,
        "cpus": os.cpu_count(),
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        "sides": {r["side"]: {k: r[k] for k in SUMMARY_KEYS if k in r} for r in rows},
        "agent_over_sorted_ledgers": ratio(rate("ours-agent", "ledgers_per_s"), rate("sorted-ours", "ledgers_per_s")),
        "agent_over_sorted_entries": ratio(rate("ours-agent", "entries_per_s"), rate("sorted-ours", "entries_per_s")),
        "scrub_agent_over_floor": ratio(rate("scrub-agent", "entries_per_s"), rate("floor", "entries_per_s")),
        "scrub_remote_over_floor": ratio(rate("scrub-remote", "entries_per_s"), rate("floor", "entries_per_s")),
        "ours_agent_over_java_replicas": ratio(
            rate("ours-agent", "ledgers_per_s"), rate("java-replicas", "ledgers_per_s")
        ),
        "ours_ledger_over_java_checkall": ratio(
            rate("ours-ledger", "ledgers_per_s"), rate("java-checkall", "ledgers_per_s")
        ),
        "ours_remote_over_agent": ratio(rate("ours-remote", "entries_per_s"), rate("ours-agent", "entries_per_s")),
    }
    out["target"] = extrapolate(by, args)
    return out


def extrapolate(by: dict[str, dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """The cost of `--target-ledgers` ledgers of `--target-entries` entries, `--target-copies` copies of
    each, on `--target-bookies` bookies, from the measured rates: a pass takes ledgers / ledgers per s or
    copies / copies per s, whichever the side's cost follows (both given); a scrub period at the shipped
    byte budget is a bookie's stored bytes (copies x the bytes per copy the scrub read) / the budget;
    agent CPU per bookie and pass is its copies x the agents' measured CPU per copy."""
    from auditor.settings.model import ScrubSettings

    ledgers, copies = args.target_ledgers, args.target_ledgers * args.target_entries * args.target_copies
    scrubbed = [r["detail"]["scrub"] for s, r in by.items() if s.startswith("scrub-")]
    per_copy = scrubbed[0]["bytes"] / scrubbed[0]["entries"] if scrubbed else float(args.entry_size)
    per_bookie_bytes = copies * per_copy / args.target_bookies
    budget = ScrubSettings().bytes_per_second_per_bookie
    out: dict[str, Any] = {
        "ledgers": ledgers,
        "entry_copies": copies,
        "stored_bytes_per_copy": round(per_copy, 1),
        "bytes_per_bookie": per_bookie_bytes,
        "bookies": args.target_bookies,
        "scrub_budget_bytes_per_s": budget,
        "scrub_period_days_at_shipped_budget": round(per_bookie_bytes / budget / 86400, 2) if budget else None,
    }
    for side, r in by.items():
        out[f"{side}_pass_hours"] = {
            "by_ledgers": round(ledgers / r["ledgers_per_s"] / 3600, 2),
            "by_entries": round(copies / r["entries_per_s"] / 3600, 2),
        }
        if side.endswith("-agent"):
            out[f"{side}_agent_core_hours_per_bookie"] = round(
                copies / args.target_bookies * r["agents_cpu_us_per_copy"] / 1e6 / 3600, 2
            )
    return out


def clusters(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Both clusters, one after the other: every side's row, and what was written on each."""
    from devcluster.agent_util import start_agent, stop_agent
    from devcluster.cluster.javatools import BK_HOME, BK_VERSION, classpath, compile_once

    classes = compile_once(ROOT / "bench" / "java" / "JavaAuditorChecks.java", classpath(), BK_HOME, BK_VERSION)
    rows: list[dict[str, Any]] = []
    written: dict[str, Any] = {}
    for storage, sides in (("sorted", SORTED_SIDES), ("db", DB_SIDES)):
        wanted = [s for s in sides if s not in args.skip]
        if not wanted:
            continue
        with scan_cluster(args.bookies, f"bench-db-storage-{storage}-", args.keep, storage) as (cluster, workdir):
            made = write(cluster, args)
            copies, pairs = copies_and_pairs(made)
            written[storage] = {"ledgers": len(made), "entry_copies": copies, "pairs": pairs}
            agents: dict[int, Any] = {}
            settings: dict[str, Any] = {}
            try:
                if storage == "db":
                    token = workdir / "agent.token"
                    token.write_text(TOKEN + "\n")
                    for b in range(1, args.bookies + 1):
                        agents[b] = start_agent(cluster, b, workdir, token_file=token)
                    addresses = {cluster.bookie(n).bookie_id: f"127.0.0.1:{a.port}" for n, a in agents.items()}
                    settings = {"agent": {"addresses": addresses, "token_file": str(token)}}
                time.sleep(3.0)  # the bookies' flushInterval is 1 s: the indexes hold every entry
                for side in wanted:
                    rows.append(
                        measured(side, cluster, workdir, args, agents, settings, classes, (len(made), copies, pairs))
                    )
            finally:
                for a in agents.values():
                    stop_agent(a)
    return rows, written


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledgers", type=int, default=300)
    ap.add_argument("--bookies", type=int, default=5)
    ap.add_argument("--shapes", default="2/2,3/2,3/3", help="ensemble/write-quorum list (ack quorum 2)")
    ap.add_argument("--entry-counts", default="100,1000,5000", help="entries per ledger, cycled (comma list)")
    ap.add_argument("--entry-size", type=int, default=100)
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop", help="our event loop (as shipped)")
    ap.add_argument("--max-in-flight", type=int, default=8, help="bookie_client.max_in_flight (as shipped)")
    ap.add_argument("--max-concurrent-ledgers", type=int, default=100, help="as shipped")
    ap.add_argument("--skip", action="append", default=[], choices=SORTED_SIDES + DB_SIDES, help="a side not run")
    ap.add_argument("--target-ledgers", type=int, default=1_000_000, help="the extrapolated cluster's ledgers")
    ap.add_argument("--target-entries", type=int, default=50_000, help="... entries per ledger")
    ap.add_argument("--target-copies", type=int, default=2, help="... copies per entry (E2/WQ2: 2)")
    ap.add_argument("--target-bookies", type=int, default=5, help="... bookies (the scrub period per bookie)")
    ap.add_argument("--keep", action="store_true", help="keep the work directories (clusters and logs)")
    return ap


def main() -> None:
    args = parser().parse_args()
    rows, written = clusters(args)
    summary = summarize(rows, args, written)
    saved = save_results("db_storage", summary, rows)
    print(json.dumps({**summary, "runs": rows, "results_file": str(saved), "time": time.strftime("%F %T")}))


def child(argv: list[str]) -> None:
    kinds: dict[str, Callable[[], dict[str, Any]]] = {
        "scrub": lambda: scrub_child(argv[1], argv[2], Path(argv[3])),
        "floor": lambda: floor_child(argv[1]),
    }
    print(json.dumps(kinds[argv[0]]()))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
    else:
        main()
