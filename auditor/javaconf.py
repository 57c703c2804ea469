"""The Java auditor's settings that bk-auditor accepts (`JAVA_KEYS`: Java name -> our dotted name, with
unit conversion) and a reader for Java `.properties` files such as bk_server.conf.

Names, defaults and units were checked against BookKeeper 4.17.3 (`ServerConfiguration`,
`ClientConfiguration`, `AbstractConfiguration`, the placement policies). docs/configuration.md has the
table with the reasons where our default differs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from auditor.durability.javatext import JAVA_TRIM


def _ms_to_s(value: Any) -> Any:
    return _scaled(value, 1000, "milliseconds")


def _scaled(value: Any, divisor: int, unit: str) -> Any:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ValueError(f"must be an integer ({unit}), got {value!r}") from None
    return n / divisor


def _placement_kind(value: Any) -> str:
    name = str(value).strip()
    short = name.rsplit(".", 1)[-1]
    table = {
        "RackawareEnsemblePlacementPolicy": "rackaware",
        # Pulsar's isolation policy extends the rack-aware one; isolation groups are not audited.
        "IsolatedBookieEnsemblePlacementPolicy": "rackaware",
        "ZoneawareEnsemblePlacementPolicy": "zoneaware",
        "RegionAwareEnsemblePlacementPolicy": "regionaware",
        "DefaultEnsemblePlacementPolicy": "default",
    }
    if short in table:
        return table[short]
    if name.lower() in ("rackaware", "zoneaware", "regionaware", "default"):
        return name.lower()
    raise ValueError(f"unsupported placement policy {name!r}; supported: {', '.join(sorted(table))}")


def _rack_source(value: Any) -> str:
    name = str(value).strip()
    short = name.rsplit(".", 1)[-1]
    if short == "ScriptBasedMapping":
        return "script"  # becomes "none" when no script is configured, as Java's default-rack answer
    if short in ("ZkBookieRackAffinityMapping", "BookieRackAffinityMapping"):
        return "pulsar"
    raise ValueError(
        f"unsupported DNS resolver {name!r}; supported: ScriptBasedMapping, "
        "(Zk)BookieRackAffinityMapping (Pulsar's /bookies rack map)"
    )


def _ledger_manager(value: Any) -> str:
    name = str(value).strip()
    short = name.rsplit(".", 1)[-1]
    table = {
        "HierarchicalLedgerManagerFactory": "hierarchical",
        "LongHierarchicalLedgerManagerFactory": "longhierarchical",
        "FlatLedgerManagerFactory": "flat",
    }
    if short in table:
        return table[short]
    if name.lower() in table.values():
        return name.lower()
    raise ValueError(f"unsupported ledger manager {name!r}; supported: {', '.join(sorted(table))}")


@dataclass(frozen=True, slots=True)
class JavaKey:
    """A Java auditor setting we accept: where it goes and how its value converts."""

    java: str
    path: str  # our dotted name
    unit: str  # the Java unit, for the docs and messages
    convert: Callable[[Any], Any] | None = None


JAVA_KEYS: dict[str, JavaKey] = {
    k.java: k
    for k in (
        JavaKey("metadataServiceUri", "metadata_service_uri", "URI"),
        JavaKey("zkServers", "zookeeper.servers", "host:port list"),
        JavaKey("zkLedgersRootPath", "zookeeper.ledgers_root", "path"),
        JavaKey("ledgerManagerFactoryClass", "zookeeper.ledger_manager", "class", _ledger_manager),
        JavaKey("ledgerManagerType", "zookeeper.ledger_manager", "name", _ledger_manager),
        JavaKey("zkTimeout", "zookeeper.session_timeout_seconds", "ms", _ms_to_s),
        JavaKey("zkRequestRateLimit", "zookeeper.reads_per_second", "requests/s"),
        JavaKey("auditorPeriodicBookieCheckInterval", "schedule.bookie_check_seconds", "s"),
        JavaKey("auditorPeriodicCheckInterval", "schedule.ledger_check_seconds", "s"),
        JavaKey("auditorPeriodicPlacementPolicyCheckInterval", "schedule.scrutiny_seconds", "s"),
        JavaKey("auditorReplicasCheckInterval", "schedule.scrutiny_seconds", "s"),
        JavaKey("lostBookieRecoveryDelay", "schedule.lost_bookie_delay_seconds", "s"),
        JavaKey("auditorLedgerVerificationPercentage", "ledger_check.verification_percentage", "%"),
        JavaKey("underreplicatedLedgerRecoveryGracePeriod", "under_replication.grace_seconds", "s"),
        JavaKey("auditorMaxNumberOfConcurrentOpenLedgerOperations", "max_concurrent_ledgers", "count"),
        JavaKey("readEntryTimeoutSec", "bookie_client.timeout_seconds", "s"),
        JavaKey("readTimeout", "bookie_client.timeout_seconds", "s"),
        JavaKey("clientConnectTimeoutMillis", "bookie_client.connect_timeout_seconds", "ms", _ms_to_s),
        JavaKey("nettyMaxFrameSizeBytes", "bookie_client.max_frame_bytes", "bytes"),
        JavaKey("ensemblePlacementPolicy", "placement.policy", "class", _placement_kind),
        JavaKey("minNumRacksPerWriteQuorum", "placement.min_racks_per_write_quorum", "count"),
        JavaKey("enforceMinNumRacksPerWriteQuorum", "placement.enforce_min_racks_per_write_quorum", "bool"),
        JavaKey("reppMinimumRegionsForDurability", "placement.min_regions_for_durability", "count"),
        JavaKey("minNumZonesPerWriteQuorum", "placement.min_zones_per_write_quorum", "count"),
        JavaKey("desiredNumZonesPerWriteQuorum", "placement.desired_zones_per_write_quorum", "count"),
        JavaKey("enforceStrictZoneawarePlacement", "placement.enforce_strict_zoneaware_placement", "bool"),
        JavaKey("networkTopologyScriptFileName", "racks.script", "path"),
        JavaKey("networkTopologyScriptNumberArgs", "racks.script_max_args", "count"),
        JavaKey("reppDnsResolverClass", "racks.source", "class", _rack_source),
    )
}

# When two Java keys feed one setting: the first listed wins (Java's own fallback order).
JAVA_PRECEDENCE = {
    "bookie_client.timeout_seconds": ("readEntryTimeoutSec", "readTimeout"),
    "zookeeper.ledger_manager": ("ledgerManagerFactoryClass", "ledgerManagerType"),
}
SCRUTINY_KEYS = ("auditorReplicasCheckInterval", "auditorPeriodicPlacementPolicyCheckInterval")


class PropertiesError(ValueError):
    """A `.properties` text Java's Properties.load would refuse; the message names the line."""


