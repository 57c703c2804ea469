"""The operator's switches from the command line, as Java's shell sets them: `whoisauditor`,
`lostBookieRecoveryDelay` get/set, and the replication enable flag. Each change is shown before it is
made, confirmed (a prompt on a terminal, else `--yes`), written compare-and-set on the version just
read, and read back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from auditor.checks.build import connect_store
from auditor.errors import ConfigError
from auditor.metadata.zkoperator import OperatorSwitches
from auditor.settings import Settings

Confirm = Callable[[str], bool]  # shown the change; True to go on


@dataclass(frozen=True)
class SwitchReport:
    """What a command found and did: `lines` for people, `data` for --format json."""

    lines: list[str]
    data: dict[str, Any]


async def who_is_auditor(settings: Settings) -> SwitchReport:
    store = await connect_store(settings)
    try:
        leaders = await OperatorSwitches(store).current_leaders(settings.election_path)
    finally:
        await store.close()
    lines = [f"Auditor: {leader.identity} (vote {leader.election}/{leader.vote})" for leader in leaders]
    data = {"leaders": [{"election": x.election, "vote": x.vote, "identity": x.identity} for x in leaders]}
    return SwitchReport(lines or ["no auditor is elected (no votes in either election)"], data)


async def recovery_delay(settings: Settings, seconds: int | None, confirm: Confirm) -> SwitchReport:
    """Show lostBookieRecoveryDelay; with `seconds`, set it (after `confirm`) and read it back."""
    store = await connect_store(settings)
    try:
        switches = OperatorSwitches(store)
        current, version = await switches.lost_bookie_recovery_delay()
        shown = "not set (auditors use their own setting)" if current is None else f"{current}s"
        if seconds is None:
            return SwitchReport([f"lostBookieRecoveryDelay: {shown}"], {"lostBookieRecoveryDelaySeconds": current})
        if seconds == current:
            return SwitchReport(
                [f"lostBookieRecoveryDelay: already {current}s; nothing to do"],
                {"lostBookieRecoveryDelaySeconds": current, "changed": False},
            )
        change = f"set lostBookieRecoveryDelay of {store.root} from {shown} to {seconds}s"
        if not confirm(change):
            raise ConfigError(f"not confirmed: {change}")
        await switches.set_lost_bookie_recovery_delay(seconds, version)
        now, _ = await switches.lost_bookie_recovery_delay()
    finally:
        await store.close()
    return SwitchReport(
        [f"lostBookieRecoveryDelay: {shown} -> {now}s (read back)"],
        {"lostBookieRecoveryDelaySeconds": now, "previous": current, "changed": True},
    )


async def replication(settings: Settings, action: str, confirm: Confirm) -> SwitchReport:
    """`status`, `enable` or `disable` auto-recovery's replication (Java's `autorecovery` shell command)."""
    if action not in ("status", "enable", "disable"):
        raise ConfigError(f"replication: the action must be status, enable or disable, got {action!r}")
    store = await connect_store(settings)
    try:
        switches = OperatorSwitches(store)
        disabled = await switches.replication_disabled()
        state = "disabled" if disabled else "enabled"
        if action == "status" or (action == "disable") == disabled:
            suffix = "" if action == "status" else "; nothing to do"
            return SwitchReport(
                [f"replication: {state}{suffix}"], {"replicationEnabled": not disabled, "changed": False}
            )
        change = (
            f"{action} replication of {store.root} (workers {'stop' if action == 'disable' else 'resume'} taking work)"
        )
        if not confirm(change):
            raise ConfigError(f"not confirmed: {change}")
        await switches.set_replication_disabled(action == "disable")
        now = await switches.replication_disabled()
    finally:
        await store.close()
    return SwitchReport(
        [f"replication: {state} -> {'disabled' if now else 'enabled'} (read back)"],
        {"replicationEnabled": not now, "changed": True},
    )
