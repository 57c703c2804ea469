"""The engine's pure parts for the daemon's scans on worker processes: the cursor over partitions that end
out of order, and run counters summed from the partitions' stats."""

from __future__ import annotations

from auditor.checks.context import RunStats
from auditor.durability.ids import MAX_ID, LedgerId
from auditor.processes.engine import _Cursor, merge_run_stats
from auditor.processes.partitions import ID_SPACE_END, SCOPE_STRIDE, IdPartition


def _parts(*cuts: int) -> list[IdPartition]:
    edges = [0, *cuts, ID_SPACE_END]
    return [IdPartition(i, a, b) for i, (a, b) in enumerate(zip(edges, edges[1:]))]


def test_cursor_moves_only_over_an_unbroken_run_of_ended_partitions() -> None:
    c = _Cursor(_parts(100, 200, SCOPE_STRIDE))
    assert c.end(1) is None  # the first still runs: nothing below 200 may be skipped yet
    assert c.end(0) == LedgerId(0, 199)  # both ended: through the second's last id
    assert c.end(2) == LedgerId(0, MAX_ID)  # a scope's last id (a resumed pass starts at scope 1)
    assert c.end(3) is None  # the last partition: past the last id, no cursor to save


def test_cursor_in_order() -> None:
    c = _Cursor(_parts(10, 20))
    assert [c.end(0), c.end(1), c.end(2)] == [LedgerId(0, 9), LedgerId(0, 19), None]


def test_partition_counters_add_up_to_the_run() -> None:
    one, two = RunStats("scrutiny"), RunStats("scrutiny")
    one.ledgers_seen, one.ledgers_checked, one.reanalysed = 10, 9, 1
    one.ledgers_skipped["deleted"] = 1
    one.bookie_requests.update({"b1:3181": 20, "b2:3181": 10})
    two.ledgers_seen, two.ledgers_checked, two.metadata_unreadable, two.ledgers_rechecked = 5, 4, 1, 2
    two.ledgers_skipped.update({"deleted": 2, "underreplicated": 1})
    two.bookie_requests.update({"b1:3181": 5})
    two.bookie_unknown.update({"b2:3181": 3})
    total = RunStats("scrutiny")
    for part in (one.as_dict(), two.as_dict()):
        total.absorb(part)
    got = total.as_dict()
    assert got["ledgersSeen"] == 15 and got["ledgersChecked"] == 13 and got["reanalysed"] == 1
    assert got["ledgersSkipped"] == {"deleted": 3, "underreplicated": 1}
    assert got["ledgersRechecked"] == 2 and got["metadataUnreadable"] == 1
    assert got["bookieRequestsByBookie"] == {"b1:3181": 25, "b2:3181": 10} and got["bookieRequests"] == 35
    assert got["bookieUnknownByBookie"] == {"b2:3181": 3}
    merged = merge_run_stats("scrutiny", [one.as_dict(), two.as_dict()])
    assert merged["partitions"] == 2
    assert {k: v for k, v in merged.items() if k not in ("partitions", "durationSeconds")} == {
        k: v for k, v in got.items() if k != "durationSeconds"
    }
