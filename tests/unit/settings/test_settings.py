"""The settings package's one-place rules: one error class, one placement-policy translation, one default
admin address, and the admin address variable with its deprecated alias."""

from __future__ import annotations

from pathlib import Path

import pytest

import auditor.errors
from auditor.durability.placement import POLICY_CLASSES, PolicyKind
from auditor.metadata.location import LedgerManager
from auditor.settings import (
    DEFAULT_ADMIN_ADDRESS,
    ENV_ADMIN_ADDRESS,
    ENV_ADMIN_ADDRESS_DEPRECATED,
    ConfigError,
    PropertiesError,
    Settings,
    admin_address_from_environment,
    load_settings,
    parse_properties,
)
from tests.unit.durability.placement_conf import policy_from_conf

pytestmark = pytest.mark.usefixtures("no_bkaudit_env")  # no BKAUDIT_* variable from outside


@pytest.fixture(autouse=True)
def no_old_admin_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_ADMIN_ADDRESS_DEPRECATED, raising=False)


def test_config_error_is_the_error_trees_class() -> None:
    assert ConfigError is auditor.errors.ConfigError
    assert issubclass(PropertiesError, ConfigError)
    with pytest.raises(ConfigError) as exc:
        parse_properties("key=\\u12\n")
    assert str(exc.value).startswith("line 1: ")


def test_config_error_lines_are_printable() -> None:
    err = ConfigError(["a\nb", "c"])
    assert err.problems == ["a\\nb", "c"] and str(err) == "a\\nb; c"


@pytest.mark.parametrize("name", sorted(POLICY_CLASSES))
def test_each_placement_class_is_translated_once_when_loaded(tmp_path: Path, name: str) -> None:
    conf = tmp_path / "bk.conf"
    conf.write_text(f"metadataServiceUri=zk://127.0.0.1:2181/ledgers\nensemblePlacementPolicy=x.y.{name}\n")
    s = load_settings(conf)
    assert s.placement.policy is POLICY_CLASSES[name]
    policy = s.placement.build_policy(s.racks.default_rack)
    if POLICY_CLASSES[name] is PolicyKind.DEFAULT:
        assert policy is None
    else:
        assert policy is not None and policy.kind is POLICY_CLASSES[name]


def test_placement_kind_names_and_java_classes_round_trip() -> None:
    for kind in PolicyKind:
        assert PolicyKind.parse(kind.value) is kind
        assert PolicyKind.parse(kind.java_class) is kind
        assert kind.java_class.startswith("org.apache.bookkeeper.client.")
    assert policy_from_conf(
        {"ensemblePlacementPolicy": "org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy"}
    ).kind is (PolicyKind.RACK_AWARE)


def test_a_bad_policy_in_yaml_names_the_setting(tmp_path: Path) -> None:
    f = tmp_path / "a.yaml"
    f.write_text("placement:\n  policy: RackAware2\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(f)
    assert exc.value.problems == [
        f"config file {f}: placement.policy: must be one of 'rackaware', 'zoneaware', 'regionaware' or 'default', "
        "got 'RackAware2'"
    ]


def test_metadata_location_takes_our_translated_values() -> None:
    s = Settings(zookeeper={"servers": "a:1,b:2", "ledgers_root": "/x/", "ledger_manager": "flat"})
    loc = s.metadata_location()
    assert (loc.zk_hosts, loc.ledgers_root, loc.manager, loc.session_timeout_ms) == (
        "a:1,b:2",
        "/x",
        LedgerManager.FLAT,
        10000,
    )
    uri = Settings(metadata_service_uri="zk+longhierarchical://h:1/r", zookeeper={"servers": "a:1"})
    assert uri.metadata_location().manager is LedgerManager.LONG_HIERARCHICAL


def test_one_default_admin_address() -> None:
    assert Settings().admin.bind == DEFAULT_ADMIN_ADDRESS


@pytest.mark.parametrize(
    ("env", "address", "warns"),
    [
        ({}, None, None),
        ({ENV_ADMIN_ADDRESS: "h:1"}, "h:1", None),
        ({ENV_ADMIN_ADDRESS_DEPRECATED: "h:2"}, "h:2", "deprecated; set BKAUDIT_ADMIN_ADDRESS instead"),
        ({ENV_ADMIN_ADDRESS: "h:1", ENV_ADMIN_ADDRESS_DEPRECATED: "h:2"}, "h:1", "BKAUDIT_ADMIN_ADDRESS=h:1 is used"),
        ({ENV_ADMIN_ADDRESS: "h:1", ENV_ADMIN_ADDRESS_DEPRECATED: "h:1"}, "h:1", "can be unset"),
        ({ENV_ADMIN_ADDRESS: " ", ENV_ADMIN_ADDRESS_DEPRECATED: ""}, None, None),
    ],
)
def test_admin_address_from_environment(env: dict[str, str], address: str | None, warns: str | None) -> None:
    got, warning = admin_address_from_environment(env)
    assert got == address
    if warns is None:
        assert warning is None
    else:
        assert warning is not None and warns in warning and ENV_ADMIN_ADDRESS_DEPRECATED in warning


def test_the_admin_address_variable_is_not_a_daemon_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_ADMIN_ADDRESS, "10.0.0.1:1")
    assert load_settings().admin.bind == DEFAULT_ADMIN_ADDRESS
