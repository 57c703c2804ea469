"""The smoke version of `bench/db_storage.py` (the exact audit on DbLedgerStorage against SortedLedgerStorage,
Java's checks and the read floor) on clusters of its own: two bookies, four small E2/WQ2 ledgers, every
side but the slowest ones once. Counts, never times: each side covers every copy the Java writer wrote,
the agents answer every (ledger, bookie) pair without one request to a bookie, Java's replicas check
sees nothing wrong while every one of its GET_LISTs fails, and the summary has its ratios and the
extrapolation."""

from __future__ import annotations

import pytest

from bench.db_storage import clusters, parser, summarize

pytestmark = pytest.mark.realcluster

# 2 ledgers of 10 entries, 2 of 30, E2/WQ2 on 2 bookies: each entry on both.
ARGS = ["--ledgers", "4", "--bookies", "2", "--shapes", "2/2", "--entry-counts", "10,30"]
COPIES, PAIRS = (10 + 10 + 30 + 30) * 2, 4 * 2
SKIPPED = ("ours-defaults", "java-checkall", "ours-ledger")
ROW_KEYS = {"side", "seconds", "ledgers_per_s", "entries_per_s", "bookie_requests", "bookie_requests_per_pair"}
ROW_KEYS |= {"agent_requests", "bookies_cpu_s", "agents_cpu_s", "client_cpu_s", "machine_busy", "detail"}


def test_every_side_covers_every_copy_and_the_summary_has_its_ratios() -> None:
    args = parser().parse_args([*ARGS, *(x for s in SKIPPED for x in ("--skip", s))])
    rows, written = clusters(args)
    by = {r["side"]: r for r in rows}
    assert sorted(by) == sorted(
        ["sorted-ours", "java-replicas", "ours-agent", "ours-remote", "scrub-agent", "scrub-remote", "floor"]
    )
    assert all(ROW_KEYS <= r.keys() and r["seconds"] > 0 for r in rows), rows
    assert written["sorted"] == written["db"] == {"ledgers": 4, "entry_copies": COPIES, "pairs": PAIRS}

    for side in ("sorted-ours", "ours-agent", "ours-remote"):
        d = by[side]["detail"]
        assert d["ledgers_checked"] == 4 and d["exit"] in (0, 1), d
        assert not [c for c in d["findings"] if c.startswith("entry_")], (side, d["findings"])
    # The agents answer every pair from their indexes (flushed by now): not one request to a bookie.
    agent = by["ours-agent"]
    assert agent["detail"]["index_answers"] == PAIRS and agent["detail"]["bookie_requests"] == 0, agent
    assert sum(agent["bookie_requests"].values()) == 0 and 1 <= agent["agent_requests"] <= 2, agent
    assert by["ours-remote"]["detail"]["index_answers"] == 0 and sum(by["ours-remote"]["bookie_requests"].values())
    for side in ("scrub-agent", "scrub-remote"):
        s = by[side]["detail"]["scrub"]
        assert (s["entries"], s["unverifiedEntries"], s["corrupt"], s["coverageRatio"]) == (COPIES, 0, 0, 1.0), s
    assert by["scrub-agent"]["agent_requests"] >= PAIRS and sum(by["scrub-agent"]["bookie_requests"].values()) == 0
    floor = by["floor"]["detail"]
    assert (floor["entries"], floor["not_present"]) == (COPIES, 0), floor
    # Java's replicas check on DbLedgerStorage: no GET_LIST answered, every one logged and ignored.
    java = by["java-replicas"]["detail"]
    assert java["jvm_log"]["unable_to_get_list"] == PAIRS, java["jvm_log"]
    assert java["jvm_log"]["unavailable_bookies_reported"] == 4, java["jvm_log"]  # one line per ledger
    assert java["NumLedgersHavingNoReplicaOfAnEntryGuageValue"] == 0, java

    summary = summarize(rows, args, written)
    for key in ("agent_over_sorted_ledgers", "agent_over_sorted_entries", "scrub_agent_over_floor"):
        assert isinstance(summary[key], float) and summary[key] > 0, (key, summary[key])
    assert summary["target"]["entry_copies"] == 1_000_000 * 50_000 * 2
    assert summary["target"]["ours-agent_pass_hours"]["by_entries"] > 0
