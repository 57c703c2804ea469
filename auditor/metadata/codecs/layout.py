"""The `R/LAYOUT` znode: which ledger manager (path scheme) the cluster uses. Spec §1.2.

Read-only: we never create or rewrite LAYOUT, even when it is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from auditor.durability.javatext import java_int, java_split, shown
from auditor.metadata.errors import CorruptZnodeError, LayoutMismatchError, UnsupportedLayoutError
from auditor.metadata.location import Driver, LedgerManager

# Class-name suffix (after any shading prefix such as "dlshade.") -> path scheme. Order matters:
# the longer names must be tried before "HierarchicalLedgerManagerFactory".
_CLASS_SUFFIXES = (
    ("org.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory", LedgerManager.LONG_HIERARCHICAL),
    ("org.apache.bookkeeper.meta.LegacyHierarchicalLedgerManagerFactory", LedgerManager.LEGACY_HIERARCHICAL),
    ("org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory", LedgerManager.HIERARCHICAL),
    ("org.apache.bookkeeper.meta.FlatLedgerManagerFactory", LedgerManager.FLAT),
)
# Pulsar's own factory (metadata-store driver) lays ledgers out like the hybrid hierarchical manager.
_PULSAR_FACTORY_SUFFIX = "PulsarLedgerManagerFactory"
_V1_TYPES = {"hierarchical": LedgerManager.HIERARCHICAL, "flat": LedgerManager.FLAT}


@dataclass(frozen=True, slots=True)
class LedgerLayout:
    format_version: int  # 1 or 2
    factory_class: str  # class name (v2) or short type (v1), as stored
    manager_version: int


def parse_layout(data: bytes, path: str = "LAYOUT") -> LedgerLayout:
    """Parse LAYOUT content, `<format version>\\n<class>:<manager version>`, as Java's LedgerLayout
    reads it: Java ints with nothing around them, exactly one ':' on the second line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptZnodeError(path, f"not UTF-8 text ({exc})") from None
    lines = java_split(text, "\n")
    try:
        fmt = java_int(lines[0])
    except ValueError as exc:
        raise CorruptZnodeError(path, f"layout format version: {exc}") from None
    if fmt not in (1, 2):
        raise CorruptZnodeError(path, f"layout format version {fmt} is not supported (1 or 2 only)")
    if len(lines) < 2:
        raise CorruptZnodeError(path, f"no '<class>:<version>' line after the format version: {shown(text, 80)}")
    parts = java_split(lines[1], ":")
    if len(parts) != 2:
        raise CorruptZnodeError(path, f"second line {shown(lines[1], 120)} is not '<class>:<version>'")
    try:
        manager_version = java_int(parts[1])
    except ValueError as exc:
        raise CorruptZnodeError(path, f"manager version: {exc}") from None
    return LedgerLayout(fmt, parts[0], manager_version)


def manager_of(layout: LedgerLayout, driver: Driver = Driver.ZOOKEEPER) -> LedgerManager:
    """The path scheme a LAYOUT names; UnsupportedLayoutError for MetaStore and unknown classes."""
    name = layout.factory_class
    if layout.format_version == 1:
        if name in _V1_TYPES:
            return _V1_TYPES[name]
        raise UnsupportedLayoutError(f"LAYOUT v1 names unknown ledger manager type {name!r}")
    for suffix, manager in _CLASS_SUFFIXES:
        # Accept a shading prefix (e.g. "dlshade.org.apache...") in front of the real class name.
        if name == suffix or name.endswith("." + suffix):
            return manager
    if driver is Driver.PULSAR_METADATA_STORE and name.rsplit(".", 1)[-1] == _PULSAR_FACTORY_SUFFIX:
        return LedgerManager.HIERARCHICAL
    raise UnsupportedLayoutError(
        f"LAYOUT names ledger manager factory {name!r}, which is not a ZooKeeper tree this auditor can read"
    )


def resolve_manager(
    configured: LedgerManager | None,
    layout: LedgerLayout | None,
    driver: Driver = Driver.ZOOKEEPER,
    path: str = "LAYOUT",
) -> LedgerManager:
    """Decide the path scheme from the configured manager and the LAYOUT znode, refusing a mismatch.

    A missing LAYOUT (e.g. a cluster only ever touched by Pulsar's driver) means the configured manager
    or, by default, hybrid hierarchical, which is what Java would write there.
    """
    if layout is None:
        return configured or LedgerManager.HIERARCHICAL
    stored = manager_of(layout, driver)
    if configured is not None and configured is not stored:
        raise LayoutMismatchError(
            f"{path}: the configuration says {configured.value} but the cluster's "
            f"LAYOUT says {layout.factory_class} ({stored.value}); refusing to guess"
        )
    return stored
