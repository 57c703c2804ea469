"""Our own check state (`<root>/bk-auditor/checks/<check>`) is parsed strictly: anything but the shape we
write is CorruptZnodeError naming the znode (the daemon then reports it once and replaces it), never a
TypeError or RecursionError later in the check loop; and the bookie watch's state likewise."""

from __future__ import annotations

import pytest

from auditor.daemon.bookie_watch import parse_incarnations
from auditor.durability.ids import LedgerId
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.own.checkstate import CheckState

PATH = "/ledgers/bk-auditor/checks/scrutiny"
DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    "state",
    [
        CheckState(),
        CheckState(1_700_000_000_000, None, None),
        CheckState(1_700_000_000_000, 1_700_000_100_000, LedgerId(0, 42)),
        CheckState(None, 5, LedgerId(3, 2**63 - 1)),
    ],
)
def test_what_we_write_reads_back(state: CheckState) -> None:
    assert CheckState.parse(state.to_json(), PATH) == state


@pytest.mark.parametrize(
    "data, problem",
    [
        (b'{"cursor": 5}', "cursor is not a ledger id"),
        (b'{"cursor": "not-a-ledger"}', "cursor is not a ledger id"),
        (b'{"cursor": "' + b"9" * 5000 + b'"}', "cursor is not a ledger id"),
        (b"[]", "not a JSON object"),
        (b'"text"', "not a JSON object"),
        (b'{"lastSuccessMs": "x"}', "lastSuccessMs is not a time"),
        (b'{"lastSuccessMs": true}', "lastSuccessMs is not a time"),
        (b'{"lastSuccessMs": 1.5}', "lastSuccessMs is not a time"),
        (b'{"runStartedMs": -1}', "runStartedMs is not a time"),
        (b'{"runStartedMs": 1' + b"0" * 400 + b"}", "runStartedMs is not a time"),
        (b'{"lastSuccessMs": NaN}', "lastSuccessMs is not a time"),
        (b"\xff\xfe\x00", "not UTF-8"),
        (b"{not json", "not valid JSON"),
        (DEEP, "nested too deeply"),
    ],
)
def test_anything_else_is_corrupt_and_names_the_znode(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptZnodeError) as exc:
        CheckState.parse(data, PATH)
    assert exc.value.path == PATH and PATH in str(exc.value) and problem in str(exc.value)


def test_bookie_state() -> None:
    path = "/ledgers/bk-auditor/bookies"
    assert parse_incarnations(b'{"127.0.0.1:3181": [12, 34]}', path) == {"127.0.0.1:3181": (12, 34)}
    for bad in (b"[]", b'{"b": "x"}', b'{"b": [1]}', b'{"b": [1, true]}', b'{"b": [1, -2]}', DEEP, b"\xff"):
        with pytest.raises(CorruptZnodeError) as exc:
            parse_incarnations(bad, path)
        assert exc.value.path == path
