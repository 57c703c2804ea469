"""Leader election for the auditor daemon (ZooKeeper ephemeral-sequential votes). Spec §6.

By default it runs on our own path (`<ledgers root>/bk-auditor/election`), never in Java's
`U/auditorelection`; that path is used only when `java_compatible=True` is asked for, and then the votes
follow Java's format exactly (`V_<seq>` children holding the text proto `bookieId: "<id>"`).

Rules kept: numeric sort of the sequence; watch only the predecessor; step down at once on SUSPENDED;
on LOST drop everything and re-enter with a new vote after reconnecting; delete our vote on close.
Writes made while leader carry `guard` (this vote must still exist, checked inside the write's
transaction), so a deposed leader's write fails.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType, KazooState

from auditor.aio import spawn
from auditor.logging import get_logger
from auditor.metadata.codecs import formats
from auditor.metadata.errors import MetadataConfigError, NotLeaderError
from auditor.metadata.location import join
from auditor.metadata.zk.bridge import KazooBridge

log = get_logger("auditor.metadata.election")

VOTE_PREFIX = "V_"
_VOTE = re.compile(r"V_([0-9]+)")  # fullmatch; ASCII digits (ZooKeeper's sequence suffix)
OUR_SUBTREE = "bk-auditor"
DEFAULT_ELECTION_DIR = f"{OUR_SUBTREE}/election"
JAVA_ELECTION_DIR = "underreplication/auditorelection"


def election_path(ledgers_root: str, custom: str | None = None) -> str:
    return custom or join(ledgers_root, DEFAULT_ELECTION_DIR)


def election_base(path: str, ledgers_root: str, java_compatible: bool) -> str:
    """The highest znode the election may create for `path`: our subtree `<root>/bk-auditor`, or
    `<root>/underreplication` for Java's own election (only with `java_compatible`). Anything else is
    refused (MetadataConfigError): the daemon creates nothing outside its subtree and the markers'.
    """
    path = path.rstrip("/")
    ours = join(ledgers_root, OUR_SUBTREE)
    java = join(ledgers_root, JAVA_ELECTION_DIR)
    if path == java:
        if not java_compatible:
            raise MetadataConfigError(
                f"{path} is the Java auditor's election; set "
                "election.join_java_election=true to take part in it on purpose"
            )
        return join(ledgers_root, "underreplication")
    if path.startswith(ours + "/"):
        return ours
    raise MetadataConfigError(
        f"election path {path} is outside bk-auditor's own subtree {ours}/ "
        f"(and is not Java's {java}); refusing to create znodes there"
    )


def sort_votes(children: list[str]) -> list[str]:
    """`V_<seq>` children by numeric sequence (as Java sorts them); other names are ignored."""
    votes = [(int(m.group(1)), c) for c in children if (m := _VOTE.fullmatch(c))]
    return [c for _, c in sorted(votes)]


@dataclass(frozen=True)
class Leader:
    """A current leader as Java's whoisauditor reads it: the lowest vote and the identity it holds."""

    election: str  # the election znode
    vote: str  # the vote's name, e.g. V_0000000003
    identity: str  # its bookieId (Java) or our identity


async def leader_of(bridge: KazooBridge, path: str) -> tuple[str, str] | None:
    """(vote name, identity) of the lowest vote of the election at `path`, as Java's whoisauditor reads
    it (after a sync, so a lagging follower does not answer from the past); None without votes."""
    client = bridge.client
    try:
        await bridge.call(client.sync_async, path)
        children = await bridge.call(client.get_children_async, path)
    except NoNodeError:
        return None
    for name in sort_votes(children):
        try:
            data, _ = await bridge.call(client.get_async, join(path, name))
        except NoNodeError:
            continue  # that leader just went: the next vote is the leader now
        return name, formats.parse_vote(data, join(path, name))
    return None


class VoteGuard:
    """Write guard bound to one vote: valid only while that vote is ours and we lead with it."""

    def __init__(self, election: LeaderElection, vote_path: str) -> None:
        self._election = election
        self._vote_path = vote_path

    @property
    def guard_path(self) -> str:
        return self._vote_path

    def check(self) -> None:
        e = self._election
        if not e.is_leader or e.vote_path != self._vote_path:
            raise NotLeaderError(f"not the leader any more (vote {self._vote_path})")


