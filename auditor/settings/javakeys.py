"""BookKeeper's configuration keys: the Java auditor's settings bk-auditor accepts (`JAVA_KEYS`: Java name
-> our dotted name, converted to our units and names) and the names of every other BookKeeper key, which a
bk_server.conf pointed at bk-auditor may hold and which are logged and ignored (`is_known_java_key`).

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
        JavaKey("networkTopologyScriptNumberArgs", "racks.script_max_args", "count"),
        JavaKey("reppDnsResolverClass", "racks.source", "class", _rack_source),
    )
}

# When two Java keys feed one setting: the first listed wins (Java's own fallback order).
JAVA_PRECEDENCE = {
    "bookie_client.timeout_seconds": ("readEntryTimeoutSec", "readTimeout"),
    "zookeeper.ledger_manager": ("ledgerManagerFactoryClass", "ledgerManagerType"),
}
SCRUTINY_KEYS = ("auditorReplicasCheckInterval", "auditorPeriodicPlacementPolicyCheckInterval")


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
bookieAuthProviderFactoryClass bookieDeathWatchInterval bookieErrorThresholdPerInterval
bookieFailureHistoryExpirationMSec bookieHealthCheckEnabled bookieHealthCheckIntervalSeconds bookieId
bookieMaxMultipleForWeightBasedPlacement bookiePort bookieQuarantineRatio bookieQuarantineTimeSeconds
byteBufAllocatorSizeInitial byteBufAllocatorSizeMax byteBufAllocatorSizeMin clientAuthProviderFactoryClass
clientConnectBookieUnavailableLogThrottling clientConnectTimeoutMillis clientKeyStore
clientKeyStorePasswordPath clientKeyStoreType clientReceiveBufferSize clientRole clientSendBufferSize
clientSockKeepalive clientTcpNoDelay clientTcpUserTimeoutMillis clientTrustStore
clientTrustStorePasswordPath clientTrustStoreType clientWriteBufferHighWaterMark
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
speculativeReadTimeoutBackoffMultiplier startTLSTimeoutSecs statsProviderClass stickyReadSEnabled
storage.cluster.controller.schedule.interval.ms storage.range.store.dirs storage.serve.readonly.tables
storageserver.grpc.port storeSystemTimeAsLedgerCreationTime storeSystemTimeAsLedgerUnderreplicatedMarkTime
taskExecutionWarnTimeMicros tcpKeepCnt tcpKeepIdle tcpKeepIntvl timeoutMonitorIntervalSec
timeoutTaskIntervalMillis timeoutTimerNumTicks timeoutTimerTickDurationMs tlsCertFilesRefreshDurationSeconds
tlsCertificatePath tlsClientAuthentication tlsEnabledCipherSuites tlsEnabledProtocols
tlsHostnameVerificationEnabled tlsKeyStore tlsKeyStorePasswordPath tlsKeyStoreType tlsProvider
tlsProviderFactoryClass tlsTrustStore tlsTrustStorePasswordPath tlsTrustStoreType
underreplicatedLedgerRecoveryGracePeriod useHostNameAsBookieID useHostnameResolveLocalNodePlacementPolicy
useShortHostName useTargetEntryLogSizeForGc useTransactionalCompaction useV2WireProtocol verifyMetadataOnGC
waitTimeoutOnBackpressureMs waitTimeoutOnResponseBackpressureMs write-cache-max-size writeBufferSizeBytes
zkEnableSecurity zkLedgersRootPath zkRequestRateLimit zkRetryBackoffMaxMs zkRetryBackoffMaxRetries
zkRetryBackoffStartMs zkServers zkTimeout
""".split()
)


def is_known_java_key(key: str) -> bool:
    return key in KNOWN_JAVA_KEYS or key.startswith(KNOWN_PREFIXES)
