"""The full-cluster sweep as a Spark job: plan on the driver, check on the executors, aggregate.

    python -m auditor.spark.sweep --metadata-service-uri zk+hierarchical://zk:2181/ledgers --output out/
    spark-submit --master spark://m:7077 <path>/auditor/spark/sweep.py --metadata-service-uri ...
    bk-auditor sweep --metadata-service-uri ...          (the same options)

1. The driver lists the leaf directories of the ledger tree (not the ledgers in them) and cuts the id
   space into N consecutive partitions of about equal ledger counts (`auditor/processes/plan.py`, `partitions.py`).
2. Each partition is one Spark task (`mapPartitions` over a one-element partition): it opens its own
   ZooKeeper session and bookie connections and runs the selected checks with the same code as
   `bk-auditor check` and the daemon (`auditor/processes/worker.py`).
3. The driver submits one job per partition from a pool of `max_concurrent_partitions` threads, so the
   load on the cluster is bounded globally: at most that many partitions are in flight, each within
   its own per-bookie rate limit. Progress is reported as partitions finish; a failed partition is
   reported with its id range and does not stop the others.
4. Findings are deduplicated, counted per category, written as JSONL plus a summary JSON.

Exit codes as `bk-auditor check`: 0 clean, 1 findings (other than informational), 2 errors (including
any failed partition).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, TextIO

from auditor.durability.ids import LedgerId
from auditor.errors import error_line
from auditor.processes.engine import local_processes, new_pool, partition_rows, stop_workers
from auditor.processes.partitions import IdPartition
from auditor.processes.plan import SweepPlan, checked_plan
from auditor.processes.worker import FINDING, STATS, Row, run_partitions, settings_to_wire
from auditor.settings import Settings

from .output import PartitionStats, SweepFindings, aggregate, findings_jsonl, join_uri, print_table, write_text

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
PARTITIONS_PER_CORE = 4


@dataclass
class SweepOptions:
    checks: list[str] = field(default_factory=list)  # empty = all
    partitions: int | None = None  # None: Spark's default parallelism x PARTITIONS_PER_CORE
    max_concurrent_partitions: int | None = None  # None: 2 x default parallelism
    start: LedgerId | None = None  # sweep only ids in [start, end)
    end: LedgerId | None = None
    trace_ledgers: bool = False  # stats rows list every ledger visited (tests, debugging)
    executor_log_level: str = "warning"
    refine: bool = True  # list the few leaf directories too heavy for one partition, to cut them evenly


@dataclass
class PartitionReport:
    partition: IdPartition
    started: float  # wall clock (time.time()) when the driver submitted it
    finished: float
    findings: int = 0  # finding rows (before deduplication)
    ledgers: int = 0  # ledgers the scan visited (the largest count over the checks)
    error: str | None = None

    @property
    def seconds(self) -> float:
        return self.finished - self.started


@dataclass
class SweepResult:
    plan: SweepPlan
    checks: list[str]
    summary: SweepFindings
    runs: list[dict[str, Any]]
    partition_stats: dict[int, PartitionStats]
    reports: list[PartitionReport]
    master: str
    seconds: float

    @property
    def failed(self) -> list[PartitionReport]:
        return [r for r in self.reports if r.error is not None]

    @property
    def exit_code(self) -> int:
        if self.failed:
            return EXIT_ERROR
        return EXIT_FINDINGS if self.summary.actionable else EXIT_CLEAN

    def sweep_dict(self) -> dict[str, Any]:
        return {
            "master": self.master,
            "partitionsTotal": len(self.reports),
            "partitionsDone": sum(1 for r in self.reports if r.error is None),
            "durationSeconds": round(self.seconds, 3),
            "plan": self.plan.as_dict(),
            "failedPartitions": [{**r.partition.to_dict(), "error": r.error} for r in self.failed],
        }

    def summary_dict(self) -> dict[str, Any]:
        """The one-shot summary's shape (`findingCount`, `actionable`, `repeatSightings`, `byCategory`, ...,
        `checks`, `durationSeconds`) plus a `sweep` section."""
        return {
            **self.summary.as_dict(),
            "checks": self.runs,
            "durationSeconds": round(self.seconds, 3),
            "sweep": self.sweep_dict(),
        }


@dataclass(frozen=True)
class SweepProgress:
    """Where a sweep is, after one more partition finished."""

    partitions_done: int
    partitions_total: int
    report: PartitionReport  # the partition that just finished
    ledgers_done: int  # ledgers visited by the finished partitions
    ledgers_estimate: int  # the plan's estimate for the whole sweep
    seconds: float  # since the sweep started

    @property
    def ledgers_per_second(self) -> float:
        return self.ledgers_done / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        if self.partitions_done >= self.partitions_total:
            return 0.0
        rate = self.ledgers_per_second
        remaining = max(0, self.ledgers_estimate - self.ledgers_done)
        return remaining / rate if rate > 0 else None


ProgressFn = Callable[[SweepProgress], None]


def _error_line(exc: BaseException) -> str:
    """The useful last line of a Spark/Py4J error (the Python exception raised on the executor)."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln.split(":")[0] or "Exception" in ln.split(":")[0]:
            if not ln.startswith(("at ", "org.apache.spark", "py4j")):
                return ln[:500]
    return (lines[-1] if lines else type(exc).__name__)[:500]


