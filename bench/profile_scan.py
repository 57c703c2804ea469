"""Where a scrutiny scan's CPU goes: `bk-auditor check --checks scrutiny`, limits off, timed and profiled on
a real cluster (issue 12, docs/benchmarks.md).

    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.profile_scan                          # 3,000 ledgers, both loops
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.profile_scan --loop uvloop --profile scan.html
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.profile_scan --ledgers 300 --runs 1    # a quick smoke
    BK_TEST_PORT_SLOT=6 .venv/bin/python -m bench.profile_scan --check ledger           # the ledger check instead

Starts its own real cluster ("second cluster" ports of devcluster/ports.py): ZooKeeper and
`--bookies` real 4.17.3 bookies. Writes `--ledgers` closed ledgers with the real Java client, in equal
shares of `--shapes` (default thirds E3/WQ3/AQ2, E3/WQ2/AQ2 and E5/WQ2/AQ2; `--shapes 3/3` for E == WQ
alone), with 10 to 200 entries of `--entry-size` bytes (the
entry counts cycle over `--entry-counts`). Then runs the scrutiny check in-process exactly as
`bk-auditor check --checks scrutiny --format json` does (`auditor.checks.oneshot.main` with settings
from `load_settings`, JSON logs to a file as on a pipe), with `bookie_client.requests_per_second` and
`zookeeper.reads_per_second` at 0 (off), on each `--loop`, `--runs` times (loops alternating). Each run
reports wall time, process CPU (getrusage: every thread, kazoo's included), the event-loop thread's own
CPU, and CPU µs per ledger. With `--profile FILE` (repeatable) one more run per loop is made under a
profiler (FILE.html or FILE.txt: pyinstrument; FILE.prof: cProfile; FILE.svg or FILE.raw: py-spy attached
from outside, every thread, kazoo's included; the loop name is inserted before the
suffix when several loops run) and not counted in the timings. The cluster is stopped at the end, on
error too. Prints one JSON line of results (the runs and, per loop, the medians). Not a test: nothing
here asserts a speed.

Profilers are dev tools, not dependencies: `.venv/bin/pip install pyinstrument py-spy` (py-spy needs
ptrace rights over this process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.harness import save_results, second_cluster, started
from bench.scan_child import measure, settings_for
from devcluster.cluster import BookieProc, Cluster

# The test harness's bookies keep 512 index pages (pageLimit=512): enough for tests, but with thousands of
# ledgers on SortedLedgerStorage every GET_LIST then force-flushes dirty index pages ("Could not grab a
# clean page ... force flushing dirty ledgers"), bookies answer in seconds, and the scan measures the
# bookies' thrashing instead of our CPU. 16,384 pages of 8 KiB (128 MiB of the bookie's 256 MiB heap)
# hold one page per ledger of the largest runs here.
PAGE_LIMIT = 16384
CHILD = Path(__file__).with_name("scan_child.py")
# A run's phases (bench/scan_child.py `phases`), with medians where every run of a side has them.
PHASES = (
    "first_ledger_s",
    "after_first_ledgers_per_s",
    "loop_thread_on_cpu_s",
    "loop_thread_runqueue_wait_s",
    "loop_thread_blocked_s",
)
SHAPES = "3/3,3/2,5/2"  # ensemble/write quorum, ack quorum 2: the real cluster
CREATE_BATCH = 250  # ledgers per Java ledger-tool call (one JVM each)


class ScanCluster(Cluster):
    """The bench harness's cluster, its bookies with `pageLimit` raised to PAGE_LIMIT."""

    def _make_bookie(self, n: int) -> BookieProc:
        b = super()._make_bookie(n)
        lines = b.conf_path.read_text().splitlines()
        b.conf_path.write_text(
            "\n".join(f"pageLimit={PAGE_LIMIT}" if x.startswith("pageLimit=") else x for x in lines) + "\n"
        )
        return b


