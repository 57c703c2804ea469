"""The settings model: one pydantic `Settings` with a section per subject, and the names it knows.

One module on purpose (just over 600 lines): the sections are one model that pydantic resolves
together, and the names it knows are derived from it; wording and loading live elsewhere.

Sources and their precedence are set up here (`settings_customise_sources`); reading them, and wording
what is wrong, is `auditor.settings.load`'s job.
"""

from __future__ import annotations

import contextvars
import os
import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from auditor.durability.placement import DEFAULT_RACK, PlacementPolicy, PolicyKind
from auditor.errors import ConfigError
from auditor.files.tls import TlsFiles

from .clientnames import client_names
from .values import DEFAULT_ADMIN_ADDRESS, TimeWindow, checked_bind, optional_bind, split_list

if TYPE_CHECKING:
    from auditor.metadata.location import MetadataLocation

ENV_PREFIX = "BKAUDIT_"
DEFAULT_LEDGERS_ROOT = "/ledgers"


def _default_identity() -> str:
    # StatefulSet pods: HOSTNAME is the stable pod name, a good election identity.
    return os.environ.get("HOSTNAME") or socket.gethostname()


# ---------------------------------------------------------------------------------------- the model


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


StoreType = Literal["PEM", "JKS", "PKCS12"]


def _store_type(v: Any) -> Any:
    return v.strip().upper().replace("PKCS#12", "PKCS12") if isinstance(v, str) else v


class ZooKeeperTlsSettings(_Section):
    """TLS to ZooKeeper (docs/security.md). Trust: `ca_file` or `truststore`; our certificate (when the
    server wants one, ZooKeeper's default): `cert_file` + `key_file` or `keystore`."""

    enabled: bool = False
    ca_file: Path | None = None  # PEM CA certificates
    cert_file: Path | None = None  # PEM certificate chain (a combined key+chain PEM may be cert and key)
    key_file: Path | None = None  # PEM private key
    key_password: str | None = Field(None, repr=False)  # for an encrypted PEM key
    keystore: Path | None = None  # Java's zookeeper.ssl.keyStore.location: PEM, JKS or PKCS12
    keystore_type: StoreType | None = None  # default: from the file name (.pem, .jks, .p12)
    keystore_password: str | None = Field(None, repr=False)
    keystore_password_file: Path | None = None
    truststore: Path | None = None  # Java's zookeeper.ssl.trustStore.location
    truststore_type: StoreType | None = None
    truststore_password: str | None = Field(None, repr=False)
    truststore_password_file: Path | None = None
    verify_hostname: bool = True  # the server certificate must match the host dialled (ZooKeeper's default)

    _types = field_validator("keystore_type", "truststore_type", mode="before")(_store_type)


class ZooKeeperAuthSettings(_Section):
    """Authentication to ZooKeeper and the ACL of the znodes we create (docs/security.md)."""

    jaas_file: Path | None = None  # java.security.auth.login.config: its Client section's DIGEST-MD5 login
    jaas_section: str = "Client"  # zookeeper.sasl.clientconfig
    sasl_enabled: bool = True  # zookeeper.sasl.client: false = never SASL, even with a JAAS file
    sasl_service: str = "zookeeper"  # zookeeper.sasl.client.username (the server's service name)
    sasl_mechanism: str = "DIGEST-MD5"  # the only one implemented; anything else is refused at start
    sasl_username: str | None = None  # instead of a JAAS file
    sasl_password: str | None = Field(None, repr=False)
    sasl_password_file: Path | None = None
    digest_username: str | None = None  # ZooKeeper's `digest` scheme (addauth digest user:password)
    digest_password: str | None = Field(None, repr=False)
    digest_password_file: Path | None = None
    secure_acls: bool = False  # zkEnableSecurity: znodes we create get CREATOR_ALL_ACL