def run_sweep(
    spark: Any, settings: Settings, options: SweepOptions | None = None, *, progress: ProgressFn | None = None
) -> SweepResult:
    """Plan, run every partition on the cluster, aggregate. Raises on planning errors (cannot reach
    ZooKeeper, bad layout); a failing partition is reported in the result instead."""
    opts = options or SweepOptions()
    checks = _checks(opts)
    sc = spark.sparkContext
    started = time.monotonic()
    plan = _plan(settings, opts, opts.partitions or max(1, sc.defaultParallelism * PARTITIONS_PER_CORE))
    parts = plan.partitions
    rdd = sc.parallelize([p.to_wire() for p in parts], len(parts))
    fn = functools.partial(
        run_partitions, settings_to_wire(settings), checks, opts.trace_ledgers, opts.executor_log_level
    )
    mapped = rdd.mapPartitions(fn)

    def run_one(part: IdPartition) -> list[Row]:
        sc.setJobDescription(f"bk-auditor sweep partition {part.index + 1}/{len(parts)} {part.describe()}")
        got: list[Row] = sc.runJob(mapped, lambda it: it, [part.index])
        return got

    in_flight = opts.max_concurrent_partitions or max(2, sc.defaultParallelism * 2)
    # Ctrl-C: cancel the jobs, do not leave tasks hammering the cluster.
    return _run_planned(plan, checks, run_one, in_flight, progress, sc.master, started, abort=sc.cancelAllJobs)


def run_sweep_on_processes(
    settings: Settings, processes: int, options: SweepOptions | None = None, *, progress: ProgressFn | None = None
) -> SweepResult:
    """The same sweep without Spark: `processes` local worker processes (`new_pool`, each with its own event
    loop, ZooKeeper session and bookie connections) run the partitions with the executors' code
    (`worker.run_partitions`). For one machine's cores: Python's one thread per process binds a scan to
    one core, the id space cut as the Spark planner cuts it spreads it over several."""
    opts = options or SweepOptions()
    checks = _checks(opts)
    started = time.monotonic()
    plan = _plan(settings, opts, opts.partitions or processes * PARTITIONS_PER_CORE)
    wire = settings_to_wire(settings)
    in_flight = min(opts.max_concurrent_partitions or processes, processes)
    with new_pool(processes) as pool:

        def run_one(part: IdPartition) -> list[Row]:
            job = pool.submit(partition_rows, wire, checks, opts.trace_ledgers, opts.executor_log_level, part.to_wire())
            return job.result()

        master = f"processes[{processes}]"
        return _run_planned(
            plan, checks, run_one, in_flight, progress, master, started, abort=lambda: stop_workers(pool)
        )


def _checks(opts: SweepOptions) -> list[str]:
    from auditor.checks.per_ledger import resolve_checks

    return resolve_checks(opts.checks, per_ledger_only=True)


def _plan(settings: Settings, opts: SweepOptions, partitions: int) -> SweepPlan:
    return checked_plan(settings, partitions, start=opts.start, end=opts.end, refine=opts.refine)


