"""LedgerId.parse on text from operators and clients: every error quotes the input, short."""

from __future__ import annotations

import pytest

from auditor.durability.ids import LedgerId, LedgerIdError


@pytest.mark.parametrize(
    "text",
    [
        "00000000000000008000000000000000",
        "9223372036854775808",
        "1:9223372036854775808",
        "9" * 5000,
        "1:" + "9" * 5000,
        "\u0661",
        "1_0",
        "7\n\n7",
    ],
)
def test_errors_quote_the_input(text: str) -> None:
    with pytest.raises(LedgerIdError) as err:
        LedgerId.parse(text)
    assert repr(text[:24])[:-1] in str(err.value) and len(str(err.value)) < 200, str(err.value)


def test_accepted_forms() -> None:
    assert LedgerId.parse(" 7\n") == LedgerId(0, 7)
    assert LedgerId.parse("5:7") == LedgerId.parse("5/7") == LedgerId(5, 7)
    assert LedgerId.parse("0x" + LedgerId(5, 7).qualified_name.upper()) == LedgerId(5, 7)


@pytest.mark.parametrize(
    ("scope", "ledger"),
    [(0, -1), (-1, 0), (0, 2**63), (2**63, 0), (0, True), (False, 0), (0, 1.0), (0, "7"), (0, None)],
)
def test_construction_refuses_what_is_not_an_id(scope: object, ledger: object) -> None:
    """The fast path for plain ints in range must leave every other value to the full validation."""
    with pytest.raises(LedgerIdError):
        LedgerId(scope, ledger)  # type: ignore[arg-type]


def test_construction_takes_the_edges() -> None:
    assert (LedgerId(0, 0).ledger, LedgerId(2**63 - 1, 2**63 - 1).scope) == (0, 2**63 - 1)


def test_next_id_walks_into_the_next_scope_and_ends_after_the_last() -> None:
    from auditor.durability.ids import MAX_ID, next_id

    assert next_id(LedgerId(0, 41)) == LedgerId(0, 42)
    assert next_id(LedgerId(0, MAX_ID)) == LedgerId(1, 0)
    assert next_id(LedgerId(7, MAX_ID)) == LedgerId(8, 0)
    assert next_id(LedgerId(MAX_ID, MAX_ID)) is None
