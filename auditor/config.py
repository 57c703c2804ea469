"""bk-auditor's settings: one `Settings` model, loaded from (highest first) command-line flags (init
kwargs), `BKAUDIT_*` environment variables (`__` nests), one config file (YAML, or a Java-style
`.properties`/`.conf` such as an existing bk_server.conf), then defaults.

A config file may use our names (nested in YAML, dotted in `.properties`: `schedule.scrutiny_seconds`)
and the Java auditor's names where they mean the same thing (`JAVA_KEYS`, converted to our units).
Other BookKeeper keys are recognised and ignored (`ignored_java_keys`, logged at info by the CLI);
anything else is an error. Every error names the setting as it was written and where it came from:
`config file /etc/x.yaml: auditorPeriodicCheckInterval: must be >= 0, got -5`.

Durations are seconds (floats) everywhere; Java milliseconds are converted on the way in.
docs/configuration.md has the full table.
"""

from __future__ import annotations

import contextvars
import difflib
import json
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from . import safeyaml
from .java_config_keys import is_known_java_key
from .javaconf import JAVA_KEYS, JAVA_PRECEDENCE, SCRUTINY_KEYS, JavaKey, PropertiesError, parse_properties

__all__ = [
    "ConfigError",
    "Settings",
    "TimeWindow",
    "JAVA_KEYS",
    "JavaKey",
    "load_settings",
    "parse_bind",
    "parse_properties",
    "java_key_table",
]

ENV_PREFIX = "BKAUDIT_"
ENV_CONFIG_FILE = "BKAUDIT_CONFIG_FILE"
DEFAULT_LEDGERS_ROOT = "/ledgers"


class ConfigError(ValueError):
    """The configuration is unusable. `problems` holds one line per problem; str() joins them."""

    def __init__(self, problems: list[str] | str) -> None:
        # One line each, whatever a key or value held: control characters and line breaks are escaped.
        self.problems = [_printable(p) for p in ([problems] if isinstance(problems, str) else problems)]
        super().__init__("; ".join(self.problems))


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# ---------------------------------------------------------------------------------------- helpers


def parse_bind(text: str) -> tuple[str, int]:
    """'host:port' or '[v6]:port' -> (host, port). Port 0 means "any free port" (tests)."""
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:([0-9]{1,5})|([^:\[\]\s]+):([0-9]{1,5})", text.strip())
    if not m:
        raise ValueError(f"must be host:port (e.g. 127.0.0.1:7979 or [::1]:7979), got {text!r}")
    host, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    if not 0 <= int(port) <= 65535:
        raise ValueError(f"port must be 0..65535, got {port}")
    return host, int(port)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A daily time-of-day window [start, end); end < start crosses midnight; start == end is all day."""

    start: time
    end: time

    @classmethod
    def parse(cls, text: str) -> TimeWindow:
        m = re.fullmatch(r"\s*([0-9]{1,2}):([0-9]{2})\s*-\s*([0-9]{1,2}):([0-9]{2})\s*", text)
        if not m:
            raise ValueError(f"time window must look like 01:00-05:00, got {text!r}")
        h1, m1, h2, m2 = map(int, m.groups())
        for h, mi in ((h1, m1), (h2, m2)):
            if not (0 <= h <= 24 and 0 <= mi <= 59) or (h == 24 and mi):
                raise ValueError(f"time window {text!r}: {h:02d}:{mi:02d} is not a time of day")
        end = time(0, 0) if h2 == 24 else time(h2, m2)
        return cls(time(h1 % 24, m1), end)

    def contains(self, t: time) -> bool:
        if self.start == self.end:
            return True
        if self.start < self.end:
            return self.start <= t < self.end
        return t >= self.start or t < self.end

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{self.end:%H:%M}"


def _split_list(value: Any) -> Any:
    """Lists may be given as a JSON list, a YAML list, or a comma-separated string (env, .properties)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a valid JSON list: {exc.msg}") from None
            except RecursionError:
                raise ValueError("not a valid JSON list: nested too deeply") from None
        return [p.strip() for p in text.split(",") if p.strip()]
    return value


