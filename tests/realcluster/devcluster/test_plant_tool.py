"""The ledger tool's `plant` command against real BookKeeper 4.17.3 bookies: OPEN ledgers whose entries sit
exactly where a test says, as a writer that died mid-write leaves them, for differential tests of ledger
recovery. Checked by Java alone (its BookieClient's census of the write-set copies, its client's reads), by
the stored bytes of every bookie of the ensemble (off-write-set copies, piggybacked LAC and length), and by
Java's own open-with-recovery.

Expected placements are written out here by brute force from the round-robin rule, not by the tool.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from auditor.bookie import BookieClientConfig, BookiePool
from auditor.durability.model import DigestType
from devcluster.cluster import Cluster, HarnessError

pytestmark = pytest.mark.realcluster

CONFIG = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=0.5)
SIZE = 50  # payload bytes per entry
DIGESTS = {"CRC32": DigestType.CRC32, "CRC32C": DigestType.CRC32C, "MAC": DigestType.HMAC, "DUMMY": DigestType.DUMMY}


@pytest.fixture
def made(cluster: Cluster) -> Iterator[list[int]]:
    """Planted ledgers to delete after the test: later modules audit the cluster."""
    ledgers: list[int] = []
    yield ledgers
    if ledgers:
        cluster.ledger_tool("delete", "--ledger-id", ",".join(map(str, ledgers)))


def ids(cluster: Cluster, *ns: int) -> list[str]:
    return [cluster.bookie(n).bookie_id for n in ns]


def write_set(entry: int, e: int, wq: int) -> list[int]:
    return [(entry + i) % e for i in range(wq)]


def ensemble_at(row: dict[str, Any], entry: int) -> list[str]:
    starts = sorted((int(k), v) for k, v in row["ensembles"].items())
    return [v for first, v in starts if first <= entry][-1]


def named(row: dict[str, Any], placed: dict[int, list[int]]) -> dict[str, list[str]]:
    """`placed` (entry -> ensemble indexes) as the tool reports it: entry -> bookie ids, empty ones left out."""
    return {str(e): [ensemble_at(row, e)[i] for i in idx] for e, idx in sorted(placed.items()) if idx}


def expected_missing(row: dict[str, Any], placed: dict[int, list[int]], end: int) -> dict[str, list[int]]:
    """Per bookie, the entries 0..end of its write sets that were not planted there."""
    out: dict[str, list[int]] = {}
    for entry in range(end + 1):
        ens = ensemble_at(row, entry)
        for i in write_set(entry, row["ensembleSize"], row["writeQuorum"]):
            if i not in placed.get(entry, []):
                out.setdefault(ens[i], []).append(entry)
    return out


async def stored(cluster: Cluster, row: dict[str, Any], end: int) -> dict[int, dict[str, tuple[int, int]]]:
    """Entry -> {bookie: (piggybacked LAC, length)} of every copy on any bookie of any ensemble, read by our
    read-only bookie client; each copy's digest and payload are checked on the way."""
    lid, password = row["ledgerId"], row["password"]
    bookies = sorted({b for ens in row["ensembles"].values() for b in ens})
    addresses = {b.bookie_id: (b.host, b.port) for b in cluster.bookies}
    out: dict[int, dict[str, tuple[int, int]]] = {}
    async with BookiePool(lambda bookie_id: addresses[bookie_id], CONFIG) as pool:
        for bookie in bookies:
            for got in await pool.client(bookie).read_entries(lid, list(range(end + 1))):
                assert not got.unknown, got
                if got.present:
                    check = got.verify(DIGESTS[row["digest"]], password)
                    assert check.ok and check.header is not None, check
                    assert check.payload == cluster.payload(lid, got.entry_id, row["entrySize"])
                    copy = (check.header.last_add_confirmed, check.header.length)
                    out.setdefault(got.entry_id, {})[bookie] = copy
    return out


CENSUS_CASES = [
    # E3/WQ2: entry 10's copy on index 0 is outside its write set {1, 2}; entry 11's write set is {2, 0}.
    pytest.param(
        (3, 2, 2),
        (1, 2, 3),
        "CRC32C",
        "pw",
        "0-9=ws;10=0;11=1,2",
        {**{e: write_set(e, 3, 2) for e in range(10)}, 10: [0], 11: [1, 2]},
        {},
        id="E3-WQ2",
    ),
    # E3/WQ3 on both storages, HMAC with a password of its own; 12 nowhere, 13 with an overridden LAC.
    pytest.param(
        (3, 3, 2),
        (4, 6, 5),
        "MAC",
        "s3cret",
        "0-9=ws;10=0;11=1,2;12=none;13=2@5",
        {**{e: write_set(e, 3, 3) for e in range(10)}, 10: [0], 11: [1, 2], 13: [2]},
        {13: 5},
        id="E3-WQ3-MAC",
    ),
]


