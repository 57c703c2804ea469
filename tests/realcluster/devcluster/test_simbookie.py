"""The simulated bookie (devcluster/simbookie) passes the same protocol tests as the real 4.17.3 bookie: ledgers
written by the real Java client (one add at a time, so every stored byte is determined), the simulated
bookie given the same metadata from ZooKeeper, and the same requests sent to both get byte-identical
replies (raw frames) and equal answers through our BookieClient. Then the scrutiny check over planted
ledgers served only by simulated bookies: nothing but the informational risky_quorum, and a planted loss
of entries found."""

from __future__ import annotations

import asyncio
import json
import os
import struct
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.bookie import BookieClient, BookieClientConfig, Outcome, Status, v2
from auditor.bookie import protocol as P
from auditor.durability.entry import Verdict
from auditor.durability.model import DigestType
from devcluster import ports
from devcluster.cli_util import BIN, json_findings
from devcluster.cluster import Cluster
from devcluster.planted import Shape, plant, planted
from devcluster.simbookie import Faults, PlantedSource, SimBookies, SnapshotSource

pytestmark = pytest.mark.realcluster

CONFIG = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0, backoff_initial=0.05, backoff_max=1.0)
DIGESTS = {"CRC32": DigestType.CRC32, "CRC32C": DigestType.CRC32C, "MAC": DigestType.HMAC, "DUMMY": DigestType.DUMMY}
NEVER_WRITTEN_LEDGER = 7_777_777_777
# (digest, E, WQ, AQ, entries, entry size): every digest, E == WQ, E - WQ >= 2 (gaps of two ids between
# runs), and one entry in E3 (a member that never saw the ledger).
SHAPES = [
    ("CRC32C", 3, 2, 2, 23, 37),
    ("CRC32", 3, 2, 2, 23, 37),
    ("MAC", 3, 3, 2, 17, 20),
    ("DUMMY", 5, 2, 2, 23, 11),
    ("CRC32C", 3, 2, 2, 1, 64),
]


@pytest.fixture(scope="module")
def written(cluster: Cluster) -> list[dict[str, Any]]:
    return [
        cluster.create_ledger(
            ensemble=e,
            write_quorum=wq,
            ack_quorum=aq,
            digest=digest,
            password=f"pw-{digest.lower()}",
            entries=n,
            entry_size=size,
            one_at_a_time=True,
        )
        for digest, e, wq, aq, n, size in SHAPES
    ]


def real_address(cluster: Cluster, bookie_id: str) -> tuple[str, int]:
    b = next(b for b in cluster.bookies if b.bookie_id == bookie_id)
    return b.host, b.port


def sim_address(cluster: Cluster, bookie_id: str) -> tuple[str, int]:
    """Where the simulated twin of a session bookie listens: bookie N on 127.0.0.N:SIM_PORT_BASE + N."""
    b = next(b for b in cluster.bookies if b.bookie_id == bookie_id)
    return b.host, ports.SIM_PORT_BASE + b.index


@asynccontextmanager
async def twins(cluster: Cluster, ledgers: list[dict[str, Any]]) -> AsyncIterator[SimBookies]:
    """Simulated twins of the SortedLedgerStorage bookies, serving the metadata of `ledgers` as read from
    ZooKeeper."""
    source = await SnapshotSource.read(cluster.metadata_service_uri, [w["ledgerId"] for w in ledgers])
    assert sorted(source.ledgers) == sorted(w["ledgerId"] for w in ledgers)
    async with SimBookies(source, {b: sim_address(cluster, b) for b in cluster.sorted_bookie_ids}) as sim:
        yield sim


def requests_for(ledger: dict[str, Any]) -> list[pb.Request]:
    """Every read the auditor can send about one ledger, and about one that was never written."""
    lid = ledger["ledgerId"]
    txn = iter(range(1, 10_000))
    reqs = [P.entry_list_request(next(txn), lid), P.read_lac_request(next(txn), lid)]
    reqs += [P.read_entry_request(next(txn), lid, e) for e in range(-1, ledger["entries"] + 2)]
    reqs += [
        P.entry_list_request(next(txn), NEVER_WRITTEN_LEDGER),
        P.read_entry_request(next(txn), NEVER_WRITTEN_LEDGER, 0),
        P.read_entry_request(next(txn), NEVER_WRITTEN_LEDGER, -1),
        P.read_lac_request(next(txn), NEVER_WRITTEN_LEDGER),
        P.auth_probe_request(next(txn)),
        P.start_tls_request(next(txn)),
        P.bookie_info_request(next(txn), 0),
    ]
    return reqs


