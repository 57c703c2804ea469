"""BookKeeper's configuration keys: the Java auditor's settings bk-auditor accepts (`JAVA_KEYS`: Java name
-> our dotted name, converted to our units and names), the bookie TLS and authentication keys
(`translate_bookie_security`: they depend on each other, and the ones we do not implement are refused),
and the names of every other BookKeeper key, which a bk_server.conf pointed at bk-auditor may hold and
which are logged and ignored (`is_known_java_key`).

Names, defaults and units were checked against BookKeeper 4.17.3 (`ServerConfiguration`,
`ClientConfiguration`, `AbstractConfiguration`, the placement policies, conf/bk_server.conf). Only the
names are recorded (facts needed for interoperability). docs/configuration.md has the table, with the
reasons where our default differs. Class names translate through one table each: placement policies
through `auditor.durability.placement.POLICY_CLASSES`, ledger managers through
`auditor.metadata.location.LEDGER_MANAGER_CLASSES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from auditor.durability.placement import PolicyKind


def _ms_to_s(value: Any) -> Any:
    return _scaled(value, 1000, "milliseconds")


def _scaled(value: Any, divisor: int, unit: str) -> Any:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ValueError(f"must be an integer ({unit}), got {value!r}") from None
    return n / divisor


def _rack_source(value: Any) -> str:
    name = str(value).strip()
    short = name.rsplit(".", 1)[-1]
    if short == "ScriptBasedMapping":
        return "script"  # becomes "none" when no script is configured, as Java's default-rack answer
    if short in ("ZkBookieRackAffinityMapping", "BookieRackAffinityMapping"):
        return "pulsar"
    raise ValueError(
        f"unsupported DNS resolver {name!r}; supported: ScriptBasedMapping, "
        "(Zk)BookieRackAffinityMapping (Pulsar's /bookies rack map)"
    )


def _ledger_manager(value: Any) -> str:
    from auditor.metadata.location import LEDGER_MANAGER_CLASSES  # the adapters load only when needed

    name = str(value).strip()
    short = name.rsplit(".", 1)[-1]
    if short in LEDGER_MANAGER_CLASSES:
        return LEDGER_MANAGER_CLASSES[short].value
    if name.lower() in {m.value for m in LEDGER_MANAGER_CLASSES.values()}:
        return name.lower()
    raise ValueError(f"unsupported ledger manager {name!r}; supported: {', '.join(sorted(LEDGER_MANAGER_CLASSES))}")


@dataclass(frozen=True, slots=True)
class JavaKey:
    """A Java auditor setting we accept: where it goes and how its value converts."""

    java: str
    path: str  # our dotted name
    unit: str  # the Java unit, for the docs and messages
    convert: Callable[[Any], Any] | None = None


JAVA_KEYS: dict[str, JavaKey] = {
    k.java: k
    for k in (
        JavaKey("metadataServiceUri", "metadata_service_uri", "URI"),
        JavaKey("zkServers", "zookeeper.servers", "host:port list"),
        JavaKey("zkLedgersRootPath", "zookeeper.ledgers_root", "path"),
        JavaKey("ledgerManagerFactoryClass", "zookeeper.ledger_manager", "class", _ledger_manager),
        JavaKey("ledgerManagerType", "zookeeper.ledger_manager", "name", _ledger_manager),
        JavaKey("zkTimeout", "zookeeper.session_timeout_seconds", "ms", _ms_to_s),
        JavaKey("zkRequestRateLimit", "zookeeper.reads_per_second", "requests/s"),
        JavaKey("auditorPeriodicBookieCheckInterval", "schedule.bookie_check_seconds", "s"),
        JavaKey("auditorPeriodicCheckInterval", "schedule.ledger_check_seconds", "s"),
        JavaKey("auditorPeriodicPlacementPolicyCheckInterval", "schedule.scrutiny_seconds", "s"),
        JavaKey("auditorReplicasCheckInterval", "schedule.scrutiny_seconds", "s"),
        JavaKey("lostBookieRecoveryDelay", "schedule.lost_bookie_delay_seconds", "s"),
        JavaKey("auditorLedgerVerificationPercentage", "ledger_check.verification_percentage", "%"),
        JavaKey("underreplicatedLedgerRecoveryGracePeriod", "under_replication.grace_seconds", "s"),
        JavaKey("auditorMaxNumberOfConcurrentOpenLedgerOperations", "max_concurrent_ledgers", "count"),
        JavaKey("readEntryTimeoutSec", "bookie_client.timeout_seconds", "s"),
        JavaKey("readTimeout", "bookie_client.timeout_seconds", "s"),
        JavaKey("clientConnectTimeoutMillis", "bookie_client.connect_timeout_seconds", "ms", _ms_to_s),
        JavaKey("nettyMaxFrameSizeBytes", "bookie_client.max_frame_bytes", "bytes"),
        JavaKey("ensemblePlacementPolicy", "placement.policy", "class", PolicyKind.parse),
        JavaKey("minNumRacksPerWriteQuorum", "placement.min_racks_per_write_quorum", "count"),
        JavaKey("enforceMinNumRacksPerWriteQuorum", "placement.enforce_min_racks_per_write_quorum", "bool"),
        JavaKey("reppMinimumRegionsForDurability", "placement.min_regions_for_durability", "count"),
        JavaKey("minNumZonesPerWriteQuorum", "placement.min_zones_per_write_quorum", "count"),
        JavaKey("desiredNumZonesPerWriteQuorum", "placement.desired_zones_per_write_quorum", "count"),
        JavaKey("enforceStrictZoneawarePlacement", "placement.enforce_strict_zoneaware_placement", "bool"),
        JavaKey("networkTopologyScriptFileName", "racks.script", "path"),
        JavaKey("bookieRecoveryPasswd", "repair.recovery_password", "text"),
        JavaKey("bookieRecoveryDigestType", "repair.recovery_digest_type", "CRC32|MAC|CRC32C|DUMMY"),
        JavaKey("lockReleaseOfFailedLedgerGracePeriod", "repair.backoff_cap_seconds", "ms", _ms_to_s),
        JavaKey("networkTopologyScriptNumberArgs", "racks.script_max_args", "count"),
        JavaKey("reppDnsResolverClass", "racks.source", "class", _rack_source),
        # ZooKeeper security (docs/security.md). BookKeeper reads zkEnableSecurity; the rest are the
        # ZooKeeper client's system properties (BOOKIE_EXTRA_OPTS, PULSAR_EXTRA_OPTS) or the keys of a
        # ZKClientConfig file (Pulsar's metadataStoreConfigPath), which may be given here as they are.
        JavaKey("zkEnableSecurity", "zookeeper.auth.secure_acls", "bool"),
        JavaKey("zookeeper.client.secure", "zookeeper.tls.enabled", "bool"),
        JavaKey("zookeeper.ssl.keyStore.location", "zookeeper.tls.keystore", "path"),
        JavaKey("zookeeper.ssl.keyStore.password", "zookeeper.tls.keystore_password", "text"),
        JavaKey("zookeeper.ssl.keyStore.passwordPath", "zookeeper.tls.keystore_password_file", "path"),
        JavaKey("zookeeper.ssl.keyStore.type", "zookeeper.tls.keystore_type", "PEM|JKS|PKCS12"),
        JavaKey("zookeeper.ssl.trustStore.location", "zookeeper.tls.truststore", "path"),
        JavaKey("zookeeper.ssl.trustStore.password", "zookeeper.tls.truststore_password", "text"),
        JavaKey("zookeeper.ssl.trustStore.passwordPath", "zookeeper.tls.truststore_password_file", "path"),
        JavaKey("zookeeper.ssl.trustStore.type", "zookeeper.tls.truststore_type", "PEM|JKS|PKCS12"),
        JavaKey("zookeeper.ssl.hostnameVerification", "zookeeper.tls.verify_hostname", "bool"),
        JavaKey("java.security.auth.login.config", "zookeeper.auth.jaas_file", "path"),
        JavaKey("zookeeper.sasl.clientconfig", "zookeeper.auth.jaas_section", "name"),
        JavaKey("zookeeper.sasl.client", "zookeeper.auth.sasl_enabled", "bool"),
        JavaKey("zookeeper.sasl.client.username", "zookeeper.auth.sasl_service", "name"),
    )
}

# When two Java keys feed one setting: the first listed wins (Java's own fallback order).
JAVA_PRECEDENCE = {
    "bookie_client.timeout_seconds": ("readEntryTimeoutSec", "readTimeout"),
    "zookeeper.ledger_manager": ("ledgerManagerFactoryClass", "ledgerManagerType"),
}
SCRUTINY_KEYS = ("auditorReplicasCheckInterval", "auditorPeriodicPlacementPolicyCheckInterval")


def _netty_or_nio(value: Any) -> None:
    short = str(value).strip().rsplit(".", 1)[-1]
    if short not in ("ClientCnxnSocketNetty", "ClientCnxnSocketNIO"):
        raise ValueError(f"unknown ZooKeeper client socket {str(value).strip()!r} (ClientCnxnSocketNetty or NIO)")


def _bool_text(value: Any) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"must be true or false, got {value!r}")
    return text == "true"


def _not_true(feature: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if _bool_text(value):
            raise ValueError(f"{feature} is not implemented by bk-auditor; refusing to start without it")

    return check


def _refused(why: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        raise ValueError(f"not supported: {why}")

    return check


# ZooKeeper client keys that need no setting of ours, checked when given: a value asking for something we
# do not do is refused (fail closed), naming the key. Listed in docs/security.md ("Settings we refuse").
CHECKED_JAVA_KEYS: dict[str, Callable[[Any], object]] = {
    # kazoo has one socket implementation for both; TLS does not depend on this choice.
    "zookeeper.clientCnxnSocket": _netty_or_nio,
    # kazoo reads the certificate files again on every (re)connection.
    "zookeeper.client.certReload": _bool_text,
    "zookeeper.ssl.crl": _not_true("certificate revocation (CRL) checking"),
    "zookeeper.ssl.ocsp": _not_true("certificate revocation (OCSP) checking"),
    "zookeeper.ssl.protocol": _refused("kazoo negotiates TLS 1.2 or 1.3 with OpenSSL's defaults; remove the key"),
    "zookeeper.ssl.enabledProtocols": _refused("kazoo negotiates TLS 1.2 or 1.3 with OpenSSL's defaults"),
    "zookeeper.ssl.ciphersuites": _refused("kazoo uses OpenSSL's default cipher suites"),
    "zookeeper.ssl.context.supplier.class": _refused("a Java SSLContext supplier cannot be used from Python"),
    "zookeeper.server.principal": _refused("Kerberos (GSSAPI) SASL is not implemented"),
    "zookeeper.server.realm": _refused("Kerberos (GSSAPI) SASL is not implemented"),
}


def java_key_table() -> list[tuple[str, str, str]]:
    """(Java key, our dotted name, Java unit) for every accepted Java key (docs and tests)."""
    return [(k.java, k.path, k.unit) for k in JAVA_KEYS.values()]


# ------------------------------------------------------------------ BookKeeper keys we ignore

# Key prefixes whose members vary by release (DbLedgerStorage tunables).
KNOWN_PREFIXES: tuple[str, ...] = ("dbStorage_",)

KNOWN_JAVA_KEYS: frozenset[str] = frozenset(
    """
