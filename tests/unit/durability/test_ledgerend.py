"""Where an open ledger ends: the pure decision from metadata and judged READ_LAC bodies.

The honest answers are simulated from the round-robin rule (bookie i holds entry e iff (i - e) mod E < WQ)
and built with `build_entry`, the writer's byte layout; the expected ends are computed here from that
simulation, not by the code under test.
"""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest

from auditor.durability.entry import build_entry, compute_digest, mac_key
from auditor.durability.findings import Category
from auditor.durability.ids import LedgerId
from auditor.durability.ledgerend import (
    LacEvidence,
    LacSource,
    Trust,
    decide_end,
    judge_lac_body,
    judge_last_entry_body,
    judge_read_lac,
    lac_findings,
    metadata_floor,
)
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment
from auditor.durability.verdicts import confirm

PASSWORD = b"pw"
BOOKIES = ("b0:1", "b1:1", "b2:1")
CHECKING = (DigestType.CRC32, DigestType.CRC32C, DigestType.HMAC)


def ledger(
    digest: DigestType | None = DigestType.CRC32C,
    e: int = 3,
    wq: int = 2,
    aq: int = 2,
    state: LedgerState = LedgerState.OPEN,
    last: int = -1,
    segments: tuple[tuple[int, tuple[str, ...]], ...] = ((0, BOOKIES),),
    lid: int = 7,
    password: bytes | None = PASSWORD,
) -> LedgerMetadata:
    return LedgerMetadata(
        LedgerId(0, lid),
        e,
        wq,
        aq,
        state,
        last,
        0,
        tuple(Segment(f, ens) for f, ens in segments),
        digest_type=digest,
        password=password,
    )


def entry_body(md: LedgerMetadata, entry: int, lac: int, ledger_id: int | None = None) -> bytes:
    return build_entry(
        md.ledger_id.ledger if ledger_id is None else ledger_id,
        entry,
        lac,
        (entry + 1) % 2**40,
        b"payload!",
        md.digest_type or DigestType.CRC32C,
        md.password or b"",
    )


def lac_body(md: LedgerMetadata, lac: int, ledger_id: int | None = None) -> bytes:
    head = struct.pack(">qq", md.ledger_id.ledger if ledger_id is None else ledger_id, lac)
    dt = md.digest_type or DigestType.CRC32C
    key = mac_key(md.password or b"") if dt is DigestType.HMAC else None
    return head + compute_digest(dt, head, b"", key)


def honest(md: LedgerMetadata, written: int) -> dict[str, tuple[int, int]]:
    """Per bookie of the (single) ensemble: (its highest entry, the LAC that entry carries), for a writer
    that wrote entries 0..written-1 and piggybacks LAC = entry - 1."""
    ens = md.segments[-1].ensemble
    out = {}
    for i, b in enumerate(ens):
        held = [x for x in range(written) if (i - x) % md.ensemble_size < md.write_quorum]
        if held:
            out[b] = (held[-1], held[-1] - 1)
    return out


def evidence_of(md: LedgerMetadata, state: dict[str, tuple[int, int]]) -> list[LacEvidence]:
    out: list[LacEvidence] = []
    for b, (entry, lac) in state.items():
        out.extend(judge_read_lac(b, None, entry_body(md, entry, lac), md))
    return out


def honest_end(state: dict[str, tuple[int, int]]) -> int:
    return max((lac for _, lac in state.values()), default=-1)


# ----- metadata floor -----------------------------------------------------------------------------------
def test_closed_ledger_ends_at_its_last_entry_whatever_the_bookies_say() -> None:
    md = ledger(state=LedgerState.CLOSED, last=41)
    ev = evidence_of(md, {"b0:1": (99, 98), "b1:1": (99, 98)})
    assert decide_end(md, ev, True).end == 41
    assert decide_end(md, [], False).end == 41
    assert metadata_floor(md) == 41


