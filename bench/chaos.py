"""The chaos campaign on the real cluster (docs/reliability.md, "Chaos campaign"). One command:

    python -m bench.chaos --rounds 200 --seed 1          (from the repository root; or: make chaos)
    python -m bench.chaos --repair --rounds 200 --seed 1 (the repair role on, live writers: make chaos-repair)
    python -m bench.chaos --repair --rounds 200 --seed 1 --first-round 91   (the same campaign's rounds 91-200)
    python -m bench.chaos --combine PART1.json PART2.json ...             (one report of a campaign run in parts)

Starts its own ZooKeeper, 6 real bookies (one DbLedgerStorage, one registered behind a TCP proxy) and two
`bk-auditor run` daemons on the ports of BK_TEST_PORT_SLOT (devcluster/ports.py), writes a few
hundred ledgers with the real Java client, then runs one fault per round and checks the invariants
against ground truth from the Java tools. Progress goes to stdout, one line per round; the report is
printed at the end and written as JSON under --results. Exit status: 0 when no invariant was violated,
1 otherwise, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from pathlib import Path

from devcluster.chaos.campaign import KINDS, Campaign, CampaignError, ChaosConfig, summary_text, write_report
from devcluster.chaos.repair_campaign import (
    REPAIR_KINDS,
    RepairCampaign,
    RepairConfig,
    combine_repair_reports,
    repair_summary_text,
    write_repair_report,
)
from devcluster.cluster import HarnessError


def _stop(signum: int, frame: object) -> None:
    """SIGTERM ends the campaign as Ctrl-C does: its teardown stops every process it started (bookies,
    ZooKeeper, writers and daemons run in sessions of their own, so a signal to the campaign's process
    group does not reach them; left running, they filled the disk once)."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _stop)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--first-round",
        type=int,
        default=1,
        help="run rounds FIRST_ROUND..ROUNDS of the seed's plan (each round draws its fault and parameters "
        "from the seed alone, so a campaign can run in parts; --combine joins their reports)",
    )
    ap.add_argument(
        "--combine",
        nargs="+",
        type=Path,
        metavar="REPORT",
        help="write one report of a repair campaign run in parts (their JSON reports) and start nothing",
    )
    ap.add_argument(
        "--results",
        type=Path,
        default=None,
        help="directory for the JSON report (default bench/results/chaos[-repair])",
    )
    ap.add_argument("--workdir", type=Path, default=None, help="cluster work directory (default: a new temp dir)")
    ap.add_argument(
        "--ledgers-per-quorum",
        type=int,
        default=None,
        help="closed ledgers for each of E3/WQ3/AQ2, E3/WQ2/AQ2, E5/WQ2/AQ2 (default 80; --repair: 20)",
    )
    ap.add_argument("--open-ledgers", type=int, default=20)
    ap.add_argument("--kinds", default=None, help=f"faults to draw from (default all: {','.join(KINDS)})")
    ap.add_argument("--cycle", action="store_true", help="take the kinds in order instead of drawing them")
    ap.add_argument("--session-timeout", type=float, default=4.0, help="the daemons' ZooKeeper session timeout")
    ap.add_argument("--scrutiny-seconds", type=float, default=10.0)
    ap.add_argument("--lost-bookie-delay", type=int, default=None, help="seconds (default 60; --repair: 10)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory and logs")
    ap.add_argument(
        "--repair",
        action="store_true",
        help=f"the repair campaign (docs/reliability.md): faults {','.join(REPAIR_KINDS)} on a lost bookie, "
        "live writers, healed by repair itself",
    )
    args = ap.parse_args(argv)
    if not 1 <= args.first_round <= args.rounds:
        print(f"error: --first-round must be between 1 and --rounds ({args.rounds})", file=sys.stderr)
        return 2
    if args.combine:
        return combine_main(args.combine, args.results or Path("bench/results/chaos-repair"))
    if args.repair:
        return repair_main(args)
    kinds = tuple(k.strip() for k in (args.kinds or ",".join(KINDS)).split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds or args.rounds < 1:
        print(
            f"error: unknown fault kinds {unknown} (known: {', '.join(KINDS)})"
            if unknown
            else "error: --rounds must be >= 1 and --kinds non-empty",
            file=sys.stderr,
        )
        return 2
    cfg = ChaosConfig(
        rounds=args.rounds,
        seed=args.seed,
        first_round=args.first_round,
        workdir=args.workdir,
        results_dir=args.results or Path("bench/results/chaos"),
        ledgers_per_quorum=80 if args.ledgers_per_quorum is None else args.ledgers_per_quorum,
        open_ledgers=args.open_ledgers,
        kinds=kinds,
        cycle=args.cycle,
        session_timeout=args.session_timeout,
        scrutiny_seconds=args.scrutiny_seconds,
        lost_bookie_delay=60 if args.lost_bookie_delay is None else args.lost_bookie_delay,
        keep=args.keep,
        progress=lambda line: print(line, flush=True),
    )
    # Our own ZooKeeper clients reconnect through every ZooKeeper restart: keep their chatter out.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    try:
        report = Campaign(cfg).run()
    except (CampaignError, HarnessError) as exc:
        print(f"error: the campaign could not start: {exc}", file=sys.stderr)
        return 1
    path = write_report(report, cfg.results_dir)
    print(summary_text(report))
    print(f"report: {path}")
    print(
        json.dumps(
            {
                k: report[k]
                for k in (
                    "rounds",
                    "findings",
                    "planted_losses",
                    "failover_seconds",
                    "writes_outside_allowed_paths",
                    "violations_total",
                )
            },
            default=str,
        )
    )
    return 0 if report["violations_total"] == 0 else 1


def repair_main(args: argparse.Namespace) -> int:
    """`--repair`: the repair campaign, with its own defaults (kinds, lost-bookie delay, pool, results)."""
    kinds_text = args.kinds or ",".join(REPAIR_KINDS)
    kinds = tuple(k.strip() for k in kinds_text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in REPAIR_KINDS]
    if unknown or not kinds or args.rounds < 1:
        print(
            f"error: unknown repair fault kinds {unknown} (known: {', '.join(REPAIR_KINDS)})"
            if unknown
            else "error: --rounds must be >= 1 and --kinds non-empty",
            file=sys.stderr,
        )
        return 2
    cfg = RepairConfig(
        rounds=args.rounds,
        seed=args.seed,
        first_round=args.first_round,
        workdir=args.workdir,
        results_dir=args.results or Path("bench/results/chaos-repair"),
        ledgers_per_quorum=20 if args.ledgers_per_quorum is None else args.ledgers_per_quorum,
        kinds=kinds,
        cycle=args.cycle,
        session_timeout=args.session_timeout,
        scrutiny_seconds=args.scrutiny_seconds,
        lost_bookie_delay=10 if args.lost_bookie_delay is None else args.lost_bookie_delay,
        keep=args.keep,
        progress=lambda line: print(line, flush=True),
    )
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    try:
        report = RepairCampaign(cfg).run()
    except (CampaignError, HarnessError) as exc:
        print(f"error: the campaign could not start: {exc}", file=sys.stderr)
        return 1
    path = write_repair_report(report, cfg.results_dir)
    print(repair_summary_text(report))
    print(f"report: {path}")
    return 0 if report["violations_total"] == 0 else 1


def combine_main(paths: list[Path], results: Path) -> int:
    """`--combine`: the reports of one repair campaign run in parts, as one report (nothing is started)."""
    reports = []
    for path in paths:
        try:
            reports.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"error: {path}: not a readable JSON report ({exc})", file=sys.stderr)
            return 2
    try:
        report = combine_repair_reports(reports)
    except (KeyError, TypeError) as exc:
        print(f"error: not a repair campaign report (no {exc}) among {', '.join(map(str, paths))}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path = write_repair_report(report, results, suffix="-combined")
    print(repair_summary_text(report))
    print(f"report: {path}")
    return 0 if report["violations_total"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