class ZooKeeperSettings(_Section):
    servers: str | None = None  # legacy zkServers; metadata_service_uri wins when both are set
    ledgers_root: str = DEFAULT_LEDGERS_ROOT
    ledger_manager: Literal["hierarchical", "longhierarchical", "flat"] | None = None
    session_timeout_seconds: float = Field(10.0, gt=0)
    # How long to try reaching any server before giving up with one line naming them (the daemon then
    # retries with backoff): short, so a wrong address fails fast instead of after pages of retries.
    connect_timeout_seconds: float = Field(5.0, gt=0)
    reads_per_second: float = Field(2000.0, ge=0)  # 0 = unlimited
    # Transactions (markers, our state) per second, apart from reads: bounded so a lost bookie's
    # thousands of markers are no write storm, high enough that 10,000 are written in seconds.
    writes_per_second: float = Field(5000.0, ge=0)  # 0 = unlimited
    max_concurrent_reads: int = Field(64, ge=1)
    # Bulk reads (a scan's ledger metadata) on a read-only session of our own on the event loop instead
    # of kazoo's threads: about 7x less CPU per znode. Plaintext connections without credentials only.
    wire_reads: bool = True
    tls: ZooKeeperTlsSettings = Field(default_factory=ZooKeeperTlsSettings)
    auth: ZooKeeperAuthSettings = Field(default_factory=ZooKeeperAuthSettings)


class ElectionSettings(_Section):
    path: str | None = None  # default <ledgersRoot>/bk-auditor/election
    identity: str = Field(default_factory=_default_identity)
    join_java_election: bool = False  # vote in <root>/underreplication/auditorelection


class ScheduleSettings(_Section):
    bookie_check_seconds: float = Field(86400.0, ge=0)  # 0 = off (bookie watch still reacts)
    ledger_check_seconds: float = Field(604800.0, ge=0)  # 0 = off
    scrutiny_seconds: float = Field(86400.0, ge=0)  # replicas + placement; 0 = off
    open_ledger_check_seconds: float = Field(3600.0, ge=0)  # 0 = off
    references_seconds: float = Field(86400.0, ge=0)  # Pulsar's listed ledgers vs BookKeeper's; 0 = off
    lost_bookie_delay_seconds: float = Field(0.0, ge=0)
    # The leader runs the checks that judge each ledger alone (scrutiny, ledger, open) on this many worker
    # processes, each on a share of the id space and of the bookie and ZooKeeper budgets; 1 = in its own
    # process. Capped at the CPUs the daemon may use.
    scan_processes: int = Field(1, ge=1, le=64)
    # Ledgers per partition handed to a worker process: how far a pause or a lost leadership lets a scan
    # run on (what is running finishes), against one ZooKeeper session and bookie connections per partition.
    scan_partition_ledgers: int = Field(5000, ge=10)
    windows: Annotated[list[str], NoDecode] = Field(default_factory=list)  # [] = always
    windows_timezone: str = "UTC"

    _split = field_validator("windows", mode="before")(split_list)

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

    _split = field_validator("delays_seconds", mode="before")(split_list)

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


class ScrubSettings(_Section):
    """The digest scrub (docs/scrub.md): every copy's bytes verified once per period, within a byte budget."""

    enabled: bool = True  # on by default, as HDFS's block scanner and Ceph's deep scrub are, at a small budget
    period_days: float = Field(14.0, gt=0)
    bytes_per_second_per_bookie: float = Field(4 * 1024 * 1024, ge=0)  # 0 = unlimited
    max_concurrent_ledgers: int = Field(4, ge=1, le=256)
    start_delay_seconds: float = Field(600.0, ge=0)  # after a leader takes over: its other checks first
    save_every_ledgers: int = Field(100, ge=1)
    save_every_seconds: float = Field(30.0, gt=0)


class UnderReplicationSettings(_Section):
    grace_seconds: float = Field(14400.0, ge=0)  # 0 = never report "under-replicated too long"
    # How often the leader lists the markers (the gauges) and the repair role's blocked records.
    poll_seconds: float = Field(60.0, gt=0)