class LeaderElection:
    def __init__(
        self, bridge: KazooBridge, path: str, identity: str, *, ledgers_root: str, java_compatible: bool = False
    ) -> None:
        self.base = election_base(path, ledgers_root, java_compatible)
        if java_compatible and not formats.is_valid_bookie_id(identity):
            raise MetadataConfigError(f"identity {identity!r} is not a valid BookieId (Java tools would fail)")
        self.bridge = bridge
        self.client = bridge.client
        self.path = path.rstrip("/")
        self.identity = identity
        self.java_compatible = java_compatible
        self.vote_path: str | None = None
        self._leader = False
        self.leader_event = asyncio.Event()  # set while we lead
        self.follower_event = asyncio.Event()  # set while we do not
        self.follower_event.set()
        self._on_elected: list[Callable[[], Any]] = []
        self._on_deposed: list[Callable[[], Any]] = []
        self._wake: asyncio.Future[str] = bridge.loop.create_future()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._connected = asyncio.Event()
        if self.client.connected:
            self._connected.set()
        self.elections = 0  # times we became leader (for tests and metrics)

    # ------------------------------------------------------------ public surface
    @property
    def is_leader(self) -> bool:
        return self._leader

    @property
    def guard(self) -> VoteGuard:
        if not self._leader or self.vote_path is None:
            raise NotLeaderError("not the leader")
        return VoteGuard(self, self.vote_path)

    def on_elected(self, callback: Callable[[], Any]) -> None:
        self._on_elected.append(callback)

    def on_deposed(self, callback: Callable[[], Any]) -> None:
        self._on_deposed.append(callback)

    async def wait_leader(self, timeout: float | None = None) -> None:
        async with asyncio.timeout(timeout):
            await self.leader_event.wait()

    async def wait_follower(self, timeout: float | None = None) -> None:
        async with asyncio.timeout(timeout):
            await self.follower_event.wait()

    async def start(self) -> None:
        self.bridge.add_state_callback(self._on_state)
        self._task = spawn(self._run(), name="election")

    async def close(self) -> str | None:
        """Step down, stop, and delete our vote so that a successor need not wait for session expiry.
        Returns the vote it deleted (None: there was none, or it could not be deleted: it then ends with
        the session)."""
        self._closed = True
        self._step_down("closing")
        self._poke("closing")  # a round waiting for a change returns even if the cancel below is lost
        self.bridge.remove_state_callback(self._on_state)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        released = None
        if self.vote_path is not None and self.client.connected:
            try:
                await self.bridge.call(self.client.delete_async, self.vote_path)
                released = self.vote_path
            except (TimeoutError, NoNodeError, KazooException):
                pass
        self.vote_path = None
        return released

    async def vote_is_ours(self) -> bool:
        """One fresh ZooKeeper round trip: does our vote still exist, owned by our current session? (sync
        first, so a lagging follower cannot answer from before our session expired.)"""
        vote, session = self.vote_path, self.client.client_id
        if vote is None or session is None:
            return False
        await self.bridge.call(self.client.sync_async, vote)
        stat = await self.bridge.call(self.client.exists_async, vote)
        return stat is not None and stat.ephemeralOwner == session[0] and self.vote_path == vote

    async def current_leader(self) -> tuple[str, str] | None:
        """(vote name, identity) of the current leader, read like Java's whoisauditor."""
        return await leader_of(self.bridge, self.path)

    # ------------------------------------------------------------ internals
    def _on_state(self, state: KazooState) -> None:
        if state == KazooState.SUSPENDED:
            self._connected.clear()
            self._step_down("connection suspended")
        elif state == KazooState.LOST:
            self._connected.clear()
            self._step_down("session lost")
            self.vote_path = None  # the ephemeral vote died with the session
        else:
            self._connected.set()
        self._poke(str(state))

    def _poke(self, why: str) -> None:
        if not self._wake.done():
            self._wake.set_result(why)

    def _become_leader(self) -> None:
        if self._leader:
            return
        self._leader = True
        self.elections += 1
        self.follower_event.clear()
        self.leader_event.set()
        log.info("elected leader with vote %s", self.vote_path)
        self._fire(self._on_elected)

    def _step_down(self, why: str) -> None:
        if not self._leader:
            return
        self._leader = False
        self.leader_event.clear()
        self.follower_event.set()
        log.warning("stepping down (%s); vote %s", why, self.vote_path)
        self._fire(self._on_deposed)

    @staticmethod
    def _fire(callbacks: list[Callable[[], Any]]) -> None:
        for cb in list(callbacks):
            try:
                r = cb()
                if asyncio.iscoroutine(r):
                    spawn(r, name=f"election callback {cb!r}")
            except Exception:
                log.exception("election callback %r failed", cb)

    async def _ensure_parent(self) -> None:
        """Create the election znode and its missing parents from `self.base` down, never above it: the
        ledgers root must already exist (NoNodeError otherwise; it is never created here)."""
        if await self.bridge.call(self.client.exists_async, self.path) is None:
            todo = [self.path]
            while todo[-1] != self.base:
                todo.append(todo[-1].rsplit("/", 1)[0])
            for p in reversed(todo):
                try:
                    await self.bridge.call(self.client.create_async, p, b"")
                except NodeExistsError:
                    pass

    async def _vote(self) -> str:
        await self._ensure_parent()
        created = await self.bridge.call(
            self.client.create_async,
            join(self.path, VOTE_PREFIX),
            formats.serialize_vote(self.identity),
            None,
            True,
            True,
        )
        return cast(str, created)  # kazoo ships no types: create answers the path it created

    async def _run(self) -> None:
        while not self._closed:
            await self._connected.wait()
            self._wake = self.bridge.loop.create_future()
            if not self.client.connected:
                continue
            try:
                await self._round()
            except asyncio.CancelledError:
                raise
            except (TimeoutError, KazooException, OSError) as exc:
                log.warning("election round failed: %r; retrying", exc)
                self._step_down(f"error {exc!r}")
                await asyncio.sleep(0.5)

    async def _round(self) -> None:
        """One pass of the candidate loop; returns when something may have changed."""
        if self.vote_path is not None and await self.bridge.call(self.client.exists_async, self.vote_path) is None:
            log.warning("our vote %s vanished; voting again", self.vote_path)
            self._step_down("vote vanished")
            self.vote_path = None
        if self.vote_path is None:
            self.vote_path = await self._vote()
        me = self.vote_path.rsplit("/", 1)[1]
        votes = sort_votes(await self.bridge.call(self.client.get_children_async, self.path))
        if me not in votes:
            self.vote_path = None
            return
        idx = votes.index(me)
        if idx == 0:
            watch, fired = self.bridge.event_watch()
            # Watch our own vote: if someone deletes it we must not keep acting as leader.
            if await self.bridge.call(self.client.exists_async, self.vote_path, watch) is None:
                return
            if self.java_compatible:
                await self._announce()
            self._become_leader()
            await asyncio.wait({fired, self._wake}, return_when=asyncio.FIRST_COMPLETED)
            if fired.done() and fired.result().type == EventType.DELETED:
                self._step_down("vote deleted")
            return
        self._step_down("not first")
        watch, fired = self.bridge.event_watch()
        predecessor = join(self.path, votes[idx - 1])
        if await self.bridge.call(self.client.exists_async, predecessor, watch) is None:
            return
        await asyncio.wait({fired, self._wake}, return_when=asyncio.FIRST_COMPLETED)

    async def _announce(self) -> None:
        # Java's new leader writes its id into the election node (informational), guarded by our vote.
        txn = self.client.transaction()
        txn.check(self.vote_path, -1)
        txn.set_data(self.path, formats.serialize_vote(self.identity), -1)
        results = await self.bridge.commit(txn)
        if any(isinstance(r, Exception) for r in results):
            log.warning("could not announce leadership on %s: %r", self.path, results)