@contextmanager
def scan_cluster(bookies: int, prefix: str, keep: bool, storage: str = "sorted") -> Iterator[tuple[ScanCluster, Path]]:
    """A started ScanCluster on the slot's "second cluster" ports and its work directory; stopped at the end,
    on error or SIGTERM too (turned into SystemExit so the cleanup runs); the directory kept with `keep`.
    `storage`: every bookie's ledger storage ("sorted" or "db", devcluster's STORAGE_CLASSES)."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    template = second_cluster(workdir, num_bookies=bookies)
    cluster = ScanCluster(
        workdir,
        num_bookies=bookies,
        zk_port=template.zk_port,
        port_base=template.port_base,
        http_base=template.http_base,
        storage={n: storage for n in range(1, bookies + 1)},
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with started(cluster, workdir, keep):
        yield cluster, workdir


def write_ledgers(
    cluster: Any,
    count: int,
    shapes: list[tuple[int, int]],
    entry_counts: list[int],
    entry_size: int,
    batch: int = CREATE_BATCH,
) -> list[dict[str, Any]]:
    """`count` closed ledgers, equal shares of `shapes`, entry counts cycling over `entry_counts` from one
    batch of at most `batch` ledgers (one Java ledger-tool call) to the next."""
    made: list[dict[str, Any]] = []
    per_shape = max(1, count // len(shapes))
    for e, wq in shapes:
        left, k = per_shape, 0
        while left > 0:
            n = min(batch, left)
            made += cluster.create_ledgers(
                n,
                ensemble=e,
                write_quorum=wq,
                ack_quorum=2,
                entries=entry_counts[k % len(entry_counts)],
                entry_size=entry_size,
            )
            left -= n
            k += 1
        print(f"wrote {per_shape} ledgers E{e}/WQ{wq}/AQ2", file=sys.stderr, flush=True)
    return made


class Profiler:
    """pyinstrument (.html, .txt), cProfile (.prof) or py-spy from outside (.svg flame graph, .raw collapsed
    stacks of every thread) around one run, written to `path`."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._p: Any = None

    def __enter__(self) -> Profiler:
        if self.path is None:
            return self
        if self.path.suffix == ".prof":
            import cProfile

            self._p = cProfile.Profile()
            self._p.enable()
        elif self.path.suffix in (".svg", ".raw"):
            spy = Path(sys.executable).with_name("py-spy")
            fmt = "flamegraph" if self.path.suffix == ".svg" else "raw"
            argv = [str(spy), "record", "--pid", str(os.getpid()), "--rate", "500", "--nonblocking"]
            self._p = subprocess.Popen([*argv, "--format", fmt, "-o", str(self.path)], stdout=subprocess.DEVNULL)
            time.sleep(1.0)  # let it attach before the run starts
            if self._p.poll() is not None:
                raise RuntimeError(f"py-spy exited at once (code {self._p.returncode}): needs ptrace rights")
        else:
            from pyinstrument import Profiler as Pyinstrument

            self._p = Pyinstrument(interval=0.0005, async_mode="disabled")
            self._p.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._p is None or self.path is None:
            return
        if self.path.suffix == ".prof":
            self._p.disable()
            self._p.dump_stats(str(self.path))
        elif isinstance(self._p, subprocess.Popen):
            self._p.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            self._p.wait(60)
        else:
            self._p.stop()
            text = self._p.output_html() if self.path.suffix == ".html" else self._p.output_text(unicode=True)
            self.path.write_text(text)


def one_run(
    uri: str,
    loop: str,
    args: argparse.Namespace,
    logs: Path,
    profile: Path | None = None,
    tree: str | None = None,
    check: str = "scrutiny",
) -> dict[str, Any]:
    """One timed scan: in this process (this tree's code, optionally profiled), or with `tree` in a child
    process whose `auditor` package is that tree's (bench/scan_child.py), so versions compare in one run."""
    if tree is None:
        row = measure(uri, loop, args.max_in_flight, args.max_concurrent_ledgers, logs, Profiler(profile), check)
        return {"tree": None, "profiled": str(profile) if profile else None, **row}
    path, _, window = tree.partition(":")
    in_flight = int(window) if window else args.max_in_flight
    row = run_child(CHILD, [uri, loop, str(in_flight), str(args.max_concurrent_ledgers), str(logs), check], path)
    return {"tree": tree_label(path) + (f" in-flight {in_flight}" if window else ""), "profiled": None, **row}