async def raw_replies(address: tuple[str, int], frames: list[bytes]) -> dict[int, bytes]:
    """txn id -> the reply's frame body. All frames are pipelined on one connection; a real bookie answers
    reads from a thread pool, so replies come in any order."""
    reader, writer = await asyncio.open_connection(*address)
    try:
        writer.write(b"".join(frames))
        decoder = P.FrameDecoder()
        out: dict[int, bytes] = {}
        while len(out) < len(frames):
            data = await asyncio.wait_for(reader.read(65536), 10)
            assert data, f"{address} closed the connection after {len(out)} of {len(frames)} replies"
            for body in decoder.feed(data):
                out[P.decode_response(body).txn_id] = body
        return out
    finally:
        writer.close()


async def test_replies_are_byte_identical_to_the_real_bookies(cluster: Cluster, written: list[dict[str, Any]]) -> None:
    compared = 0
    async with twins(cluster, written):
        for ledger in written:
            frames = [P.encode_request(r) for r in requests_for(ledger)]
            for bookie in cluster.sorted_bookie_ids:
                real = await raw_replies(real_address(cluster, bookie), frames)
                sim = await raw_replies(sim_address(cluster, bookie), frames)
                assert sim.keys() == real.keys()
                for txn in real:
                    assert sim[txn] == real[txn], (ledger["ledgerId"], bookie, txn, pb.Response.FromString(real[txn]))
                compared += len(real)
    statuses = {pb.Response.FromString(r).status for r in real.values()}
    assert compared > 400 and {pb.EOK, pb.ENOENTRY, pb.ENOLEDGER, pb.EBADREQ} <= statuses


def v2_requests_for(ledger: dict[str, Any]) -> list[bytes]:
    """v2 READENTRY of every entry (and past the end), BATCH_READ_ENTRY from every entry with several counts
    and sizes (the first entry always; two entries' worth; no size limit), and both about a ledger never
    written. Request ids are distinct, and each (ledger, entry) is read once: replies are told apart."""
    lid, n = ledger["ledgerId"], ledger["entries"]
    entry_bytes = 32 + {"CRC32": 8, "CRC32C": 8, "MAC": 20, "DUMMY": 0}[ledger["digest"]] + ledger["entrySize"]
    frames = [v2.read_entry_frame(lid, e).frame for e in range(n + 2)]
    frames.append(v2.read_entry_frame(NEVER_WRITTEN_LEDGER, 0).frame)
    rid = iter(range(1, 10_000))
    for first in range(n + 1):
        for count, size in ((1, 1 << 20), (3, 1 << 20), (100, 1), (100, 36 + 2 * (entry_bytes + 4)), (100, 1 << 20)):
            frames.append(v2.batch_read_frame(next(rid), lid, first, count, size).frame)
    frames.append(v2.batch_read_frame(next(rid), NEVER_WRITTEN_LEDGER, 0, 10, 1 << 20).frame)
    return frames


async def raw_v2_replies(address: tuple[str, int], frames: list[bytes]) -> dict[object, bytes]:
    """(ledger, entry) of a READENTRY reply, or a batch reply's request id -> the reply's frame body."""
    reader, writer = await asyncio.open_connection(*address)
    try:
        writer.write(b"".join(frames))
        decoder = P.FrameDecoder()
        out: dict[object, bytes] = {}
        while len(out) < len(frames):
            data = await asyncio.wait_for(reader.read(65536), 10)
            assert data, f"{address} closed the connection after {len(out)} of {len(frames)} replies"
            for body in decoder.feed(data):
                reply, key = v2.decode_reply(body)
                out[key if key is not None else reply.txn_id] = body
        return out
    finally:
        writer.close()


