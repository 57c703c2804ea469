"""Where the metadata lives: BookKeeper's `metadataServiceUri` (every ZooKeeper form) and legacy settings.

Pure string handling; nothing here connects. See spec zookeeper-layout.md §1.1.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from auditor.durability.javatext import java_int
from auditor.metadata.errors import MetadataConfigError, UnsupportedLayoutError

DEFAULT_LEDGERS_ROOT = "/ledgers"
DEFAULT_ZK_TIMEOUT_MS = 10000


class LedgerManager(enum.Enum):
    """The ZooKeeper path schemes BookKeeper uses for ledger znodes."""

    HIERARCHICAL = "hierarchical"  # hybrid: 2-4-4 below 2^31-1, 3-4-4-4-4 from there on
    LONG_HIERARCHICAL = "longhierarchical"  # always 3-4-4-4-4
    LEGACY_HIERARCHICAL = "legacyhierarchical"  # always 2-4-4 (only ever named inside LAYOUT)
    FLAT = "flat"  # one directory


class Driver(enum.Enum):
    ZOOKEEPER = "zk"  # BookKeeper's own ZooKeeper driver (zk+... URIs, legacy settings)
    PULSAR_METADATA_STORE = "metadata-store"  # Pulsar's driver (`metadata-store:zk:...`)


# URI scheme part after "zk+" -> manager; "null" (or nothing) means "read it from LAYOUT".
_URI_TYPES = {
    "hierarchical": LedgerManager.HIERARCHICAL,
    "longhierarchical": LedgerManager.LONG_HIERARCHICAL,
    "flat": LedgerManager.FLAT,
    "null": None,
}
# `ledgerManagerFactoryClass` (simple name) -> manager: the one translation of these class names.
LEDGER_MANAGER_CLASSES: Mapping[str, LedgerManager] = {
    "HierarchicalLedgerManagerFactory": LedgerManager.HIERARCHICAL,
    "LongHierarchicalLedgerManagerFactory": LedgerManager.LONG_HIERARCHICAL,
    "FlatLedgerManagerFactory": LedgerManager.FLAT,
}
# One ZooKeeper server: a host name / IPv4 address or a bracketed IPv6 address, then an optional port.
_SERVER = re.compile(r"(?:\[([0-9A-Fa-f:.]+(?:%[A-Za-z0-9._-]+)?)\]|([A-Za-z0-9._-]+))(?::([0-9]{1,5}))?")


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
    def ledgers_root_address(self) -> str:
        """Servers, chroot and ledgers root in one string (`zk-0:2181,zk-1:2181/pulsar/ledgers`): where
        this cluster's metadata is, the default name of the cluster in metrics."""
        return self.connect_string + self.ledgers_root

    @property
    def underreplication_root(self) -> str:
        return join(self.ledgers_root, "underreplication")


def join(parent: str, *children: str) -> str:
    """Join ZooKeeper path parts ("/" + "a" -> "/a", "/r" + "a" -> "/r/a")."""
    out = parent.rstrip("/")
    for child in children:
        out = f"{out}/{child.strip('/')}"
    return out or "/"


def zk_path_problem(path: str) -> str | None:
    """Why ZooKeeper would refuse `path` (its PathUtils.validatePath rules), or None if it is valid."""
    if not path.startswith("/"):
        return "must start with '/'"
    if len(path) > 1 and path.endswith("/"):
        return "must not end with '/'"
    for name in path.split("/")[1:] if path != "/" else []:
        if not name:
            return "has an empty node name ('//')"
        if name in (".", ".."):
            return "has a relative part ('.' or '..')"
    for c in path:
        n = ord(c)
        if n == 0 or n <= 0x1F or 0x7F <= n <= 0x9F or 0xD800 <= n <= 0xF8FF or n >= 0xFFF0:
            return f"has an invalid character {c!r}"
    return None


