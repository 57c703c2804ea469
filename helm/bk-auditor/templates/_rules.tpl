{{/*
The alert rules (docs/deploy.md has the runbook of each, under a heading that is the alert's name).
Metric names are the daemon's (auditor/daemon/metrics.py); tests/deploy/ checks them.

"bk-auditor.alertRules.raw" writes them as YAML; "bk-auditor.alertRules" drops the disabled ones and adds
prometheusRule.alertLabels and runbook_url. The findings and the pause flag are read across replicas
(bk-auditor.clusterMax): every replica exports them, the leader from its store, a standby from what the
leader persisted in ZooKeeper, so a failover (the leader's series gone for a while, a new leader's from
another pod) neither resolves an alert nor fires it again. Under-replication, lost bookies and the
re-check queue are read from the leader only (bk-auditor.leaderMax): standbys do not watch them. Every
rule reads only this release's series (bk-auditor.sel, prometheusRule.scopeToRelease) and aggregates by
`bookkeeper_cluster` (the daemon's label, one value per BookKeeper cluster: setting metrics.cluster) and
namespace, so two releases for two clusters under one Prometheus alert once each; only
BkAuditorMultipleLeaders looks across releases, for two releases auditing the same cluster.
*/}}

{{- define "bk-auditor.checkInterval" -}}
{{- /* (list $ <check> <schedule key> <daemon default>) -> seconds, from config.schedule, then
       prometheusRule.checkIntervals, then the daemon's default. */ -}}
{{- $root := index . 0 -}}
{{- $sched := (get ($root.Values.config | default dict) "schedule") | default dict -}}
{{- $over := $root.Values.prometheusRule.checkIntervals | default dict -}}
{{- if hasKey $sched (index . 2) -}}
{{- index $sched (index . 2) | float64 -}}
{{- else if hasKey $over (index . 1) -}}
{{- index $over (index . 1) | float64 -}}
{{- else -}}
{{- index . 3 | float64 -}}
{{- end -}}
{{- end -}}

{{- define "bk-auditor.alertRules.raw" -}}
{{- $t := .Values.prometheusRule.thresholds -}}
{{- $value := "{{ $value }}" -}}
{{- $inNs := "{{ with $labels.bookkeeper_cluster }} of cluster {{ . }}{{ end }}{{ with $labels.namespace }} in namespace {{ . }}{{ end }}" -}}
{{- $bookie := "{{ $labels.bookie }}" -}}
{{- $check := "{{ $labels.check }}" -}}
{{- $sel := include "bk-auditor.sel" (list . "") -}}
- alert: BkAuditorEntryNoReplica
  expr: {{ include "bk-auditor.clusterMax" (list . "bk_auditor_ledgers_with_findings" `category="entry_no_replica"`) }} > 0
  for: {{ $t.criticalFor }}
  labels:
    severity: critical
  annotations:
    summary: Ledger entries with no copy on any bookie (data loss)
    description: >-
      {{ $value }} ledger(s){{ $inNs }} have acknowledged entries that no bookie of their ensemble holds.
      bk-auditor confirmed this with a re-check before reporting it.
    runbook: >-
      Stop anything that deletes or rewrites bookie data (decommissions, disk wipes, auto-recovery's
      destructive steps). List the ledgers with `bk-auditor findings --category entry_no_replica`,
      explain one with `bk-auditor explain <ledger>`, and look for the lost bookie's disks before
      anything else. Map ledgers to topics via the Pulsar metadata shown by `explain`.
- alert: BkAuditorLedgerMissing
  expr: {{ include "bk-auditor.clusterMax" (list . "bk_auditor_ledgers_with_findings" `category="ledger_missing"`) }} > 0
  for: {{ $t.criticalFor }}
  labels:
    severity: critical
  annotations:
    summary: Ledgers that Pulsar topics still list are gone from BookKeeper (data lost by deletion)
    description: >-
      {{ $value }} ledger(s){{ $inNs }} are listed by a topic's managed ledger, cursor or schema but their
      BookKeeper metadata is gone (not offloaded). bk-auditor re-read the topic's listing before reporting.
    runbook: >-
      Stop whatever deletes ledgers (cleanup jobs, scripts, a misconfigured retention) and keep the
      ZooKeeper transaction logs and snapshots: they hold the deleted metadata. `bk-auditor findings
      --category ledger_missing` names each topic and ledger; see docs/deletion.md. Readers of the topic
      will fail at that ledger (or skip it with autoSkipNonRecoverableData).
