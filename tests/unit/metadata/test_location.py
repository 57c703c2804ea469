"""metadataServiceUri in every ZooKeeper form, legacy settings, and the LAYOUT znode."""

from __future__ import annotations

import pytest

from auditor.metadata.codecs.layout import LedgerLayout, manager_of, parse_layout, resolve_manager
from auditor.metadata.errors import CorruptZnodeError, LayoutMismatchError, MetadataConfigError, UnsupportedLayoutError
from auditor.metadata.location import Driver, LedgerManager, from_settings, parse_service_uri
from auditor.settings import parse_properties

H, LH, FL, LEG = (
    LedgerManager.HIERARCHICAL,
    LedgerManager.LONG_HIERARCHICAL,
    LedgerManager.FLAT,
    LedgerManager.LEGACY_HIERARCHICAL,
)


@pytest.mark.parametrize(
    "uri, hosts, root, manager",
    [
        ("zk+hierarchical://127.0.0.1:21810/ledgers", "127.0.0.1:21810", "/ledgers", H),
        (
            "zk+longhierarchical://zk1:2181;zk2:2181;zk3:2181/pulsar/ledgers/",
            "zk1:2181,zk2:2181,zk3:2181",
            "/pulsar/ledgers",
            LH,
        ),
        ("zk+flat://h:1/l", "h:1", "/l", FL),
        ("zk+null://h:1/ledgers", "h:1", "/ledgers", None),
        ("zk://h:1/ledgers", "h:1", "/ledgers", None),
        ("ZK+Hierarchical://h:1/ledgers", "h:1", "/ledgers", H),
    ],
)
def test_zk_uris(uri: str, hosts: str, root: str, manager) -> None:
    loc = parse_service_uri(uri)
    assert (loc.zk_hosts, loc.ledgers_root, loc.manager, loc.chroot, loc.driver) == (
        hosts,
        root,
        manager,
        "",
        Driver.ZOOKEEPER,
    )
    assert loc.connect_string == hosts
    assert loc.underreplication_root == root + "/underreplication"


@pytest.mark.parametrize(
    "uri, error",
    [
        ("zk+ms://h:1/ledgers", UnsupportedLayoutError),
        ("etcd://h:1/ledgers", UnsupportedLayoutError),
        ("zk+legacyhierarchical://h:1/ledgers", MetadataConfigError),
        ("zk+hierarchical://h:1", MetadataConfigError),
        ("zk+hierarchical:///ledgers", MetadataConfigError),
        ("h:1/ledgers", UnsupportedLayoutError),
        ("zk+hierarchical://h:1//x", MetadataConfigError),
    ],
)
def test_bad_uris(uri: str, error: type) -> None:
    with pytest.raises(error):
        parse_service_uri(uri)


def test_pulsar_metadata_store_uri() -> None:
    loc = parse_service_uri("metadata-store:zk:zk1:2181,zk2:2181/my-chroot")
    assert loc.driver is Driver.PULSAR_METADATA_STORE
    assert (loc.zk_hosts, loc.chroot, loc.ledgers_root, loc.manager) == (
        "zk1:2181,zk2:2181",
        "/my-chroot",
        "/ledgers",
        H,
    )
    assert loc.connect_string == "zk1:2181,zk2:2181/my-chroot"
    assert parse_service_uri("metadata-store:zk:h:2181").chroot == ""
    assert (
        from_settings({"metadataServiceUri": "metadata-store:zk:h:2181", "zkLedgersRootPath": "/bk"}).ledgers_root
        == "/bk"
    )


def test_legacy_settings() -> None:
    loc = from_settings({"zkServers": "a:1,b:2", "zkLedgersRootPath": "/x/ledgers", "zkTimeout": "6000"})
    assert (loc.zk_hosts, loc.ledgers_root, loc.manager, loc.session_timeout_ms) == (
        "a:1,b:2",
        "/x/ledgers",
        None,
        6000,
    )
    assert from_settings({"zkServers": "a:1"}).ledgers_root == "/ledgers"
    assert (
        from_settings(
            {
                "zkServers": "a:1",
                "ledgerManagerFactoryClass": "org.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory",
            }
        ).manager
        is LH
    )
    assert from_settings({"zkServers": "a:1", "ledgerManagerType": "flat"}).manager is FL
    # The URI wins over the legacy keys.
    assert from_settings({"metadataServiceUri": "zk+flat://u:1/l", "zkServers": "a:1"}).zk_hosts == "u:1"
    with pytest.raises(MetadataConfigError):
        from_settings({})
    with pytest.raises(UnsupportedLayoutError):
        from_settings(
            {"zkServers": "a:1", "ledgerManagerFactoryClass": "org.apache.bookkeeper.meta.MSLedgerManagerFactory"}
        )
    props = parse_properties("# c\nmetadataServiceUri=zk+hierarchical://h:1/ledgers\nzkTimeout = 6000\n")
    assert from_settings(props).session_timeout_ms == 6000


