"""The bookie-side index agent (`bk-auditor agent`, a real process) beside the session cluster's
DbLedgerStorage bookie (bookie 6), with ledgers written by the real Java client: its answers equal what
the bookie serves, it verifies digests from the entry logs (and finds a byte corrupted in a copy of
them), it never changes a file of the bookie, it refuses callers without the token, and an agent that
cannot be reached is UNKNOWN."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditor.agent.index import BookieIndex
from auditor.bookie import BookieClientConfig, BookiePool, Outcome
from auditor.bookie.agent import AgentClient, AgentClientConfig, AgentEntries
from auditor.durability.model import DigestType
from auditor.durability.ranges import RangeSet
from devcluster import ports
from devcluster.agent_util import AgentProc, files_state, start_agent, stop_agent
from devcluster.cluster import Cluster

pytestmark = pytest.mark.realcluster

DB = 6  # the session cluster's DbLedgerStorage bookie (tests/conftest.py)
TOKEN = b"agent-test-token-0123456789"
NEVER_WRITTEN_LEDGER = 7_777_777_777
CONFIG = BookieClientConfig(request_timeout=5.0, connect_timeout=3.0)
# (ensemble, write quorum, ack quorum, entries, digest, password): all on bookie 6, striped, HMAC
SHAPES = [(3, 3, 2, 3000, "CRC32C", "pw"), (3, 2, 2, 2000, "CRC32", "pw"), (2, 2, 2, 600, "MAC", "secret")]
DIGESTS = {"CRC32": DigestType.CRC32, "CRC32C": DigestType.CRC32C, "MAC": DigestType.HMAC}


def _on_bookie(ledger: dict[str, Any], bookie_id: str, write_quorum: int, entries: int) -> RangeSet:
    """The entries of a one-ensemble ledger whose write set holds `bookie_id` (round-robin striping)."""
    ensemble = ledger["ensembles"]["0"]
    i = ensemble.index(bookie_id)
    n = len(ensemble)
    return RangeSet.from_ids(e for e in range(entries) if (i - e) % n < write_quorum)


@pytest.fixture(scope="module")
def written(cluster: Cluster) -> list[tuple[dict[str, Any], tuple[int, int, int, int, str, str], RangeSet]]:
    db = cluster.bookie(DB).bookie_id
    others = [cluster.bookie(1).bookie_id, cluster.bookie(2).bookie_id]
    out = []
    for shape in SHAPES:
        ens, wq, aq, entries, digest, password = shape
        bookies = [db, *others][:ens]
        ledger = cluster.create_ledger(
            ensemble=ens,
            write_quorum=wq,
            ack_quorum=aq,
            entries=entries,
            entry_size=100,
            digest=digest,
            password=password,
            bookies=bookies,
            allowed=bookies,
        )
        out.append((ledger, shape, _on_bookie(ledger, db, wq, entries)))
    return out


@pytest.fixture(scope="module")
def token_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("agent-token") / "token"
    path.write_bytes(TOKEN + b"\n")
    return path


@pytest.fixture(scope="module")
def agent(cluster: Cluster, token_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProc]:
    proc = start_agent(cluster, DB, tmp_path_factory.mktemp("agent"), token_file=token_file)
    try:
        yield proc
    finally:
        stop_agent(proc)


def _client(agent: AgentProc, token: bytes | None = TOKEN, port: int | None = None) -> AgentClient:
    return AgentClient(f"127.0.0.{DB}:bookie", ("127.0.0.1", port or agent.port), AgentClientConfig(token, None, 5.0))


async def _flushed(client: AgentClient, ledger_ids: list[int], want: list[RangeSet]) -> list[AgentEntries]:
    """The agent's answers once the bookie flushed its write cache into the index (flushInterval=1 s)."""
    deadline = time.monotonic() + 20
    while True:
        got = await client.list_entries(ledger_ids)
        if [a.entries for a in got] == want or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.5)


