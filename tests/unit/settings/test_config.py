"""Settings: precedence (flags > env > file > defaults), Java key mapping, and error messages, with real
files in tmp_path and real environment variables."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from auditor.settings import (
    JAVA_KEYS,
    ConfigError,
    TimeWindow,
    java_key_table,
    load_settings,
    parse_bind,
    parse_properties,
)
from auditor.settings.values import grpc_target

pytestmark = pytest.mark.usefixtures("no_bkaudit_env")


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def problems(exc: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return exc.value.problems


def file_problems(tmp_path: Path, name: str, text: str) -> tuple[Path, list[str]]:
    """Write a config file that must be refused: (its path, the problems named)."""
    p = write(tmp_path, name, text)
    with pytest.raises(ConfigError) as exc:
        load_settings(p)
    return p, problems(exc)


# ------------------------------------------------------------------------------------------ defaults


def test_defaults_without_any_source() -> None:
    s = load_settings()
    assert s.metadata_service_uri is None and not s.has_metadata
    assert s.schedule.ledger_check_seconds == 604800
    assert s.schedule.bookie_check_seconds == 86400
    assert s.schedule.scrutiny_seconds > 0  # scrutiny is on by default, unlike Java
    assert s.admin.bind == "127.0.0.1:7979"
    assert s.metrics.bind == "127.0.0.1:9181"
    assert s.log.format == "json" and s.log.level == "info"
    assert s.event_loop == "uvloop"
    assert s.ledger_check.mark_under_replicated is False
    assert s.election.join_java_election is False
    assert s.election_path == "/ledgers/bk-auditor/election"
    assert s.schedule.windows == [] and s.schedule.in_window()
    assert s.config_file is None and s.ignored_java_keys == ()
    with pytest.raises(ConfigError, match="metadata_service_uri: not set"):
        s.require_metadata()


# ------------------------------------------------------------------------------------------ precedence


def test_precedence_flags_over_env_over_file_over_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = write(
        tmp_path, "a.yaml", "schedule:\n  ledger_check_seconds: 100\n  scrutiny_seconds: 7\nlog:\n  level: warning\n"
    )
    s = load_settings(f)
    assert s.schedule.ledger_check_seconds == 100 and s.schedule.scrutiny_seconds == 7
    assert s.config_file == f

    monkeypatch.setenv("BKAUDIT_SCHEDULE__LEDGER_CHECK_SECONDS", "200")
    s = load_settings(f)
    assert s.schedule.ledger_check_seconds == 200
    assert s.schedule.scrutiny_seconds == 7  # the file still supplies what env does not
    assert s.log.level == "warning"

    s = load_settings(f, overrides={"schedule": {"ledger_check_seconds": 300}, "log": {"level": "debug"}})
    assert s.schedule.ledger_check_seconds == 300
    assert s.schedule.scrutiny_seconds == 7
    assert s.log.level == "debug"
    assert s.schedule.bookie_check_seconds == 86400  # default


def test_config_file_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = write(tmp_path, "bk_server.conf", "auditorPeriodicCheckInterval=42\n")
    monkeypatch.setenv("BKAUDIT_CONFIG_FILE", str(f))
    s = load_settings()
    assert s.schedule.ledger_check_seconds == 42 and s.config_file == f


def test_env_lists_and_top_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BKAUDIT_METADATA_SERVICE_URI", "zk+hierarchical://127.0.0.1:2181/ledgers")
    monkeypatch.setenv("BKAUDIT_RECHECK__DELAYS_SECONDS", "5, 60")
    monkeypatch.setenv("BKAUDIT_SCHEDULE__WINDOWS", '["01:00-05:00"]')
    monkeypatch.setenv("BKAUDIT_EVENT_LOOP", "uvloop")
    s = load_settings()
    assert s.metadata_service_uri == "zk+hierarchical://127.0.0.1:2181/ledgers"
    assert s.recheck.delays_seconds == [5.0, 60.0]
    assert s.schedule.windows == ["01:00-05:00"]
    assert s.event_loop == "uvloop"


# ------------------------------------------------------------------------------------------ Java names

BK_SERVER_CONF = """\
# an operator's bk_server.conf (excerpt)
bookiePort=3181
journalDirectories=/data/journal
ledgerDirectories=/data/ledgers
metadataServiceUri=zk+hierarchical://zk1:2181;zk2:2181/pulsar/ledgers
zkTimeout=30000
auditorPeriodicBookieCheckInterval=3600
auditorPeriodicCheckInterval = 0
auditorReplicasCheckInterval: 7200
auditorPeriodicPlacementPolicyCheckInterval 0
auditorLedgerVerificationPercentage=10
underreplicatedLedgerRecoveryGracePeriod=600
lostBookieRecoveryDelay=120
readEntryTimeoutSec=7
readTimeout=99
nettyMaxFrameSizeBytes=5253120
auditorMaxNumberOfConcurrentOpenLedgerOperations=250
ensemblePlacementPolicy=org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy
minNumRacksPerWriteQuorum=3
enforceMinNumRacksPerWriteQuorum=true
reppMinimumRegionsForDurability=3
minNumZonesPerWriteQuorum=2
desiredNumZonesPerWriteQuorum=4
enforceStrictZoneawarePlacement=false
reppDnsResolverClass=org.apache.pulsar.zookeeper.ZkBookieRackAffinityMapping
clientConnectTimeoutMillis=2500
dbStorage_writeCacheMaxSizeMb=
statsProviderClass=org.apache.bookkeeper.stats.prometheus.PrometheusMetricsProvider
prometheusStatsHttpPort=8000
"""


def test_java_properties_are_mapped_with_units(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, "bk_server.conf", BK_SERVER_CONF))
    assert s.metadata_service_uri == "zk+hierarchical://zk1:2181;zk2:2181/pulsar/ledgers"
    assert s.zookeeper.session_timeout_seconds == 30.0  # ms -> s
    assert s.schedule.bookie_check_seconds == 3600
    assert s.schedule.ledger_check_seconds == 0  # Java 0 = disabled, ours too
    assert s.schedule.scrutiny_seconds == 7200  # non-zero of the two scrutiny keys
    assert s.ledger_check.verification_percentage == 10
    assert s.under_replication.grace_seconds == 600
    assert s.schedule.lost_bookie_delay_seconds == 120
    assert s.bookie_client.timeout_seconds == 7  # readEntryTimeoutSec beats readTimeout
    assert s.bookie_client.connect_timeout_seconds == 2.5
    assert s.bookie_client.max_frame_bytes == 5253120
    assert s.max_concurrent_ledgers == 250
    p = s.placement
    assert p.policy == "zoneaware"
    assert (p.min_racks_per_write_quorum, p.enforce_min_racks_per_write_quorum) == (3, True)
    assert p.min_regions_for_durability == 3
    assert (p.min_zones_per_write_quorum, p.desired_zones_per_write_quorum) == (2, 4)
    assert p.enforce_strict_zoneaware_placement is False
    assert s.racks.source == "pulsar"
    # bookie-only keys are recognised and ignored (blank ones too), never an error
    assert {
        "bookiePort",
        "journalDirectories",
        "ledgerDirectories",
        "statsProviderClass",
        "prometheusStatsHttpPort",
        "dbStorage_writeCacheMaxSizeMb",
    } <= set(s.ignored_java_keys)
    assert "zkTimeout" not in s.ignored_java_keys
    # the metadata location and everything derived from it
    assert s.ledgers_root == "/pulsar/ledgers"
    assert s.election_path == "/pulsar/ledgers/bk-auditor/election"
    loc = s.metadata_location()
    assert loc.zk_hosts == "zk1:2181,zk2:2181" and loc.session_timeout_ms == 30000


def test_legacy_zk_servers_and_blank_uri(tmp_path: Path) -> None:
    conf = (
        "metadataServiceUri=\nzkServers=zk1:2181,zk2:2181\nzkLedgersRootPath=/bk\n"
        "ledgerManagerFactoryClass=org.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory\n"
    )
    s = load_settings(write(tmp_path, "bookkeeper.conf", conf))
    assert s.metadata_service_uri is None  # blank = unset, as Java's isBlank
    assert s.zookeeper.servers == "zk1:2181,zk2:2181"
    assert s.zookeeper.ledger_manager == "longhierarchical"
    assert s.has_metadata
    s.require_metadata()
    loc = s.metadata_location()
    assert (loc.zk_hosts, loc.ledgers_root, loc.manager.value) == ("zk1:2181,zk2:2181", "/bk", "longhierarchical")
    assert s.election_path == "/bk/bk-auditor/election"


def test_scrutiny_keys_both_zero_disable_and_both_set_take_the_more_frequent(tmp_path: Path) -> None:
    off = load_settings(
        write(tmp_path, "a.conf", "auditorReplicasCheckInterval=0\nauditorPeriodicPlacementPolicyCheckInterval=0\n")
    )
    assert off.schedule.scrutiny_seconds == 0
    both = load_settings(
        write(
            tmp_path, "b.conf", "auditorReplicasCheckInterval=86400\nauditorPeriodicPlacementPolicyCheckInterval=3600\n"
        )
    )
    assert both.schedule.scrutiny_seconds == 3600


def test_rack_resolver_mapping(tmp_path: Path) -> None:
    no_script = load_settings(
        write(tmp_path, "a.conf", "reppDnsResolverClass=org.apache.bookkeeper.net.ScriptBasedMapping\n")
    )
    assert no_script.racks.source == "none"  # Java: no script -> every bookie in the default rack
    script = write(tmp_path, "rack.sh", "#!/bin/sh\necho /r1\n")
    with_script = load_settings(
        write(
            tmp_path,
            "b.conf",
            "reppDnsResolverClass=org.apache.bookkeeper.net.ScriptBasedMapping\n"
            f"networkTopologyScriptFileName={script}\n"
            "networkTopologyScriptNumberArgs=10\n",
        )
    )
    assert (with_script.racks.source, with_script.racks.script, with_script.racks.script_max_args) == (
        "script",
        script,
        10,
    )
    pulsar = load_settings(
        write(
            tmp_path,
            "c.conf",
            "reppDnsResolverClass=org.apache.pulsar.bookie.rackawareness.BookieRackAffinityMapping\n",
        )
    )
    assert pulsar.racks.source == "pulsar"


def test_placement_class_names(tmp_path: Path) -> None:
    for cls, kind in [
        ("org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy", "rackaware"),
        ("org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy", "rackaware"),
        ("org.apache.bookkeeper.client.RegionAwareEnsemblePlacementPolicy", "regionaware"),
        ("org.apache.bookkeeper.client.DefaultEnsemblePlacementPolicy", "default"),
    ]:
        s = load_settings(write(tmp_path, "p.conf", f"ensemblePlacementPolicy={cls}\n"))
        assert s.placement.policy == kind


def test_yaml_mixes_java_and_our_names(tmp_path: Path) -> None:
    f = write(
        tmp_path,
        "auditor.yaml",
        """