addEntryQuorumTimeoutSec addEntryTimeoutSec advertisedAddress allocatorExitOnOutOfMemory
allocatorLeakDetectionPolicy allocatorOutOfMemoryPolicy allocatorPoolingConcurrency allocatorPoolingPolicy
allowEphemeralPorts allowLoopback allowMultipleDirsUnderSameDiskPartition
allowShadedLedgerManagerFactoryClass allowStorageExpansion
auditorAcquireConcurrentOpenLedgerOperationsTimeOutMSec auditorLedgerVerificationPercentage
auditorMaxNumberOfConcurrentOpenLedgerOperations auditorPeriodicBookieCheckInterval
auditorPeriodicCheckInterval auditorPeriodicPlacementPolicyCheckInterval auditorReplicasCheckInterval
authorizedRoles autoRecoveryDaemonEnabled batchReadEnabled bookieAddressResolverEnabled
bookieDeathWatchInterval bookieErrorThresholdPerInterval
bookieFailureHistoryExpirationMSec bookieHealthCheckEnabled bookieHealthCheckIntervalSeconds bookieId
bookieMaxMultipleForWeightBasedPlacement bookiePort bookieQuarantineRatio bookieQuarantineTimeSeconds
byteBufAllocatorSizeInitial byteBufAllocatorSizeMax byteBufAllocatorSizeMin
clientConnectBookieUnavailableLogThrottling clientConnectTimeoutMillis
clientReceiveBufferSize clientRole clientSendBufferSize
clientSockKeepalive clientTcpNoDelay clientTcpUserTimeoutMillis
clientWriteBufferHighWaterMark
clientWriteBufferLowWaterMark closeChannelOnResponseTimeout codahaleStatsCSVEndpoint
codahaleStatsGraphiteEndpoint codahaleStatsJmxEndpoint codahaleStatsOutputFrequencySeconds
codahaleStatsPrefix codahaleStatsSlf4jEndpoint compactionMaxOutstandingRequests compactionRate
compactionRateByBytes compactionRateByEntries dataIntegrityChecking dataIntegrityStampMissingCookies
dbStorage_directIOEntryLogger dbStorage_directIOEntryLoggerMaxFdCacheTimeSeconds
dbStorage_directIOEntryLoggerReadBufferSizeMB dbStorage_directIOEntryLoggerTotalReadBufferSizeMB
dbStorage_directIOEntryLoggerTotalWriteBufferSizeMB dbStorage_maxThrottleTimeMs
dbStorage_readAheadCacheBatchBytesSize dbStorage_readAheadCacheBatchSize dbStorage_readAheadCacheMaxSizeMb
dbStorage_rocksDB_blockCacheSize dbStorage_rocksDB_blockSize dbStorage_rocksDB_bloomFilterBitsPerKey
dbStorage_rocksDB_checksum_type dbStorage_rocksDB_format_version dbStorage_rocksDB_logLevel
dbStorage_rocksDB_logPath dbStorage_rocksDB_lz4CompressionEnabled dbStorage_rocksDB_maxSizeInLevel1MB
dbStorage_rocksDB_numFilesInLevel0 dbStorage_rocksDB_numLevels dbStorage_rocksDB_sstSizeInMB
dbStorage_rocksDB_writeBufferSizeMB dbStorage_writeCacheMaxSizeMb defaultRocksdbConf delayEnsembleChange
desiredNumZonesPerWriteQuorum digestType disableEnsembleChangeFeatureName disableServerSocketBind
diskCheckInterval diskUsageLwmThreshold diskUsageThreshold diskUsageWarnThreshold
diskWeightBasedPlacementEnabled dlog.bkcAckQuorumSize dlog.bkcEnsembleSize dlog.bkcWriteQuorumSize
enableBookieAddressTracking enableBookieFailureTracking enableBusyWait enableDigestTypeAutodetection
enableHealthCheck enableLocalTransport enableParallelRecoveryRead enableStatistics enableTaskExecutionStats
enforceMinNumFaultDomainsForWrite enforceMinNumRacksPerWriteQuorum enforceStrictZoneawarePlacement
ensemblePlacementPolicy ensemblePlacementPolicyOrderSlowBookies ensembleRandomReadReordering
entryFormatterClass entryLocationCompactionInterval entryLocationRocksdbConf
entryLogFilePreallocationEnabled entryLogPerLedgerCounterLimitsMultFactor entryLogPerLedgerEnabled
entrylogMapAccessExpiryTimeInSeconds explicitLacInterval exposeDefaultJVMMetrics extraServerComponents
fileInfoCacheInitialCapacity fileInfoFormatVersionToWrite fileInfoMaxIdleTime firstSpeculativeReadLACTimeout
firstSpeculativeReadTimeout flushEntrylogBytes flushInterval forceAllowCompaction forceReadOnlyBookie
gcEntryLogMetadataCacheEnabled gcEntryLogMetadataCachePath gcMetadataOpRateLimit
gcOverreplicatedLedgerMaxConcurrentRequests gcOverreplicatedLedgerWaitTime gcWaitTime
getBookieInfoIntervalSeconds getBookieInfoRetryIntervalSeconds getBookieInfoTimeoutSecs httpServerClass
httpServerEnabled httpServerHost httpServerKeyStorePassword httpServerKeyStorePath httpServerPort
httpServerTlsEnable httpServerTrustStorePassword httpServerTrustStorePath
ignoreExtraServerComponentsStartupFailures ignoreLocalNodeInPlacementPolicy
inFlightReadEntryNumInLedgerChecker indexDirectories isForceGCAllowWhenNoSpace isThrottleByBytes
journalAdaptiveGroupWrites journalAlignmentSize journalBufferedEntriesThreshold
journalBufferedWritesThreshold journalChannelProvider journalDirectories journalDirectory
journalFlushWhenQueueEmpty journalFormatVersionToWrite journalMaxBackups journalMaxGroupWaitMSec
journalMaxMemorySizeMb journalMaxSizeMB journalPageCacheFlushIntervalMSec journalPreAllocSizeMB
journalQueueSize journalRemoveFromPageCache journalReuseFiles journalSyncData journalWriteBufferSizeKB
journalWriteData ledgerDirectories ledgerIdFormatterClass ledgerManagerFactoryClass
ledgerManagerFactoryDisableClassCheck ledgerManagerType ledgerMetadataRocksdbConf ledgerMetadataVersion
ledgerStorageClass limitStatsLogging listeningInterface localConsistencyCheckOnStartup localScrubInterval
localScrubRateLimit lockReleaseOfFailedLedgerGracePeriod logSizeLimit lostBookieRecoveryDelay
majorCompactionInterval majorCompactionMaxTimeMillis majorCompactionThreshold maxAddsInProgressLimit
maxBatchReadSize maxNumEnsembleChanges maxOperationNumbersInSingleRocksdbWriteBatch
maxPendingAddRequestsPerThread maxPendingReadRequestsPerThread maxReadsInProgressLimit
maxSpeculativeReadLACTimeout maxSpeculativeReadTimeout maximumNumberOfActiveEntryLogs metadataServiceUri
metastoreImplClass metastoreMaxEntriesPerScan minNumRacksPerWriteQuorum minNumZonesPerWriteQuorum
minUsableSizeForEntryLogCreation minUsableSizeForHighPriorityWrites minUsableSizeForIndexFileCreation
minorCompactionInterval minorCompactionMaxTimeMillis minorCompactionThreshold nettyMaxFrameSizeBytes
nettyUsePooledBuffers networkTopologyScriptFileName networkTopologyScriptNumberArgs
networkTopologyStabilizePeriodSeconds numAddWorkerThreads numChannelsPerBookie numHighPriorityWorkerThreads
numIOThreads numJournalCallbackThreads numLongPollWorkerThreads numOfMemtableFlushThreads
numReadWorkerThreads numWorkerThreads openFileLimit openLedgerRereplicationGracePeriod opportunisticStriping
pageLimit pageSize passwd pcbcTimeoutTimerNumTicks pcbcTimeoutTimerTickDurationMs permittedStartupUsers
persistBookieStatusEnabled preserveMdcForTaskExecution prometheusStatsHttpAddress prometheusStatsHttpPort
prometheusStatsLatencyRolloverSeconds readBufferSizeBytes readEntryTimeoutSec readOnlyModeEnabled
readOnlyModeOnAnyDiskFullEnabled readReorderThresholdPendingRequests readTimeout
readWorkerThreadsThrottlingEnabled readahead-max-batch-size recoveryBatchReadEnabled recoveryReadBatchSize
registrationClientClass registrationManagerClass reorderReadSequenceEnabled
repairedPlacementPolicyNotAdheringBookieEnabled replicationRateByBytes
reppDisableDurabilityEnforcementFeature reppDisableDurabilityFeatureName
reppDisallowBookiePlacementInRegionFeatureName reppDnsResolverClass reppEnableDurabilityEnforcementInReplace
reppEnableValidation reppMinimumRegionsForDurability reppRegionsToWrite requestTimerNumTicks
requestTimerTickDurationMs rereplicationEntryBatchSize rwRereplicateBackoffMs sanityCheckMetricsEnabled
serverNumAcceptorThreads serverNumIOThreads serverSockKeepalive serverTcpLinger serverTcpNoDelay
serverWriteBufferHighWaterMark serverWriteBufferLowWaterMark shadedLedgerManagerFactoryClassPrefix
skipListArenaChunkSize skipListArenaMaxAllocSize skipListSizeLimit skipReplayJournalInvalidRecord
sortedLedgerStorageEnabled speculativeReadLACTimeoutBackoffMultiplier speculativeReadTimeout
speculativeReadTimeoutBackoffMultiplier statsProviderClass stickyReadSEnabled
storage.cluster.controller.schedule.interval.ms storage.range.store.dirs storage.serve.readonly.tables
storageserver.grpc.port storeSystemTimeAsLedgerCreationTime storeSystemTimeAsLedgerUnderreplicatedMarkTime
taskExecutionWarnTimeMicros tcpKeepCnt tcpKeepIdle tcpKeepIntvl timeoutMonitorIntervalSec
timeoutTaskIntervalMillis timeoutTimerNumTicks timeoutTimerTickDurationMs
underreplicatedLedgerRecoveryGracePeriod useHostNameAsBookieID useHostnameResolveLocalNodePlacementPolicy
useShortHostName useTargetEntryLogSizeForGc useTransactionalCompaction useV2WireProtocol verifyMetadataOnGC
waitTimeoutOnBackpressureMs waitTimeoutOnResponseBackpressureMs write-cache-max-size writeBufferSizeBytes
zkLedgersRootPath zkRequestRateLimit zkRetryBackoffMaxMs zkRetryBackoffMaxRetries
zkRetryBackoffStartMs zkServers zkTimeout
""".split()
)


def is_known_java_key(key: str) -> bool:
    return key in KNOWN_JAVA_KEYS or key.startswith(KNOWN_PREFIXES)


# ------------------------------------------------------------ bookie TLS and authentication keys

TLS_CONTEXT_FACTORY = "org.apache.bookkeeper.tls.TLSContextFactory"
BOOKIE_AUTHZ_FACTORY = "org.apache.bookkeeper.tls.BookieAuthZFactory"
TLS_PROVIDERS = ("OpenSSL", "JDK")  # Java's choice of TLS engine; bk-auditor uses Python's OpenSSL for both
_TRUST_KEYS = ("clientTrustStore", "tlsTrustStore")  # each pair: the client's key first (Java's order)
_TRUST_TYPE_KEYS = ("clientTrustStoreType", "tlsTrustStoreType")
_TRUST_PASSWORD_KEYS = ("clientTrustStorePasswordPath", "tlsTrustStorePasswordPath")
_KEY_KEYS = ("clientKeyStore", "tlsKeyStore")
_KEY_TYPE_KEYS = ("clientKeyStoreType", "tlsKeyStoreType")
_KEY_PASSWORD_KEYS = ("clientKeyStorePasswordPath", "tlsKeyStorePasswordPath")
_OWN_CERT_KEYS = (*_KEY_KEYS, *_KEY_TYPE_KEYS, *_KEY_PASSWORD_KEYS, "tlsCertificatePath")

# Translated by `translate_bookie_security` as a whole (they depend on each other), never ignored.
BOOKIE_SECURITY_KEYS: frozenset[str] = frozenset(
    {
        "tlsProviderFactoryClass",
        "tlsProvider",
        "tlsClientAuthentication",
        "tlsHostnameVerificationEnabled",
        "tlsEnabledProtocols",
        "tlsEnabledCipherSuites",
        "tlsCertFilesRefreshDurationSeconds",
        "startTLSTimeoutSecs",
        *_TRUST_KEYS,
        *_TRUST_TYPE_KEYS,
        *_TRUST_PASSWORD_KEYS,
        *_OWN_CERT_KEYS,
        "clientAuthProviderFactoryClass",
        "bookieAuthProviderFactoryClass",
    }
)


@dataclass(frozen=True, slots=True)
class Translated:
    """One setting from the bookie security keys: our dotted name, its value, the Java key it came from."""

    path: str
    value: Any
    key: str
    raw: Any


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _java_bool(key: str, value: str, problems: list[str]) -> bool | None:
    low = value.lower()
    if low in ("true", "yes", "on", "1"):
        return True
    if low in ("false", "no", "off", "0"):
        return False
    problems.append(f"{key}: must be true or false, got {value!r}")
    return None


def translate_bookie_security(flat: dict[str, Any]) -> tuple[list[Translated], list[str], list[str]]:
    """The Java client's bookie TLS and authentication keys as our `bookie_client.tls` settings, the
    way BookKeeper 4.17.3's client reads them (`TLSContextFactory`, `ClientConfiguration`): TLS only
    when `tlsProviderFactoryClass` is set; `client*` keys before `tls*` ones; store types default to JKS;
    our own certificate only with `tlsClientAuthentication=true`. Returns (settings, keys ignored as
    Java ignores them, problems as "key: message"). Fails closed: an authentication plugin or provider
    we do not implement is a problem, never ignored."""
    given = {k: str(v).strip() for k, v in flat.items() if k in BOOKIE_SECURITY_KEYS and str(v).strip()}
    out: list[Translated] = []
    ignored: list[str] = []
    problems: list[str] = []

    def first(keys: tuple[str, ...]) -> tuple[str, str] | None:
        return next(((k, given[k]) for k in keys if k in given), None)

    def put(path: str, value: Any, key: str) -> None:
        out.append(Translated(path, value, key, given[key]))

    def java_store(
        name: str, store: tuple[str, str], type_key: str, kind: str, password: tuple[str, str] | None
    ) -> None:
        """A JKS/PKCS12 store: bookie_client.tls.<name>, <name>_type, <name>_password_file."""
        put(f"bookie_client.tls.{name}", store[1], store[0])
        out.append(Translated(f"bookie_client.tls.{name}_type", kind.upper(), type_key, kind))
        if password is not None:
            put(f"bookie_client.tls.{name}_password_file", password[1], password[0])

    plugin = given.get("clientAuthProviderFactoryClass")
    if plugin is not None:
        problems.append(
            f"clientAuthProviderFactoryClass: bookie authentication plugin {plugin!r} (SASL/Kerberos or other) "
            "is not implemented by bk-auditor; it authenticates to bookies by TLS client certificate only"
        )
    provider = given.get("tlsProvider")
    if provider is not None and provider.lower() not in {p.lower() for p in TLS_PROVIDERS}:
        problems.append(f"tlsProvider: unsupported TLS provider {provider!r}; supported: {', '.join(TLS_PROVIDERS)}")
    factory = given.get("tlsProviderFactoryClass")
    client_auth = (
        _java_bool("tlsClientAuthentication", given["tlsClientAuthentication"], problems)
        if ("tlsClientAuthentication" in given)
        else False
    )
    bookie_plugin = given.get("bookieAuthProviderFactoryClass")
    if bookie_plugin is not None:
        if _short(bookie_plugin) != _short(BOOKIE_AUTHZ_FACTORY):
            problems.append(
                f"bookieAuthProviderFactoryClass: the bookies demand authentication with {bookie_plugin!r}, "
                "which bk-auditor does not implement (only certificate roles, BookieAuthZFactory, over TLS)"
            )
        elif factory is None or not client_auth:
            problems.append(
                "bookieAuthProviderFactoryClass: the bookies authorise clients by certificate role "
                "(BookieAuthZFactory): set tlsProviderFactoryClass and tlsClientAuthentication=true with our "
                "key store, so that bk-auditor presents a certificate"
            )
    if factory is None:
        # Java's client speaks plaintext without a factory and reads none of the TLS keys.
        ignored += [k for k in given if k not in ("clientAuthProviderFactoryClass", "bookieAuthProviderFactoryClass")]
        return out, sorted(ignored), problems
    if _short(factory) != _short(TLS_CONTEXT_FACTORY):
        problems.append(
            f"tlsProviderFactoryClass: unsupported security handler factory {factory!r}; "
            f"supported: {TLS_CONTEXT_FACTORY}"
        )
        return out, sorted(ignored), problems
    put("bookie_client.tls.enabled", True, "tlsProviderFactoryClass")

    trust = first(_TRUST_KEYS)
    trust_type_key, trust_type = first(_TRUST_TYPE_KEYS) or ("tlsTrustStoreType", "JKS")
    trust_password = first(_TRUST_PASSWORD_KEYS)
    if trust is None:
        problems.append("tlsTrustStore: not set; TLS to bookies needs the CA to trust (the Java client too)")
    elif trust_type.upper() == "PEM":
        put("bookie_client.tls.ca_file", trust[1], trust[0])
        if trust_password is not None:
            ignored.append(trust_password[0])  # a PEM trust file has no password
    elif trust_type.upper() in ("JKS", "PKCS12"):
        java_store("truststore", trust, trust_type_key, trust_type, trust_password)
    else:
        problems.append(f"{trust_type_key}: unsupported trust store type {trust_type!r}; supported: PEM, JKS, PKCS12")

    own = [k for k in _OWN_CERT_KEYS if k in given]
    if not client_auth:
        ignored += own  # Java loads its own certificate only for tlsClientAuthentication=true
    else:
        store = first(_KEY_KEYS)
        type_key, kind = first(_KEY_TYPE_KEYS) or ("tlsKeyStoreType", "JKS")
        password = first(_KEY_PASSWORD_KEYS)
        if store is None:
            problems.append("tlsKeyStore: not set, but tlsClientAuthentication=true needs our key")
        elif kind.upper() == "PEM":
            put("bookie_client.tls.key_file", store[1], store[0])
            if "tlsCertificatePath" not in given:
                problems.append("tlsCertificatePath: not set, but a PEM key store needs its certificate")
            else:
                put("bookie_client.tls.cert_file", given["tlsCertificatePath"], "tlsCertificatePath")
            if password is not None:
                put("bookie_client.tls.key_password_file", password[1], password[0])
        elif kind.upper() in ("JKS", "PKCS12"):
            java_store("keystore", store, type_key, kind, password)
            if "tlsCertificatePath" in given:
                ignored.append("tlsCertificatePath")  # the store holds the certificate
        else:
            problems.append(f"{type_key}: unsupported key store type {kind!r}; supported: PEM, JKS, PKCS12")
    if "tlsHostnameVerificationEnabled" in given:
        put(
            "bookie_client.tls.verify_hostname",
            given["tlsHostnameVerificationEnabled"],
            "tlsHostnameVerificationEnabled",
        )
    if "startTLSTimeoutSecs" in given:
        put("bookie_client.tls.handshake_timeout_seconds", given["startTLSTimeoutSecs"], "startTLSTimeoutSecs")
    if "tlsEnabledProtocols" in given:
        put("bookie_client.tls.protocols", given["tlsEnabledProtocols"], "tlsEnabledProtocols")
    if "tlsEnabledCipherSuites" in given:
        problems.append(
            "tlsEnabledCipherSuites: Java cipher suite names cannot be applied by bk-auditor; remove the key and "
            "set bookie_client.tls.ciphers (an OpenSSL cipher list) to restrict ciphers"
        )
    if "tlsCertFilesRefreshDurationSeconds" in given:
        # We look at the files before every new connection and reload changed ones (docs/security.md).
        ignored.append("tlsCertFilesRefreshDurationSeconds")
    return out, sorted(ignored), problems
