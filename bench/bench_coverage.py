"""Benchmark of the pure durability core on large closed ledgers. A plain script, not a test:

    python -m bench.bench_coverage [entries]        (from the repository root)

For each scenario it builds the bookies' answers (what GET_LIST_OF_ENTRIES_OF_LEDGER would decode to:
one run per maximal run of ids, as real bookies send) and times `analyze_coverage` (plus the scrutiny
verdict on top). Building the answers is not timed: in the daemon it is the entry-list decoder's work.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

from auditor.durability.coverage import UNKNOWN, Answer, analyze_coverage
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.ranges import RangeSet
from auditor.durability.schedule import expected_by_bookie
from auditor.durability.verdicts import durability_findings, triage


def closed_ledger(entries: int, e: int, wq: int, aq: int, segments: int = 1) -> LedgerMetadata:
    pool = [f"10.0.0.{i}:3181" for i in range(e + segments)]
    step = max(1, entries // segments)
    segs = tuple(Segment(k * step, tuple(pool[k : k + e])) for k in range(segments))
    return LedgerMetadata(LedgerId.of(2**33 + 7), e, wq, aq, LedgerState.CLOSED, entries - 1, 0, segs)


def healthy_answers(md: LedgerMetadata) -> dict[str, Answer]:
    return {b: RangeSet(tuple(s.iter_runs())) for b, s in expected_by_bookie(md).items()}


def run(name: str, md: LedgerMetadata, answers: dict[str, Answer], repeat: int = 3) -> None:
    runs = sum(len(a.ranges) for a in answers.values() if isinstance(a, RangeSet))
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        cov = analyze_coverage(md, answers)
        findings = durability_findings(md, cov)
        verdict = triage(cov)
        best = min(best, time.perf_counter() - t0)
    worst = cov.worst.value if cov.worst else "clean"
    affected = cov.buckets[cov.worst].confirmed.count() if cov.worst else 0
    print(
        f"{name:<46} entries={cov.entries:>10,} answer-runs={runs:>10,} time/ledger={best * 1000:9.1f} ms  "
        f"worst={worst} affected={affected:,} findings={len(findings)} triage={verdict.disposition.value}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description="Benchmark of the pure durability core on large closed ledgers.")
    ap.add_argument("entries", type=int, nargs="?", default=10_000_000, help="entries per ledger")
    n = ap.parse_args().entries
    print(f"python {sys.version.split()[0]}, closed ledgers of {n:,} entries\n")
    for e, wq, aq in [(3, 3, 2), (5, 2, 2), (5, 3, 2)]:
        md = closed_ledger(n, e, wq, aq)
        answers = healthy_answers(md)
        victim = md.segments[0].ensemble[1]
        run(f"E={e} WQ={wq} AQ={aq} healthy", md, answers)
        wiped = dict(answers, **{victim: RangeSet()})
        run(f"E={e} WQ={wq} AQ={aq} one bookie wiped (ENOLEDGER)", md, wiped)
        unknown = dict(answers, **{victim: UNKNOWN})
        run(f"E={e} WQ={wq} AQ={aq} one bookie unreachable", md, unknown)
        holes = dict(answers)
        a = answers[victim]
        assert isinstance(a, RangeSet)
        mid = n // 2
        holes[victim] = a.difference(RangeSet.span(mid, mid + 1000 * e - 1))  # 1000 stripes lost mid-ledger
        run(f"E={e} WQ={wq} AQ={aq} {1000 * e} ids lost mid-ledger", md, holes)
        scattered = dict(answers)
        scattered[victim] = a.difference(RangeSet.of((x, x) for x in range(0, n, max(1, n // 1000))))
        run(f"E={e} WQ={wq} AQ={aq} 1000 scattered ids lost", md, scattered)
        del answers, wiped, unknown, holes, scattered
    md = closed_ledger(n, 5, 3, 2, segments=50)
    answers = healthy_answers(md)
    victim = md.segments[10].ensemble[2]
    run("E=5 WQ=3 AQ=2 50 segments, one bookie wiped", md, dict(answers, **{victim: RangeSet()}))


if __name__ == "__main__":
    main()