class ReferencesSettings(_Section):
    """The references check (docs/deletion.md): missing ledgers Pulsar still lists, orphans it does not."""

    pulsar_root: str | None = None  # Pulsar's metadata root in the same ZooKeeper; default: the ledgers root's parent
    orphan_grace_seconds: float = Field(3600.0, ge=0)  # an unlisted ledger younger than this is not an orphan
    deletion_watch: bool = True  # the leader watches listed ledgers: a deletion is cross-checked at once
    confirm_seconds: float = Field(2.0, ge=0)  # wait after a deletion before re-reading its topic's listing

    @field_validator("pulsar_root")
    @classmethod
    def _check_root(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from auditor.metadata.location import zk_path_problem

        problem = zk_path_problem(v)
        if problem:
            raise ValueError(f"{v!r} is not a valid ZooKeeper path: it {problem}")
        return v


class PlacementSettings(_Section):
    """The writers' placement policy, as the checks judge it: the fields of `PlacementPolicy`, spelt the
    same, which `build_policy` fills in."""

    policy: PolicyKind = PolicyKind.RACK_AWARE  # Java class names are translated on the way in
    min_racks_per_write_quorum: int = Field(2, ge=1)
    enforce_min_racks_per_write_quorum: bool = False
    min_regions_for_durability: int = Field(2, ge=1)
    min_zones_per_write_quorum: int = Field(2, ge=1)
    desired_zones_per_write_quorum: int = Field(3, ge=1)
    enforce_strict_zoneaware_placement: bool = True

    def build_policy(self, default_rack: str) -> PlacementPolicy | None:
        """The policy to judge ensembles by, members of no known rack placed in `default_rack`
        (`racks.default_rack`); None for the default (random) policy, which promises nothing to check."""
        kind = self.policy  # translated from Java's class name, if one was given, when the settings were loaded
        if kind is PolicyKind.DEFAULT:
            return None
        return PlacementPolicy(
            kind=kind,
            min_racks_per_write_quorum=self.min_racks_per_write_quorum,
            enforce_min_racks_per_write_quorum=self.enforce_min_racks_per_write_quorum,
            min_regions_for_durability=self.min_regions_for_durability,
            min_zones_per_write_quorum=self.min_zones_per_write_quorum,
            desired_zones_per_write_quorum=self.desired_zones_per_write_quorum,
            enforce_strict_zoneaware_placement=self.enforce_strict_zoneaware_placement,
            # the rack-aware policy's own default stays implicit (None), any other rack is given
            default_location=None if kind is PolicyKind.RACK_AWARE and default_rack == DEFAULT_RACK else default_rack,
        )


class RackSettings(_Section):
    source: Literal["pulsar", "file", "script", "none"] = "pulsar"
    pulsar_path: str = "/bookies"
    file: Path | None = None
    script: Path | None = None
    script_max_args: int = Field(100, ge=1)
    default_rack: str = "/default-rack"


class BookieTlsSettings(_Section):
    """TLS to bookies (docs/security.md, "Bookies: TLS"). Passwords are read from files only, so that
    nothing secret sits in a config file, the environment or a Spark job's settings."""

    enabled: bool = False  # START_TLS on every bookie connection; plaintext is then never attempted
    ca_file: Path | None = None  # PEM CA certificates the bookies' certificates must chain to
    truststore: Path | None = None  # ... or a Java trust store
    truststore_type: Literal["PKCS12", "JKS"] = "PKCS12"
    truststore_password_file: Path | None = None
    cert_file: Path | None = None  # our certificate (PEM chain), for bookies that demand one
    key_file: Path | None = None  # its private key (PEM)
    key_password_file: Path | None = None  # when the PEM key is encrypted
    keystore: Path | None = None  # ... or a Java key store with our key and certificate
    keystore_type: Literal["PKCS12", "JKS"] = "PKCS12"
    keystore_password_file: Path | None = None
    verify_hostname: bool = True  # the bookie's certificate must name the host we dial (Java: off)
    handshake_timeout_seconds: float = Field(10.0, gt=0)  # START_TLS and the handshake
    protocols: Annotated[list[Literal["TLSv1.2", "TLSv1.3"]], NoDecode] = Field(default_factory=list)  # [] = both
    ciphers: str | None = None  # an OpenSSL cipher list (TLS 1.2); None = the library's defaults

    _split = field_validator("protocols", mode="before")(split_list)

    def material_given(self) -> list[str]:
        """The names of the TLS files that are set (to refuse them while TLS is off)."""
        names = ("ca_file", "truststore", "cert_file", "key_file", "keystore")
        return [n for n in names if getattr(self, n) is not None]

    def files(self) -> TlsFiles:
        """Where the material is, for `auditor.files.tls.client_context`."""
        return TlsFiles(
            ca_file=self.ca_file,
            truststore=self.truststore,
            truststore_type=self.truststore_type,
            truststore_password_file=self.truststore_password_file,
            cert_file=self.cert_file,
            key_file=self.key_file,
            key_password_file=self.key_password_file,
            keystore=self.keystore,
            keystore_type=self.keystore_type,
            keystore_password_file=self.keystore_password_file,
            verify_hostname=self.verify_hostname,
            protocols=tuple(self.protocols),
            ciphers=self.ciphers,
        )


class BookieClientSettings(_Section):
    timeout_seconds: float = Field(5.0, gt=0)
    connect_timeout_seconds: float = Field(10.0, gt=0)
    # Per bookie, the cap (0 = unlimited). 1,000/s is about a fifth of what one 4.17 bookie answers
    # GET_LIST at (5,400/s at 16 in flight, docs/benchmarks.md); with adaptive_rate the rate starts at
    # start_requests_per_second and rises to the cap only while the bookie answers fast (doubling each
    # half second until its first sign of trouble: the cap within about 1.5 s, auditor/aio/adaptive.py).
    requests_per_second: float = Field(1000.0, ge=0)
    adaptive_rate: bool = True  # off: every bookie is driven at requests_per_second, whatever it answers
    # 200/s: under 4 % of what one bookie answers, and a one-shot check's first second is not spent at a
    # crawl (at 50/s with a quarter per period the check ran at 0.75x Java's replicas check, issue 37)
    start_requests_per_second: float = Field(200.0, gt=0)
    min_requests_per_second: float = Field(5.0, gt=0)
    # smoothed answer latency above which a bookie counts as struggling (its rate is lowered)
    target_latency_seconds: float = Field(0.1, gt=0)
    # per bookie: requests on the wire at once; with adaptive_rate the start of a window that grows (doubling
    # while the bookie answers fast, like the rate) up to max_in_flight_cap, so that a bookie far away or
    # slow to answer is not capped at max_in_flight / latency (Little's law) while it has room
    max_in_flight: int = Field(8, ge=1)
    max_in_flight_cap: int = Field(64, ge=1)
    max_frame_bytes: int = Field(5 * 1024 * 1024, ge=1024)
    # Per bookie per ledger, the entries read where the bookie cannot list them and has no agent
    # (DbLedgerStorage); a larger share is sampled. Also bounds the reads confirming an index's absences.
    fallback_read_budget: int = Field(2000, ge=1)
    tls: BookieTlsSettings = Field(default_factory=BookieTlsSettings)


class AdminSettings(_Section):
    bind: str = DEFAULT_ADMIN_ADDRESS
    tls_cert: Path | None = None  # with tls_key: the server's TLS identity (PEM)
    tls_key: Path | None = None
    # CA bundle (PEM) of the client certificates: when set, `bind` requires one (mutual TLS)
    tls_client_ca: Path | None = None
    # typed client identities allowed to make mutating calls (clientnames.py: dns:, uri:, email:, ip:
    # subject alternative names; cn: only for a certificate without any); [] = any certificate
    # tls_client_ca verifies
    authorized_clients: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # with TLS: Status/ListFindings/ExplainLedger answered to callers without a client certificate
    unauthenticated_reads: bool = False
    # a second, plaintext listener for the kubelet's gRPC probes (which cannot do TLS); its callers are
    # unauthenticated: health always, reads per unauthenticated_reads, never a mutating call
    probe_bind: str | None = None
    # bound on an operator question that reads bookies (CanDecommission, ListUnderreplicated, ExplainLedger),
    # waiting for an earlier question included: past it the call fails with DEADLINE_EXCEEDED
    question_timeout_seconds: float = Field(120.0, gt=0)
    # calls the gRPC server runs at once (health checks included); more are refused with RESOURCE_EXHAUSTED
    max_concurrent_calls: int = Field(64, ge=1)

    _check_bind = field_validator("bind")(checked_bind)
    _split = field_validator("authorized_clients", mode="before")(split_list)

    _check_probe_bind = field_validator("probe_bind")(optional_bind)

    @field_validator("authorized_clients")
    @classmethod
    def _check_clients(cls, v: list[str]) -> list[str]:
        names = [n.strip() for n in v]
        if any(not n for n in names):
            raise ValueError(f"names must not be empty, got {v}")
        return client_names(names)


class AgentTlsSettings(_Section):
    """TLS to the bookie-side agents (docs/agent.md): PEM files only (as admin.tls_*); the agent's
    certificate must chain to `ca_file` and name the host dialled, or `server_name`."""

    enabled: bool = False
    ca_file: Path | None = None  # None: the system's roots
    cert_file: Path | None = None  # ours, for agents started with --tls-client-ca (mutual TLS)
    key_file: Path | None = None
    server_name: str | None = None

    @model_validator(mode="after")
    def _material_needs_tls(self) -> AgentTlsSettings:
        given = [n for n in ("ca_file", "cert_file", "key_file", "server_name") if getattr(self, n) is not None]
        if given and not self.enabled:
            raise ValueError(f"{', '.join(given)} set but enabled is false (set enabled: true, or remove them)")
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together")
        return self


class AgentSettings(_Section):
    """The bookie-side index agents (`bk-auditor agent`, docs/agent.md), where DbLedgerStorage bookies run
    one: each listens on its bookie's host at `port` (None: no agents) unless `addresses` names another
    `host:port` for a bookie id."""

    port: int | None = Field(None, ge=1, le=65535)
    addresses: dict[str, str] = Field(default_factory=dict)
    token_file: Path | None = None  # the bearer token the agents require (read at start)
    tls: AgentTlsSettings = Field(default_factory=AgentTlsSettings)
    timeout_seconds: float = Field(5.0, gt=0)

    @field_validator("addresses")
    @classmethod
    def _check_addresses(cls, v: dict[str, str]) -> dict[str, str]:
        for bookie, address in v.items():
            try:
                checked_bind(address)
            except ValueError as exc:
                raise ValueError(f"bookie {bookie}: {exc}") from None
        return {b: a.strip() for b, a in v.items()}


class RepairSettings(_Section):
    """The repair role (`bk-auditor repair`); the daemon runs it only as child processes of its own
    (`workers_beside_auditor`), so the write path never enters the auditor's process."""

    # For ledgers whose metadata stores no password (written before BookKeeper 4.2): Java's
    # bookieRecoveryPasswd / bookieRecoveryDigestType, as its administrative open uses them.
    recovery_password: str = Field("", repr=False)
    recovery_digest_type: Literal["CRC32", "MAC", "CRC32C", "DUMMY"] = "CRC32"
    bytes_per_second: float = Field(0.0, ge=0)  # entry bytes sent per second by one worker; 0 = unlimited
    # Per bookie, the repair role's reads and adds (its own budget, not bookie_client.requests_per_second,
    # which paces the auditor's checks); 0 = unlimited, as Java's ReplicationWorker. entries_in_flight
    # and bytes_per_second bound it as well.
    requests_per_second: float = Field(0.0, ge=0)
    entries_in_flight: int = Field(8, ge=1)  # per copy: entries between read and acknowledged add
    # Per target bookie: adds outstanding from one worker over all its lanes (ledgers_in_parallel copies)
    entries_in_flight_per_bookie: int = Field(32, ge=1)
    best_effort_placement: bool = False  # place a replacement even when no bookie meets the policy
    backoff_cap_seconds: float = Field(300.0, gt=0)  # Java's lockReleaseOfFailedLedgerGracePeriod
    poll_seconds: float = Field(10.0, gt=0)  # how often the worker looks for new markers
    newest_first: bool = False  # within a severity class, newest ledgers first (retention deletes old ones)
    ledgers_in_parallel: int = Field(4, ge=1, le=256)  # ledgers one worker repairs at once, each under its lock
    # A ledger whose metadata names a gone bookie, on survivors that cannot list entries (DbLedgerStorage):
    # true reads every surviving copy before copying and again to re-check; false (default) lets the
    # copy's own verified reads be the evidence, and leaves the rest of those copies to the auditor.
    read_unlistable_copies: bool = False
    # Opt-in ledger recovery (docs/repair.md): a marked ledger still open, with unregistered bookies in
    # its last ensemble, is fenced, recovered and closed once this worker has seen it so for
    # open_ledger_grace_seconds (Java's openLedgerRereplicationGracePeriod, 30 s). Off: such a ledger
    # waits (blocked, open_segment) for its writer or for someone else to close it.
    recover_open_ledgers: bool = False
    open_ledger_grace_seconds: float = Field(30.0, ge=0)
    # `bk-auditor run` starts this many `bk-auditor repair` processes beside the auditor (same settings),
    # restarts one that exits and stops them with itself; 0: none (run the role apart, or Java's).
    workers_beside_auditor: int = Field(0, ge=0, le=16)
    # Where those workers serve their metrics: worker i on this host at port + i; None: not served.
    worker_metrics_bind: str | None = None

    _check_worker_bind = field_validator("worker_metrics_bind")(optional_bind)

    @field_validator("recovery_digest_type", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.strip().upper() if isinstance(v, str) else v


class MetricsSettings(_Section):
    enabled: bool = True
    bind: str = "127.0.0.1:9181"
    # The `cluster` label of every metric; None: where the ledgers root is (Settings.metrics_cluster).
    cluster: str | None = None
    # Pulsar namespaces named in bk_auditor_namespace_ledgers_at_risk (the rest are summed as "other"),
    # so the gauge's cardinality stays bounded however many namespaces a cluster has.
    namespace_limit: int = Field(20, ge=0, le=1000)

    _check_bind = field_validator("bind")(checked_bind)

    @field_validator("cluster")
    @classmethod
    def _check_cluster(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("must not be empty (leave it unset for the default: <zk servers><ledgers root>)")
        return v


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["json", "console"] = "json"

    @field_validator("level", "format", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


FILE_DATA: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("bkaudit_file_data")


class _FileSource(PydanticBaseSettingsSource):
    """The already-translated config file (Java names mapped) as one settings source."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return FILE_DATA.get({}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(FILE_DATA.get({}))


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
    scrub: ScrubSettings = Field(default_factory=ScrubSettings)
    under_replication: UnderReplicationSettings = Field(default_factory=UnderReplicationSettings)
    references: ReferencesSettings = Field(default_factory=ReferencesSettings)
    placement: PlacementSettings = Field(default_factory=PlacementSettings)
    racks: RackSettings = Field(default_factory=RackSettings)
    bookie_client: BookieClientSettings = Field(default_factory=BookieClientSettings)
    max_concurrent_ledgers: int = Field(100, ge=1)
    repair: RepairSettings = Field(default_factory=RepairSettings)
    admin: AdminSettings = Field(default_factory=AdminSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    event_loop: Literal["asyncio", "uvloop"] = "uvloop"

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

    def metadata_location(self) -> MetadataLocation:
        """The resolved metadata location (URI wins over zkServers + root)."""
        from auditor.metadata.location import LedgerManager, resolve

        zk = self.zookeeper
        return resolve(
            service_uri=self.metadata_service_uri,
            servers=zk.servers,
            ledgers_root=zk.ledgers_root,
            manager=LedgerManager(zk.ledger_manager) if zk.ledger_manager else None,
            session_timeout_ms=int(zk.session_timeout_seconds * 1000),
        )

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
    def metrics_cluster(self) -> str:
        """The `cluster` label of every metric: `metrics.cluster`, else the address of the ledgers root,
        ZooKeeper servers + chroot + root as configured (`zk-0:2181,zk-1:2181/ledgers`), which tells two
        clusters apart whether they share a ZooKeeper (different roots) or not (different servers)."""
        if self.metrics.cluster:
            return self.metrics.cluster
        if self.has_metadata:
            try:
                return self.metadata_location().ledgers_root_address
            except Exception:  # reported by validate(); keep the property total
                pass
        return self.ledgers_root

    @property
    def java_election_path(self) -> str:
        from auditor.metadata.bookkeeper.election import JAVA_ELECTION_DIR

        return f"{self.ledgers_root.rstrip('/')}/{JAVA_ELECTION_DIR}"

    @property
    def election_path(self) -> str:
        from auditor.metadata.bookkeeper.election import election_path

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


# ---------------------------------------------------------------------------------------- names


def model_for(path: list[str]) -> type[BaseModel] | None:
    """The section model at `path` (a list of field names), or None if `path` is not a section."""
    model: type[BaseModel] = Settings
    for part in path:
        field = model.model_fields.get(part)
        ann = field.annotation if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        model = ann
    return model


def is_our_path(dotted: str) -> bool:
    """True when `dotted` names one of our settings (not a section)."""
    parts = dotted.split(".")
    parent = model_for(parts[:-1])
    return parent is not None and parts[-1] in parent.model_fields


def our_names() -> list[str]:
    """Every setting's dotted name."""
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


def set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """Put `value` at `dotted` in a nested dict."""
    parts = dotted.split(".")
    node = tree
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested dict as {dotted name: value}, descending only into our sections."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and model_for(dotted.split(".")) is not None:
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out