@pytest.mark.parametrize(("quorums", "bookies", "digest", "password", "layout", "placed", "lacs"), CENSUS_CASES)
async def test_planted_copies_are_exactly_the_layout(
    cluster: Cluster,
    made: list[int],
    quorums: tuple[int, int, int],
    bookies: tuple[int, ...],
    digest: str,
    password: str,
    layout: str,
    placed: dict[int, list[int]],
    lacs: dict[int, int],
) -> None:
    e, wq, aq = quorums
    (row,) = cluster.plant_ledgers(
        ensemble=e,
        write_quorum=wq,
        ack_quorum=aq,
        bookies=ids(cluster, *bookies),
        layout=layout,
        entry_size=SIZE,
        digest=digest,
        password=password,
    )
    made.append(row["ledgerId"])
    end = max(placed)
    assert (row["state"], row["lastEntryId"], row["lac"], row["layout"]) == ("OPEN", -1, -1, layout), row
    assert row["ensembles"] == {"0": ids(cluster, *bookies)}
    assert row["planted"] == named(row, placed)
    # Java's census of the write-set copies: exactly the planted ones there, each digest-valid.
    (census,) = cluster.copies([f"{row['ledgerId']}:{end}"], password)
    assert census["state"] == "OPEN"
    assert (census["missing"], census["corrupt"], census["unreadable"]) == (
        expected_missing(row, placed, end),
        {},
        {},
    ), census
    # Every bookie of the ensemble, in or out of the write set: the planted copies and no others, each with
    # the LAC of a steady writer (or the override) and the writer's cumulative length.
    copies = await stored(cluster, row, end + 2)
    want = {
        entry: {b: (lacs.get(entry, entry - 1), (entry + 1) * SIZE) for b in on}
        for entry, on in ((int(k), v) for k, v in named(row, placed).items())
    }
    assert copies == want


def test_count_plants_identical_layouts_with_an_ensemble_change(cluster: Cluster, made: list[int]) -> None:
    first, second = ids(cluster, 1, 2, 3), ids(cluster, 1, 4, 3)
    layout = "0-5=ws;6=ws;7=1;8=none"
    rows = cluster.plant_ledgers(
        ensemble=3,
        write_quorum=2,
        ack_quorum=2,
        bookies=first,
        layout=layout,
        entry_size=SIZE,
        count=2,
        ensembles={6: second},
    )
    made += [r["ledgerId"] for r in rows]
    placed = {**{e: write_set(e, 3, 2) for e in range(7)}, 7: [1]}
    assert len({r["ledgerId"] for r in rows}) == 2
    for row in rows:
        assert (row["state"], row["layout"], row["ensembles"]) == ("OPEN", layout, {"0": first, "6": second}), row
        assert row["planted"] == named(row, placed)
    assert rows[0]["planted"] == rows[1]["planted"]
    censuses = cluster.copies([f"{r['ledgerId']}:8" for r in rows])
    for row, census in zip(rows, censuses, strict=True):
        assert census["missing"] == expected_missing(row, placed, 8) and census["corrupt"] == {}, census
    assert censuses[0]["missing"] == censuses[1]["missing"]
    # Java recovers both alike: LAC read from [1, 4, 3], then entries 6 and 7 (on bookie 4), 8 absent.
    recovered = [cluster.recover_ledger(r["ledgerId"]) for r in rows]
    assert [(r["state"], r["lastEntryId"], r["length"]) for r in recovered] == [("CLOSED", 7, 8 * SIZE)] * 2
    for row in rows:
        read = cluster.read_ledger(row["ledgerId"], SIZE)
        assert (read["read"], read["badContent"]) == (8, []), read


@pytest.mark.parametrize(
    ("layout", "complaint"),
    [
        ("0-9=ws;10=3", "ensemble index 3 outside the ensemble 0..2"),
        ("0-9=ws;9=0", "entry 9 placed twice"),
        ("0-4=ws;5=0@5", "LAC 5 of entry 5 not in -1..4"),
        ("0-4=everywhere", "'everywhere' is not a number"),
    ],
)
def test_bad_layouts_are_refused_in_one_line(cluster: Cluster, layout: str, complaint: str) -> None:
    with pytest.raises(HarnessError, match=complaint):
        cluster.plant_ledgers(ensemble=3, write_quorum=2, ack_quorum=2, bookies=ids(cluster, 1, 2, 3), layout=layout)


