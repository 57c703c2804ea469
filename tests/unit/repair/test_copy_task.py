"""What a copy task may copy: only entries of its segment striped to its index; never the last segment
of a ledger that is not closed (spec repair-and-recovery.md §2.4)."""

from __future__ import annotations

import pytest

from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment
from auditor.durability.schedule import expected_for_index
from auditor.repair.copy import CopyLimits, CopyTask

ENS = ("a:1", "b:1", "c:1", "d:1", "e:1")


def md(state: LedgerState = LedgerState.CLOSED) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=LedgerId(0, 9),
        ensemble_size=5,
        write_quorum=2,
        ack_quorum=2,
        state=state,
        last_entry_id=29 if state is LedgerState.CLOSED else -1,
        length=0,
        segments=(Segment(0, ENS), Segment(20, ("f:1", *ENS[1:]))),
        digest_type=DigestType.CRC32,
        password=b"",
    )


def test_the_stripe_of_an_index_passes() -> None:
    stripe = expected_for_index(0, 19, 0, 5, 2)
    assert stripe is not None
    entries = tuple(e for first, last in stripe.iter_runs() for e in range(first, last + 1))
    assert entries == (0, 4, 5, 9, 10, 14, 15, 19)  # (0 - e) mod 5 < 2: e mod 5 in {0, 4}
    CopyTask(md(), 0, 0, "x:1", entries).validate()
    CopyTask(md(), 1, 0, "x:1", (20, 24, 25, 29)).validate()


@pytest.mark.parametrize(
    ("segment", "index", "entries", "match"),
    [
        (0, 0, (1,), "not striped to index 0"),
        (0, 0, (20,), "outside segment"),
        (1, 0, (30,), "outside segment"),
        (0, 5, (0,), "outside the ensemble"),
        (2, 0, (0,), "no segment #2"),
        (0, 0, (0, 0), "repeat"),
    ],
)
def test_anything_else_is_refused(segment: int, index: int, entries: tuple[int, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CopyTask(md(), segment, index, "x:1", entries).validate()


def test_last_segment_of_an_open_ledger_is_never_copied() -> None:
    CopyTask(md(LedgerState.OPEN), 0, 0, "x:1", (0,)).validate()  # a closed-off earlier segment is fine
    with pytest.raises(ValueError, match="not closed"):
        CopyTask(md(LedgerState.OPEN), 1, 0, "x:1", (20,)).validate()


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError):
        CopyLimits(max_in_flight=0)
    with pytest.raises(ValueError):
        CopyLimits(add_attempts=0)