metadataServiceUri: zk+hierarchical://127.0.0.1:2181/ledgers
zkTimeout: 15000
schedule:
  windows: ["22:00-02:00", "12:00-13:00"]
  windows_timezone: Europe/Berlin
recheck:
  delays_seconds: [1, 2]
  attempts: 4
racks:
  source: none
election:
  identity: auditor-0
bookie_client.requests_per_second: 10
""",
    )
    s = load_settings(f)
    assert s.zookeeper.session_timeout_seconds == 15
    assert s.schedule.windows == ["22:00-02:00", "12:00-13:00"]
    assert s.recheck.schedule() == [1, 2, 2, 2]
    assert s.election.identity == "auditor-0"
    assert s.bookie_client.requests_per_second == 10
    # 23:30 UTC is 00:30 in Berlin in winter: inside 22:00-02:00
    assert s.schedule.in_window(datetime(2026, 1, 10, 23, 30, tzinfo=UTC))
    assert not s.schedule.in_window(datetime(2026, 1, 10, 8, 0, tzinfo=UTC))


def test_java_election_is_opt_in(tmp_path: Path) -> None:
    s = load_settings(
        overrides={
            "metadata_service_uri": "zk+hierarchical://127.0.0.1:2181/ledgers",
            "election": {"join_java_election": True, "identity": "127.0.0.1:3181"},
        }
    )
    assert s.election_path == "/ledgers/underreplication/auditorelection"
    with pytest.raises(ConfigError) as exc:
        load_settings(write(tmp_path, "e.yaml", "election:\n  path: /ledgers/underreplication/auditorelection\n"))
    assert problems(exc) == [
        f"config file {tmp_path / 'e.yaml'}: election.path: /ledgers/underreplication/"
        "auditorelection is the Java auditor's election; set "
        "election.join_java_election=true to take part in it on purpose"
    ]


def test_java_key_table_is_complete() -> None:
    names = {j for j, _, _ in java_key_table()}
    required = {
        "metadataServiceUri",
        "zkServers",
        "zkLedgersRootPath",
        "zkTimeout",
        "auditorPeriodicCheckInterval",
        "auditorPeriodicBookieCheckInterval",
        "auditorPeriodicPlacementPolicyCheckInterval",
        "auditorReplicasCheckInterval",
        "auditorLedgerVerificationPercentage",
        "underreplicatedLedgerRecoveryGracePeriod",
        "lostBookieRecoveryDelay",
        "readEntryTimeoutSec",
        "nettyMaxFrameSizeBytes",
        "auditorMaxNumberOfConcurrentOpenLedgerOperations",
        "ensemblePlacementPolicy",
        "minNumRacksPerWriteQuorum",
        "enforceMinNumRacksPerWriteQuorum",
        "reppMinimumRegionsForDurability",
        "minNumZonesPerWriteQuorum",
        "desiredNumZonesPerWriteQuorum",
        "enforceStrictZoneawarePlacement",
        "networkTopologyScriptFileName",
        "reppDnsResolverClass",
    }
    assert required <= names
    # every mapping points at a real setting
    from auditor.settings.model import is_our_path

    for jk in JAVA_KEYS.values():
        assert is_our_path(jk.path), jk.path  # nested sections too (zookeeper.tls.keystore)


# ------------------------------------------------------------------------------------------ errors


def test_error_names_the_java_key_and_the_file(tmp_path: Path) -> None:
    f = write(tmp_path, "x.yaml", "auditorPeriodicCheckInterval: -5\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(f)
    assert str(exc.value) == f"config file {f}: auditorPeriodicCheckInterval: must be >= 0, got -5"


def test_error_from_a_properties_file_keeps_the_written_value(tmp_path: Path) -> None:
    f = write(
        tmp_path,
        "bk.conf",
        "zkTimeout=abc\nauditorLedgerVerificationPercentage=150\nenforceStrictZoneawarePlacement=maybe\n",
    )
    with pytest.raises(ConfigError) as exc:
        load_settings(f)
    assert problems(exc) == [f"config file {f}: zkTimeout: must be an integer (milliseconds), got 'abc'"]
    f2 = write(tmp_path, "bk2.conf", "auditorLedgerVerificationPercentage=150\nenforceStrictZoneawarePlacement=maybe\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(f2)
    assert sorted(problems(exc)) == sorted(
        [
            f"config file {f2}: auditorLedgerVerificationPercentage: must be <= 100, got 150",
            f"config file {f2}: enforceStrictZoneawarePlacement: must be true or false, got 'maybe'",
        ]
    )


def test_unknown_key_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    f, found = file_problems(tmp_path, "a.conf", "auditorPeriodicChekInterval=5\nbookiePort=3181\n")
    assert found == [
        f"config file {f}: auditorPeriodicChekInterval: unknown setting (did you mean auditorPeriodicCheckInterval?)"
    ]
    y, found = file_problems(tmp_path, "a.yaml", "schedule:\n  scrutiny: 5\n")
    assert found[0].startswith(f"config file {y}: schedule.scrutiny: unknown setting")


def test_java_and_our_name_for_the_same_setting_conflict(tmp_path: Path) -> None:
    f = write(tmp_path, "a.yaml", "auditorPeriodicCheckInterval: 5\nschedule:\n  ledger_check_seconds: 6\n")
    with pytest.raises(ConfigError, match="sets the same thing as"):
        load_settings(f)


def test_env_and_flag_errors_name_their_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BKAUDIT_BOOKIE_CLIENT__TIMEOUT_SECONDS", "0")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert problems(exc) == ["environment: BKAUDIT_BOOKIE_CLIENT__TIMEOUT_SECONDS: must be > 0, got 0"]
    monkeypatch.delenv("BKAUDIT_BOOKIE_CLIENT__TIMEOUT_SECONDS")
    with pytest.raises(ConfigError) as exc:
        load_settings(
            overrides={"admin": {"bind": "localhost"}, "log": {"format": "xml"}},
            option_names={"admin.bind": "--admin-bind", "log.format": "--log-format"},
        )
    assert sorted(problems(exc)) == [
        "command line: --admin-bind: must be host:port (e.g. 127.0.0.1:7979 or [::1]:7979), got 'localhost'",
        "command line: --log-format: must be one of 'json' or 'console', got 'xml'",
    ]


def test_bad_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=f"config file {missing}: cannot read"):
        load_settings(missing)
    bad = write(tmp_path, "bad.yaml", "schedule: [1,\n")
    with pytest.raises(ConfigError, match=f"config file {bad}: not valid YAML"):
        load_settings(bad)
    lst = write(tmp_path, "list.yaml", "- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a mapping of settings"):
        load_settings(lst)


def test_cross_checks(tmp_path: Path) -> None:
    cert = write(tmp_path, "c.pem", "x")
    f = write(
        tmp_path,
        "a.yaml",
        f"""