async def test_v2_replies_are_byte_identical_to_the_real_bookies(
    cluster: Cluster, written: list[dict[str, Any]]
) -> None:
    compared, codes, sizes = 0, set(), set()
    async with twins(cluster, written):
        for ledger in written:
            frames = v2_requests_for(ledger)
            for bookie in cluster.sorted_bookie_ids:
                real = await raw_v2_replies(real_address(cluster, bookie), frames)
                sim = await raw_v2_replies(sim_address(cluster, bookie), frames)
                assert sim.keys() == real.keys()
                for key, body in real.items():
                    assert sim[key] == body, (ledger["ledgerId"], bookie, key, v2.decode_reply(body))
                    reply = v2.decode_reply(body)[0]
                    codes.add(reply.status)
                    if isinstance(reply.sub, v2.V2BatchResponse):
                        sizes.add(len(reply.sub.entries))
                compared += len(real)
    assert compared > 1500 and {Status.EOK, Status.ENOENTRY, Status.ENOLEDGER} <= codes
    assert {0, 1, 2, 3} <= sizes and max(sizes) > 3  # error replies, cut by size, by count, by a missing entry


async def test_answers_through_the_bookie_client_are_equal(cluster: Cluster, written: list[dict[str, Any]]) -> None:
    async with twins(cluster, written):
        for ledger in written:
            lid, dt, password = ledger["ledgerId"], DIGESTS[ledger["digest"]], ledger["password"]
            members = {b for ens in ledger["ensembles"].values() for b in ens}
            for bookie in cluster.sorted_bookie_ids:
                real = BookieClient(bookie, real_address(cluster, bookie), CONFIG)
                sim = BookieClient(bookie, sim_address(cluster, bookie), CONFIG)
                async with real, sim:
                    lists = [await c.get_entry_list(lid) for c in (real, sim)]
                    assert [(r.outcome, r.status, r.entries) for r in lists[1:]] == [
                        (lists[0].outcome, lists[0].status, lists[0].entries)
                    ]
                    assert lists[0].present or bookie not in members or ledger["entries"] == 1
                    for e in range(-1, ledger["entries"] + 1):
                        a, b = await real.read_entry(lid, e), await sim.read_entry(lid, e)
                        assert (b.outcome, b.status, b.body, b.max_lac) == (a.outcome, a.status, a.body, a.max_lac)
                        if e >= 0 and a.present:
                            assert b.verify(dt, password).verdict is Verdict.OK
                    lacs = [await c.read_lac(lid) for c in (real, sim)]
                    assert (lacs[1].outcome, lacs[1].status, lacs[1].last_entry_body, lacs[1].lac_body) == (
                        lacs[0].outcome,
                        lacs[0].status,
                        lacs[0].last_entry_body,
                        lacs[0].lac_body,
                    )
                    absent = [await c.get_entry_list(NEVER_WRITTEN_LEDGER) for c in (real, sim)]
                    assert [r.outcome for r in absent] == [Outcome.ABSENT] * 2
                    assert [r.status for r in absent] == [Status.ENOLEDGER] * 2
                    absent_reads = [await c.read_entry(NEVER_WRITTEN_LEDGER, 3) for c in (real, sim)]
                    assert [(r.outcome, r.status) for r in absent_reads] == [(Outcome.ABSENT, Status.ENOLEDGER)] * 2
                    infos = [await c.get_bookie_info() for c in (real, sim)]
                    assert [(i.outcome, i.total_disk_capacity is not None) for i in infos] == [
                        (Outcome.PRESENT, True)
                    ] * 2


