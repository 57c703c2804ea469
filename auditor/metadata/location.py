"""Where the metadata lives: BookKeeper's `metadataServiceUri` (every ZooKeeper form) and legacy settings.

Pure string handling; nothing here connects. See spec zookeeper-layout.md §1.1.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

from .errors import MetadataConfigError, UnsupportedLayoutError

DEFAULT_LEDGERS_ROOT = "/ledgers"
DEFAULT_ZK_TIMEOUT_MS = 10000


class LedgerManager(enum.Enum):
    """The ZooKeeper path schemes BookKeeper uses for ledger znodes."""

    HIERARCHICAL = "hierarchical"            # hybrid: 2-4-4 below 2^31-1, 3-4-4-4-4 from there on
    LONG_HIERARCHICAL = "longhierarchical"   # always 3-4-4-4-4
    LEGACY_HIERARCHICAL = "legacyhierarchical"  # always 2-4-4 (only ever named inside LAYOUT)
    FLAT = "flat"                            # one directory


class Driver(enum.Enum):
    ZOOKEEPER = "zk"                  # BookKeeper's own ZooKeeper driver (zk+... URIs, legacy settings)
    PULSAR_METADATA_STORE = "metadata-store"  # Pulsar's driver (`metadata-store:zk:...`)


# URI scheme part after "zk+" -> manager; "null" (or nothing) means "read it from LAYOUT".
_URI_TYPES = {
    "hierarchical": LedgerManager.HIERARCHICAL,
    "longhierarchical": LedgerManager.LONG_HIERARCHICAL,
    "flat": LedgerManager.FLAT,
    "null": None,
}
_LEGACY_FACTORY_CLASSES = {
    "HierarchicalLedgerManagerFactory": LedgerManager.HIERARCHICAL,
    "LongHierarchicalLedgerManagerFactory": LedgerManager.LONG_HIERARCHICAL,
    "FlatLedgerManagerFactory": LedgerManager.FLAT,
}
_HOST = re.compile(r"^[A-Za-z0-9._\-\[\]:]+$")


@dataclass(frozen=True, slots=True)
class MetadataLocation:
    """A resolved metadata location.

    `zk_hosts` is the comma-separated server list; `chroot` is "" unless the (Pulsar) URL carried one;
    `ledgers_root` is absolute inside the chrooted client; `manager` is None when LAYOUT decides.
    """

    zk_hosts: str
    ledgers_root: str
    manager: LedgerManager | None
    chroot: str = ""
    driver: Driver = Driver.ZOOKEEPER
    session_timeout_ms: int = DEFAULT_ZK_TIMEOUT_MS

    @property
    def connect_string(self) -> str:
        """What to hand to the ZooKeeper client: servers plus chroot."""
        return self.zk_hosts + self.chroot

    @property
    def underreplication_root(self) -> str:
        return join(self.ledgers_root, "underreplication")


def join(parent: str, *children: str) -> str:
    """Join ZooKeeper path parts ("/" + "a" -> "/a", "/r" + "a" -> "/r/a")."""
    out = parent.rstrip("/")
    for child in children:
        out = f"{out}/{child.strip('/')}"
    return out or "/"


def _normalise_root(path: str, what: str) -> str:
    path = path.rstrip("/")
    if not path:
        raise MetadataConfigError(f"{what}: empty ledgers root path")
    if not path.startswith("/") or "//" in path:
        raise MetadataConfigError(f"{what}: ledgers root {path!r} must be an absolute ZooKeeper path")
    return path


def _servers(text: str, what: str) -> str:
    hosts = [h.strip() for h in re.split(r"[;,]", text) if h.strip()]
    if not hosts:
        raise MetadataConfigError(f"{what}: no ZooKeeper servers")
    for h in hosts:
        if not _HOST.match(h):
            raise MetadataConfigError(f"{what}: bad ZooKeeper server {h!r}")
    return ",".join(hosts)


def parse_service_uri(uri: str, session_timeout_ms: int = DEFAULT_ZK_TIMEOUT_MS,
                      store_ledgers_root: str = DEFAULT_LEDGERS_ROOT) -> MetadataLocation:
    """Parse `metadataServiceUri`: `zk[+type]://h1:2181;h2:2181/root` or `metadata-store:zk:h:2181[/chroot]`."""
    raw = uri.strip()
    if raw.lower().startswith("metadata-store:"):
        return _parse_metadata_store(raw, session_timeout_ms, store_ledgers_root)
    parts = urlsplit(raw)
    scheme = parts.scheme.lower()
    if not scheme:
        raise MetadataConfigError(f"metadata service uri {uri!r}: no scheme")
    kinds = scheme.split("+")
    if kinds[0] != "zk":
        raise UnsupportedLayoutError(
            f"metadata service uri {uri!r}: scheme {kinds[0]!r} is not ZooKeeper (only zk... is supported)")
    if len(kinds) > 2:
        raise MetadataConfigError(f"metadata service uri {uri!r}: scheme has more than one '+'")
    kind = kinds[1] if len(kinds) == 2 else "null"
    if kind == "ms":
        raise UnsupportedLayoutError(f"metadata service uri {uri!r}: the MetaStore ledger manager is not a "
                                     "ZooKeeper tree and is not supported")
    if kind not in _URI_TYPES:
        raise MetadataConfigError(f"metadata service uri {uri!r}: unknown ledger manager type {kind!r}")
    return MetadataLocation(
        zk_hosts=_servers(parts.netloc, f"metadata service uri {uri!r}"),
        ledgers_root=_normalise_root(parts.path, f"metadata service uri {uri!r}"),
        manager=_URI_TYPES[kind],
        session_timeout_ms=session_timeout_ms,
    )


def _parse_metadata_store(uri: str, session_timeout_ms: int, ledgers_root: str) -> MetadataLocation:
    # Pulsar's driver: the rest is a metadata-store URL such as zk:h1:2181,h2:2181/chroot. Java's URI
    # has no path for this opaque form, so the ledgers root is zkLedgersRootPath (default /ledgers),
    # inside the chroot.
    rest = uri[len("metadata-store:"):]
    if rest.lower().startswith("zk:"):
        rest = rest[3:]
    elif re.match(r"^[a-z][a-z0-9+.-]*:", rest.lower()) and not re.match(r"^[^:/]+:\d", rest):
        raise UnsupportedLayoutError(f"metadata service uri {uri!r}: only ZooKeeper metadata stores are supported")
    rest = rest.removeprefix("//")
    servers, slash, chroot = rest.partition("/")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    if chroot and "//" in chroot:
        raise MetadataConfigError(f"metadata service uri {uri!r}: bad chroot {chroot!r}")
    return MetadataLocation(
        zk_hosts=_servers(servers, f"metadata service uri {uri!r}"),
        ledgers_root=_normalise_root(ledgers_root, "zkLedgersRootPath"),
        manager=LedgerManager.HIERARCHICAL,
        chroot=chroot,
        driver=Driver.PULSAR_METADATA_STORE,
        session_timeout_ms=session_timeout_ms,
    )


def from_settings(settings: Mapping[str, object]) -> MetadataLocation:
    """Resolve a location from BookKeeper configuration keys, as Java does.

    `metadataServiceUri` wins; otherwise `zkServers` + `zkLedgersRootPath` (default /ledgers) with the
    manager from `ledgerManagerFactoryClass` or the older `ledgerManagerType`.
    """
    timeout = int(str(settings.get("zkTimeout", DEFAULT_ZK_TIMEOUT_MS)))
    uri = str(settings.get("metadataServiceUri") or "").strip()
    if uri:
        return parse_service_uri(uri, timeout, str(settings.get("zkLedgersRootPath") or DEFAULT_LEDGERS_ROOT))
    servers = settings.get("zkServers")
    if isinstance(servers, (list, tuple)):
        servers = ",".join(map(str, servers))
    if not servers or not str(servers).strip():
        raise MetadataConfigError("neither metadataServiceUri nor zkServers is set")
    root = str(settings.get("zkLedgersRootPath") or DEFAULT_LEDGERS_ROOT)
    manager = _legacy_manager(settings)
    return MetadataLocation(
        zk_hosts=_servers(str(servers), "zkServers"),
        ledgers_root=_normalise_root(root, "zkLedgersRootPath"),
        manager=manager,
        session_timeout_ms=timeout,
    )


def _legacy_manager(settings: Mapping[str, object]) -> LedgerManager | None:
    cls = str(settings.get("ledgerManagerFactoryClass") or "").strip()
    if cls:
        short = cls.rsplit(".", 1)[-1]
        if short == "MSLedgerManagerFactory":
            raise UnsupportedLayoutError(f"ledgerManagerFactoryClass {cls}: MetaStore is not supported")
        if short not in _LEGACY_FACTORY_CLASSES:
            raise MetadataConfigError(f"ledgerManagerFactoryClass {cls}: unknown ZooKeeper ledger manager")
        return _LEGACY_FACTORY_CLASSES[short]
    kind = str(settings.get("ledgerManagerType") or "").strip().lower()
    if kind:
        if kind not in ("flat", "hierarchical", "longhierarchical"):
            raise MetadataConfigError(f"ledgerManagerType {kind!r}: unknown")
        return _URI_TYPES[kind]
    return None


def parse_properties(text: str) -> dict[str, str]:
    """Read a Java-style `key=value` configuration file (bk_server.conf) into a dict."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out