- alert: BkAuditorEntryBelowAckQuorum
  expr: {{ include "bk-auditor.clusterMax" (list . "bk_auditor_ledgers_with_findings" `category="entry_below_ack_quorum"`) }} > 0
  for: {{ $t.criticalFor }}
  labels:
    severity: critical
  annotations:
    summary: Ledger entries with fewer copies than the ack quorum
    description: >-
      {{ $value }} ledger(s){{ $inNs }} have entries stored on fewer bookies than their ack quorum:
      one more lost bookie can lose data.
    runbook: >-
      Keep every bookie up (no restarts, no decommission) until repair catches up. Check that
      auto-recovery runs (`bk-auditor status`, `bin/bookkeeper shell listunderreplicated`) and is not
      disabled; list the ledgers with `bk-auditor findings --category entry_below_ack_quorum`.
- alert: BkAuditorEntryBelowWriteQuorum
  expr: {{ include "bk-auditor.clusterMax" (list . "bk_auditor_ledgers_with_findings" `category="entry_below_write_quorum"`) }} > 0
  for: {{ $t.belowWriteQuorumFor }}
  labels:
    severity: warning
  annotations:
    summary: Ledger entries below the write quorum for {{ $t.belowWriteQuorumFor }}
    description: >-
      {{ $value }} ledger(s){{ $inNs }} have had entries on fewer bookies than their write quorum for
      more than {{ $t.belowWriteQuorumFor }}; auto-recovery normally repairs this sooner.
    runbook: >-
      Check that auto-recovery (replication workers) runs and that under-replication is not disabled;
      look at BkAuditorUnderReplicatedTooLong and bookie disk space. `bk-auditor findings --category
      entry_below_write_quorum` lists the ledgers.
- alert: BkAuditorTruncationRisk
  expr: {{ include "bk-auditor.clusterMax" (list . "bk_auditor_ledgers_with_findings" `category="truncation_risk"`) }} > 0
  for: {{ $t.criticalFor }}
  labels:
    severity: critical
  annotations:
    summary: A recovery of an open ledger would cut off acknowledged entries
    description: >-
      {{ $value }} open ledger(s){{ $inNs }} have acknowledged entries missing on enough bookies that
      a ledger recovery now would truncate them.
    runbook: >-
      Do not fence or recover these ledgers (no topic unload/failover of their owners) until the
      missing bookies are back. `bk-auditor findings --category truncation_risk` names the ledgers and
      entries; bring back the bookies named there.
- alert: BkAuditorDigestMismatch
  expr: {{ include "bk-auditor.clusterMax" (list . "bk_auditor_ledgers_with_findings" `category="digest_mismatch"`) }} > 0
  for: {{ $t.criticalFor }}
  labels:
    severity: critical
  annotations:
    summary: A bookie returned entries whose digest does not match (corrupt replica)
    description: >-
      {{ $value }} ledger(s){{ $inNs }} have an entry copy whose checksum does not match its data.
    runbook: >-
      `bk-auditor findings --category digest_mismatch` names the bookie; check its disks (SMART, fs
      errors). Take the bookie out of the write set (read-only), let auto-recovery re-replicate from
      the good copies, then replace the disk.
- alert: BkAuditorBookieReincarnated
  expr: {{ include "bk-auditor.clusterMax" (list . "bk_auditor_findings" `category="bookie_reincarnated"`) }} > 0
  for: {{ $t.criticalFor }}
  labels:
    severity: critical
  annotations:
    summary: A bookie came back empty under the same id
    description: >-
      {{ $value }} bookie(s){{ $inNs }} re-registered with new storage while ledgers still name them:
      the copies they held are gone although metadata still says they hold them.
    runbook: >-
      Find the bookie with `bk-auditor findings --category bookie_reincarnated`; have its ledgers
      re-replicated (with bk-auditor's repair role, `bk-auditor trigger ledger` confirms and marks
      them; else `bin/bookkeeper shell recover <bookie>`), and find out why its disks were wiped.
      The alert resolves once no ledger naming the bookie misses a copy.
