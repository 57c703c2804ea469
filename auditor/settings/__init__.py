"""bk-auditor's settings: one `Settings` model, loaded from (highest first) command-line flags,
`BKAUDIT_*` environment variables (`__` nests), one config file (YAML, or a Java-style `.properties`/`.conf`
such as an existing bk_server.conf), then defaults.

A config file may use our names (nested in YAML, dotted in `.properties`: `schedule.scrutiny_seconds`)
and the Java auditor's names where they mean the same thing (`JAVA_KEYS`, converted to our units and
names once, on the way in); the bookie TLS and authentication keys are translated together, as the Java
client reads them, or refused (`javakeys.translate_bookie_security`, docs/security.md). Other BookKeeper
keys are recognised and ignored (`Settings.ignored_java_keys`, logged at info by the CLI); anything else
is an error. Every error is a `ConfigError` (exit 2) naming the
setting as it was written and where it came from:
`config file /etc/x.yaml: auditorPeriodicCheckInterval: must be >= 0, got -5`.
Durations are seconds (floats) everywhere. docs/configuration.md has the full table.

The modules behind this face:

    model       the pydantic model, a section per subject, and the dotted names it knows
    load        load_settings (the sources and their precedence); the CLI's admin address variable
    files       one config file read and translated into our names
    javakeys    BookKeeper's keys: the ones we translate (JAVA_KEYS) and the ones we ignore
    properties  the Java .properties reader
    origins     where each value came from, and how a validation error is worded
    rules       checks across settings (paths, files, the metadata location)
    values      value parsing: bind addresses, time windows, lists; the default admin address
    jaas        JAAS login configuration files (ZooKeeper SASL credentials)
    zksecurity  zookeeper.tls / zookeeper.auth turned into the connection's security, refusals worded
"""

from auditor.errors import ConfigError

from .javakeys import JAVA_KEYS, JavaKey, is_known_java_key, java_key_table
from .load import (
    ENV_ADMIN_ADDRESS,
    ENV_ADMIN_ADDRESS_DEPRECATED,
    ENV_CONFIG_FILE,
    admin_address_from_environment,
    load_settings,
)
from .model import (
    DEFAULT_LEDGERS_ROOT,
    ENV_PREFIX,
    AdminSettings,
    BookieClientSettings,
    BookieTlsSettings,
    ElectionSettings,
    LedgerCheckSettings,
    LogSettings,
    MetricsSettings,
    PlacementSettings,
    RackSettings,
    RecheckSettings,
    ScheduleSettings,
    Settings,
    UnderReplicationSettings,
    ZooKeeperSettings,
)
from .properties import PropertiesError, parse_properties
from .values import DEFAULT_ADMIN_ADDRESS, TimeWindow, parse_bind
from .zksecurity import zookeeper_security

__all__ = [
    "DEFAULT_ADMIN_ADDRESS",
    "DEFAULT_LEDGERS_ROOT",
    "ENV_ADMIN_ADDRESS",
    "ENV_ADMIN_ADDRESS_DEPRECATED",
    "ENV_CONFIG_FILE",
    "ENV_PREFIX",
    "JAVA_KEYS",
    "AdminSettings",
    "BookieClientSettings",
    "BookieTlsSettings",
    "ConfigError",
    "ElectionSettings",
    "JavaKey",
    "LedgerCheckSettings",
    "LogSettings",
    "MetricsSettings",
    "PlacementSettings",
    "PropertiesError",
    "RackSettings",
    "RecheckSettings",
    "ScheduleSettings",
    "Settings",
    "TimeWindow",
    "UnderReplicationSettings",
    "ZooKeeperSettings",
    "admin_address_from_environment",
    "is_known_java_key",
    "java_key_table",
    "load_settings",
    "parse_bind",
    "parse_properties",
    "zookeeper_security",
]
