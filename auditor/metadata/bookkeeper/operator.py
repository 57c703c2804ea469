"""What Java's shell sets on an operator's explicit request, and nothing else: `lostBookieRecoveryDelay`
(`bookkeeper shell lostbookierecoverydelay -set N`) and the replication switch, the `disable` znode
(`bookkeeper shell autorecovery -disable/-enable`), plus `whoisauditor`.

Used by the command line and, for an operator's explicit admin-API call only, by the daemon's
auditor/daemon/operator.py (an import contract in .importlinter keeps the rest of the daemon, the checks
and the sweep away from this module). Every write names its `guard`: the daemon passes its leader's write
guard, so the write is a multi-op that first checks our election vote still exists (a standby, or a leader
that lost its vote, cannot write); `guard=None` is the command line's direct form only, an operator's own
explicit, confirmed change, as Java's shell makes it. Writes are compare-and-set on the version just read,
so two operators cannot silently overwrite each other, and they never create a missing `underreplication`
parent: a cluster without it was never formatted for auto-recovery (Java's shell creates it and its
LAYOUT there; we leave that to the auditor and workers that own it, docs/spec-differences.md).
"""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from auditor.metadata.bookkeeper.election import DEFAULT_ELECTION_DIR, JAVA_ELECTION_DIR, Leader, leader_of
from auditor.metadata.codecs import formats
from auditor.metadata.codecs.paths import MarkerPaths
from auditor.metadata.errors import ConcurrentUpdateError, MetadataConfigError, MissingZnodeError
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.location import join
from auditor.metadata.zk.connection import ZooKeeperConnection

JAVA_INT_MAX = 2**31 - 1

__all__ = ["JAVA_INT_MAX", "Leader", "OperatorSwitches", "check_recovery_delay"]


def check_recovery_delay(seconds: int) -> None:
    """MetadataConfigError unless `seconds` is a lostBookieRecoveryDelay Java can read (an int, >= 0)."""
    if not 0 <= seconds <= JAVA_INT_MAX:
        raise MetadataConfigError(f"lostBookieRecoveryDelay must be 0..{JAVA_INT_MAX} seconds, got {seconds}")


# Java's shell creates the tree (and its LAYOUT) here; we don't create what an auditor or worker owns.
_NO_TREE = (
    "missing: no auditor or auto-recovery has run on this cluster yet (its under-replication tree is "
    "created by them, not by bk-auditor's switches)"
)


class OperatorSwitches:
    """Reads and explicit, version-checked writes of the operator's switches, on one connection."""

    def __init__(self, conn: ZooKeeperConnection) -> None:
        self.conn = conn
        self.markers: MarkerPaths = conn.markers

    # ------------------------------------------------------------ lostBookieRecoveryDelay
    async def lost_bookie_recovery_delay(self) -> tuple[int | None, int | None]:
        """(seconds or None when the znode is missing, its version)."""
        path = self.markers.lost_bookie_recovery_delay
        got = await self.conn.get(path)
        if got is None:
            return None, None
        return formats.parse_lost_bookie_recovery_delay(got[0], path), got[1].version

    async def set_lost_bookie_recovery_delay(
        self, seconds: int, expected_version: int | None, *, guard: WriteGuard | None
    ) -> None:
        """Write `seconds` if the znode is still at `expected_version` (None: still missing), under `guard`
        (None: the command line's explicit direct write). NotLeaderError when the guard's vote is gone."""
        check_recovery_delay(seconds)
        path = self.markers.lost_bookie_recovery_delay
        data = str(seconds).encode("ascii")  # Java: Integer.toString(...).getBytes(UTF_8)
        try:
            if expected_version is None:
                # Open whatever zkEnableSecurity says, as BookKeeper creates it (every principal may set it).
                acl = self.conn.security.znode_acl(path)
                await self._write(guard, "create", path, data, acl)
            else:
                await self._write(guard, "set", path, data, expected_version)
        except NoNodeError:
            if expected_version is None:
                raise MissingZnodeError(self.markers.base, _NO_TREE) from None
            raise ConcurrentUpdateError(path, "deleted since it was read; read it again") from None
        except (BadVersionError, NodeExistsError):
            raise ConcurrentUpdateError(path, "changed since it was read (another operator?); read it again") from None

    async def change_lost_bookie_recovery_delay(
        self, seconds: int, expected_version: int | None, *, guard: WriteGuard | None
    ) -> tuple[int | None, int | None]:
        """Write `seconds` compare-and-set on `expected_version`, then read it back: (seconds, version) now."""
        await self.set_lost_bookie_recovery_delay(seconds, expected_version, guard=guard)
        return await self.lost_bookie_recovery_delay()

    # ------------------------------------------------------------ the replication switch
    async def replication_disabled(self) -> bool:
        return await self.conn.exists(self.markers.disable) is not None

    async def set_replication_disabled(self, disabled: bool, *, guard: WriteGuard | None) -> bool:
        """Create (disable) or delete (enable) the `disable` znode as Java's shell does (empty data), under
        `guard` (None: the command line's explicit direct write). False when it already was in that state
        (Java's shell fails there; nothing to do is not an error). NotLeaderError when the vote is gone."""
        path = self.markers.disable
        try:
            if disabled:
                await self._write(guard, "create", path, b"", None)
            else:
                await self._write(guard, "delete", path, -1)
        except NodeExistsError:
            return False
        except NoNodeError:
            if disabled:
                raise MissingZnodeError(self.markers.base, _NO_TREE) from None
            return False
        return True

    async def change_replication_disabled(self, disabled: bool, *, guard: WriteGuard | None) -> bool:
        """Set the switch, then read it back: whether replication is disabled now."""
        await self.set_replication_disabled(disabled, guard=guard)
        return await self.replication_disabled()

    async def _write(self, guard: WriteGuard | None, op: str, path: str, *args: Any) -> None:
        """One write (`create` path data acl | `set` path data version | `delete` path version): inside the
        guard's multi-op (its vote checked first) or, without a guard, a plain call. A failed op raises
        kazoo's own error either way (NoNodeError, NodeExistsError, BadVersionError)."""
        if guard is not None:
            txn_op = {"create": "create", "set": "set_data", "delete": "delete"}[op]
            await self.conn.guarded_one(guard, lambda txn: getattr(txn, txn_op)(path, *args))
            return
        client = self.conn.client
        call = {"create": client.create_async, "set": client.set_async, "delete": client.delete_async}[op]
        await self.conn.bridge.call(call, path, *args)

    # ------------------------------------------------------------ whoisauditor
    async def current_leaders(self, our_election: str | None = None) -> list[Leader]:
        """The leader of Java's auditor election and of ours (`our_election`, by default
        `<root>/bk-auditor/election`), where there is one; Java's first."""
        out = []
        java = join(self.conn.root, JAVA_ELECTION_DIR)
        ours = our_election or join(self.conn.root, DEFAULT_ELECTION_DIR)
        for path in dict.fromkeys((java, ours)):  # once when we vote in Java's election
            leader = await leader_of(self.conn.bridge, path)
            if leader is not None:
                out.append(Leader(path, *leader))
        return out
