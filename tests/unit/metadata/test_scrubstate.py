"""The scrub's own state (`<root>/bk-auditor/scrub/state`) reads back as written and is parsed strictly:
anything else is CorruptZnodeError naming the znode."""

from __future__ import annotations

import pytest

from auditor.durability.ids import LedgerId
from auditor.durability.scrub import ScrubProgress
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.own.scrubstate import parse_scrub, scrub_to_json

PATH = "/ledgers/bk-auditor/scrub/state"


@pytest.mark.parametrize(
    "progress",
    [
        ScrubProgress(),
        ScrubProgress().begin(1_700_000_000_000, 1234),
        ScrubProgress()
        .begin(5, None)
        .ledger_done(LedgerId(0, 42), copies=3, entries=9, nbytes=900, unverified=1, corrupt=1),
        ScrubProgress()
        .begin(5, 7)
        .finish(9)
        .begin(11, 3)
        .ledger_done(LedgerId(2, 2**63 - 1), copies=1, entries=1, nbytes=1, unverified=0, corrupt=0),
    ],
)
def test_what_we_write_reads_back(progress: ScrubProgress) -> None:
    assert parse_scrub(scrub_to_json(progress), PATH) == progress


@pytest.mark.parametrize(
    "data, problem",
    [
        (b"[]", "not a JSON object"),
        (b"\xff", "not UTF-8"),
        (b"{", "not valid JSON"),
        (b'{"ledgers": 1}', "copies is not a non-negative integer"),
        (scrub_to_json(ScrubProgress()).replace(b'"cursor": null', b'"cursor": 5'), "cursor is not a ledger id"),
        (scrub_to_json(ScrubProgress()).replace(b'"cursor": null', b'"cursor": "x"'), "cursor is not a ledger id"),
        (scrub_to_json(ScrubProgress()).replace(b'"bytes": 0', b'"bytes": -1'), "bytes is not"),
        (scrub_to_json(ScrubProgress()).replace(b'"passes": 0', b'"passes": true'), "passes is not"),
        (
            scrub_to_json(ScrubProgress()).replace(b'"passStartedMs": null', b'"passStartedMs": "now"'),
            "passStartedMs is not",
        ),
    ],
)
def test_anything_else_is_corrupt_naming_the_znode(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptZnodeError, match=problem) as got:
        parse_scrub(data, PATH)
    assert got.value.path == PATH