def run_child(script: Path, argv: list[str], tree: str, what: str | None = None) -> dict[str, Any]:
    """Run a bench script as a file with `tree`'s `auditor` package (PYTHONPATH) and return the JSON object
    it prints last; an error naming `what` (default: the code of `tree`) with the tail of its stderr."""
    env = {**os.environ, "PYTHONPATH": tree}
    done = subprocess.run([sys.executable, str(script), *argv], env=env, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        name = what or f"the scan with the code of {tree}"
        raise RuntimeError(f"{name} failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.splitlines()[-1]))


def tree_label(tree: str) -> str:
    """`path@commit` (with `+dirty` for uncommitted changes): which code a row measured."""
    git = ["git", "-C", tree]
    rev = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    return f"{tree}@{rev or '?'}{'+dirty' if dirty.stdout.strip() else ''}"


def metadata_reads(uri: str, args: argparse.Namespace) -> dict[str, Any]:
    """What the scan's metadata phase is made of, timed alone on uvloop in this process: connecting the
    store, listing every ledger, getting every ledger znode in one bulk read (the wire session, answers
    unparsed), and reading them as the scan does (bulk reads and parsing)."""
    import uvloop

    from auditor.checks.build import connect_store

    async def go() -> dict[str, Any]:
        settings = settings_for(uri, args.max_in_flight, args.max_concurrent_ledgers)
        t0 = time.perf_counter()
        store = await connect_store(settings)
        try:
            t1 = time.perf_counter()
            ids = [lid async for batch in store.list_ledgers() for lid in batch.ledger_ids]
            t2 = time.perf_counter()
            c2 = time.thread_time()
            raw = await store.bridge.get_many([store.paths.path(lid) for lid in ids])
            t3, c3 = time.perf_counter(), time.thread_time()
            parsed = await store.read_ledgers(ids)
            t4, c4 = time.perf_counter(), time.thread_time()
        finally:
            await store.close()
        assert sum(r is not None for r in raw) == len(ids) == sum(r is not None for r in parsed)
        return {
            "ledgers": len(ids),
            "connect_s": round(t1 - t0, 3),
            "list_s": round(t2 - t1, 3),
            "get_all_s": round(t3 - t2, 3),
            "get_all_per_s": round(len(ids) / (t3 - t2), 1),
            "get_all_loop_cpu_us_per_ledger": round((c3 - c2) / len(ids) * 1e6, 1),
            "read_and_parse_s": round(t4 - t3, 3),
            "read_and_parse_loop_cpu_us_per_ledger": round((c4 - c3) / len(ids) * 1e6, 1),
        }

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(go())


def profile_path(base: str, loop: str, several: bool) -> Path:
    p = Path(base)
    return p.with_name(f"{p.stem}-{loop}{p.suffix}") if several else p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledgers", type=int, default=3000, help="ledgers to write (equal thirds of the 3 shapes)")
    ap.add_argument("--bookies", type=int, default=5)
    ap.add_argument(
        "--entry-counts", default="10,50,100,200", help="entries per ledger, cycled over batches (comma list)"
    )
    ap.add_argument("--entry-size", type=int, default=100)
    ap.add_argument("--shapes", default=SHAPES, help="ensemble/write-quorum list, equal shares (default %(default)s)")
    ap.add_argument("--loop", choices=("asyncio", "uvloop", "both"), default="both")
    ap.add_argument("--runs", type=int, default=2, help="timed runs per loop (loops alternate)")
    ap.add_argument(
        "--profile",
        metavar="FILE",
        action="append",
        default=[],
        help="one extra run per loop under a profiler: .html/.txt (pyinstrument), .prof (cProfile), "
        ".svg/.raw (py-spy, all threads); repeatable",
    )
    ap.add_argument("--max-in-flight", type=int, default=8, help="bookie_client.max_in_flight (default as shipped)")
    ap.add_argument("--max-concurrent-ledgers", type=int, default=100, help="as shipped")
    ap.add_argument(
        "--tree",
        metavar="DIR[:IN_FLIGHT]",
        action="append",
        default=[],
        help="compare code versions: each run is made once per tree (a checkout of this repository, e.g. a "
        "git worktree of an older commit; '.' for this one), in a child process, trees alternating; repeatable; "
        "':N' runs that tree with bookie_client.max_in_flight N (the same tree may be given with several)",
    )
    ap.add_argument(
        "--check",
        choices=("scrutiny", "ledger"),
        default="scrutiny",
        help="the check to scan with (default %(default)s)",
    )
    ap.add_argument(
        "--metadata-reads",
        action="store_true",
        help="also time the metadata phase's parts alone once per round (connect, list, bulk get, get and parse)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory (cluster and check logs)")
    args = ap.parse_args()
    trees: list[str | None] = [
        str(Path(path).resolve()) + (f":{window}" if window else "")
        for path, _, window in (t.partition(":") for t in args.tree)
    ] or [None]
    if any(Path(p).suffix not in (".html", ".txt", ".prof", ".svg", ".raw") for p in args.profile):
        ap.error("--profile must end in .html, .txt (pyinstrument), .prof (cProfile), .svg or .raw (py-spy)")
    loops = ["asyncio", "uvloop"] if args.loop == "both" else [args.loop]
    entry_counts = [int(x) for x in args.entry_counts.split(",") if x.strip()]
    shapes = [(int(e), int(w)) for e, w in (x.split("/") for x in args.shapes.split(",") if x.strip())]
    rows: list[dict[str, Any]] = []
    metadata: list[dict[str, Any]] = []
    with scan_cluster(args.bookies, "bench-profile-scan-", args.keep) as (cluster, workdir):
        logs = workdir / "check-logs.jsonl"
        t0 = time.monotonic()
        made = write_ledgers(cluster, args.ledgers, shapes, entry_counts, args.entry_size)
        print(f"wrote {len(made)} ledgers in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)
        uri = cluster.metadata_service_uri
        for i in range(args.runs):
            for loop in loops if i % 2 == 0 else loops[::-1]:
                for tree in trees if i % 2 == 0 else trees[::-1]:
                    row = one_run(uri, loop, args, logs, tree=tree, check=args.check)
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
            if args.metadata_reads:
                metadata.append(metadata_reads(uri, args))
                print(json.dumps(metadata[-1]), file=sys.stderr, flush=True)
        profiled: list[dict[str, Any]] = []
        for base in args.profile:
            for loop in loops:
                row = one_run(uri, loop, args, logs, profile_path(base, loop, len(loops) > 1), check=args.check)
                profiled.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        per_loop: dict[str, Any] = {}
        for loop in loops:
            for label in dict.fromkeys(r["tree"] for r in rows):
                mine = [r for r in rows if r["loop"] == loop and r["tree"] == label]
                if mine:
                    per_loop[loop if label is None else f"{loop} {label}"] = {
                        key + "_median": statistics.median(r[key] for r in mine)
                        for key in (
                            "wall_s",
                            "ledgers_per_s",
                            "cpu_us_per_ledger",
                            "loop_thread_cpu_us_per_ledger",
                            *PHASES,
                        )
                        if all(key in r for r in mine)
                    }
        summary = {
            "check": args.check,
            "ledgers_written": len(made),
            "bookies": args.bookies,
            "shapes": args.shapes,
            "entry_counts": entry_counts,
            "max_in_flight": args.max_in_flight,
            "max_concurrent_ledgers": args.max_concurrent_ledgers,
            "cpus": os.cpu_count(),
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
            "per_loop": per_loop,
            **({"metadata_reads": metadata} if metadata else {}),
        }
        saved = save_results("profile_scan", summary, rows + profiled)
        print(json.dumps({**summary, "runs": rows, "profiled_runs": profiled, "results_file": str(saved)}))


if __name__ == "__main__":
    main()