def _checked_bind(value: str) -> str:
    parse_bind(value)
    return value.strip()


def _default_identity() -> str:
    # StatefulSet pods: HOSTNAME is the stable pod name, a good election identity.
    return os.environ.get("HOSTNAME") or socket.gethostname()


# ---------------------------------------------------------------------------------------- the model


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ZooKeeperSettings(_Section):
    servers: str | None = None  # legacy zkServers; metadata_service_uri wins when both are set
    ledgers_root: str = DEFAULT_LEDGERS_ROOT
    ledger_manager: Literal["hierarchical", "longhierarchical", "flat"] | None = None
    session_timeout_seconds: float = Field(10.0, gt=0)
    reads_per_second: float = Field(2000.0, ge=0)  # 0 = unlimited
    max_concurrent_reads: int = Field(64, ge=1)


class ElectionSettings(_Section):
    path: str | None = None  # default <ledgersRoot>/bk-auditor/election
    identity: str = Field(default_factory=_default_identity)
    join_java_election: bool = False  # vote in <root>/underreplication/auditorelection


class ScheduleSettings(_Section):
    bookie_check_seconds: float = Field(86400.0, ge=0)  # 0 = off (bookie watch still reacts)
    ledger_check_seconds: float = Field(604800.0, ge=0)  # 0 = off
    scrutiny_seconds: float = Field(86400.0, ge=0)  # replicas + placement; 0 = off
    open_ledger_check_seconds: float = Field(3600.0, ge=0)  # 0 = off
    lost_bookie_delay_seconds: float = Field(0.0, ge=0)
    windows: Annotated[list[str], NoDecode] = Field(default_factory=list)  # [] = always
    windows_timezone: str = "UTC"

    _split = field_validator("windows", mode="before")(_split_list)

    @field_validator("windows")
    @classmethod
    def _check_windows(cls, v: list[str]) -> list[str]:
        return [str(TimeWindow.parse(w)) for w in v]

    @field_validator("windows_timezone")
    @classmethod
    def _check_tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r} (use an IANA name such as UTC or Europe/Berlin)") from None
        return v

    def parsed_windows(self) -> list[TimeWindow]:
        return [TimeWindow.parse(w) for w in self.windows]

    def in_window(self, when: datetime | None = None) -> bool:
        """True when heavy checks may run now (always when no windows are configured)."""
        if not self.windows:
            return True
        now = (when or datetime.now(UTC)).astimezone(ZoneInfo(self.windows_timezone))
        return any(w.contains(now.time()) for w in self.parsed_windows())


class RecheckSettings(_Section):
    delays_seconds: Annotated[list[float], NoDecode] = Field(default_factory=lambda: [30.0, 120.0, 600.0])
    attempts: int = Field(3, ge=1, le=100)

    _split = field_validator("delays_seconds", mode="before")(_split_list)

    @field_validator("delays_seconds")
    @classmethod
    def _check_delays(cls, v: list[float]) -> list[float]:
        if not v:
            raise ValueError("must list at least one delay")
        if any(d < 0 for d in v):
            raise ValueError(f"delays must be >= 0, got {v}")
        return v

    def schedule(self) -> list[float]:
        """One delay per attempt; the last configured delay repeats when there are more attempts."""
        return [self.delays_seconds[min(i, len(self.delays_seconds) - 1)] for i in range(self.attempts)]


class LedgerCheckSettings(_Section):
    verification_percentage: float = Field(0.0, ge=0, le=100)
    mark_under_replicated: bool = False  # write Java-compatible urL markers for confirmed losses


class UnderReplicationSettings(_Section):
    grace_seconds: float = Field(14400.0, ge=0)  # 0 = never report "under-replicated too long"


