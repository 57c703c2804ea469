"""Build an AuditContext from Settings: the one place that wires adapters to checks.

Used by the one-shot command, the daemon and each Spark partition alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from auditor.aio.adaptive import AdaptivePolicy
from auditor.bookie.agent import AgentClientConfig, AgentsConfig, AgentTls
from auditor.bookie.capabilities import CapabilityBook, Incarnation
from auditor.bookie.config import BookieClientConfig
from auditor.bookie.pool import BookiePool
from auditor.bookie.tls import BookieTls
from auditor.durability.findings import Category, Finding, Method
from auditor.errors import ConfigError
from auditor.files.tls import ReloadingContext, TlsFileError
from auditor.logging import get_logger
from auditor.metadata.bookkeeper.bookies import pulsar_racks
from auditor.metadata.bookkeeper.racks import RackResolver, ScriptRackResolver, load_rack_file
from auditor.metadata.errors import MetadataError
from auditor.metadata.interfaces import Registrations
from auditor.metadata.store import ZooKeeperMetadataStore
from auditor.settings import Settings, zookeeper_security

from .context import AuditContext, CheckOptions

log = get_logger("auditor.checks")


def check_options(settings: Settings, *, one_shot: bool = False) -> CheckOptions:
    delays = tuple(settings.recheck.schedule())  # one delay per attempt
    if one_shot:
        # A one-shot run should finish in seconds, not wait out the daemon's minutes-long delays.
        delays = tuple(min(d, 3.0) for d in delays) or (2.0,)
    return CheckOptions(
        max_concurrent_ledgers=settings.max_concurrent_ledgers,
        recheck_delays=delays,
        underreplicated_grace_period=settings.under_replication.grace_seconds,
        verification_percentage=settings.ledger_check.verification_percentage,
        fallback_read_budget=settings.bookie_client.fallback_read_budget,
        placement=settings.placement.build_policy(settings.racks.default_rack),
        pulsar_root=settings.references.pulsar_root,
        orphan_grace_seconds=settings.references.orphan_grace_seconds,
    )


def bookie_tls(settings: Settings) -> BookieTls | None:
    """TLS to bookies, or None for plaintext. The files were checked when the settings were loaded; a
    file that went bad since is a ConfigError here, naming the setting."""
    t = settings.bookie_client.tls
    if not t.enabled:
        return None
    try:
        context = ReloadingContext(t.files())  # renewed certificates are used from the next connection on
    except TlsFileError as exc:
        raise ConfigError(f"bookie_client.tls.{exc.setting}: {exc.message}") from None
    own = t.cert_file is not None or t.keystore is not None
    return BookieTls(context, handshake_timeout=t.handshake_timeout_seconds, client_certificate=own)


def bookie_config(settings: Settings) -> BookieClientConfig:
    b = settings.bookie_client
    t = b.timeout_seconds
    # The probes must never outlast the operator's timeout: a silent bookie costs at most ~2 timeouts.
    return BookieClientConfig(
        request_timeout=t,
        connect_timeout=b.connect_timeout_seconds,
        max_in_flight=b.max_in_flight,
        rate_limit=b.requests_per_second or None,
        adaptive=AdaptivePolicy(
            start=b.start_requests_per_second,
            floor=b.min_requests_per_second,
            target_latency_s=b.target_latency_seconds,
            window_cap=max(b.max_in_flight, b.max_in_flight_cap),
        )
        if b.adaptive_rate
        else None,
        max_frame_size=b.max_frame_bytes,
        liveness_timeout=min(2.0, t),
        entry_list_probe_timeout=min(1.0, t),
        tls=bookie_tls(settings),
    )


def agents_config(settings: Settings) -> AgentsConfig | None:
    """Where the bookie-side index agents are (`agent:` settings), their token and TLS read now (a file
    that cannot be read is a ConfigError naming the key); None when no agent is configured."""
    a = settings.agent
    if a.port is None and not a.addresses:
        return None
    token = None
    if a.token_file is not None:
        try:
            token = a.token_file.read_bytes().strip()
        except OSError as exc:
            raise ConfigError(f"agent.token_file {a.token_file}: {exc.strerror or exc}") from None
        if not token:
            raise ConfigError(f"agent.token_file {a.token_file} is empty")
    t = a.tls
    tls = AgentTls.from_files(t.ca_file, t.cert_file, t.key_file, t.server_name) if t.enabled else None
    addresses = {}
    for bookie, address in a.addresses.items():
        host, _, port = address.rpartition(":")
        addresses[bookie] = (host.strip("[]"), int(port))
    return AgentsConfig(a.port, addresses, AgentClientConfig(token, tls, a.timeout_seconds))


def registration_incarnations(store: ZooKeeperMetadataStore) -> Incarnation:
    """bookie id -> its incarnation: the creation zxid of its registration znode (writable or read-only),
    which a restarted bookie creates anew; None when it is not registered. The registrations are read once,
    on first use (one listing per context: a partition's clients see one snapshot)."""
    snapshot: asyncio.Future[Registrations] | None = None

    async def incarnation(bookie_id: str) -> str | None:
        nonlocal snapshot
        if snapshot is None:
            snapshot = asyncio.ensure_future(store.registrations())
        regs = await asyncio.shield(snapshot)
        reg = regs.writable.get(bookie_id) or regs.read_only.get(bookie_id)
        return None if reg is None else f"{reg.stat.czxid:x}"

    return incarnation


class Locations:
    """bookie id -> network location (rack), cached per run; the default location when unknown.

    Rack data that cannot be used (Pulsar's /bookies malformed, a rack file turned unreadable, a rack
    script failing) disables placement judgement only: `problem` names the source and what is wrong,
    `finding()` reports it as `metadata_unreadable`, every other check goes on, and the next `refresh()`
    tries again."""

    def __init__(
        self, resolver: RackResolver | None, rebuild: Callable[[], Awaitable[RackResolver | None]] | None = None
    ) -> None:
        self._resolver = resolver
        self._rebuild = rebuild
        self._cache: dict[str, str | None] = {}
        self.problem: str | None = None

    async def refresh(self) -> None:
        """Re-read the rack source (e.g. Pulsar's /bookies) and forget cached racks: once per check run."""
        if self._rebuild is not None:
            try:
                self._resolver = await self._rebuild()
                self.problem = None
            except MetadataError as exc:
                self._unusable(exc)
        self._cache.clear()

    def _unusable(self, exc: MetadataError) -> None:
        if str(exc) != self.problem:
            log.warning("rack information unusable, placement is not checked until it is fixed: %s", exc)
        self.problem = str(exc)
        self._resolver = None

    @property
    def available(self) -> bool:
        """False when the cluster has no (usable) rack information: placement cannot be judged, and
        judging it against "everything in the default rack" would flag every ledger."""
        return self._resolver is not None

    def finding(self) -> Finding | None:
        """While rack data is unusable: the `metadata_unreadable` finding that says so (no ledger)."""
        if self.problem is None:
            return None
        return Finding.of(
            Category.METADATA_UNREADABLE,
            f"rack information unusable, placement is not checked: {self.problem}",
            method=Method.METADATA,
            confirmed=True,
            detail={"problem": self.problem},
        )

    async def __call__(self, bookie_ids: Iterable[str]) -> Mapping[str, str | None]:
        ids = set(bookie_ids)
        missing = [b for b in ids if b not in self._cache]
        if missing and self._resolver is not None:
            try:
                self._cache.update(await self._resolver.racks(missing))
            except MetadataError as exc:
                self._unusable(exc)
        return {b: self._cache.get(b) for b in ids}

    def clear(self) -> None:
        self._cache.clear()


async def rack_resolver(settings: Settings, store: ZooKeeperMetadataStore) -> RackResolver | None:
    r = settings.racks

    async def host_of(bookie_id: str) -> str | None:
        addr = await store.resolve_bookie(bookie_id)
        return addr.host if addr else None

    if r.source == "none":
        return None
    if r.source == "file":
        assert r.file is not None
        return load_rack_file(r.file, default_rack=r.default_rack, host_of=host_of)
    if r.source == "script":
        assert r.script is not None
        return ScriptRackResolver(r.script, default_rack=r.default_rack, host_of=host_of, max_args=r.script_max_args)
    return await pulsar_racks(store, path=r.pulsar_path, default_rack=r.default_rack)


async def connect_store(settings: Settings) -> ZooKeeperMetadataStore:
    """The metadata store the settings name, connected (one place for the connection's settings)."""
    z = settings.zookeeper
    return await ZooKeeperMetadataStore.connect(
        settings.metadata_location(),
        max_in_flight=z.max_concurrent_reads,
        reads_per_second=z.reads_per_second or None,
        writes_per_second=z.writes_per_second or None,
        connect_timeout=z.connect_timeout_seconds,
        security=zookeeper_security(settings),
        wire_reads=z.wire_reads,
    )


@asynccontextmanager
async def audit_context(
    settings: Settings,
    *,
    one_shot: bool = False,
    start_rates: Mapping[str, float] | None = None,
    start_windows: Mapping[str, int] | None = None,
    capabilities: CapabilityBook | None = None,
    judges_placement: bool = False,
    **overrides: Any,
) -> AsyncIterator[tuple[AuditContext, Locations]]:
    """`start_rates`, `start_windows`: where each bookie's adaptive request rate and window start
    (BookiePool). `capabilities`: the process tree's book of what its clients learnt of each bookie,
    by incarnation (bookie/capabilities.py; the registrations say which runs now). `judges_placement`:
    the caller runs a check that judges placement, so a cluster without rack information is said, once
    here (a `check` run's worker processes and the repair role pass False: the run's owner says it)."""
    agents = agents_config(settings)  # a token or TLS file that cannot be read fails before we connect
    store = await connect_store(settings)
    pool = BookiePool(
        store.address_resolver(),
        bookie_config(settings),
        agents=agents,
        start_rates=start_rates,
        start_windows=start_windows,
        capabilities=capabilities,
        incarnation=registration_incarnations(store) if capabilities is not None else None,
    )
    try:
        options = check_options(settings, one_shot=one_shot)
        if overrides:
            from dataclasses import replace

            options = replace(options, **overrides)

        async def rebuild() -> RackResolver | None:
            return await rack_resolver(settings, store)

        if settings.racks.source in ("file", "script"):
            # Local configuration: unusable at start is a configuration error (exit 2), not a finding.
            locations = Locations(await rebuild(), rebuild)
        else:
            # Rack data in ZooKeeper (Pulsar's /bookies) is outside data: if malformed, placement alone
            # is not judged (Locations.problem / finding()).
            locations = Locations(None, rebuild)
            await locations.refresh()
        if judges_placement and not locations.available and locations.problem is None and options.placement is not None:
            log.warning(
                "no rack information (racks.source=%s found nothing): placement is not checked", settings.racks.source
            )
        yield AuditContext(store, pool, options), locations
    finally:
        await pool.close()
        await store.close()
