"""Property test: the parsers of bk-auditor's own state znodes (check state, bookie incarnations) keep
the parse contract on any bytes and any JSON: valid states round-trip, everything else is
CorruptZnodeError naming the znode, nothing else escapes, bounded work."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from auditor.daemon.bookie_watch import parse_incarnations
from auditor.durability.ids import LedgerId
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.own.checkstate import CheckState
from auditor.metadata.own.recipe import MAX_MILLIS
from auditor.metadata.own.repairlimits import COUNT_LIMIT, RepairLimits
from auditor.metadata.own.repairstate import TEXT_LIMIT, RepairBlock
from tests.property.contract import parse_contract

CHECK_PATH = "/ledgers/bk-auditor/checks/ledger"
BOOKIE_PATH = "/ledgers/bk-auditor/bookies"
REPAIR_PATH = "/ledgers/bk-auditor/repair/blocked/00000000000000000000000000000007"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
state_like = st.fixed_dictionaries(
    {},
    optional={
        "lastSuccessMs": json_values,
        "runStartedMs": json_values,
        "cursor": json_values | st.integers(0, 2**64 - 1).map(str),
    },
)
millis = st.none() | st.integers(0, MAX_MILLIS)
ledger_ids = st.builds(LedgerId, st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1))
states = st.builds(CheckState, millis, millis, st.none() | ledger_ids)


@given(states)
def test_check_state_round_trips(state: CheckState) -> None:
    assert CheckState.parse(state.to_json(), CHECK_PATH) == state


@given(
    st.binary(max_size=300)
    | state_like.map(lambda d: json.dumps(d).encode())
    | json_values.map(lambda v: json.dumps(v).encode())
)
def test_check_state_contract(data: bytes) -> None:
    out = parse_contract(lambda: CheckState.parse(data, CHECK_PATH), CorruptZnodeError, names=CHECK_PATH)
    if out.ok:
        assert isinstance(out.value, CheckState)


@given(st.integers(1, 200_000))
def test_deep_nesting_is_corrupt_not_a_crash(depth: int) -> None:
    data = b"[" * depth + b"]" * depth
    parse_contract(lambda: CheckState.parse(data, CHECK_PATH), CorruptZnodeError, names=CHECK_PATH)
    parse_contract(lambda: parse_incarnations(data, BOOKIE_PATH), CorruptZnodeError, names=BOOKIE_PATH)


@given(
    st.binary(max_size=300)
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.dictionaries(st.text(max_size=20), json_values, max_size=4).map(lambda d: json.dumps(d).encode())
)
def test_bookie_state_contract(data: bytes) -> None:
    parse_contract(lambda: parse_incarnations(data, BOOKIE_PATH), CorruptZnodeError, names=BOOKIE_PATH)


@given(st.dictionaries(st.text(max_size=20), st.tuples(st.integers(0, 2**63), st.integers(0, 2**63)), max_size=5))
def test_bookie_state_round_trips(table: dict[str, tuple[int, int]]) -> None:
    data = json.dumps({b: list(v) for b, v in table.items()}).encode()
    assert parse_incarnations(data, BOOKIE_PATH) == table


texts = st.text(max_size=TEXT_LIMIT)
blocks = st.builds(
    RepairBlock,
    texts,
    texts,
    st.integers(1, 2**31 - 1),
    st.integers(0, MAX_MILLIS),
    st.integers(0, MAX_MILLIS),
    texts,
)
block_like = st.fixed_dictionaries(
    {},
    optional={
        k: json_values | st.integers(-(2**64), 2**64)
        for k in ("reason", "detail", "failures", "blockedAtMs", "notBeforeMs", "holder")
    },
)


@given(blocks)
def test_repair_record_round_trips(block: RepairBlock) -> None:
    assert RepairBlock.parse(block.to_json(), REPAIR_PATH) == block


@given(
    st.binary(max_size=300)
    | block_like.map(lambda d: json.dumps(d).encode())
    | json_values.map(lambda v: json.dumps(v).encode())
)
def test_repair_record_contract(data: bytes) -> None:
    out = parse_contract(lambda: RepairBlock.parse(data, REPAIR_PATH), CorruptZnodeError, names=REPAIR_PATH)
    if out.ok:
        assert isinstance(out.value, RepairBlock) and out.value.failures >= 1


LIMITS_PATH = "/ledgers/bk-auditor/repair/limits"
positive_counts = st.none() | st.integers(1, COUNT_LIMIT)
limits = st.builds(
    RepairLimits,
    st.none() | st.floats(min_value=1e-3, max_value=1e12, allow_nan=False, allow_infinity=False),
    positive_counts,
    positive_counts,
    st.text(max_size=200),
    st.integers(0, MAX_MILLIS),
)
limits_like = st.fixed_dictionaries(
    {},
    optional={
        "bytesPerSecond": json_values | st.floats(allow_nan=False, allow_infinity=False),
        "entriesInFlight": json_values | st.integers(-5, COUNT_LIMIT + 5),
        "entriesInFlightPerBookie": json_values | st.integers(-5, COUNT_LIMIT + 5),
        "setBy": json_values,
        "setAtMs": json_values | st.integers(-1, MAX_MILLIS + 1),
    },
)


@given(limits)
def test_repair_limits_round_trip(x: RepairLimits) -> None:
    assert RepairLimits.parse(x.to_json(), LIMITS_PATH) == x


@given(
    st.binary(max_size=300)
    | limits_like.map(lambda d: json.dumps(d).encode())
    | json_values.map(lambda v: json.dumps(v).encode())
)
def test_repair_limits_contract(data: bytes) -> None:
    """Anything a znode may hold: limits a worker can apply (each positive, or unset) or CorruptZnodeError
    naming the znode; nothing else escapes."""
    out = parse_contract(lambda: RepairLimits.parse(data, LIMITS_PATH), CorruptZnodeError, names=LIMITS_PATH)
    if out.ok:
        got = out.value
        assert isinstance(got, RepairLimits)
        assert got.bytes_per_second is None or got.bytes_per_second > 0
        assert all(
            v is None or 1 <= v <= COUNT_LIMIT for v in (got.entries_in_flight, got.entries_in_flight_per_bookie)
        )