def test_floor_is_the_entry_before_the_last_ensemble_change() -> None:
    md = ledger(segments=((0, BOOKIES), (10, ("b0:1", "b1:1", "b3:1")), (25, ("b0:1", "b4:1", "b3:1"))))
    assert metadata_floor(md) == 24
    # Answers that say less (a lagging LAC) never pull the end below what the metadata proves.
    got = decide_end(md, evidence_of(md, {"b0:1": (20, 19), "b4:1": (20, 19)}), True)
    assert got.end == 24 and got.floor == 24 and got.basis == "metadata"
    assert metadata_floor(replace(md, last_entry_id=30)) == 30
    assert metadata_floor(ledger()) == -1


def test_no_answer_is_unknown_and_answers_without_bodies_give_the_floor() -> None:
    md = ledger()
    assert decide_end(md, [], False).end is None
    assert decide_end(md, [], True).end == -1
    assert judge_read_lac("b0:1", b"", b"", md) == ()  # empty bodies are absent, as in Java
    assert judge_read_lac("b0:1", None, None, md) == ()


# ----- honest answers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("digest", list(DigestType))
@pytest.mark.parametrize("e,wq", [(3, 2), (3, 3), (2, 2), (5, 3)])
def test_honest_answers_give_the_highest_lac(digest: DigestType, e: int, wq: int) -> None:
    ens = tuple(f"b{i}:1" for i in range(e))
    md = ledger(digest, e=e, wq=wq, aq=min(2, wq), segments=((0, ens),))
    for written in (1, 2, 7, 20):
        state = honest(md, written)
        got = decide_end(md, evidence_of(md, state), True)
        assert got.end == honest_end(state), (digest, e, wq, written, got)
        assert got.rejected == ()
        trust = {x.trust for x in evidence_of(md, state)}
        assert trust == ({Trust.VERIFIED} if digest in CHECKING else {Trust.UNVERIFIED})


@pytest.mark.parametrize("digest", CHECKING)
def test_verified_lac_body_counts_up_to_the_highest_verified_stored_entry(digest: DigestType) -> None:
    md = ledger(digest)
    ev = list(evidence_of(md, {"b0:1": (19, 18), "b1:1": (19, 18)}))
    ev += judge_read_lac("b2:1", lac_body(md, 19), None, md)
    assert decide_end(md, ev, True).end == 19  # the explicit LAC says 19 and entry 19 is held
    far = ev[:-1] + list(judge_read_lac("b2:1", lac_body(md, 500), None, md))
    got = decide_end(md, far, True)
    assert got.end == 19 and got.capped and got.capped[0][1] == 19  # nothing held past 19 backs 500
    alone = decide_end(md, list(judge_read_lac("b2:1", lac_body(md, 500), None, md)), True)
    assert alone.end == -1  # an explicit LAC with no stored entry behind it invents nothing


def test_wq_one_unverified_end_is_conservative() -> None:
    ens = ("b0:1", "b1:1")
    md = ledger(DigestType.DUMMY, e=2, wq=1, aq=1, segments=((0, ens),))
    state = honest(md, 20)
    assert decide_end(md, evidence_of(md, state), True).end == 17  # one short of 18: only one bookie says 18
    md_verified = replace(md, digest_type=DigestType.CRC32)
    assert decide_end(md_verified, evidence_of(md_verified, state), True).end == 18


def test_single_bookie_ensemble_unverified_stays_at_the_floor() -> None:
    md = ledger(DigestType.DUMMY, e=1, wq=1, aq=1, segments=((0, ("b0:1",)),))
    assert decide_end(md, evidence_of(md, {"b0:1": (9, 8)}), True).end == -1
    md = replace(md, digest_type=DigestType.CRC32C)
    assert decide_end(md, evidence_of(md, {"b0:1": (9, 8)}), True).end == 8