def test_layout_parse_and_mapping() -> None:
    lay = parse_layout(b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1")
    assert lay == LedgerLayout(2, "org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory", 1)
    assert manager_of(lay) is H
    assert manager_of(parse_layout(b"2\norg.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory:1")) is LH
    assert manager_of(parse_layout(b"2\norg.apache.bookkeeper.meta.LegacyHierarchicalLedgerManagerFactory:1")) is LEG
    assert manager_of(parse_layout(b"2\ndlshade.org.apache.bookkeeper.meta.FlatLedgerManagerFactory:1")) is FL
    assert manager_of(parse_layout(b"1\nflat:1")) is FL
    assert manager_of(parse_layout(b"1\nhierarchical:1")) is H
    with pytest.raises(UnsupportedLayoutError):
        manager_of(parse_layout(b"2\norg.apache.bookkeeper.meta.MSLedgerManagerFactory:1"))
    with pytest.raises(UnsupportedLayoutError):
        manager_of(parse_layout(b"2\ncom.example.MyFactory:1"))
    pulsar = parse_layout(b"2\norg.apache.pulsar.metadata.bookkeeper.PulsarLedgerManagerFactory:1")
    assert manager_of(pulsar, Driver.PULSAR_METADATA_STORE) is H
    with pytest.raises(UnsupportedLayoutError):
        manager_of(pulsar)


@pytest.mark.parametrize("data", [b"", b"2", b"3\nx:1", b"2\nx", b"2\nx:y", b"a\nx:1", b"2\na:b:1", b"\xff\xfe"])
def test_layout_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptZnodeError):
        parse_layout(data, "/ledgers/LAYOUT")


def test_resolve_manager() -> None:
    long_layout = parse_layout(b"2\norg.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory:1")
    assert resolve_manager(None, None) is H  # missing LAYOUT: assume hybrid, never write it
    assert resolve_manager(FL, None) is FL
    assert resolve_manager(None, long_layout) is LH
    assert resolve_manager(LH, long_layout) is LH
    with pytest.raises(LayoutMismatchError):
        resolve_manager(H, long_layout)


@pytest.mark.parametrize(
    "data, problem",
    [
        (b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1_0", "manager version: '1_0'"),
        ("\u0662\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1".encode(), "layout format version"),
        (b" 2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1", "layout format version"),
        (b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory: 1", "manager version"),
        (b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:" + b"9" * 5000, "out of range"),
    ],
)
def test_layout_numbers_read_like_java(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptZnodeError) as err:
        parse_layout(data, "/ledgers/LAYOUT")
    assert err.value.path == "/ledgers/LAYOUT" and problem in err.value.problem, err.value.problem
    # Java's split(":") drops a trailing empty field, so "cls:1:" is still two parts.
    assert parse_layout(b"2\nx.Y:1:\n", "/l").manager_version == 1


@pytest.mark.parametrize(
    "uri, words",
    [
        ("zk+hierarchical://[::1/ledgers", "Invalid IPv6 URL"),
        ("zk+hierarchical://[::1]]:2181/ledgers", "bad ZooKeeper server"),
        ("zk+hierarchical://h:99999/ledgers", "port 99999 is not 1..65535"),
        ("zk+hierarchical://h:\u0662\u0661\u0668\u0661/ledgers", "bad ZooKeeper server"),
        ("zk+hierarchical://user@h:2181/ledgers", "bad ZooKeeper server"),
        ("zk+hierarchical://h:2181/led\ngers", "invalid character"),
        ("zk+hierarchical://h:2181/ledgers/../x", "relative part"),
        ("zk+hierarchical://h:2181/led\x00gers", "invalid character"),
        ("zk+hierarchical://h:2181/ledgers?x=1", "unexpected '?' or '#'"),
        ("zk+hierarchical://h:2181/ledgers#f", "unexpected '?' or '#'"),
        ("metadata-store:zk:h:2181/chroot/./x", "relative part"),
    ],
)
def test_malformed_uris_are_config_errors(uri: str, words: str) -> None:
    with pytest.raises(MetadataConfigError) as err:
        parse_service_uri(uri)
    assert words in str(err.value) and "metadata service uri" in str(err.value), str(err.value)


@pytest.mark.parametrize(
    "value, words",
    [
        ("abc", "'abc' is not a decimal number"),
        ("1.5", "not a decimal"),
        ("0", "must be > 0"),
        ("9" * 5000, "out of range"),
        (2**31, "out of range for a Java int"),
        ("\u0661\u0660", "not a decimal"),
    ],
)
def test_zk_timeout_must_be_a_java_int(value: str, words: str) -> None:
    with pytest.raises(MetadataConfigError) as err:
        from_settings({"zkServers": "h:2181", "zkTimeout": value})
    assert str(err.value).startswith("zkTimeout: ") and words in str(err.value), str(err.value)