def _normalise_root(path: str, what: str) -> str:
    path = path.rstrip("/")
    if not path:
        raise MetadataConfigError(f"{what}: empty ledgers root path")
    problem = zk_path_problem(path)
    if problem:
        raise MetadataConfigError(f"{what}: ledgers root {path!r} is not a valid ZooKeeper path: it {problem}")
    return path


def _servers(text: str, what: str) -> str:
    hosts = [h.strip() for h in re.split(r"[;,]", text) if h.strip()]
    if not hosts:
        raise MetadataConfigError(f"{what}: no ZooKeeper servers")
    for h in hosts:
        m = _SERVER.fullmatch(h)
        if not m:
            raise MetadataConfigError(f"{what}: bad ZooKeeper server {h!r} (expected host:port or [ipv6]:port)")
        if m.group(3) is not None and not 0 < int(m.group(3)) < 65536:
            raise MetadataConfigError(f"{what}: ZooKeeper server {h!r}: port {m.group(3)} is not 1..65535")
    return ",".join(hosts)


def parse_service_uri(
    uri: str, session_timeout_ms: int = DEFAULT_ZK_TIMEOUT_MS, store_ledgers_root: str = DEFAULT_LEDGERS_ROOT
) -> MetadataLocation:
    """Parse `metadataServiceUri`: `zk[+type]://h1:2181;h2:2181/root` or `metadata-store:zk:h:2181[/chroot]`."""
    raw = uri.strip()
    bad = next((c for c in raw if ord(c) <= 0x20 or 0x7F <= ord(c) <= 0x9F), None)
    if bad is not None:
        # Java's URI refuses them; urlsplit would silently drop tabs and newlines ("/led\ngers" -> /ledgers).
        raise MetadataConfigError(
            f"metadata service uri {uri!r}: invalid character {bad!r} (a space or control character)"
        )
    if raw.lower().startswith("metadata-store:"):
        return _parse_metadata_store(raw, session_timeout_ms, store_ledgers_root)
    try:
        parts = urlsplit(raw)
    except ValueError as exc:  # e.g. "Invalid IPv6 URL" for an unclosed '['
        raise MetadataConfigError(f"metadata service uri {uri!r}: {exc}") from None
    if parts.query or parts.fragment or "?" in raw or "#" in raw:
        raise MetadataConfigError(
            f"metadata service uri {uri!r}: unexpected '?' or '#' (a ZooKeeper path cannot hold them)"
        )
    scheme = parts.scheme.lower()
    if not scheme:
        raise MetadataConfigError(f"metadata service uri {uri!r}: no scheme")
    kinds = scheme.split("+")
    if kinds[0] != "zk":
        raise UnsupportedLayoutError(
            f"metadata service uri {uri!r}: scheme {kinds[0]!r} is not ZooKeeper (only zk... is supported)"
        )
    if len(kinds) > 2:
        raise MetadataConfigError(f"metadata service uri {uri!r}: scheme has more than one '+'")
    kind = kinds[1] if len(kinds) == 2 else "null"
    if kind == "ms":
        raise UnsupportedLayoutError(
            f"metadata service uri {uri!r}: the MetaStore ledger manager is not a ZooKeeper tree and is not supported"
        )
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
    rest = uri[len("metadata-store:") :]
    if rest.lower().startswith("zk:"):
        rest = rest[3:]
    elif re.match(r"^[a-z][a-z0-9+.-]*:", rest.lower()) and not re.match(r"^[^:/]+:\d", rest):
        raise UnsupportedLayoutError(f"metadata service uri {uri!r}: only ZooKeeper metadata stores are supported")
    rest = rest.removeprefix("//")
    servers, slash, chroot = rest.partition("/")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    problem = zk_path_problem(chroot) if chroot else None
    if problem:
        raise MetadataConfigError(
            f"metadata service uri {uri!r}: chroot {chroot!r} is not a valid ZooKeeper path: it {problem}"
        )
    return MetadataLocation(
        zk_hosts=_servers(servers, f"metadata service uri {uri!r}"),
        ledgers_root=_normalise_root(ledgers_root, "zkLedgersRootPath"),
        manager=LedgerManager.HIERARCHICAL,
        chroot=chroot,
        driver=Driver.PULSAR_METADATA_STORE,
        session_timeout_ms=session_timeout_ms,
    )