def _run_planned(
    plan: SweepPlan,
    checks: list[str],
    run_one: Callable[[IdPartition], list[Row]],
    in_flight: int,
    progress: ProgressFn | None,
    master: str,
    started: float,
    abort: Callable[[], None],
) -> SweepResult:
    """Run every planned partition (`in_flight` at once), gather rows and reports, aggregate; `abort`
    stops the engine's work in flight when this is interrupted."""
    parts = plan.partitions
    rows: list[Row] = []
    reports: dict[int, PartitionReport] = {}

    def one(part: IdPartition) -> tuple[PartitionReport, list[Row]]:
        t0 = time.time()
        try:
            got = run_one(part)
        except Exception as exc:  # Py4JJavaError after Spark's own task retries; a worker process's error
            return PartitionReport(part, t0, time.time(), error=_error_line(exc)), []
        visited = [json.loads(r[4]).get("ledgersVisited", 0) for r in got if r[0] == STATS]
        return PartitionReport(
            part, t0, time.time(), findings=sum(1 for r in got if r[0] == FINDING), ledgers=max(visited, default=0)
        ), got

    pool = ThreadPoolExecutor(max_workers=min(len(parts), in_flight), thread_name_prefix="sweep")
    try:
        futures = [pool.submit(one, p) for p in parts]
        for fut in as_completed(futures):
            report, got = fut.result()  # results are gathered here, on this one thread
            reports[report.partition.index] = report
            rows.extend(got)
            if progress:
                done = sum(r.ledgers for r in reports.values())
                progress(
                    SweepProgress(
                        len(reports), len(parts), report, done, plan.ledgers_estimate, time.monotonic() - started
                    )
                )
    except BaseException:
        abort()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    summary, per_part, runs = aggregate(rows, checks)
    return SweepResult(
        plan, checks, summary, runs, per_part, [reports[p.index] for p in parts], master, time.monotonic() - started
    )


# ------------------------------------------------------------------------------------------ front end


def print_progress(err: TextIO) -> ProgressFn:
    def show(p: SweepProgress) -> None:
        r = p.report
        status = f"FAILED: {r.error}" if r.error else f"{r.ledgers} ledgers, {r.findings} finding row(s)"
        eta = p.eta_seconds
        print(
            f"sweep: {p.partitions_done}/{p.partitions_total} partitions, {p.ledgers_done} of ~{p.ledgers_estimate} "
            f"ledgers, {p.ledgers_per_second:.0f}/s, ETA {'?' if eta is None else f'{eta:.0f}s'} "
            f"(partition {r.partition.index} {r.partition.describe()}: {status}, {r.seconds:.1f}s)",
            file=err,
            flush=True,
        )

    return show


def write_outputs(result: SweepResult, output: str, spark: Any = None) -> tuple[str, str]:
    """`<output>/findings.jsonl` (one finding per line) and `<output>/summary.json`."""
    findings_uri, summary_uri = join_uri(output, "findings.jsonl"), join_uri(output, "summary.json")
    write_text(findings_uri, findings_jsonl(result.summary.findings), spark)
    write_text(
        summary_uri,
        json.dumps({"kind": "summary", "summary": result.summary_dict()}, indent=2, sort_keys=True) + "\n",
        spark,
    )
    return findings_uri, summary_uri