class PlacementSettings(_Section):
    policy: Literal["rackaware", "zoneaware", "regionaware", "default"] = "rackaware"
    min_racks_per_write_quorum: int = Field(2, ge=1)
    enforce_min_racks_per_write_quorum: bool = False
    min_regions_for_durability: int = Field(2, ge=1)
    min_zones_per_write_quorum: int = Field(2, ge=1)
    desired_zones_per_write_quorum: int = Field(3, ge=1)
    enforce_strict_zoneaware_placement: bool = True


class RackSettings(_Section):
    source: Literal["pulsar", "file", "script", "none"] = "pulsar"
    pulsar_path: str = "/bookies"
    file: Path | None = None
    script: Path | None = None
    script_max_args: int = Field(100, ge=1)
    default_rack: str = "/default-rack"


class BookieClientSettings(_Section):
    timeout_seconds: float = Field(5.0, gt=0)
    connect_timeout_seconds: float = Field(10.0, gt=0)
    requests_per_second: float = Field(50.0, ge=0)  # per bookie; 0 = unlimited
    max_in_flight: int = Field(8, ge=1)  # per bookie
    max_frame_bytes: int = Field(5 * 1024 * 1024, ge=1024)


class AdminSettings(_Section):
    bind: str = "127.0.0.1:7979"
    tls_cert: Path | None = None
    tls_key: Path | None = None

    _check_bind = field_validator("bind")(_checked_bind)


