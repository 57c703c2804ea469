"""The chaos campaign on the real cluster (docs/reliability.md, "Chaos campaign"). One command:

    python -m bench.chaos --rounds 200 --seed 1          (from the repository root; or: make chaos)

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
import sys
from pathlib import Path

from devcluster.chaos.campaign import KINDS, Campaign, CampaignError, ChaosConfig, summary_text, write_report
from devcluster.cluster import HarnessError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--results", type=Path, default=Path("bench/results/chaos"), help="directory for the JSON report")
    ap.add_argument("--workdir", type=Path, default=None, help="cluster work directory (default: a new temp dir)")
    ap.add_argument(
        "--ledgers-per-quorum",
        type=int,
        default=80,
        help="closed ledgers for each of E3/WQ3/AQ2, E3/WQ2/AQ2, E5/WQ2/AQ2",
    )
    ap.add_argument("--open-ledgers", type=int, default=20)
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"faults to draw from (default all: {','.join(KINDS)})")
    ap.add_argument("--cycle", action="store_true", help="take the kinds in order instead of drawing them")
    ap.add_argument("--session-timeout", type=float, default=4.0, help="the daemons' ZooKeeper session timeout")
    ap.add_argument("--scrutiny-seconds", type=float, default=10.0)
    ap.add_argument("--lost-bookie-delay", type=int, default=60)
    ap.add_argument("--keep", action="store_true", help="keep the work directory and logs")
    args = ap.parse_args(argv)
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
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
        workdir=args.workdir,
        results_dir=args.results,
        ledgers_per_quorum=args.ledgers_per_quorum,
        open_ledgers=args.open_ledgers,
        kinds=kinds,
        cycle=args.cycle,
        session_timeout=args.session_timeout,
        scrutiny_seconds=args.scrutiny_seconds,
        lost_bookie_delay=args.lost_bookie_delay,
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
    path = write_report(report, args.results)
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


if __name__ == "__main__":
    sys.exit(main())