async def test_refuses_writes_and_fencing_reads_and_keeps_serving() -> None:
    bookies = [f"127.0.0.{i}:{ports.SIM_PORT_BASE + i}" for i in range(1, 7)]
    address = ("127.0.0.1", ports.SIM_PORT_BASE + 1)
    lid = 6  # planted on bookies 1, 2, 3 (devcluster/planted.py: the first is bookies[lid % 6])
    async with SimBookies(PlantedSource(10, bookies), {bookies[0]: address}) as sim:
        plain = P.encode_request(P.entry_list_request(9, lid))
        # Fields our schema cannot build, added as raw protobuf bytes: a fencing read (flag FENCE_LEDGER = 1,
        # field 100; a 20-byte masterKey, field 3), an add (addRequest, field 101) and a WRITE_LAC.
        fencing = P.read_entry_request(1, lid, 0)
        fencing.readRequest.MergeFromString(bytes([0xA0, 0x06, 1, 0x1A, 20]) + bytes(20))
        add = pb.Request()
        add.header.version, add.header.operation, add.header.txnId = pb.VERSION_THREE, pb.ADD_ENTRY, 2
        add.MergeFromString(bytes([0xAA, 0x06, 4, 0x08, lid, 0x10, 0]))
        write_lac = pb.Request()
        write_lac.header.version, write_lac.header.operation, write_lac.header.txnId = pb.VERSION_THREE, pb.WRITE_LAC, 3
        refused = [P.frame(r.SerializeToString()) for r in (fencing, add, write_lac)]
        before = await raw_replies(address, [plain])
        replies = await raw_replies(address, [*refused, plain])
        assert [P.decode_response(replies[t]).status for t in (1, 2, 3)] == [Status.EBADREQ] * 3
        assert P.decode_response(replies[9]).status is Status.EOK and replies[9] == before[9]
        assert sim.views[bookies[0]].refused == 3
        # v2: a fencing read and a fencing batch (flag 0x1 and a master key) get EBADREQ; an add closes the link.
        key = bytes(20)
        fence_read = P.frame(struct.pack(">iqq", v2.packet_header(2, 0x1), lid, 0) + key)
        fence_batch = P.frame(struct.pack(">iqqqiq", v2.packet_header(7, 0x1), lid, 0, 5, 10, 4096) + key)
        add_v2 = P.frame(struct.pack(">i", v2.packet_header(1)) + key + struct.pack(">qq", lid, 0) + bytes(8))
        got = await raw_v2_replies(address, [fence_read, fence_batch, v2.read_entry_frame(lid, 1).frame])
        assert v2.decode_reply(got[(lid, 0)])[0].status is Status.EBADREQ
        assert v2.decode_reply(got[(lid, 1)])[0].status in (Status.EOK, Status.ENOENTRY)  # a plain read: served
        assert v2.decode_reply(got[5])[0].status is Status.EBADREQ
        reader, writer = await asyncio.open_connection(*address)
        writer.write(add_v2)
        assert await asyncio.wait_for(reader.read(100), 5) == b""  # closed, nothing answered
        writer.close()
        assert sim.views[bookies[0]].refused == 5


async def test_silent_bookie_never_answers() -> None:
    bookies = [f"127.0.0.{i}:{ports.SIM_PORT_BASE + i}" for i in range(1, 7)]
    address = ("127.0.0.2", ports.SIM_PORT_BASE + 2)
    faults = Faults(silent=frozenset({bookies[1]}))
    async with SimBookies(PlantedSource(10, bookies), {bookies[1]: address}, faults) as sim:
        config = BookieClientConfig(request_timeout=0.5, connect_timeout=1.0)
        async with BookieClient(bookies[1], address, config) as client:
            got = await client.get_entry_list(1)
        assert got.outcome is Outcome.UNKNOWN
        assert sim.views[bookies[1]].requests >= 1


