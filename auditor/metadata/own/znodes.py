"""bk-auditor's own znodes (`<root>/bk-auditor/...`: check cursors and times, bookie incarnations), read
and written whole; the one place besides the markers where the daemon creates znodes.

A recipe on the connection (zk/connection.py) whose primitives the store (metadata/store.py) offers; the
documents are read and written through the one recipe built on them (own/recipe.py: `OwnDocument`,
`OwnDirectory`), each with its schema beside its meaning (checkstate.py, referencestate.py,
repairstate.py, repairlimits.py, the daemon's bookie watch).
"""

from __future__ import annotations

from kazoo.exceptions import NodeExistsError, NoNodeError

from auditor.metadata.bookkeeper.election import OUR_SUBTREE
from auditor.metadata.errors import ConcurrentUpdateError
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.location import join
from auditor.metadata.zk.connection import ZooKeeperConnection


class OwnZnodes:
    """Our own subtree beside the election: never Java's znodes."""

    def __init__(self, zk: ZooKeeperConnection) -> None:
        self._zk = zk

    @property
    def own_subtree(self) -> str:
        """`<root>/bk-auditor`: the one place the daemon keeps znodes of its own."""
        return join(self._zk.root, OUR_SUBTREE)

    def _require_own(self, path: str) -> None:
        if not path.startswith(self.own_subtree + "/"):
            raise ValueError(f"{path} is not under bk-auditor's own subtree {self.own_subtree}")

    async def read_own(self, path: str) -> bytes | None:
        """The data of one of our own znodes, under `own_subtree`; None if it does not exist."""
        self._require_own(path)
        got = await self._zk.get(path)
        return None if got is None else got[0]

    async def put(self, path: str, data: bytes, guard: WriteGuard) -> None:
        """Guarded set-or-create of one of our own znodes, under `own_subtree` (missing parents created,
        each guarded)."""
        self._require_own(path)
        for _ in range(3):
            try:
                await self._zk.guarded_one(guard, lambda t: t.set_data(path, data))
                return
            except NoNodeError:
                await self._zk.create_parents(path, guard)
                try:
                    await self._zk.guarded_one(guard, lambda t, data=data: t.create(path, data))
                    return
                except NodeExistsError:
                    continue  # created meanwhile: set it on the next round
        raise ConcurrentUpdateError(path, "keeps changing between set and create")

    async def delete_own(self, path: str, guard: WriteGuard) -> bool:
        """Guarded delete of one of our own znodes (a leaf); False if it was already gone."""
        self._require_own(path)
        try:
            await self._zk.guarded_one(guard, lambda t: t.delete(path))
        except NoNodeError:
            return False
        return True

    async def own_children(self, path: str) -> list[str]:
        """The children of one of our own znodes ([] if it does not exist)."""
        self._require_own(path + "/")
        return await self._zk.children(path) or []
