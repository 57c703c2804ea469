"""GET_LIST support learnt with one request: while a client does not know whether its bookie answers GET_LIST,
one request at a time finds out (the probe) and the others wait for it; with a capability book the
clients of a process tree (other pools, other worker processes) probe a bookie once per incarnation.
Against a scripted peer that, as DbLedgerStorage, never answers GET_LIST for the ledger it holds."""

from __future__ import annotations

import asyncio
import multiprocessing
from dataclasses import replace
from typing import Any

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.bookie import BookiePool, Capability
from auditor.bookie.capabilities import CLAIM_EXPIRES_SECONDS, LocalCapabilityBook, claimed
from auditor.bookie.protocol import Op
from auditor.processes.capabilities import SharedCapabilityBook
from tests.unit.bookie.scripted_peer import FAST, Peer, _client, answer_ok


async def silent_on_lists(p: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
    if (
        req.header.operation == int(Op.GET_LIST_OF_ENTRIES_OF_LEDGER)
        and req.getListOfEntriesOfLedgerRequest.ledgerId == 1
    ):
        return  # DbLedgerStorage: UnsupportedOperationException, no reply at all
    await answer_ok(p, req, writer)


def _lists(peer: Peer) -> int:
    return sum(1 for r in peer.requests if r.header.operation == int(Op.GET_LIST_OF_ENTRIES_OF_LEDGER))


async def test_many_asks_at_once_send_one_probe_to_a_bookie_that_never_answers_lists() -> None:
    peer = await Peer(silent_on_lists).start()
    async with await _client(peer, entry_list_probe_timeout=0.2) as c:
        sent = [c.send_get_entry_list(1, timeout=0.2) for _ in range(10)]
        batch = c.get_entry_lists([1] * 10, timeout=0.2)
        results = [await s.result() for s in sent] + await batch
        assert all(r.unknown and r.unsupported for r in results)
        assert all((r.error or "").count("DbLedgerStorage") == 1 for r in results)  # said once, to read instead
        assert c.entry_list_support is Capability.UNSUPPORTED
        assert _lists(peer) == 1  # one unanswerable request (one exception in the bookie's log), not 20
    await peer.stop()


async def test_a_bookie_that_lists_is_asked_in_one_batch_after_the_first_answer() -> None:
    peer = await Peer(answer_ok).start()
    async with await _client(peer) as c:
        # Ledger 2 is not on the bookie (ENOLEDGER: says nothing of the capability); ledger 1 is.
        results = await c.get_entry_lists([2, 1, 1, 1], timeout=FAST.entry_list_probe_timeout)
        assert [r.outcome.value for r in results] == ["absent", "present", "present", "present"]
        assert c.entry_list_support is Capability.SUPPORTED and _lists(peer) == 4
    await peer.stop()


async def test_a_bookie_that_does_not_answer_at_all_is_not_asked_one_ledger_at_a_time() -> None:
    async def mute(p: Peer, req: pb.Request, writer: asyncio.StreamWriter) -> None:
        return  # a paused bookie: no reply to anything, the ping included

    peer = await Peer(mute).start()
    async with await _client(peer, entry_list_probe_timeout=0.1, liveness_timeout=0.1, request_timeout=0.3) as c:
        loop = asyncio.get_running_loop()
        started = loop.time()
        results = await c.get_entry_lists(list(range(1, 21)), timeout=0.1)
        assert all(r.unknown and not r.unsupported for r in results)
        assert c.entry_list_support is Capability.UNKNOWN
        assert loop.time() - started < 1.5  # one probe and ping, then the rest together (not 20 x 0.2 s)
    await peer.stop()


async def test_pools_sharing_a_book_probe_each_bookie_incarnation_once() -> None:
    peer = await Peer(silent_on_lists).start()
    book = LocalCapabilityBook()
    incarnation = {"test-bookie": "1a"}

    async def resolver(bookie_id: str) -> tuple[str, int]:
        return peer.address

    async def incarnation_of(bookie_id: str) -> str | None:
        return incarnation[bookie_id]

    cfg = replace(FAST, entry_list_probe_timeout=0.2)
    for _ in range(3):  # three partitions, one after the other
        async with BookiePool(resolver, cfg, capabilities=book, incarnation=incarnation_of) as pool:
            r = await pool.client("test-bookie").get_entry_list(1, timeout=0.2)
            assert r.unsupported
    assert _lists(peer) == 1
    assert book.lookup("test-bookie", "1a") is Capability.UNSUPPORTED
    incarnation["test-bookie"] = "2b"  # the bookie restarted (a new registration): learnt again, once
    for _ in range(2):
        async with BookiePool(resolver, cfg, capabilities=book, incarnation=incarnation_of) as pool:
            assert (await pool.client("test-bookie").get_entry_list(1, timeout=0.2)).unsupported
    assert _lists(peer) == 2
    await peer.stop()


async def test_a_client_waits_for_another_clients_probe_instead_of_sending_its_own() -> None:
    peer = await Peer(silent_on_lists).start()
    book = LocalCapabilityBook()
    assert book.claim("test-bookie", "1a")  # another process is probing it now

    async def later() -> None:
        await asyncio.sleep(0.3)
        book.settle("test-bookie", "1a", Capability.UNSUPPORTED)

    async def incarnation_of(bookie_id: str) -> str | None:
        return "1a"

    async with await _client(peer) as c:
        c.capability_book, c.incarnation_of = book, incarnation_of
        settling = asyncio.ensure_future(later())
        r = await c.get_entry_list(1)
        await settling
        assert r.unsupported and _lists(peer) == 0  # told, never asked
    await peer.stop()


def test_a_claim_given_up_by_a_process_that_died_expires() -> None:
    line = claimed(None, "1a", 100.0)
    assert line is not None and claimed(line, "1a", 101.0) is None
    assert claimed(line, "1a", 100.0 + CLAIM_EXPIRES_SECONDS) is not None
    assert claimed(line, "2b", 101.0) is not None  # a new incarnation: the old claim means nothing


def _in_child(book: SharedCapabilityBook, out: Any) -> None:
    out.put((book.claim("bk-1", "1a"), book.lookup("bk-2", "9")))
    book.settle("bk-1", "1a", Capability.SUPPORTED)


def test_the_shared_book_is_one_book_across_processes() -> None:
    context = multiprocessing.get_context("forkserver")
    book = SharedCapabilityBook(context)
    book.settle("bk-2", "9", Capability.UNSUPPORTED)
    out = context.Queue()
    child = context.Process(target=_in_child, args=(book, out))
    child.start()
    claimed_there, seen_there = out.get(timeout=60)
    child.join(60)
    assert claimed_there and seen_there is Capability.UNSUPPORTED
    assert book.lookup("bk-1", "1a") is Capability.SUPPORTED and not book.claim("bk-1", "1a")
    assert book.known() == {"bk-1": ("1a", Capability.SUPPORTED), "bk-2": ("9", Capability.UNSUPPORTED)}