async def test_entries_equal_what_the_bookie_serves(cluster: Cluster, agent: AgentProc, written: list[Any]) -> None:
    client = _client(agent)
    try:
        info = await client.describe()
        assert info.bookie_id == cluster.bookie(DB).bookie_id and info.storage == "db"
        ids = [ledger["ledgerId"] for ledger, _, _ in written]
        want = [expected for _, _, expected in written]
        answers = await _flushed(client, [*ids, NEVER_WRITTEN_LEDGER], [*want, RangeSet()])
        for a, (ledger, shape, expected) in zip(answers, written, strict=False):
            assert a.outcome is Outcome.PRESENT, a
            assert a.entries == expected, (shape, a.entries, expected)
            assert a.index_as_of > time.time() - 30
        absent = answers[-1]
        assert absent.outcome is Outcome.ABSENT and absent.entries == RangeSet()
        # What the bookie itself serves, entry by entry, for a sample: held where the agent says so.
        db = cluster.bookie(DB)
        async with BookiePool(lambda _b: (db.host, db.port), CONFIG) as pool:
            bookie = pool.client(db.bookie_id)
            for ledger, (_, _, _, entries, digest, password), expected in written:
                lid = ledger["ledgerId"]
                for e in sorted({0, 1, 2, entries // 2, entries // 2 + 1, entries - 2, entries - 1}):
                    r = await bookie.read_entry(lid, e)
                    assert r.present == (e in expected), (lid, e, r)
                    if r.present:
                        assert r.verify(DIGESTS[digest], password).ok
    finally:
        await client.close()


async def test_verify_entries_is_clean_and_resumable(agent: AgentProc, written: list[Any]) -> None:
    client = _client(agent)
    try:
        for ledger, (_, _, _, entries, digest, password), expected in written:
            lid = ledger["ledgerId"]
            await _flushed(client, [lid], [expected])
            r = await client.verify_entries(
                lid, DIGESTS[digest], password.encode(), RangeSet.span(0, entries - 1), max_bytes=0
            )
            assert r.outcome is Outcome.PRESENT and r.error is None, r
            assert r.verified == len(expected) and not r.corrupt and not r.unreadable, r
            assert r.absent == RangeSet.span(0, entries - 1).difference(expected)
            assert r.next_entry is None and r.verified_bytes >= len(expected) * 100
        # A byte budget cuts a call short; resuming at next_entry covers the rest exactly once.
        ledger, (_, _, _, entries, digest, password), expected = written[0]
        verified, start, calls = 0, 0, 0
        while start is not None:
            r = await client.verify_entries(
                ledger["ledgerId"],
                DIGESTS[digest],
                password.encode(),
                RangeSet.span(start, entries - 1),
                max_bytes=100_000,
            )
            verified += r.verified
            calls += 1
            start = r.next_entry
        assert verified == len(expected) and calls > 2
        # The wrong password for an HMAC ledger: every entry corrupt, none verified.
        ledger, (_, _, _, entries, _, _), expected = written[2]
        r = await client.verify_entries(ledger["ledgerId"], DigestType.HMAC, b"wrong", RangeSet.span(0, 9), max_bytes=0)
        assert r.verified == 0 and [e for e, _ in r.corrupt] == list(RangeSet.span(0, 9))
        # A ledger the bookie does not hold.
        r = await client.verify_entries(NEVER_WRITTEN_LEDGER, DigestType.CRC32, b"", RangeSet.span(0, 9), max_bytes=0)
        assert r.outcome is Outcome.ABSENT and r.absent == RangeSet.span(0, 9)
    finally:
        await client.close()


async def test_token_required_and_unreachable_is_unknown(agent: AgentProc, written: list[Any]) -> None:
    lid = written[0][0]["ledgerId"]
    for token in (None, b"not-the-token"):
        client = _client(agent, token)
        try:
            [a] = await client.list_entries([lid])
            assert a.outcome is Outcome.UNKNOWN and a.entries is None and "UNAUTHENTICATED" in (a.error or ""), a
            v = await client.verify_entries(lid, DigestType.CRC32C, b"pw", RangeSet.span(0, 9), max_bytes=0)
            assert v.outcome is Outcome.UNKNOWN and v.unreadable == RangeSet.span(0, 9), v
        finally:
            await client.close()
    nobody = _client(agent, port=ports.AGENT_PORT_BASE + 9)  # no agent listens there
    try:
        [a] = await nobody.list_entries([lid], timeout=2.0)
        assert a.outcome is Outcome.UNKNOWN and "UNAVAILABLE" in (a.error or ""), a
    finally:
        await nobody.close()


def _flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def _agent_fds_read_only(pid: int, roots: list[Path]) -> int:
    """How many of the agent's open descriptors are bookie files; fails if one is open for writing."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            flags = int(Path(f"/proc/{pid}/fdinfo/{fd}").read_text().split("flags:")[1].split()[0], 8)
        except (OSError, IndexError):
            continue
        if any(target.startswith(str(r)) for r in roots):
            count += 1
            assert flags & os.O_ACCMODE == os.O_RDONLY, (target, oct(flags))
    return count


async def _changed_by_a_round(
    client: AgentClient, agent: AgentProc, roots: list[Path], written: list[Any]
) -> list[str]:
    """The bookie files that changed (but lastMark) over a round of every question, with a catch-up."""
    before = files_state(roots)
    ids = [ledger["ledgerId"] for ledger, _, _ in written]
    for ledger, (_, _, _, entries, digest, password), _ in written:
        await client.list_entries([ledger["ledgerId"], NEVER_WRITTEN_LEDGER])
        await client.verify_entries(
            ledger["ledgerId"], DIGESTS[digest], password.encode(), RangeSet.span(0, entries - 1), max_bytes=0
        )
    await asyncio.sleep(1.5)  # past the agent's index age bound: the next call catches up with the bookie
    await client.list_entries(ids)
    assert _agent_fds_read_only(agent.proc.pid, roots) > 0
    after = files_state(roots)
    assert not [p for p in after if "rocksdict" in p], "the binding wrote into the bookie's directory"
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    # lastMark is the bookie's own: its SyncThread rewrites it at every checkpoint (flushInterval, 1 s
    # here), written or not; the agent never opens it (it opens entry logs and RocksDB files only).
    return [p for p in changed if not p.endswith("/current/lastMark")]


async def test_the_bookie_files_stay_as_they_were(cluster: Cluster, agent: AgentProc, written: list[Any]) -> None:
    db = cluster.bookie(DB)
    roots = [db.ledger_dir, db.journal_dir]
    client = _client(agent)
    try:
        await _flushed(client, [ledger["ledgerId"] for ledger, _, _ in written], [e for _, _, e in written])
        await asyncio.sleep(2.5)  # the bookie's own last flush of what the fixtures wrote
        changed = await _changed_by_a_round(client, agent, roots, written)
        if changed:  # once more: the bookie's own garbage collector (every 60 s) may have run in between
            changed = await _changed_by_a_round(client, agent, roots, written)
        assert changed == [], changed
    finally:
        await client.close()


async def test_a_corrupted_byte_in_a_copy_is_found(
    cluster: Cluster, agent: AgentProc, written: list[Any], token_file: Path, tmp_path: Path
) -> None:
    """The harness (never the agent) corrupts one byte of an entry in a copy of the bookie's ledger
    directory; an agent over the copy reports exactly that entry corrupt."""
    ledger, (_, _, _, entries, digest, password), expected = written[0]
    lid = ledger["ledgerId"]
    client = _client(agent)
    try:
        await _flushed(client, [lid], [expected])
    finally:
        await client.close()
    await asyncio.sleep(1.5)
    copy = tmp_path / "ledgers"
    shutil.copytree(cluster.bookie(DB).ledger_dir, copy, symlinks=True)
    victim = 123
    found = BookieIndex([copy], tmp_path / "harness-index")  # the agent's reader: nothing written into the copy
    try:
        _, [loc] = found.locations(lid, victim, victim)
    finally:
        found.close()
    _flip_byte(copy / "current" / f"{loc.log_id:x}.log", loc.offset + 50)  # a payload byte (header: 36)
    other = start_agent(
        cluster, DB, tmp_path, token_file=token_file, ledger_dirs=[copy], port=ports.AGENT_PORT_BASE + 8
    )
    copy_client = _client(other, port=other.port)
    try:
        r = await copy_client.verify_entries(
            lid, DIGESTS[digest], password.encode(), RangeSet.span(0, entries - 1), max_bytes=0
        )
        assert [e for e, _ in r.corrupt] == [victim], r.corrupt
        assert "digest" in r.corrupt[0][1]
        assert r.verified == len(expected) - 1 and not r.unreadable
    finally:
        await copy_client.close()
        stop_agent(other)