@pytest.fixture
def planted_root(cluster: Cluster) -> Iterator[str]:
    """A ledgers root of its own on the session ZooKeeper (hierarchical LAYOUT, `available`), removed after."""
    root = f"/simbookie-{uuid.uuid4().hex[:8]}"
    zk = cluster.kazoo
    zk.create(f"{root}/LAYOUT", b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1", makepath=True)
    zk.create(f"{root}/available/readonly", makepath=True)
    try:
        yield root
    finally:
        zk.delete(root, recursive=True)


async def run_check(uri: str) -> tuple[int, list[dict[str, Any]], str]:
    """`bk-auditor check --checks scrutiny --format json` in a process of its own (limits off), while this
    loop serves the simulated bookies."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    env |= {"BKAUDIT_BOOKIE_CLIENT__REQUESTS_PER_SECOND": "0", "BKAUDIT_ZOOKEEPER__READS_PER_SECOND": "0"}
    proc = await asyncio.create_subprocess_exec(
        str(BIN),
        "check",
        "--metadata-service-uri",
        uri,
        "--checks",
        "scrutiny",
        "--format",
        "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode is not None
    return proc.returncode, json_findings(out.decode()), err.decode()


async def test_scrutiny_over_simulated_bookies_finds_only_the_planted_loss(cluster: Cluster, planted_root: str) -> None:
    count = 300
    bookies = [f"127.0.0.{i}:{ports.SIM_PORT_BASE + i}" for i in range(1, 7)]
    plant(cluster.kazoo, planted_root, count, bookies)
    victim_ledger = 77
    victim = planted(victim_ledger, bookies, 0).segments[0].ensemble[1]
    faults = Faults(missing={(victim, victim_ledger): frozenset(range(10, 20))})
    uri = f"zk+hierarchical://{cluster.zk_hosts}{planted_root}"
    addresses = {b: (b.split(":")[0], int(b.split(":")[1])) for b in bookies}
    async with SimBookies(PlantedSource(count, bookies), addresses, faults) as sim:
        for b in bookies:
            cluster.kazoo.create(f"{planted_root}/available/{b}", b"", ephemeral=True)
        rc, findings, err = await run_check(uri)
        served = sum(sim.requests.values())
    assert rc == 1, err[-3000:]
    actionable = [f for f in findings if f["category"] != "risky_quorum"]
    assert {f["category"] for f in findings} - {"risky_quorum"} <= {"entry_below_ack_quorum"}
    assert len([f for f in findings if f["category"] == "risky_quorum"]) == count
    assert [f["ledgerId"] for f in actionable] == [victim_ledger], json.dumps(actionable)
    # The entries of 10-19 the schedule puts on the victim, its index 1 of E3/WQ2: e when (1 - e) % 3 < 2.
    lost = [e for e in range(10, 20) if (1 - e) % 3 < 2]
    assert lost == [10, 12, 13, 15, 16, 18, 19]
    assert actionable[0]["affectedEntryRanges"] == "10,12-13,15-16,18-19" and actionable[0]["confirmed"]
    assert [(m["bookie"], m["ranges"]) for m in actionable[0]["detail"]["missing"]] == [
        (victim, "10,12-13,15-16,18-19")
    ]
    assert served >= 3 * count  # every ledger asked of its three bookies


@pytest.mark.parametrize("shape", [Shape(5, 2, 2, (10, 50, 100, 200)), Shape(3, 3, 2, (1, 7))], ids=str)
async def test_scrutiny_over_simulated_bookies_of_a_planted_shape(
    cluster: Cluster, planted_root: str, shape: Shape
) -> None:
    """The planting and the simulated bookies agree on other shapes than the default (bench.check_scaling
    measures CPU per ledger on them): every ledger healthy, each asked of every bookie of its ensemble."""
    count = 120
    bookies = [f"127.0.0.{i}:{ports.SIM_PORT_BASE + i}" for i in range(1, 7)]
    plant(cluster.kazoo, planted_root, count, bookies, shape=shape)
    uri = f"zk+hierarchical://{cluster.zk_hosts}{planted_root}"
    addresses = {b: (b.split(":")[0], int(b.split(":")[1])) for b in bookies}
    async with SimBookies(PlantedSource(count, bookies, shape), addresses) as sim:
        for b in bookies:
            cluster.kazoo.create(f"{planted_root}/available/{b}", b"", ephemeral=True)
        rc, findings, err = await run_check(uri)
        served = sum(sim.requests.values())
    assert rc == 0, err[-3000:]
    risky = count if shape.write_quorum == shape.ack_quorum else 0
    assert [f["category"] for f in findings] == ["risky_quorum"] * risky, json.dumps(findings[:3])
    assert served == shape.ensemble * count
    assert {planted(lid, bookies, 0, shape).last_entry_id for lid in range(1, count + 1)} == {
        n - 1 for n in shape.entries
    }