def resolve(
    *,
    service_uri: str | None = None,
    servers: str | Sequence[str] | None = None,
    ledgers_root: str = DEFAULT_LEDGERS_ROOT,
    manager: LedgerManager | None = None,
    session_timeout_ms: int | str = DEFAULT_ZK_TIMEOUT_MS,
) -> MetadataLocation:
    """Resolve a location from already-translated settings, as Java does: `service_uri`
    (metadataServiceUri) wins; otherwise `servers` (zkServers) + `ledgers_root` (zkLedgersRootPath), with
    `manager` (None: LAYOUT decides). Errors name the BookKeeper key, as operators know them."""
    timeout = _timeout_ms(session_timeout_ms)
    uri = (service_uri or "").strip()
    if uri:
        return parse_service_uri(uri, timeout, ledgers_root or DEFAULT_LEDGERS_ROOT)
    if isinstance(servers, (list, tuple)):
        servers = ",".join(map(str, servers))
    if not servers or not str(servers).strip():
        raise MetadataConfigError("neither metadataServiceUri nor zkServers is set")
    return MetadataLocation(
        zk_hosts=_servers(str(servers), "zkServers"),
        ledgers_root=_normalise_root(ledgers_root or DEFAULT_LEDGERS_ROOT, "zkLedgersRootPath"),
        manager=manager,
        session_timeout_ms=timeout,
    )


def from_settings(settings: Mapping[str, object]) -> MetadataLocation:
    """Resolve a location from BookKeeper configuration keys (`metadataServiceUri`, `zkServers`,
    `zkLedgersRootPath`, `zkTimeout`, `ledgerManagerFactoryClass` or the older `ledgerManagerType`)."""
    timeout = _timeout_ms(settings.get("zkTimeout", DEFAULT_ZK_TIMEOUT_MS))  # checked first, as ever
    uri = str(settings.get("metadataServiceUri") or "").strip()
    servers = settings.get("zkServers")
    if not isinstance(servers, (list, tuple)):
        servers = str(servers) if servers else None
    legacy = not uri and bool(servers) and bool(str(servers).strip())
    return resolve(
        service_uri=uri,
        servers=servers,
        ledgers_root=str(settings.get("zkLedgersRootPath") or DEFAULT_LEDGERS_ROOT),
        manager=_legacy_manager(settings) if legacy else None,
        session_timeout_ms=timeout,
    )


def _timeout_ms(value: object) -> int:
    """zkTimeout (ms), a Java int > 0."""
    try:
        timeout = java_int(str(value).strip())
    except ValueError as exc:
        raise MetadataConfigError(f"zkTimeout: {exc}") from None
    if timeout <= 0:
        raise MetadataConfigError(f"zkTimeout: must be > 0 milliseconds, got {timeout}")
    return timeout


def _legacy_manager(settings: Mapping[str, object]) -> LedgerManager | None:
    cls = str(settings.get("ledgerManagerFactoryClass") or "").strip()
    if cls:
        short = cls.rsplit(".", 1)[-1]
        if short == "MSLedgerManagerFactory":
            raise UnsupportedLayoutError(f"ledgerManagerFactoryClass {cls}: MetaStore is not supported")
        if short not in LEDGER_MANAGER_CLASSES:
            raise MetadataConfigError(f"ledgerManagerFactoryClass {cls}: unknown ZooKeeper ledger manager")
        return LEDGER_MANAGER_CLASSES[short]
    kind = str(settings.get("ledgerManagerType") or "").strip().lower()
    if kind:
        if kind not in ("flat", "hierarchical", "longhierarchical"):
            raise MetadataConfigError(f"ledgerManagerType {kind!r}: unknown")
        return _URI_TYPES[kind]
    return None