def sweep_main(
    settings: Settings,
    options: SweepOptions,
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    output: str | None = None,
    fmt: str = "table",
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Everything `bk-auditor sweep` does after parsing options; returns the exit code."""
    from auditor.checks.per_ledger import resolve_checks
    from auditor.logging import get_logger, log_new_finding

    from .session import describe, get_session

    out, err = out or sys.stdout, err or sys.stderr
    try:
        resolve_checks(options.checks, per_ledger_only=True)
        if options.executor_log_level not in ("debug", "info", "warning", "error"):
            raise ValueError(
                f"--executor-log-level must be debug, info, warning or error, got {options.executor_log_level!r}"
            )
    except ValueError as exc:
        print(error_line(str(exc)), file=err)
        return EXIT_ERROR
    log = get_logger("auditor.sweep")
    try:
        processes = local_processes(master)
    except ValueError as exc:
        print(error_line(str(exc)), file=err)
        return EXIT_ERROR
    spark: Any = None
    created = False
    if processes is None:
        try:
            spark, created = get_session(master, conf)
        except Exception as exc:
            print(error_line(f"cannot start Spark: {type(exc).__name__}: {exc}"), file=err)
            return EXIT_ERROR
    try:
        try:
            if spark is None:
                log.info("sweep starting", master=f"processes[{processes}]", engine="local processes, no Spark")
                result = run_sweep_on_processes(settings, processes or 1, options, progress=print_progress(err))
            else:
                log.info("sweep starting", **describe(spark))
                result = run_sweep(spark, settings, options, progress=print_progress(err))
        except Exception as exc:  # ZooKeeper unreachable, bad layout, ...: one clear line
            print(error_line(exc), file=err)
            return EXIT_ERROR
        for finding, check in result.summary.summary.sightings():
            log_new_finding(finding, logger=log, check=check)
        if output:
            try:
                paths = write_outputs(result, output, spark)
                print(f"sweep: wrote {paths[0]} and {paths[1]}", file=err)
            except Exception as exc:
                print(error_line(f"cannot write {output}: {type(exc).__name__}: {exc}"), file=err)
                return EXIT_ERROR
    finally:
        if created and spark is not None:
            spark.stop()
    if fmt == "json":
        for f in result.summary.findings:
            out.write(json.dumps({"kind": "finding", **f}, sort_keys=True) + "\n")
        out.write(json.dumps({"kind": "summary", "summary": result.summary_dict()}) + "\n")
    else:
        print_table(result.summary, result.runs, result.sweep_dict(), out)
    out.flush()
    return result.exit_code


def quiet_spark_client_logs() -> None:
    """py4j logs every connection it opens and closes at info: noise on the driver's stderr."""
    import logging

    logging.getLogger("py4j").setLevel(logging.WARNING)


def _ledger_id(text: str) -> LedgerId:
    try:
        return LedgerId.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="auditor.spark.sweep", description="bk-auditor full-cluster sweep on Spark.")
    p.add_argument("--config", "-c", help="YAML or Java .properties/.conf file (bk_server.conf works)")
    p.add_argument("--metadata-service-uri", help="e.g. zk+hierarchical://zk1:2181;zk2:2181/ledgers")
    p.add_argument("--checks", default="", help="comma-separated checks; empty = all")
    p.add_argument(
        "--master",
        help="Spark master (default: spark-submit's / spark-defaults / local[*]); processes[N] or processes[*]: "
        "N local worker processes, no Spark",
    )
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf")
    p.add_argument("--partitions", type=int, help="id-range partitions (default: parallelism x 4)")
    p.add_argument(
        "--max-concurrent-partitions",
        type=int,
        help="partitions in flight at once; bookie load = this x bookie_client.requests_per_second",
    )
    p.add_argument("--start", type=_ledger_id, help="first ledger id to sweep (decimal, scope:ledger, 32 hex)")
    p.add_argument("--end", type=_ledger_id, help="sweep ids below this one")
    p.add_argument("--output", help="directory (path or Hadoop URI) for findings.jsonl and summary.json")
    p.add_argument("--format", dest="fmt", choices=("table", "json"), default="table")
    p.add_argument("--log-level", help="debug|info|warning|error (driver)")
    p.add_argument("--log-format", help="json|console")
    p.add_argument(
        "--executor-log-level",
        default="warning",
        choices=("debug", "info", "warning", "error"),
        help="log level on the executors",
    )
    return p


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for `python -m auditor.spark.sweep` and `spark-submit .../sweep.py`."""
    from auditor.logging import configure_logging
    from auditor.settings import ConfigError, load_settings

    from .session import parse_conf, require_pyspark

    args = build_parser().parse_args(argv)
    try:
        if local_processes(args.master) is None:
            require_pyspark()
    except (ConfigError, ValueError) as exc:
        print(error_line(exc), file=sys.stderr)
        return EXIT_ERROR
    overrides: dict[str, Any] = {}
    names: dict[str, str] = {}
    if args.metadata_service_uri:
        overrides["metadata_service_uri"], names["metadata_service_uri"] = (
            args.metadata_service_uri,
            "--metadata-service-uri",
        )
    log: dict[str, str] = {}
    if args.log_level:
        log["level"] = args.log_level
    if args.log_format:
        log["format"] = args.log_format
    if log:
        overrides["log"] = log
    try:
        _positive("--partitions", args.partitions)
        _positive("--max-concurrent-partitions", args.max_concurrent_partitions)
        conf = parse_conf(args.conf)
        settings = load_settings(args.config, overrides=overrides, option_names=names)
        settings.require_metadata()
    except (ConfigError, ValueError) as exc:
        print(error_line(str(exc)), file=sys.stderr)
        return EXIT_ERROR
    configure_logging(settings.log.level, settings.log.format)
    quiet_spark_client_logs()
    options = SweepOptions(
        checks=[c.strip() for c in args.checks.split(",") if c.strip()],
        partitions=args.partitions,
        max_concurrent_partitions=args.max_concurrent_partitions,
        start=args.start,
        end=args.end,
        executor_log_level=args.executor_log_level,
    )
    return sweep_main(settings, options, master=args.master, conf=conf, output=args.output, fmt=args.fmt)


if __name__ == "__main__":  # python -m auditor.spark.sweep / spark-submit auditor/spark/sweep.py
    sys.exit(main())
