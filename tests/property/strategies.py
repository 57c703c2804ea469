"""Generators shared by the property tests: valid values (for round trips) and hostile text and bytes
that stay close to the valid shapes (where parsers go wrong), not only random noise."""

from __future__ import annotations

from types import MappingProxyType

from hypothesis import strategies as st

from auditor.durability.ids import MAX_ID, LedgerId
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment

# Java's BookieId alphabet: ASCII letters, digits, ':'..'_' (that range holds ;<=>?@[\]^), '.', '-'.
BOOKIE_ID_ALPHABET = "".join(chr(c) for c in range(ord(":"), ord("_") + 1)) + "abcdefghijklmnopqrstuvwxyz0123456789.-"

bookie_ids = st.text(BOOKIE_ID_ALPHABET, min_size=1, max_size=24).filter(lambda s: s.lower() != "readonly")
host_port_ids = st.builds(
    lambda h, p: f"{h}:{p}", st.from_regex(r"[a-z0-9][a-z0-9.-]{0,14}", fullmatch=True), st.integers(1, 65535)
)
ledger_ids = st.builds(LedgerId, st.just(0), st.integers(0, MAX_ID))
scoped_ledger_ids = st.builds(LedgerId, st.integers(0, MAX_ID), st.integers(0, MAX_ID))
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)

# Digit-like text a parser of decimal numbers must judge: Python's int() takes most of these, Java's
# parseInt only some (sign, ASCII digits, in range).
weird_numbers = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(
        [
            "",
            " ",
            "+",
            "-",
            "1_0",
            " 5",
            "5 ",
            "5\n",
            "0x10",
            "1e3",
            "1.0",
            "\u0667",
            "\u0661\u0660",
            "\uff15",
            "\u00b2",
            "-0",
            "+7",
            "--1",
            "9" * 25,
            "0" * 40 + "1",
            "\t3",
            "NaN",
            "-102",
        ]
    ),
    st.text("0123456789+-_ \u0660\u0661\u0967", max_size=25),
)


@st.composite
def ledger_metadata(draw: st.DrawFn, fmt: int = 3) -> LedgerMetadata:
    """Metadata a Java client could have written in format `fmt` (1, 2 or 3)."""
    e = draw(st.integers(1, 6))
    w = draw(st.integers(1, e))
    a = w if fmt == 1 else draw(st.integers(1, w))
    firsts = sorted({0} | draw(st.sets(st.integers(1, 10**12), max_size=3)))  # a writer starts at entry 0
    # Format 1 cannot hold an ensemble led by a bookie named CLOSED (that line is the close marker).
    members = bookie_ids.filter(lambda b: b != "CLOSED") if fmt == 1 else bookie_ids
    segs = tuple(Segment(x, tuple(draw(st.lists(members, min_size=e, max_size=e, unique=True)))) for x in firsts)
    state = draw(st.sampled_from(list(LedgerState)))
    closed = state is LedgerState.CLOSED
    v1 = fmt == 1
    return LedgerMetadata(
        ledger_id=draw(ledger_ids),
        ensemble_size=e,
        write_quorum=w,
        ack_quorum=a,
        state=state,
        last_entry_id=draw(st.integers(-1, 10**15)) if closed else -1,
        length=draw(st.integers(0, 2**62)) if closed else 0,
        segments=segs,
        digest_type=None if v1 else draw(st.sampled_from(list(DigestType))),
        password=None if v1 else draw(st.binary(max_size=20)),
        custom_metadata=MappingProxyType(
            {} if v1 else draw(st.dictionaries(st.text(max_size=8), st.binary(max_size=8), max_size=3))
        ),
        ctime=None if v1 else draw(st.none() | st.integers(0, 2**62)),
        creator_token=draw(st.integers(0, MAX_ID)) if fmt == 3 else None,
        format_version=fmt,
    )


@st.composite
def mutated(draw: st.DrawFn, blob: bytes) -> bytes:
    """`blob` with a few bytes flipped, inserted, deleted, or cut off."""
    out = bytearray(blob)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        i = draw(st.integers(0, max(len(out) - 1, 0)))
        if op == "flip" and out:
            out[i] = draw(st.integers(0, 255))
        elif op == "insert":
            out[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and out:
            del out[i]
        elif op == "truncate":
            del out[i:]
    return bytes(out)


def deep_json(depth: int = 3000) -> st.SearchStrategy[str]:
    """JSON nested deeper than any decoder's recursion limit."""
    return st.sampled_from(["[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth, "[" * depth])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