class MetricsSettings(_Section):
    enabled: bool = True
    bind: str = "127.0.0.1:9181"

    _check_bind = field_validator("bind")(_checked_bind)


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["json", "console"] = "json"

    @field_validator("level", "format", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


_FILE_DATA: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("bkaudit_file_data")


class _FileSource(PydanticBaseSettingsSource):
    """The already-translated config file (Java names mapped) as one settings source."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return _FILE_DATA.get({}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_FILE_DATA.get({}))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", case_sensitive=False, validate_assignment=True
    )

    metadata_service_uri: str | None = None
    zookeeper: ZooKeeperSettings = Field(default_factory=ZooKeeperSettings)
    election: ElectionSettings = Field(default_factory=ElectionSettings)
    schedule: ScheduleSettings = Field(default_factory=ScheduleSettings)
    recheck: RecheckSettings = Field(default_factory=RecheckSettings)
    ledger_check: LedgerCheckSettings = Field(default_factory=LedgerCheckSettings)
    under_replication: UnderReplicationSettings = Field(default_factory=UnderReplicationSettings)
    placement: PlacementSettings = Field(default_factory=PlacementSettings)
    racks: RackSettings = Field(default_factory=RackSettings)
    bookie_client: BookieClientSettings = Field(default_factory=BookieClientSettings)
    max_concurrent_ledgers: int = Field(100, ge=1)
    admin: AdminSettings = Field(default_factory=AdminSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    event_loop: Literal["asyncio", "uvloop"] = "asyncio"

    _config_file: Path | None = PrivateAttr(default=None)
    _ignored_java_keys: tuple[str, ...] = PrivateAttr(default=())

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _FileSource(settings_cls)

    # -------------------------------------------------------------------------- derived values
    @property
    def config_file(self) -> Path | None:
        """The file the settings were read from, if any."""
        return self._config_file

    @property
    def ignored_java_keys(self) -> tuple[str, ...]:
        """BookKeeper keys present in the config file that bk-auditor does not use."""
        return self._ignored_java_keys

    def metadata_location(self) -> Any:
        """The resolved `auditor.metadata.MetadataLocation` (URI wins over zkServers + root)."""
        from auditor.metadata.location import from_settings

        zk = self.zookeeper
        java: dict[str, object] = {
            "zkTimeout": int(zk.session_timeout_seconds * 1000),
            "zkLedgersRootPath": zk.ledgers_root,
        }
        if self.metadata_service_uri:
            java["metadataServiceUri"] = self.metadata_service_uri
        if zk.servers:
            java["zkServers"] = zk.servers
        if zk.ledger_manager:
            java["ledgerManagerType"] = zk.ledger_manager
        return from_settings(java)

    @property
    def has_metadata(self) -> bool:
        return bool(self.metadata_service_uri or self.zookeeper.servers)

    @property
    def ledgers_root(self) -> str:
        if self.has_metadata:
            try:
                return str(self.metadata_location().ledgers_root)
            except Exception:  # reported by validate(); keep the property total
                pass
        return self.zookeeper.ledgers_root.rstrip("/") or "/"

    @property
    def java_election_path(self) -> str:
        from auditor.metadata.election import JAVA_ELECTION_DIR

        return f"{self.ledgers_root.rstrip('/')}/{JAVA_ELECTION_DIR}"

    @property
    def election_path(self) -> str:
        from auditor.metadata.election import election_path

        if self.election.path:
            return self.election.path.rstrip("/")
        if self.election.join_java_election:
            return self.java_election_path
        return election_path(self.ledgers_root)

    def require_metadata(self) -> None:
        """Raise ConfigError unless a metadata location is configured (daemon and one-shot checks)."""
        if not self.has_metadata:
            raise ConfigError(
                "metadata_service_uri: not set (give --metadata-service-uri, "
                "BKAUDIT_METADATA_SERVICE_URI, or metadataServiceUri / zkServers in the config file)"
            )


# ---------------------------------------------------------------------------------------- loading


@dataclass
class _Origin:
    """Where a value came from, for error messages."""

    where: str  # "config file /x.yaml", "environment", "command line"
    name: str  # the key as the user wrote it
    raw: Any = None  # the value as written (before unit conversion)

    def label(self) -> str:
        return f"{self.where}: {self.name}"


def _model_for(path: list[str]) -> type[BaseModel] | None:
    """The section model at `path` (a list of field names), or None if `path` is not a section."""
    model: type[BaseModel] = Settings
    for part in path:
        field = model.model_fields.get(part)
        ann = field.annotation if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        model = ann
    return model


def _is_our_path(dotted: str) -> bool:
    parts = dotted.split(".")
    parent = _model_for(parts[:-1])
    return parent is not None and parts[-1] in parent.model_fields


def _our_names() -> list[str]:
    names: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, f in model.model_fields.items():
            ann = f.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
            else:
                names.append(prefix + name)

    walk(Settings, "")
    return names


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and _model_for(dotted.split(".")) is not None:
            out.update(_flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def _read_file(path: Path) -> dict[str, Any]:
    """The file's keys as a flat {key: value} dict (our sections flattened to dotted names)."""
    where = f"config file {path}"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{where}: not UTF-8 text (byte {raw[exc.start]:#04x} on line {line})") from None
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        try:
            data = safeyaml.load(text)
        except yaml.reader.ReaderError as exc:  # a character YAML does not allow, e.g. NUL
            line = text[: exc.position].count("\n") + 1
            raise ConfigError(
                f"{where}: not valid YAML (line {line}): character {chr(exc.character)!r} is not allowed"
            ) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where_in = f" (line {mark.line + 1})" if mark is not None else ""
            raise ConfigError(
                f"{where}: not valid YAML{where_in}: {one_line(str(getattr(exc, 'problem', None) or exc))}"
            ) from None
        except ValueError as exc:  # e.g. an integer of thousands of digits
            raise ConfigError(f"{where}: unreadable value: {one_line(str(exc))[:200]}") from None
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: must be a mapping of settings, got {type(data).__name__}")
        return _flatten(data)
    try:
        return parse_properties(text)
    except PropertiesError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def one_line(text: str) -> str:
    """`text` with its line breaks made spaces: every error we print is one line."""
    return " ".join(text.split())


def _translate_file(path: Path, origins: dict[str, _Origin]) -> tuple[dict[str, Any], list[str]]:
    """Our nested dict from a config file, plus the BookKeeper keys that were ignored."""
    where = f"config file {path}"
    flat = _read_file(path)
    problems: list[str] = []
    ignored: list[str] = []
    tree: dict[str, Any] = {}
    given: dict[str, str] = {}  # our path -> the key that set it

    def put(dotted: str, value: Any, key: str, raw: Any) -> None:
        if dotted in given and given[dotted] != key:
            problems.append(f"{where}: {key}: sets the same thing as {given[dotted]}; keep one of them")
            return
        given[dotted] = key
        _set_path(tree, dotted, value)
        origins[dotted] = _Origin(where, key, raw)

    java_present = {
        k: v for k, v in flat.items() if k in JAVA_KEYS and v is not None and not (isinstance(v, str) and not v.strip())
    }
    # Java keys whose fallback partner is present are skipped (the preferred one wins, as in Java).
    shadowed = {
        lower
        for keys in JAVA_PRECEDENCE.values()
        for i, lower in enumerate(keys)
        if any(k in java_present for k in keys[:i])
    }
    for key, value in flat.items():
        if value is None or (isinstance(value, str) and not value.strip()):
            # Blank means "not set", as Java reads `metadataServiceUri=`; still catch typos in the name.
            if not (key in JAVA_KEYS or _is_our_path(key) or is_known_java_key(key)):
                problems.append(f"{where}: {key}: unknown setting{_suggest(key)}")
            elif key not in JAVA_KEYS and not _is_our_path(key):
                ignored.append(key)
            continue
        if key in JAVA_KEYS:
            if key in shadowed or key in SCRUTINY_KEYS:
                continue
            jk = JAVA_KEYS[key]
            try:
                converted = jk.convert(value) if jk.convert else value
            except ValueError as exc:
                problems.append(f"{where}: {key}: {exc}")
                continue
            put(jk.path, converted, key, value)
        elif _is_our_path(key):
            put(key, value, key, value)
        elif is_known_java_key(key):
            ignored.append(key)
        else:
            problems.append(f"{where}: {key}: unknown setting{_suggest(key)}")
    # Both Java scrutiny keys feed our one scrutiny interval: the more frequent non-zero one wins;
    # zero only when every given one is zero (Java's "disabled").
    scrutiny = [(k, java_present[k]) for k in SCRUTINY_KEYS if k in java_present]
    if scrutiny:
        parsed: list[tuple[str, Any, float | None]] = []
        for k, v in scrutiny:
            try:
                parsed.append((k, v, float(str(v).strip())))
            except ValueError:
                parsed.append((k, v, None))
        bad = [(k, v) for k, v, n in parsed if n is None or n < 0]
        if bad:
            k, v = bad[0]
            put("schedule.scrutiny_seconds", v, k, v)  # let the model word the error
        else:
            nonzero = [(n, k, v) for k, v, n in parsed if n]
            n, k, v = min(nonzero) if nonzero else (0.0, parsed[0][0], parsed[0][1])
            put("schedule.scrutiny_seconds", n, k, v)
    if "racks.source" in given and tree.get("racks", {}).get("source") == "script" and "racks.script" not in given:
        tree["racks"]["source"] = "none"  # Java's ScriptBasedMapping without a script: everyone default rack
    if problems:
        raise ConfigError(problems)
    return tree, sorted(ignored)


def _suggest(key: str) -> str:
    candidates = _our_names() + list(JAVA_KEYS)
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def _env_origins(origins: dict[str, _Origin]) -> None:
    env = {k.upper(): v for k, v in os.environ.items() if k.upper().startswith(ENV_PREFIX)}
    for dotted in _our_names():
        parts = dotted.split(".")
        name = ENV_PREFIX + "__".join(parts).upper()
        if name in env:
            origins[dotted] = _Origin("environment", name, env[name])
            continue
        for i in range(1, len(parts)):  # a whole section given as JSON
            sec = ENV_PREFIX + "__".join(parts[:i]).upper()
            if sec in env:
                origins.setdefault(".".join(parts[:i]), _Origin("environment", sec, env[sec]))


def _init_origins(kwargs: Mapping[str, Any], origins: dict[str, _Origin], option_names: Mapping[str, str]) -> None:
    for dotted, value in _flatten(kwargs).items():
        origins[dotted] = _Origin("command line", option_names.get(dotted, dotted), value)


def _origin_for(loc: tuple[Any, ...], stacks: list[dict[str, _Origin]]) -> _Origin | None:
    parts = [str(p) for p in loc if not isinstance(p, int)]
    for origins in stacks:  # highest precedence first
        for i in range(len(parts), 0, -1):
            hit = origins.get(".".join(parts[:i]))
            if hit is not None:
                return hit
    return None


def _num(x: Any) -> Any:
    return int(x) if isinstance(x, float) and x.is_integer() else x


def _describe(err: Mapping[str, Any], raw: Any) -> str:
    kind = err.get("type", "")
    ctx = {k: _num(v) for k, v in (err.get("ctx") or {}).items()}
    got = raw if raw is not None else err.get("input")
    if isinstance(got, (int, float)) and not isinstance(got, bool):
        shown: Any = _num(got)
    elif isinstance(got, str) and re.fullmatch(r"-?\d+(\.\d+)?", got.strip()):
        shown = got.strip()  # a number as written in a file or variable: show it as a number
    else:
        shown = repr(got)
    if kind == "greater_than_equal":
        return f"must be >= {ctx.get('ge')}, got {shown}"
    if kind == "greater_than":
        return f"must be > {ctx.get('gt')}, got {shown}"
    if kind == "less_than_equal":
        return f"must be <= {ctx.get('le')}, got {shown}"
    if kind == "less_than":
        return f"must be < {ctx.get('lt')}, got {shown}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be an integer, got {shown}"
    if kind in ("float_parsing", "float_type"):
        return f"must be a number, got {shown}"
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false, got {shown}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}, got {shown}"
    if kind == "extra_forbidden":
        return "unknown setting"
    if kind in ("list_type",):
        return f"must be a list, got {shown}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a section (a mapping of settings), got {shown}"
    msg = str(err.get("msg", "invalid"))
    return msg.removeprefix("Value error, ")


def load_settings(
    config_file: str | Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    option_names: Mapping[str, str] | None = None,
) -> Settings:
    """Build and validate the settings. `overrides` (our nested names, from CLI flags) beat environment
    variables, which beat the config file (`config_file`, else $BKAUDIT_CONFIG_FILE), which beats defaults.
    `option_names` maps dotted setting names to the CLI flag that set them (for messages).
    Raises ConfigError with one clear line per problem."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    path = (
        Path(config_file)
        if config_file
        else (Path(os.environ[ENV_CONFIG_FILE]) if os.environ.get(ENV_CONFIG_FILE) else None)
    )
    file_origins: dict[str, _Origin] = {}
    env_origins: dict[str, _Origin] = {}
    cli_origins: dict[str, _Origin] = {}
    tree: dict[str, Any] = {}
    ignored: list[str] = []
    if path is not None:
        tree, ignored = _translate_file(path, file_origins)
    _env_origins(env_origins)
    _init_origins(overrides, cli_origins, option_names or {})
    token = _FILE_DATA.set(tree)
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        stacks = [cli_origins, env_origins, file_origins]
        problems = []
        for err in exc.errors():
            origin = _origin_for(tuple(err.get("loc", ())), stacks)
            dotted = ".".join(str(p) for p in err.get("loc", ()))
            label = origin.label() if origin else dotted
            problems.append(f"{label}: {_describe(err, origin.raw if origin else None)}")
        raise ConfigError(problems) from None
    except (SettingsError, RecursionError) as exc:
        # A whole section given as JSON in BKAUDIT_<SECTION> did not decode: name the variable.
        name, problem = _bad_section_json() or (None, one_line(str(exc.__cause__ or exc)))
        raise ConfigError(f"environment: {name or 'a ' + ENV_PREFIX + '* variable'}: {problem}") from None
    finally:
        _FILE_DATA.reset(token)
    settings._config_file = path
    settings._ignored_java_keys = tuple(ignored)
    problems = _cross_checks(settings, [cli_origins, env_origins, file_origins])
    if problems:
        raise ConfigError(problems)
    return settings


def _bad_section_json() -> tuple[str, str] | None:
    """(variable, problem) for the first BKAUDIT_<SECTION> variable whose value is not usable JSON."""
    sections = {ENV_PREFIX + name.upper() for name in Settings.model_fields if _model_for([name]) is not None}
    for name, value in sorted(os.environ.items()):
        if name.upper() in sections:
            try:
                json.loads(value)
            except RecursionError:
                return name, "JSON nested too deeply to be a setting"
            except ValueError as exc:
                return name, f"not valid JSON ({exc})"
    return None


def _cross_checks(s: Settings, stacks: list[dict[str, _Origin]]) -> list[str]:
    """Rules that involve more than one setting or the outside world."""
    problems: list[str] = []

    def say(dotted: str, msg: str) -> None:
        origin = _origin_for(tuple(dotted.split(".")), stacks)
        problems.append(f"{origin.label() if origin else dotted}: {msg}")

    if s.has_metadata:
        try:
            s.metadata_location()
        except Exception as exc:  # MetadataConfigError / UnsupportedLayoutError from the adapters
            say("metadata_service_uri" if s.metadata_service_uri else "zookeeper.servers", str(exc))
    from auditor.metadata.election import election_base
    from auditor.metadata.errors import MetadataConfigError
    from auditor.metadata.location import zk_path_problem

    root = s.zookeeper.ledgers_root
    if zk_path_problem(root.rstrip("/") or "/"):
        say(
            "zookeeper.ledgers_root",
            f"must be a valid absolute ZooKeeper path: {root!r} {zk_path_problem(root.rstrip('/') or '/')}",
        )
    path = s.election.path
    if path is not None and (path.rstrip("/") == "" or zk_path_problem(path.rstrip("/"))):
        say("election.path", f"must be a valid absolute ZooKeeper path, got {path!r}")
    else:
        try:
            election_base(s.election_path, s.ledgers_root, s.election.join_java_election)
        except MetadataConfigError as exc:
            say("election.path", str(exc))
    if s.election.join_java_election:
        from auditor.metadata.formats import is_valid_bookie_id

        if not is_valid_bookie_id(s.election.identity):
            say(
                "election.identity",
                f"{s.election.identity!r} is not a valid BookKeeper bookie id, which the "
                "Java election needs (letters, digits, ':', '.', '-')",
            )
    if not s.election.identity.strip():
        say("election.identity", "must not be empty")
    p = s.placement
    if p.desired_zones_per_write_quorum < p.min_zones_per_write_quorum:
        say(
            "placement.desired_zones_per_write_quorum",
            f"must be >= min_zones_per_write_quorum ({p.min_zones_per_write_quorum}), "
            f"got {p.desired_zones_per_write_quorum}",
        )
    r = s.racks
    if r.source == "file":
        if r.file is None:
            say("racks.source", "is 'file' but racks.file is not set")
        elif not r.file.is_file():
            say("racks.file", f"{r.file}: no such file")
    if r.source == "script":
        if r.script is None:
            say("racks.source", "is 'script' but racks.script is not set")
        elif not r.script.is_file():
            say("racks.script", f"{r.script}: no such file")
    a = s.admin
    if (a.tls_cert is None) != (a.tls_key is None):
        say("admin.tls_cert" if a.tls_cert else "admin.tls_key", "admin TLS needs both tls_cert and tls_key")
    for name in ("tls_cert", "tls_key"):
        f = getattr(a, name)
        if f is not None and not f.is_file():
            say(f"admin.{name}", f"{f}: no such file")
    return problems


def java_key_table() -> list[tuple[str, str, str]]:
    """(Java key, our dotted name, Java unit) for every accepted Java key (docs and tests)."""
    return [(k.java, k.path, k.unit) for k in JAVA_KEYS.values()]
