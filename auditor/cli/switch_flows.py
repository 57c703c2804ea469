"""The operator's switches from the command line, as Java's shell sets them: `whoisauditor`,
`lostBookieRecoveryDelay` get/set, and the replication enable flag. Each change is shown before it is
made, confirmed (a prompt on a terminal, else `--yes`), written compare-and-set on the version just
read, and read back.

One flow for both forms of each command: `ZooKeeperOps` talks to ZooKeeper directly, `AdminOps` to a
daemon's admin API (`--admin HOST:PORT`), whose answers come from the same `OperatorSwitches` calls
(auditor/daemon/operator.py); so both forms print the same report for the same cluster state. The direct
form writes without a leader's guard (it is no daemon: the operator's explicit, confirmed change, as
Java's shell); through a daemon only its leader writes, guarded by its election vote.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from auditor.checks.build import connect_store
from auditor.errors import ConfigError
from auditor.metadata.bookkeeper.operator import Leader, OperatorSwitches, check_recovery_delay
from auditor.settings import Settings

if TYPE_CHECKING:
    from auditor.admin.client import AdminClient

Confirm = Callable[[str], bool]  # shown the change; True to go on


class OperatorOps(Protocol):
    """What the flows need: reads, and compare-and-set writes that answer what they read back."""

    @property
    def root(self) -> str: ...

    async def leaders(self) -> list[Leader]: ...

    async def recovery_delay(self) -> tuple[int | None, int | None]: ...  # (seconds, znode version)

    async def change_recovery_delay(self, seconds: int, expected_version: int | None) -> int | None: ...

    async def replication_disabled(self) -> bool: ...

    async def change_replication_disabled(self, disabled: bool) -> bool: ...


@dataclass
class ZooKeeperOps:
    """The direct form: OperatorSwitches on our own ZooKeeper connection."""

    switches: OperatorSwitches
    election_path: str

    @property
    def root(self) -> str:
        return self.switches.conn.root

    async def leaders(self) -> list[Leader]:
        return await self.switches.current_leaders(self.election_path)

    async def recovery_delay(self) -> tuple[int | None, int | None]:
        return await self.switches.lost_bookie_recovery_delay()

    # No guard: the operator's own explicit, confirmed write, as Java's shell makes it (no daemon involved).
    async def change_recovery_delay(self, seconds: int, expected_version: int | None) -> int | None:
        return (await self.switches.change_lost_bookie_recovery_delay(seconds, expected_version, guard=None))[0]

    async def replication_disabled(self) -> bool:
        return await self.switches.replication_disabled()

    async def change_replication_disabled(self, disabled: bool) -> bool:
        return await self.switches.change_replication_disabled(disabled, guard=None)


@asynccontextmanager
async def zookeeper_ops(settings: Settings) -> AsyncIterator[ZooKeeperOps]:
    store = await connect_store(settings)
    try:
        yield ZooKeeperOps(OperatorSwitches(store), settings.election_path)
    finally:
        await store.close()


class AdminOps:
    """The `--admin` form: the same reads and writes as admin-API calls to a daemon."""

    root = ""  # learnt from the daemon's first answer

    def __init__(self, client: AdminClient) -> None:
        self.client = client

    async def leaders(self) -> list[Leader]:
        resp = await self.client.who_is_auditor()
        return [Leader(x.election, x.vote, x.identity) for x in resp.leaders]

    async def recovery_delay(self) -> tuple[int | None, int | None]:
        resp = await self.client.recovery_delay()
        self.root = resp.ledgers_root
        return _opt(resp, "seconds"), _opt(resp, "version")

    async def change_recovery_delay(self, seconds: int, expected_version: int | None) -> int | None:
        return _opt(await self.client.set_recovery_delay(seconds, expected_version), "seconds")

    async def replication_disabled(self) -> bool:
        resp = await self.client.replication()
        self.root = resp.ledgers_root
        return not resp.enabled

    async def change_replication_disabled(self, disabled: bool) -> bool:
        return not (await self.client.set_replication(not disabled)).enabled


def _opt(msg: Any, name: str) -> int | None:
    """An optional int32 field of an admin reply (RecoveryDelay): its value, None when unset."""
    if not msg.HasField(name):
        return None
    value: int = getattr(msg, name)
    return value


@dataclass(frozen=True)
class SwitchReport:
    """What a command found and did: `lines` for people, `data` for --format json."""

    lines: list[str]
    data: dict[str, Any]


async def who_is_auditor(ops: OperatorOps) -> SwitchReport:
    leaders = await ops.leaders()
    lines = [f"Auditor: {leader.identity} (vote {leader.election}/{leader.vote})" for leader in leaders]
    data = {"leaders": [{"election": x.election, "vote": x.vote, "identity": x.identity} for x in leaders]}
    return SwitchReport(lines or ["no auditor is elected (no votes in either election)"], data)


async def recovery_delay(ops: OperatorOps, seconds: int | None, confirm: Confirm) -> SwitchReport:
    """Show lostBookieRecoveryDelay; with `seconds`, set it (after `confirm`) and read it back."""
    if seconds is not None:
        check_recovery_delay(seconds)  # before asking: a value Java cannot read is refused at once
    current, version = await ops.recovery_delay()
    shown = "not set (auditors use their own setting)" if current is None else f"{current}s"
    if seconds is None:
        return SwitchReport([f"lostBookieRecoveryDelay: {shown}"], {"lostBookieRecoveryDelaySeconds": current})
    if seconds == current:
        return SwitchReport(
            [f"lostBookieRecoveryDelay: already {current}s; nothing to do"],
            {"lostBookieRecoveryDelaySeconds": current, "changed": False},
        )
    change = f"set lostBookieRecoveryDelay of {ops.root} from {shown} to {seconds}s"
    if not confirm(change):
        raise ConfigError(f"not confirmed: {change}")
    now = await ops.change_recovery_delay(seconds, version)
    return SwitchReport(
        [f"lostBookieRecoveryDelay: {shown} -> {now}s (read back)"],
        {"lostBookieRecoveryDelaySeconds": now, "previous": current, "changed": True},
    )


async def replication(ops: OperatorOps, action: str, confirm: Confirm) -> SwitchReport:
    """`status`, `enable` or `disable` auto-recovery's replication (Java's `autorecovery` shell command)."""
    if action not in ("status", "enable", "disable"):
        raise ConfigError(f"replication: the action must be status, enable or disable, got {action!r}")
    disabled = await ops.replication_disabled()
    state = "disabled" if disabled else "enabled"
    if action == "status" or (action == "disable") == disabled:
        suffix = "" if action == "status" else "; nothing to do"
        return SwitchReport([f"replication: {state}{suffix}"], {"replicationEnabled": not disabled, "changed": False})
    change = f"{action} replication of {ops.root} (workers {'stop' if action == 'disable' else 'resume'} taking work)"
    if not confirm(change):
        raise ConfigError(f"not confirmed: {change}")
    now = await ops.change_replication_disabled(action == "disable")
    return SwitchReport(
        [f"replication: {state} -> {'disabled' if now else 'enabled'} (read back)"],
        {"replicationEnabled": not now, "changed": True},
    )
