"""The one recipe for our own documents (`auditor.metadata.own.recipe`): what it reads, writes and deletes
through the store's primitives, and the corrupt policy (log, count, replace) decided in one place."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kazoo.exceptions import NoAuthError

from auditor.durability.ids import LedgerId
from auditor.metadata.errors import CorruptZnodeError, MetadataError
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.own.checkstate import CheckState, CheckStateStore
from auditor.metadata.own.repairlimits import RepairLimits, RepairLimitsNode
from auditor.metadata.own.repairstate import RepairBlocks

ROOT = "/ledgers/bk-auditor"


class Guard:
    guard_path = "/ledgers/vote"

    def check(self) -> None:
        pass


class FakeStore:
    """Our own subtree's primitives over a dict (what `own.znodes.OwnZnodes` offers)."""

    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}
        self.writes: list[tuple[str, bytes | None, WriteGuard]] = []
        self.fail_reads = False

    @property
    def own_subtree(self) -> str:
        return ROOT

    async def read_own(self, path: str) -> bytes | None:
        if self.fail_reads:
            raise NoAuthError()
        return self.nodes.get(path)

    async def put(self, path: str, data: bytes, guard: WriteGuard) -> None:
        self.writes.append((path, data, guard))
        self.nodes[path] = data

    async def delete_own(self, path: str, guard: WriteGuard) -> bool:
        self.writes.append((path, None, guard))
        return self.nodes.pop(path, None) is not None

    async def own_children(self, path: str) -> list[str]:
        prefix = path + "/"
        return sorted(p[len(prefix) :] for p in self.nodes if p.startswith(prefix) and "/" not in p[len(prefix) :])


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, *args: Any, **kw: Any) -> None:
        self.lines.append((event, kw))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_get_put_delete_go_through_the_guarded_primitives() -> None:
    store, guard = FakeStore(), Guard()
    states = CheckStateStore(store)
    assert states.path("ledger") == f"{ROOT}/checks/ledger"
    assert run(states.get("ledger")) is None
    run(states.put("ledger", CheckState(5, None, None), guard))
    assert store.writes == [(f"{ROOT}/checks/ledger", CheckState(5, None, None).to_json(), guard)]
    assert run(states.get("ledger")) == CheckState(5, None, None)
    assert run(states.delete("ledger", guard)) is True
    assert run(states.delete("ledger", guard)) is False


def test_an_empty_znode_is_absent_only_where_the_schema_says_so() -> None:
    store = FakeStore()
    store.nodes[f"{ROOT}/checks/ledger"] = b""
    store.nodes[f"{ROOT}/repair/limits"] = b""
    assert run(CheckStateStore(store).get("ledger")) is None
    with pytest.raises(CorruptZnodeError):
        run(RepairLimitsNode(store).get())


def test_a_refused_read_names_the_znode_where_the_schema_says_so() -> None:
    store = FakeStore()
    store.fail_reads = True
    with pytest.raises(MetadataError, match=f"{ROOT}/checks/ledger: cannot read bk-auditor check state"):
        run(CheckStateStore(store).get("ledger"))
    with pytest.raises(NoAuthError):
        run(RepairLimitsNode(store).get())
    with pytest.raises(NoAuthError):
        run(RepairBlocks(store).get(LedgerId(0, 7)))


def test_refused_limits_are_never_written() -> None:
    store = FakeStore()
    with pytest.raises(ValueError):
        run(RepairLimitsNode(store).put(RepairLimits(entries_in_flight=0), Guard()))
    assert store.writes == []
    assert run(RepairLimitsNode(store).get()) == RepairLimits()


def test_a_corrupt_document_is_logged_counted_and_replaced() -> None:
    store, log = FakeStore(), Log()
    path = f"{ROOT}/checks/ledger"
    store.nodes[path] = b"[]"
    counted: list[CorruptZnodeError] = []
    replaced: list[CheckState] = []

    async def replace(fresh: CheckState) -> None:
        replaced.append(fresh)

    doc = CheckStateStore(store).document("ledger")
    got = run(doc.get_or_replace(CheckState(), log=log, count=counted.append, replace=replace, check="ledger"))
    assert got == CheckState() and replaced == [CheckState()]
    assert [exc.path for exc in counted] == [path]
    ((event, fields),) = log.lines
    assert event == "bk-auditor state is corrupt: replacing it with a fresh state"
    assert list(fields) == ["check", "path", "problem"] and fields["path"] == path
    # A good or missing document is no news: nothing logged, counted or written.
    store.nodes[path] = CheckState(7, None, None).to_json()
    assert run(doc.get_or_replace(CheckState(), log=log, count=counted.append)) == CheckState(7, None, None)
    del store.nodes[path]
    assert run(doc.get_or_replace(CheckState(), log=log, count=counted.append)) == CheckState()
    assert len(log.lines) == 1 and len(counted) == 1 and store.writes == []