def parse_properties(text: str) -> dict[str, str]:
    """Java `.properties` / bk_server.conf: `key=value`, `key: value` or `key value`; `#`/`!` comments;
    a trailing backslash continues a line; common escapes. A repeated key keeps its last value.
    PropertiesError (naming the line) for a malformed `\\uXXXX` escape, as Java refuses it."""
    out: dict[str, str] = {}
    logical: list[tuple[int, str]] = []  # (first physical line number, text)
    buf, start = "", 0
    for number, raw in enumerate(_LINES.split(text), 1):
        line = raw.lstrip(JAVA_TRIM)
        if not buf:
            start = number
            if not line or line[0] in "#!":
                continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            buf += line[:-1]
            continue
        logical.append((start, buf + line))
        buf = ""
    if buf:
        logical.append((start, buf))
    for number, line in logical:
        m = re.match(r"((?:\\.|[^=:\s\\])+)\s*(?:[=:]\s*|\s+|$)(.*)$", line, re.DOTALL)
        if not m:
            continue
        try:
            out[_unescape(m.group(1))] = _unescape(m.group(2).rstrip())
        except PropertiesError as exc:
            raise PropertiesError(f"line {number}: {exc}") from None
    return out


# Lines end at \n, \r or \r\n (Java's line reader); leading white space goes as String.trim() removes it.
_LINES = re.compile(r"\r\n|\r|\n")


def _unescape(s: str) -> str:
    def rep(m: re.Match[str]) -> str:
        c = m.group(1)
        if c == "u":
            bad = s[m.start() : m.start() + 6]
            raise PropertiesError(f"malformed \\uxxxx escape {bad!r} (needs four hex digits)")
        if c.startswith("u"):
            return chr(int(c[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", rep, s, flags=re.DOTALL)
