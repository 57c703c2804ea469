"""A bookie's GET_LIST support is learnt once per process tree and bookie incarnation (issue 37): a check on
worker processes, many partitions each with clients of their own, sends a DbLedgerStorage bookie one
GET_LIST it cannot answer, not one per partition or per ledger; a later run of the same owner sends none;
after the bookie restarts (a new registration), one again. What the check finds is what one process finds
without any of this. Real ZooKeeper, two SortedLedgerStorage bookies and one DbLedgerStorage bookie (behind a
proxy that counts the GET_LISTs it is sent), ledgers written by the real Java client."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf.message import DecodeError

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.bookie import protocol as P
from auditor.bookie.results import Capability
from auditor.durability.findings import Category, Finding
from auditor.durability.ids import LedgerId
from auditor.processes import engine
from auditor.processes.engine import check_on_processes
from devcluster.checks_util import audit, rewrite_ensemble, settings_for
from devcluster.cluster import Cluster
from devcluster.cluster.servers import PROXY_HOST
from tests.realcluster.second_cluster import second_cluster

pytestmark = pytest.mark.realcluster

DB = 3  # the DbLedgerStorage bookie (not bookie 1: that one binds PROXY_HOST)


class ListCountingProxy:
    """The DB bookie's proxy (it is registered behind one, `Cluster.proxied`): forwards every byte both ways
    on its own loop in a daemon thread, and counts the GET_LIST requests on their way to the bookie. The
    bookie counts none it cannot answer (its processor registers no stat before the exception)."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.listen, self.target = listen, target
        self.lists = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="list-counter", daemon=True)
        self._server: asyncio.Server | None = None

    def __enter__(self) -> ListCountingProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(20)
        return self

    def __exit__(self, *exc: Any) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(20)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, *self.listen, reuse_address=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        await asyncio.gather(self._pipe(reader, up_writer, requests=True), self._pipe(up_reader, writer))

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, requests: bool = False) -> None:
        decoder = P.FrameDecoder()
        try:
            while chunk := await src.read(65536):
                if requests:
                    for body in decoder.feed(chunk):
                        req = pb.Request()
                        try:
                            req.ParseFromString(body)
                        except DecodeError:
                            continue  # a v2 frame (the Java client's, a batch reader's): v2 has no GET_LIST
                        self.lists += req.header.operation == int(P.Op.GET_LIST_OF_ENTRIES_OF_LEDGER)
                dst.write(chunk)
                await dst.drain()
        except OSError:
            pass
        finally:
            dst.transport.abort()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with second_cluster("bk-auditor-capability-", 3, storage={DB: "db"}, proxied=(DB,)) as c:
        yield c


@pytest.fixture(scope="module")
def proxy(cluster: Cluster) -> Iterator[ListCountingProxy]:
    b = cluster.bookie(DB)
    with ListCountingProxy((PROXY_HOST, b.port), (b.host, b.port)) as p:
        yield p


def _key(f: Finding) -> tuple[Any, ...]:
    return (f.category, f.ledger, f.bookie, f.affected_ranges, f.method)


def test_the_db_bookie_is_probed_once_per_process_tree_and_incarnation(
    cluster: Cluster, proxy: ListCountingProxy
) -> None:
    db = cluster.bookie(DB).bookie_id
    every = [b.bookie_id for b in cluster.bookies]
    rows = cluster.create_ledgers(9, ensemble=3, write_quorum=3, ack_quorum=2, entries=20, allowed=every)
    # A planted fault: a ledger written to the sorted bookies, its metadata then naming the DB bookie.
    moved = cluster.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2, entries=20)
    rewrite_ensemble(cluster, moved["ledgerId"], cluster.bookie(2).bookie_id, db)
    ids = [r["ledgerId"] for r in rows] + [moved["ledgerId"]]
    # The shipped adaptive limits (the rate and window that grow), not the helper's unlimited ones.
    settings = settings_for(cluster, bookie_client={"requests_per_second": 1000.0})

    def on_processes() -> tuple[set[tuple[Any, ...]], int, int]:
        found: list[Finding] = []
        before = proxy.lists
        runs = check_on_processes(settings, 2, ["scrutiny"], lambda f, _check: found.append(f), max_ledgers=2)
        return {_key(f) for f in found}, runs[0]["partitions"], proxy.lists - before

    first, partitions, lists = on_processes()
    assert partitions >= 4  # several partitions, on two processes, each with clients of its own
    # The one probe, and the moved ledger's GET_LIST per partition that asked it... none: once the DB bookie
    # is known not to list, nothing more is sent it but reads. Without the book: one probe per partition.
    assert lists == 1
    known = engine._book.known() if engine._book is not None else {}
    assert known[db][1] is Capability.UNSUPPORTED and known[cluster.bookie(1).bookie_id][1] is Capability.SUPPORTED

    again, _, lists = on_processes()
    assert lists == 0 and again == first  # the same owner: known from the start

    cluster.restart_bookie(DB)  # a new incarnation (it may have been reconfigured): learnt again, once
    cluster.wait_ready(DB)
    after_restart, _, lists = on_processes()
    assert lists == 1 and after_restart == first

    # What one process finds by itself, with no book: the same, the planted fault on the DB bookie included
    # (found by reading its entries: it cannot list them).
    alone, _ = audit(cluster, ids, ("scrutiny",), settings=settings)
    assert first == {_key(f) for f in alone}
    planted = [k for k in first if k[1] == LedgerId(0, moved["ledgerId"]) and k[0] is Category.ENTRY_BELOW_ACK_QUORUM]
    assert [(k[3], k[4]) for k in planted] == [("0-19", "entry-list+read")], first  # the DB bookie's part: read