metadataServiceUri: etcd://127.0.0.1:2379/ledgers
admin:
  tls_cert: {cert}
placement:
  min_zones_per_write_quorum: 3
  desired_zones_per_write_quorum: 2
racks:
  source: file
schedule:
  windows: ["25:00-01:00"]
""",
    )
    with pytest.raises(ConfigError) as exc:
        load_settings(f)
    got = problems(exc)
    assert got == [f"config file {f}: schedule.windows: time window '25:00-01:00': 25:00 is not a time of day"]
    f2 = write(
        tmp_path,
        "b.yaml",
        f"""
metadataServiceUri: etcd://127.0.0.1:2379/ledgers
admin:
  tls_cert: {cert}
placement:
  min_zones_per_write_quorum: 3
  desired_zones_per_write_quorum: 2
racks:
  source: file
""",
    )
    with pytest.raises(ConfigError) as exc:
        load_settings(f2)
    got = problems(exc)
    assert len(got) == 4, got
    assert got[0].startswith(f"config file {f2}: metadataServiceUri: ") and "not ZooKeeper" in got[0]
    assert (
        f"config file {f2}: placement.desired_zones_per_write_quorum: must be >= min_zones_per_write_quorum "
        "(3), got 2" in got
    )
    assert f"config file {f2}: racks.source: is 'file' but racks.file is not set" in got
    assert f"config file {f2}: admin.tls_cert: admin TLS needs both tls_cert and tls_key" in got


# ------------------------------------------------------------------------------------------ helpers


def test_properties_parser() -> None:
    text = (
        "# comment\n! also a comment\n  key1 = value one  \nkey2:v2\nkey3 v3\n"
        "long=a,\\\n    b,\\\n    c\nesc=tab\\there\\u0041\nempty=\nkey2=last wins\n"
    )
    assert parse_properties(text) == {
        "key1": "value one",
        "key2": "last wins",
        "key3": "v3",
        "long": "a,b,c",
        "esc": "tab\thereA",
        "empty": "",
    }


def test_time_windows() -> None:
    w = TimeWindow.parse("22:00-02:00")
    from datetime import time

    assert w.contains(time(23, 0)) and w.contains(time(1, 59)) and not w.contains(time(2, 0))
    assert TimeWindow.parse("01:00-05:00").contains(time(1, 0))
    assert TimeWindow.parse("00:00-24:00").contains(time(13, 0))
    with pytest.raises(ValueError):
        TimeWindow.parse("1-5")


def test_parse_bind() -> None:
    assert parse_bind("127.0.0.1:7979") == ("127.0.0.1", 7979)
    assert parse_bind("[::1]:0") == ("::1", 0)
    # Kubernetes' "$(POD_IP):7979" on an IPv6 pod network has no brackets
    assert parse_bind("fd00:10:244::7:7979") == ("fd00:10:244::7", 7979)
    assert grpc_target("fd00:10:244::7:7979") == "[fd00:10:244::7]:7979"
    assert grpc_target("10.1.2.3:7979") == "10.1.2.3:7979"
    for bad in ("7979", "host:99999", "a b:1", "fd00::zz:1", "::1"):
        with pytest.raises(ValueError):
            parse_bind(bad)


# ------------------------------------------------------------------------------------------ hostile input (issue 10)


def test_non_utf8_config_file_is_one_config_error(tmp_path: Path) -> None:
    for name in ("bad.conf", "bad.yaml"):
        p = tmp_path / name
        p.write_bytes(b"# ok\nmetadataServiceUri=zk://h:1/l\xff\n" if name.endswith(".conf") else b"a: 1\nb: \xfe\n")
        with pytest.raises(ConfigError) as exc:
            load_settings(p)
        assert problems(exc) == [
            f"config file {p}: not UTF-8 text (byte {'0xff' if 'conf' in name else '0xfe'} on line 2)"
        ]


@pytest.mark.parametrize(
    "text", ["zkServers=h:1\nmetadataServiceUri=zk://h:1/l\\u12\n", "a\\u=1\n", "zkServers=h:1\nx\\uZZZZ=1\n"]
)
def test_short_unicode_escape_in_properties_is_one_config_error(tmp_path: Path, text: str) -> None:
    p, (line,) = file_problems(tmp_path, "e.conf", text)
    assert line.startswith(f"config file {p}: line ") and "malformed \\uxxxx escape" in line, line


@pytest.mark.parametrize(
    "name, text, words",
    [
        ("deep.yaml", "a: " + "[" * 3000 + "]" * 3000 + "\n", "not valid YAML: nested deeper than 64 levels"),
        ("deep.json", '{"a": ' + "[" * 3000 + "]" * 3000 + "}", "nested deeper than 64 levels"),
        ("big.yaml", "max_concurrent_ledgers: " + "9" * 5000 + "\n", "unreadable value"),
        ("nul.yaml", "log:\n  level: '\x00'\n", "not valid YAML (line 2): character '\\x00' is not allowed"),
    ],
)
def test_hostile_yaml_is_one_config_error(tmp_path: Path, name: str, text: str, words: str) -> None:
    p, (line,) = file_problems(tmp_path, name, text)
    assert line.startswith(f"config file {p}: ") and words in line and "\n" not in line, line


def test_deeply_nested_env_json_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BKAUDIT_ZOOKEEPER", '{"servers": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert problems(exc) == ["environment: BKAUDIT_ZOOKEEPER: JSON nested too deeply to be a setting"]


@pytest.mark.parametrize(
    "path",
    ["/elsewhere", "/ledgers", "/ledgers/bk-auditor", "/ledgers/underreplication/x", "/other/bk-auditor/election"],
)
def test_election_path_outside_our_subtree_is_refused(path: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings(
            overrides={"metadata_service_uri": "zk+hierarchical://h:2181/ledgers", "election": {"path": path}},
            option_names={"election.path": "--election-path"},
        )
    (line,) = problems(exc)
    assert (
        line.startswith("command line: --election-path: election path") and "outside bk-auditor's own subtree" in line
    ), line
    ok = load_settings(
        overrides={
            "metadata_service_uri": "zk+hierarchical://h:2181/ledgers",
            "election": {"path": "/ledgers/bk-auditor/e2"},
        }
    )
    assert ok.election_path == "/ledgers/bk-auditor/e2"


@pytest.mark.parametrize("value", ["127.0.0.1:\u0667\u0669", "h:79790", "h:\u00b2"])
def test_bind_ports_are_ascii_and_in_range(value: str) -> None:
    with pytest.raises(ValueError):
        parse_bind(value)


def test_time_window_digits_are_ascii() -> None:
    with pytest.raises(ValueError):
        TimeWindow.parse("\u0661:00-02:00")


def test_malformed_uri_and_zk_timeout_are_config_errors(tmp_path: Path) -> None:
    p, found = file_problems(tmp_path, "u.conf", "metadataServiceUri=zk+hierarchical://[::1/ledgers\n")
    assert found == [
        f"config file {p}: metadataServiceUri: metadata service uri 'zk+hierarchical://[::1/ledgers': Invalid IPv6 URL"
    ]
    p, found = file_problems(tmp_path, "t.conf", "zkServers=h:2181\nzkTimeout=abc\n")
    assert found == [f"config file {p}: zkTimeout: must be an integer (milliseconds), got 'abc'"]


def test_a_key_with_a_line_break_still_makes_one_line(tmp_path: Path) -> None:
    p, found = file_problems(tmp_path, "k.yaml", '? "a\\nb"\n: 1\n')
    assert found == [f"config file {p}: a\\nb: unknown setting"]