# ----- hostile answers -------------------------------------------------------------------------------------
def _flip(body: bytes, bit: int) -> bytes:
    b = bytearray(body)
    b[bit // 8] ^= 0x80 >> (bit % 8)
    return bytes(b)


@pytest.mark.parametrize("digest", list(DigestType))
def test_every_single_bit_flip_in_one_last_entry_body_never_raises_the_end(digest: DigestType) -> None:
    md = ledger(digest)
    state = honest(md, 20)
    want = honest_end(state)
    victim = "b0:1"
    good = entry_body(md, *state[victim])
    others = [x for x in evidence_of(md, state) if x.bookie != victim]
    caught = 0
    for bit in range(len(good) * 8):
        bad = judge_read_lac(victim, None, _flip(good, bit), md)
        got = decide_end(md, others + list(bad), True)
        assert got.end is not None and got.end <= want, (digest, bit, got)
        caught += bool(got.rejected)
        if digest in CHECKING:
            assert got.rejected and got.rejected[0].bookie == victim, (digest, bit)
            assert got.end == want
    if digest is DigestType.DUMMY:
        assert caught >= 64  # the ledger id field (and LACs pushed to or past the entry id) still catch
    # the regression of issue 10: bit 62 of the LAC field made the end about 4.6e18
    flipped = _flip(good, 16 * 8 + 1)
    assert struct.unpack_from(">q", flipped, 16)[0] > 4 * 10**18
    assert decide_end(md, others + list(judge_read_lac(victim, None, flipped, md)), True).end == want


@pytest.mark.parametrize("digest", list(DigestType))
def test_every_single_bit_flip_in_one_lac_body_never_raises_the_end(digest: DigestType) -> None:
    md = ledger(digest)
    state = honest(md, 20)
    want = honest_end(state)
    base = evidence_of(md, state)
    good = lac_body(md, want)
    for bit in range(len(good) * 8):
        got = decide_end(md, base + list(judge_read_lac("b1:1", _flip(good, bit), None, md)), True)
        assert got.end is not None and got.end <= want, (digest, bit, got)
        if digest in CHECKING:
            assert got.rejected and got.rejected[0].source is LacSource.LAC_BODY, (digest, bit)


@pytest.mark.parametrize("digest", list(DigestType))
def test_an_entry_of_another_ledger_is_rejected(digest: DigestType) -> None:
    md = ledger(digest)
    state = honest(md, 20)
    other = entry_body(md, 5_000_001, 5_000_000, ledger_id=8)  # valid bytes, wrong ledger
    ev = [x for x in evidence_of(md, state) if x.bookie != "b2:1"] + list(judge_read_lac("b2:1", None, other, md))
    got = decide_end(md, ev, True)
    # Without b2, b1 alone says 18: enough when its digest is checked, not when it is DUMMY.
    assert got.end == (honest_end(state) if digest in CHECKING else honest_end(state) - 1)
    assert [(r.bookie, r.entry_id) for r in got.rejected] == [("b2:1", None)]
    assert "ledger" in got.rejected[0].detail


def test_structurally_impossible_bodies_are_corrupt_even_without_a_digest() -> None:
    md = ledger(DigestType.DUMMY)
    assert judge_last_entry_body("b", entry_body(md, 5, 5), md).trust is Trust.CORRUPT  # LAC == entry id
    assert judge_last_entry_body("b", entry_body(md, 5, 9), md).trust is Trust.CORRUPT
    assert judge_last_entry_body("b", entry_body(md, 5, -2), md).trust is Trust.CORRUPT
    assert judge_last_entry_body("b", entry_body(md, -3, -4), md).trust is Trust.CORRUPT
    assert judge_last_entry_body("b", b"short", md).trust is Trust.CORRUPT
    assert judge_lac_body("b", lac_body(md, -5), md).trust is Trust.CORRUPT
    assert judge_lac_body("b", b"\x00" * 8, md).trust is Trust.CORRUPT
    assert judge_last_entry_body("b", entry_body(md, 5, 4), md).trust is Trust.UNVERIFIED
    assert judge_last_entry_body("b", entry_body(md, 0, -1), md).trust is Trust.UNVERIFIED


def test_unverifiable_digests_are_unverified_not_corrupt() -> None:
    md = ledger(DigestType.HMAC)
    body = entry_body(md, 5, 4)
    assert judge_last_entry_body("b", body, md).trust is Trust.VERIFIED
    assert judge_last_entry_body("b", body, replace(md, password=None)).trust is Trust.UNVERIFIED
    assert judge_last_entry_body("b", body, replace(md, digest_type=None)).trust is Trust.UNVERIFIED
    assert judge_lac_body("b", lac_body(md, 4), replace(md, password=None)).trust is Trust.UNVERIFIED


def test_one_unverified_bookie_cannot_raise_the_end_with_any_values() -> None:
    md = ledger(DigestType.DUMMY)
    state = honest(md, 20)
    want = honest_end(state)
    for entry, lac in [(10**12, 10**12 - 1), (2**63 - 1, 2**63 - 2), (25, 24), (want + 2, want + 1)]:
        ev = [x for x in evidence_of(md, state) if x.bookie != "b0:1"]
        ev += judge_read_lac("b0:1", lac_body(md, lac), entry_body(md, entry, lac), md)
        got = decide_end(md, ev, True)
        assert got.end == want, (entry, lac, got)
        assert got.capped


def test_two_bookies_agreeing_corroborate_an_unverified_lac() -> None:
    md = ledger(DigestType.DUMMY)
    got = decide_end(md, evidence_of(md, {"b0:1": (30, 29), "b1:1": (30, 29), "b2:1": (10, 9)}), True)
    assert got.end == 29


def test_a_corrupt_body_discredits_the_bookies_whole_answer() -> None:
    md = ledger(DigestType.CRC32C)
    good_lac = lac_body(md, 18)
    bad_entry = _flip(entry_body(md, 19, 18), 300)
    ev = [x for x in evidence_of(md, {"b1:1": (19, 18), "b2:1": (17, 16)})]
    ev += judge_read_lac("b0:1", good_lac, bad_entry, md)
    got = decide_end(md, ev, True)
    assert got.end == 18
    assert [r.bookie for r in got.rejected] == ["b0:1"]
    alone = [x for x in evidence_of(md, {"b2:1": (17, 16)})] + list(judge_read_lac("b0:1", good_lac, bad_entry, md))
    assert decide_end(md, alone, True).end == 16  # b0's intact LAC body is not used either


def test_lac_findings_are_digest_mismatches_stable_across_passes() -> None:
    md = ledger(DigestType.CRC32)
    bad = _flip(entry_body(md, 19, 18), 200)
    ev = evidence_of(md, {"b1:1": (19, 18)}) + list(judge_read_lac("b0:1", _flip(lac_body(md, 18), 3), bad, md))
    first = lac_findings(md, decide_end(md, ev, True))
    second = lac_findings(md, decide_end(md, ev, True))
    assert [f.category for f in first] == [Category.DIGEST_MISMATCH]
    assert first[0].bookie == "b0:1"
    assert [f.dedup_key() for f in first] == [f.dedup_key() for f in second]
    other = lac_findings(
        md, decide_end(md, list(judge_read_lac("b0:1", None, entry_body(md, 3, 2, ledger_id=99), md)), True)
    )
    assert other[0].entry_id is None  # an entry id from another ledger's header names nothing here
    assert lac_findings(md, decide_end(md, evidence_of(md, {"b1:1": (19, 18)}), True)) == []


def test_a_read_lac_body_damaged_on_the_way_is_not_confirmed() -> None:
    # Found by the chaos campaign: a corrupting link flipped a different bit of the same lastEntryBody on
    # the first read and on the re-read; both failed verification, and the finding was "confirmed".
    md = ledger(DigestType.CRC32C)
    body = entry_body(md, 19, 18)

    def findings(flipped: bytes) -> list:
        return lac_findings(md, decide_end(md, list(judge_read_lac("b0:1", None, flipped, md)), True))

    first, other_flip, same_flip = findings(_flip(body, 200)), findings(_flip(body, 240)), findings(_flip(body, 200))
    assert [f.dedup_key() for f in first] == [f.dedup_key() for f in other_flip]  # one finding, seen twice
    assert confirm(first, other_flip) == []
    assert [f.confirmed for f in confirm(first, same_flip)] == [True]  # the bookie really holds those bytes