- alert: BkAuditorUnderReplicatedTooLong
  expr: {{ include "bk-auditor.leaderMax" (list . "bk_auditor_underreplicated_past_grace_ledgers" "") }} > 0
  for: {{ $t.underReplicatedFor }}
  labels:
    severity: warning
  annotations:
    summary: Under-replicated ledgers are not being repaired
    description: >-
      {{ $value }} ledger(s){{ $inNs }} have been marked under-replicated for longer than the recovery
      grace period (under_replication.grace_seconds).
    runbook: >-
      Auto-recovery is stuck or off: check the replication workers' logs and that
      `<ledgersRoot>/underreplication/disable` does not exist; look for ledgers that cannot be
      re-replicated (no source copy, no eligible bookie for the placement policy).
- alert: BkAuditorRepairBlocked
  expr: {{ include "bk-auditor.clusterMax" (list . "bk_auditor_ledgers_with_findings" `category="repair_blocked"`) }} > 0
  for: {{ $t.underReplicatedFor }}
  labels:
    severity: warning
  annotations:
    summary: Marked ledgers that bk-auditor's repair workers cannot repair
    description: >-
      {{ $value }} under-replicated ledger(s){{ $inNs }} are blocked: a repair worker tried and gave
      up for now (no source copy, no eligible bookie, a bookie that does not answer, ...), and no worker
      takes them again before their backoff ends.
    runbook: >-
      `bk-auditor findings --category repair_blocked` gives each ledger's reason; `bk-auditor explain
      <ledger>` shows the record (failures, last worker, next attempt). data_loss: see
      BkAuditorEntryNoReplica; no_eligible_bookie: add writable bookies that satisfy the placement policy
      (or allow repair.best_effort_placement); wait_unknown: bring back the bookie that does not answer.
- alert: BkAuditorBookieUnreachable
  expr: {{ include "bk-auditor.clusterMax" (list . "bk_auditor_findings" `category="bookie_unreachable"`) }} > 0
  for: {{ $t.bookieUnreachableFor }}
  labels:
    severity: warning
  annotations:
    summary: Registered bookies do not answer the auditor
    description: >-
      {{ $value }} registered bookie(s){{ $inNs }} did not answer the auditor: the ledgers on them
      could not be audited.
    runbook: >-
      `bk-auditor findings --category bookie_unreachable` names the bookies. Check them (pod status,
      `/api/v1/bookie/state`), and the network path from the auditor pod (NetworkPolicies) to the
      bookie port.
- alert: BkAuditorBookieRequestErrors
  expr: >-
    sum by (bookkeeper_cluster, namespace, bookie) (rate(bk_auditor_bookie_request_errors_total{{ $sel }}[15m]))
    / sum by (bookkeeper_cluster, namespace, bookie) (rate(bk_auditor_bookie_requests_total{{ $sel }}[15m]))
    > {{ $t.bookieErrorRatio }}
  for: {{ $t.bookieErrorsFor }}
  labels:
    severity: warning
  annotations:
    summary: Most of the auditor's requests to bookie {{ $bookie }} fail
    description: >-
      {{ printf "{{ $value | humanizePercentage }}" }} of bk-auditor's requests to bookie {{ $bookie }}{{ $inNs }}
      failed over the last 15 minutes.
    runbook: >-
      Look at `bk_auditor_bookie_request_errors_total` by `error` for this bookie: timeouts point at
      an overloaded bookie (lower bookie_client.requests_per_second), connection errors at the network
      or a restarting bookie.
- alert: BkAuditorLostBookies
  expr: {{ include "bk-auditor.leaderMax" (list . "bk_auditor_lost_bookies" "") }} > 0
  for: {{ $t.lostBookiesFor }}
  labels:
    severity: warning
  annotations:
    summary: Ledger metadata names bookies that are not registered
    description: >-
      {{ $value }} bookie(s){{ $inNs }} are in ledger ensembles but registered neither writable nor
      read-only, for more than {{ $t.lostBookiesFor }}.
    runbook: >-
      If the bookie is coming back, wait; if it is gone for good, make sure its ledgers are
      re-replicated (auto-recovery, or `bin/bookkeeper shell recover <bookie>`) and watch
      BkAuditorUnderReplicatedTooLong.
- alert: BkAuditorMetadataUnreadable
  expr: {{ include "bk-auditor.clusterMax" (list . "bk_auditor_ledgers_with_findings" `category="metadata_unreadable"`) }} > 0
  for: {{ $t.metadataUnreadableFor }}
  labels:
    severity: warning
  annotations:
    summary: Ledger metadata that the auditor cannot parse
    description: >-
      {{ $value }} ledger(s){{ $inNs }} have metadata znodes bk-auditor cannot read, so they are not
      audited.
    runbook: >-
      `bk-auditor findings --category metadata_unreadable` lists them with the parse error. Compare
      with `bin/bookkeeper shell ledgermetadata -ledgerid <id>`; report a bk-auditor bug if BookKeeper
      reads it.
- alert: BkAuditorNoLeader
  expr: >-
    (sum by (bookkeeper_cluster, namespace) (bk_auditor_is_leader{{ $sel }}) < 1)
    or absent(bk_auditor_is_leader{{ $sel }})
  for: {{ $t.noLeaderFor }}
  labels:
    severity: warning
  annotations:
    summary: No bk-auditor replica is the leader; nothing is being audited
    description: >-
      For {{ $t.noLeaderFor }} no bk-auditor replica{{ $inNs }} has been the elected leader (or none is
      scraped at all).
    runbook: >-
      `kubectl get pods -l app.kubernetes.io/name=bk-auditor`; if they run, check readiness (ZooKeeper
      session) and the logs for election errors. The leader holds an ephemeral znode under
      `<ledgersRoot>/bk-auditor/election`.
- alert: BkAuditorMultipleLeaders
  # Leaders are counted across releases (any namespace, any job): two releases pointed at one cluster
  # both lead. Only for the cluster this release audits, so two releases for two clusters never fire it;
  # each release involved fires once, with its namespace and job.
  expr: >-
    (sum by (bookkeeper_cluster) (bk_auditor_is_leader{{ include "bk-auditor.sel" (list . "" false) }}) > 1)
    * on (bookkeeper_cluster) group_right group by (bookkeeper_cluster, namespace, job) (bk_auditor_is_leader{{ $sel }})
  for: {{ $t.multipleLeadersFor }}
  labels:
    severity: warning
  annotations:
    summary: More than one bk-auditor replica believes it is the leader
    description: >-
      {{ $value }} replicas{{ $inNs }} report bk_auditor_is_leader=1 for {{ $t.multipleLeadersFor }}.
    runbook: >-
      Check that all replicas use the same election path (`election.path`, ledgers root) and the same
      ZooKeeper ensemble, and that no other release audits the same cluster
      (`count by (namespace, job) (bk_auditor_is_leader{bookkeeper_cluster="..."})`); restart the replica whose
      ZooKeeper session has expired.
- alert: BkAuditorTaskFailing
  expr: >-
    max by (bookkeeper_cluster, namespace, task) (increase(bk_auditor_task_failures_total{{ $sel }}[{{ $t.taskFailuresWindow }}]))
    >= {{ $t.taskFailures }}
  for: 0m
  labels:
    severity: warning
  annotations:
    summary: A bk-auditor background task keeps failing
    description: >-
      The {{ "{{ $labels.task }}" }} task{{ $inNs }} failed {{ $value }} times in {{ $t.taskFailuresWindow }}; it is
      restarted with backoff each time, and the other tasks go on.
    runbook: >-
      `bk-auditor status` shows the task's state (`failed`), last error and restarts; the logs have each
      failure with its traceback ("background task failed", task=...). Fix the cause it names (often
      ZooKeeper permissions or an unreadable znode); the task recovers at its next restart.
{{- $checks := list (list "bookies" "bookie_check_seconds" 86400) (list "ledger" "ledger_check_seconds" 604800) (list "scrutiny" "scrutiny_seconds" 86400) (list "open" "open_ledger_check_seconds" 3600) (list "references" "references_seconds" 86400) }}
{{- range $checks }}
{{- $interval := include "bk-auditor.checkInterval" (list $ (index . 0) (index . 1) (index . 2)) | float64 }}
{{- if gt $interval 0.0 }}
{{- $stale := mulf $interval (float64 $t.checkStaleFactor) | int64 }}
{{- $cm := printf "check=%q" (index . 0) }}
- alert: BkAuditorCheckStale
  expr: >-
    time() - max by (bookkeeper_cluster, namespace, check) (bk_auditor_check_last_success_timestamp_seconds{{ include "bk-auditor.sel" (list $ $cm) }})
    > {{ $stale }}
  for: 10m
  labels:
    severity: warning
    check: {{ index . 0 }}
  annotations:
    summary: The {{ index . 0 }} check has not succeeded for {{ $t.checkStaleFactor }} intervals
    description: >-
      The last successful {{ $check }} run{{ $inNs }} ended {{ printf "{{ $value | humanizeDuration }}" }} ago;
      it runs every {{ $interval | int64 }} s.
    runbook: >-
      `bk-auditor status` shows the check's state, progress, ETA and last error. A check that never
      finishes is too slow for its interval (raise the interval or bookie_client.requests_per_second),
      one that fails names the error; `paused` or schedule windows can also hold it back.
- alert: BkAuditorCheckNeverSucceeded
  expr: >-
    max by (bookkeeper_cluster, namespace) (bk_auditor_is_leader{{ $sel }}) == 1
    unless on (bookkeeper_cluster, namespace) max by (bookkeeper_cluster, namespace) (bk_auditor_check_last_success_timestamp_seconds{{ include "bk-auditor.sel" (list $ $cm) }})
  for: {{ $stale }}s
  labels:
    severity: warning
    check: {{ index . 0 }}
  annotations:
    summary: The {{ index . 0 }} check has had no success since the leader started
    description: >-
      A leader{{ $inNs }} has been elected for {{ $t.checkStaleFactor }} intervals of {{ index . 0 }}
      ({{ $interval | int64 }} s) and no replica reports a successful run.
    runbook: >-
      As for BkAuditorCheckStale: `bk-auditor status` shows why the check does not complete.
{{- end }}
{{- end }}
- alert: BkAuditorRecheckQueueGrowing
  expr: >-
    max by (bookkeeper_cluster, namespace) (
      (bk_auditor_recheck_queue_depth{{ $sel }} > {{ $t.recheckQueueDepth }})
      and on (instance) (delta(bk_auditor_recheck_queue_depth{{ $sel }}[1h]) > 0)
      and on (instance) (bk_auditor_is_leader{{ $sel }} == 1)
    )
  for: {{ $t.recheckQueueGrowingFor }}
  labels:
    severity: warning
  annotations:
    summary: The re-check queue keeps growing
    description: >-
      {{ $value }} ledgers{{ $inNs }} wait for a re-check and the queue has grown for
      {{ $t.recheckQueueGrowingFor }}.
    runbook: >-
      Re-checks are for answers that could not be decided (a bookie did not answer). Look at
      BkAuditorBookieUnreachable / BkAuditorBookieRequestErrors and `bk_auditor_recheck_outcomes_total`;
      a bookie that is down for long fills the queue until recheck.attempts run out.
- alert: BkAuditorPausedTooLong
  expr: {{ include "bk-auditor.clusterMax" (list . "bk_auditor_paused" "") }} > 0
  for: {{ $t.pausedFor }}
  labels:
    severity: info
  annotations:
    summary: bk-auditor checks have been paused for {{ $t.pausedFor }}
    description: >-
      An operator paused the checks{{ $inNs }} more than {{ $t.pausedFor }} ago.
    runbook: >-
      `bk-auditor status` shows who paused and why; `bk-auditor resume` resumes.
{{- end -}}

{{- define "bk-auditor.alertRules" -}}
{{- $p := .Values.prometheusRule -}}
{{- $out := list -}}
{{- range (include "bk-auditor.alertRules.raw" . | fromYamlArray) -}}
{{- if not (has .alert $p.disabledAlerts) -}}
{{- $_ := set . "labels" (merge (dict) (.labels | default dict) ($p.alertLabels | default dict)) -}}
{{- if $p.runbookUrl -}}
{{- $_ := set .annotations "runbook_url" (printf "%s#%s" $p.runbookUrl (lower .alert)) -}}
{{- end -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
