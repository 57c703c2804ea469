"""The commands that run the checks once, here, and exit 0 clean, 1 findings, 2 errors: `check` (on this
machine, on worker processes) and `sweep` (the whole cluster as a Spark job, or on local processes)."""

from __future__ import annotations

import functools
from typing import Annotated

import typer

from auditor.checks.names import checks_help
from auditor.cli.common import (
    ConfigOpt,
    FormatRunOpt,
    LogFormatOpt,
    LogLevelOpt,
    UriOpt,
    exit_on_error,
    fail,
    parse_ledger_id,
    prepare_run,
    run_with_loop,
)
from auditor.settings.clientenv import ENV_CHECK_PROCESSES


def check(
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    checks: Annotated[str, typer.Option("--checks", help=checks_help())] = "",
    fmt: FormatRunOpt = None,
    by: Annotated[
        str, typer.Option("--by", help="finding|topic: one row per finding, or per Pulsar topic at risk.")
    ] = "finding",
    processes: Annotated[
        int | None,
        typer.Option(
            "--processes",
            envvar=ENV_CHECK_PROCESSES,
            min=1,
            help="Worker processes for the checks that judge each ledger alone, each on a share of the id "
            "space and of the bookie and ZooKeeper budgets (default: the CPUs this process may use; one process below about 2,000 ledgers).",
        ),
    ] = None,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Run checks once and exit: 0 clean, 1 findings, 2 errors."""
    if by not in ("finding", "topic"):
        fail(f"--by must be finding or topic, got {by!r}")
    settings, fmt = prepare_run(config, metadata_service_uri, fmt, log_level, log_format)
    names = [c.strip() for c in checks.split(",") if c.strip()]
    try:
        from auditor.checks.oneshot import main as oneshot_main
    except ImportError as exc:
        fail(f"one-shot checks are not available in this build ({exc})")
    from auditor.processes.cpus import available_cpus

    sharded = None
    if (processes or available_cpus()) > 1:
        from auditor.processes.engine import IN_PROCESS_BELOW, check_on_processes

        # Unless the operator named a count, a small cluster is checked here: faster than starting workers.
        small = 0 if processes else IN_PROCESS_BELOW
        sharded = functools.partial(check_on_processes, settings, processes or available_cpus(), in_process_below=small)
    code = run_with_loop(
        functools.partial(oneshot_main, by=by, sharded=sharded), settings, names, fmt, loop=settings.event_loop
    )
    raise typer.Exit(int(code or 0))


def sweep(
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    checks: Annotated[str, typer.Option("--checks", help=checks_help())] = "",
    master: Annotated[
        str | None,
        typer.Option(
            "--master",
            help="Spark master; default: spark-submit's, $SPARK_MASTER, spark-defaults, else local[*]. "
            "processes[N] or processes[*]: N local worker processes (one per CPU), no Spark.",
        ),
    ] = None,
    partitions: Annotated[
        int | None, typer.Option("--partitions", min=1, help="Id-range partitions (default: Spark parallelism x 4).")
    ] = None,
    max_concurrent_partitions: Annotated[
        int | None,
        typer.Option(
            "--max-concurrent-partitions",
            min=1,
            help="Partitions in flight; per-bookie load = this x bookie_client.requests_per_second.",
        ),
    ] = None,
    output: Annotated[
        str | None, typer.Option("--output", help="Directory or Hadoop URI for findings.jsonl and summary.json.")
    ] = None,
    conf: Annotated[list[str] | None, typer.Option("--conf", help="Extra Spark conf KEY=VALUE (repeatable).")] = None,
    start: Annotated[str | None, typer.Option("--start", help="First ledger id to sweep.")] = None,
    end: Annotated[str | None, typer.Option("--end", help="Sweep ledger ids below this one.")] = None,
    fmt: FormatRunOpt = None,
    executor_log_level: Annotated[
        str, typer.Option("--executor-log-level", help="Log level on the Spark executors.")
    ] = "warning",
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Sweep the whole cluster as a Spark job (local[*] by default); exit 0 clean, 1 findings, 2 errors."""
    from auditor.processes.engine import local_processes
    from auditor.spark.session import parse_conf, require_pyspark
    from auditor.spark.sweep import SweepOptions, quiet_spark_client_logs, sweep_main

    try:
        processes = local_processes(master)
    except ValueError as exc:
        fail(str(exc))
    with exit_on_error():
        if processes is None:
            require_pyspark()  # first: nothing else matters without it (the local process engine needs no Spark)
    settings, fmt = prepare_run(config, metadata_service_uri, fmt, log_level, log_format)
    with exit_on_error():
        spark_conf = parse_conf(conf)
    bounds = [parse_ledger_id(v) if v else None for v in (start, end)]
    options = SweepOptions(
        checks=[c.strip() for c in checks.split(",") if c.strip()],
        partitions=partitions,
        max_concurrent_partitions=max_concurrent_partitions,
        start=bounds[0],
        end=bounds[1],
        executor_log_level=executor_log_level.lower(),
    )
    quiet_spark_client_logs()
    code = sweep_main(settings, options, master=master, conf=spark_conf, output=output, fmt=fmt)
    raise typer.Exit(int(code or 0))


def scrub(
    config: ConfigOpt = None,
    metadata_service_uri: UriOpt = None,
    ledgers: Annotated[
        str, typer.Option("--ledgers", help="Comma-separated ledger ids to scrub (default: every closed ledger).")
    ] = "",
    bytes_per_second: Annotated[
        float | None,
        typer.Option(
            "--bytes-per-second",
            min=0,
            help="Per-bookie byte budget (default: scrub.bytes_per_second_per_bookie; 0 = unlimited).",
        ),
    ] = None,
    fmt: FormatRunOpt = None,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Verify every copy's digests once (docs/scrub.md) and exit: 0 clean, 1 damage found, 2 errors."""
    from auditor.checks.scrub_oneshot import main as scrub_main

    settings, fmt = prepare_run(config, metadata_service_uri, fmt, log_level, log_format)
    ids = [parse_ledger_id(v.strip()) for v in ledgers.split(",") if v.strip()] or None
    code = run_with_loop(
        functools.partial(scrub_main, ledgers=ids, bytes_per_second=bytes_per_second),
        settings,
        fmt,
        loop=settings.event_loop,
    )
    raise typer.Exit(int(code or 0))