def test_a_failed_add_is_an_error_naming_bookie_entry_and_rc(cluster: Cluster, made: list[int]) -> None:
    # An ensemble member that is not registered: the ledger is created (metadata only), entry 0 lands on
    # bookie 2, and the add of entry 1 to the unknown bookie fails before any connection is made.
    nobody = "127.0.0.1:1"
    b = [*ids(cluster, 2, 3), nobody]
    with pytest.raises(
        HarnessError, match=rf"add of entry 1 of ledger \d+ to bookie {nobody} failed: rc=-8 "
    ) as failed:
        cluster.plant_ledgers(ensemble=3, write_quorum=2, ack_quorum=2, bookies=b, layout="0=0;1=1,2")
    lid = re.search(r"of ledger (\d+)", str(failed.value))
    assert lid is not None
    made.append(int(lid.group(1)))


RECOVERY_CASES = [
    # A clean end: nothing after entry 9 anywhere. (The cases where Java's particular rules decide are
    # below; ours against Java's, case by case, is tests/realcluster/repair/test_open_ledger_recovery.py.)
    pytest.param((3, 3, 2), "0-9=ws", 9, id="WQ3-clean-end"),
    pytest.param((3, 2, 2), "0-9=ws", 9, id="WQ2-clean-end"),
]


@pytest.mark.parametrize(("quorums", "layout", "last"), RECOVERY_CASES)
def test_java_recovers_planted_ledgers(
    cluster: Cluster, made: list[int], quorums: tuple[int, int, int], layout: str, last: int
) -> None:
    e, wq, aq = quorums
    (row,) = cluster.plant_ledgers(
        ensemble=e, write_quorum=wq, ack_quorum=aq, bookies=ids(cluster, 2, 3, 4), layout=layout, entry_size=SIZE
    )
    made.append(row["ledgerId"])
    recovered = cluster.recover_ledger(row["ledgerId"])
    assert (recovered["state"], recovered["lastEntryId"], recovered["length"]) == (
        "CLOSED",
        last,
        (last + 1) * SIZE,
    ), recovered
    read = cluster.read_ledger(row["ledgerId"], SIZE)
    assert (read["read"], read["badContent"]) == (last + 1, []), read


# What 4.17.3 does where its code is more particular than the rules above (LedgerRecoveryOp, PendingReadOp's
# SequenceReadRequest, ReadLastConfirmedOp), each outcome the same on every run:
# * recovery reads ask the write set's bookies one after another in write-set order (entry 10 of E3/WQ3: 1,
#   2, then 0; neither the client by default nor the tool's placement policy reorders) and give up at
#   WQ-AQ+1 = 2 NoSuchEntry, so a lone copy on the write set's last bookie is never asked for, while one
#   on its first or second bookie is recovered;
# * the recovered length is the length field of the entry that carried the highest LAC, so a copy past the
#   end that piggybacked that LAC counts in the closed length although it is not in the ledger.
JAVA_CASES = [
    pytest.param((3, 3, 2), "0-9=ws;10=1", 10, 11 * SIZE, id="WQ3-10-on-first-asked"),
    pytest.param((3, 3, 2), "0-9=ws;10=2", 10, 11 * SIZE, id="WQ3-10-on-second-asked"),
    # A pipelining writer: 10 and 11 in flight together, both with LAC 9; 10 never stored.
    pytest.param((3, 2, 2), "0-9=ws;11=ws@9", 9, 12 * SIZE, id="WQ2-hole-at-10-pipelined"),
]


@pytest.mark.parametrize(("quorums", "layout", "last", "length"), JAVA_CASES)
def test_java_recovery_particulars(
    cluster: Cluster, made: list[int], quorums: tuple[int, int, int], layout: str, last: int, length: int
) -> None:
    e, wq, aq = quorums
    (row,) = cluster.plant_ledgers(
        ensemble=e, write_quorum=wq, ack_quorum=aq, bookies=ids(cluster, 2, 3, 4), layout=layout, entry_size=SIZE
    )
    made.append(row["ledgerId"])
    recovered = cluster.recover_ledger(row["ledgerId"])
    assert (recovered["state"], recovered["lastEntryId"], recovered["length"]) == ("CLOSED", last, length), recovered
    read = cluster.read_ledger(row["ledgerId"], SIZE)
    assert (read["read"], read["badContent"]) == (last + 1, []), read
