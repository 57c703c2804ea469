"""The leader's deletion watch: a missing ledger found within seconds of its deletion, not at the next pass.

After each `references` pass the leader keeps a one-shot existence watch on the metadata znode of every
ledger Pulsar lists (and that the pass found), a data watch on every managed ledger's znode so that
ledgers added by a rollover are watched too, and a child watch on each namespace's `persistent` directory
so that a new topic is followed from its creation (a new namespace waits for the next pass). When a listed ledger's znode is deleted, the watch waits
`confirm_seconds` (a topic being deleted drops its ledgers just before its own znode; a trim updates the
listing before it deletes) and then asks the references check to confirm: still gone, still listed by a
fresh read of its topic. Read only: watches never write.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, KazooState, WatchedEvent

from auditor.aio.tasks import spawn
from auditor.checks.references import ReferencesCheck
from auditor.durability.findings import Finding
from auditor.durability.ids import LedgerId
from auditor.durability.references import Reference, managed_ledger_path
from auditor.logging import get_logger
from auditor.metadata.zk.connection import ZooKeeperConnection

log = get_logger("auditor.daemon")


def _kept(refs: list[Reference]) -> bool:
    """Whether Pulsar expects the ledger in BookKeeper (not offloaded with its BookKeeper copy deleted)."""
    return any(not (r.listed is not None and r.listed.absence_expected) for r in refs)


class DeletionWatch:
    def __init__(
        self,
        zk: ZooKeeperConnection,
        report: Callable[[Finding], None],
        *,
        enabled: bool = True,
        confirm_seconds: float = 2.0,
        on_deletion: Callable[[], None] | None = None,
    ) -> None:
        self.zk = zk
        self._report = report
        self.enabled = enabled
        self.confirm_seconds = confirm_seconds
        self.check: ReferencesCheck | None = None  # the last pass's check: its reader and listings
        self.listed: dict[int, list[Reference]] = {}
        self._seen_ms: dict[int, int] = {}
        self._armed: set[str] = set()
        self._watchers: dict[str, Callable[[WatchedEvent], None]] = {}
        self._paths: dict[str, int] = {}  # ledger znode path -> ledger id
        self._children: dict[str, set[str]] = {}  # namespace directory -> managed ledgers seen in it
        self._tasks: set[asyncio.Task[Any]] = set()
        self._on_deletion = on_deletion  # counts each deletion seen (a metric)
        zk.bridge.add_state_callback(self._on_state)

    def last_seen(self, ledger_id: int) -> int | None:
        """When this leader last saw the ledger's metadata present (ms), if it did."""
        return self._seen_ms.get(ledger_id)

    def close(self) -> None:
        self.zk.bridge.remove_state_callback(self._on_state)
        for t in list(self._tasks):
            t.cancel()
        self.enabled = False

    def _on_state(self, state: KazooState) -> None:
        if state == KazooState.LOST:
            self._armed.clear()  # watches die with the session: re-armed at the next pass or change
        elif state == KazooState.CONNECTED and self.enabled and self.check is not None and not self._armed:
            self._spawn(self._arm_all(), "deletion watch re-arm")

    def _spawn(self, coro: Any, name: str) -> None:
        spawn(coro, name=name, keep=self._tasks)

    # ------------------------------------------------------------------ after a pass
    async def arm(self, check: ReferencesCheck) -> None:
        """Watch what the finished pass found listed and present."""
        if not self.enabled:
            return
        self.check = check
        now = int(time.time() * 1000)
        self.listed = {lid: refs for lid, refs in check.by_ledger.items() if lid in check.present and _kept(refs)}
        for lid in self.listed:
            self._seen_ms[lid] = now
        await self._arm_all()

    async def _arm_all(self) -> None:
        for lid in sorted(self.listed):
            await self._arm_ledger(lid)
        if self.check is not None and self.check.refs is not None:
            for name in sorted(self.check.refs.managed_ledgers):
                await self._arm_managed_ledger(name)
            for directory in sorted({name.rsplit("/", 1)[0] for name in self.check.refs.managed_ledgers}):
                await self._arm_directory(directory)
        log.info("deletion watch armed", ledgers=len(self.listed), watches=len(self._armed))

    def _watcher(self, path: str, on_event: Callable[[WatchedEvent], None]) -> Callable[[WatchedEvent], None]:
        # One watcher object per path: kazoo keeps a set of watchers per path, so re-arming does not stack.
        if path not in self._watchers:
            self._watchers[path] = self.zk.bridge.watcher(on_event)
        return self._watchers[path]

    async def _arm_ledger(self, lid: int) -> None:
        path = self.zk.paths.path(LedgerId(0, lid))
        if path in self._armed:
            return
        self._paths[path] = lid
        stat = await self.zk.exists(path, self._watcher(path, self._ledger_event))
        if stat is None:  # deleted between the pass and now: the same cross-check
            self._spawn(self._confirm(lid), "deletion confirm")
            return
        self._armed.add(path)

    def _ledger_event(self, event: WatchedEvent) -> None:
        self._armed.discard(event.path)
        lid = self._paths.get(event.path)
        if lid is None or not self.enabled or lid not in self.listed:
            return
        if event.type == EventType.DELETED:
            if self._on_deletion is not None:
                self._on_deletion()
            log.info("listed ledger deleted: cross-checking", ledgerId=lid, path=event.path)
            self._spawn(self._confirm(lid), "deletion confirm")
        else:  # its metadata changed (closed, ensemble change): still there; watch on
            self._seen_ms[lid] = int(time.time() * 1000)
            self._spawn(self._arm_ledger(lid), "deletion watch re-arm")

    async def _confirm(self, lid: int) -> None:
        await asyncio.sleep(self.confirm_seconds)
        check = self.check
        refs = self.listed.get(lid)
        if check is None or refs is None:
            return
        finding = await check.confirm_missing(lid, refs)
        if finding is not None:
            self._report(finding)
        else:
            self.listed.pop(lid, None)  # trimmed, offloaded or the topic deleted: no longer listed

    # ------------------------------------------------------------------ managed ledgers (rollovers)
    async def _arm_managed_ledger(self, name: str) -> None:
        assert self.check is not None
        path = managed_ledger_path(self.check.reader.root, name)
        if path in self._armed:
            return
        watcher = self._watcher(path, functools.partial(self._managed_ledger_event, name))
        if await self.zk.exists(path, watcher) is not None:
            self._armed.add(path)

    def _managed_ledger_event(self, name: str, event: WatchedEvent) -> None:
        self._armed.discard(event.path)
        if self.enabled and event.type == EventType.CHANGED:
            self._spawn(self._refresh(name), "deletion watch refresh")

    async def _arm_directory(self, directory: str) -> None:
        """A namespace's `persistent` directory: a topic created there is watched from its creation on."""
        assert self.check is not None
        path = managed_ledger_path(self.check.reader.root, directory)
        if path in self._armed:
            return
        watcher = self._watcher(path, functools.partial(self._directory_event, directory))
        try:
            names = await self.zk.bridge.call(self.zk.client.get_children_async, path, watcher)
        except NoNodeError:
            return
        self._armed.add(path)
        known = self._children.setdefault(directory, set(names))
        for new in sorted(set(names) - known):
            known.add(new)
            await self._refresh(f"{directory}/{new}")

    def _directory_event(self, directory: str, event: WatchedEvent) -> None:
        self._armed.discard(event.path)
        if self.enabled and event.type == EventType.CHILD:
            self._spawn(self._arm_directory(directory), "deletion watch directory")

    async def _refresh(self, name: str) -> None:
        """A managed ledger's list changed (a rollover, a trim): watch the ledgers it lists now."""
        check = self.check
        if check is None:
            return
        fresh = await check.reader.read_owner(False, name)
        for lid, refs in fresh.by_ledger().items():
            if not _kept(refs):
                continue
            if lid not in self.listed:
                self.listed[lid] = refs
                self._seen_ms[lid] = int(time.time() * 1000)
            await self._arm_ledger(lid)
        await self._arm_managed_ledger(name)
