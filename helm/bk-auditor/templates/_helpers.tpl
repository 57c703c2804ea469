{{/* Names. StatefulSet names stay <= 52 characters so pod names and revision labels fit in 63. */}}
{{- define "bk-auditor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "bk-auditor.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "bk-auditor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "bk-auditor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "bk-auditor.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* app.kubernetes.io labels (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/). */}}
{{- define "bk-auditor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bk-auditor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ .Values.component }}
{{- end -}}

{{/* The repair workers' pods: the same name and instance, component "repair", so no selector of the
     auditors' (StatefulSet, Service, PDB, PodMonitor) matches them. */}}
{{- define "bk-auditor.repairSelectorLabels" -}}
app.kubernetes.io/name: {{ include "bk-auditor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: repair
{{- end -}}

{{- define "bk-auditor.repairLabels" -}}
{{ include "bk-auditor.repairSelectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: {{ .Values.partOf }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "bk-auditor.chart" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "bk-auditor.labels" -}}
{{ include "bk-auditor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: {{ .Values.partOf }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "bk-auditor.chart" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "bk-auditor.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The daemon's config file: .Values.config plus the binds the ports and probes need. */}}
{{- define "bk-auditor.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- $admin := get $cfg "admin" | default dict -}}
{{- $metrics := get $cfg "metrics" | default dict -}}
{{- if hasKey $admin "bind" -}}
{{- fail "config.admin.bind is set by the chart (<pod IP>:<ports.admin>); set ports.admin instead" -}}
{{- end -}}
{{- if hasKey $metrics "bind" -}}
{{- fail "config.metrics.bind is set by the chart (0.0.0.0:<ports.metrics>); set ports.metrics instead" -}}
{{- end -}}
{{- include "bk-auditor.securityChecks" . -}}
{{- /* admin.bind is the pod IP, set in the environment (BKAUDIT_ADMIN__BIND, bk-auditor.securityEnv) */ -}}
{{- $_ := set $metrics "bind" (printf "0.0.0.0:%d" (int .Values.ports.metrics)) -}}
{{- $_ := set $cfg "admin" $admin -}}
{{- $_ := set $cfg "metrics" $metrics -}}
{{- include "bk-auditor.securityConfig" (dict "cfg" $cfg "root" .) -}}
{{- if not (get $cfg "admin") -}}{{- $_ := unset $cfg "admin" -}}{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* A probe: (list $ <health service name> <probe settings>). */}}
{{- define "bk-auditor.probe" -}}
{{- $root := index . 0 -}}
{{- $service := index . 1 -}}
{{- $p := index . 2 -}}
{{- if eq $root.Values.probes.type "grpc" -}}
grpc:
  port: {{ include "bk-auditor.probePort" $root }}
  service: {{ $service | quote }}
{{- else -}}
{{- /* the address (the pod IP) and TLS material come from the container's BKAUDIT_ADMIN_* variables */}}
exec:
  command:
    - bk-auditor
    - health
    - --service
    - {{ $service | quote }}
    - --timeout
    - {{ max 1 (sub (int $p.timeoutSeconds) 1) | quote }}
{{- end }}
{{ omit $p "enabled" | toYaml }}
{{- end -}}

{{/* Whether a monitoring object is rendered: (list $ <enabled value> <prometheus-operator kind> <VM kind>).
     true: always; false: never; "auto": when the cluster serves its API (.Capabilities.APIVersions: what
     `helm install` discovers, or `helm template --api-versions monitoring.coreos.com/v1/PodMonitor`).
     Returns "true" or "". */}}
{{- define "bk-auditor.monitoringEnabled" -}}
{{- $root := index . 0 -}}
{{- $enabled := toString (index . 1) -}}
{{- $api := printf "monitoring.coreos.com/v1/%s" (index . 2) -}}
{{- if $root.Values.victoriaMetrics.enabled -}}
{{- $api = printf "operator.victoriametrics.com/v1beta1/%s" (index . 3) -}}
{{- end -}}
{{- if or (eq $enabled "true") (and (eq $enabled "auto") ($root.Capabilities.APIVersions.Has $api)) -}}true{{- end -}}
{{- end -}}

{{/* The matchers that pick this release's series: the PodMonitor/VMPodScrape sets job to the release
     name (jobLabel app.kubernetes.io/instance) and the operator adds namespace. */}}
{{- define "bk-auditor.releaseMatchers" -}}
{{- printf "namespace=%q,job=%q" .Release.Namespace .Release.Name -}}
{{- end -}}

{{/* PromQL label matchers: (list $ "<matchers>") -> {<matchers>,<this release>,<prometheusRule.selector>}
     or "". (list $ "<matchers>" false) leaves out the release's matchers. */}}
{{- define "bk-auditor.sel" -}}
{{- $root := index . 0 -}}
{{- $release := "" -}}
{{- if and $root.Values.prometheusRule.scopeToRelease (ne (len .) 3) -}}
{{- $release = include "bk-auditor.releaseMatchers" $root -}}
{{- end -}}
{{- $parts := list -}}
{{- range (list (index . 1) $release $root.Values.prometheusRule.selector) -}}
{{- if . -}}{{- $parts = append $parts . -}}{{- end -}}
{{- end -}}
{{- if $parts -}}{{- printf "{%s}" (join "," $parts) -}}{{- end -}}
{{- end -}}

{{/* The leader's value of a gauge, per cluster: (list $ "<metric>" "<matchers>"). Every replica
     serves metrics but only the leader watches under-replication, lost bookies and the re-check queue,
     so the standbys' values are ignored. */}}
{{- define "bk-auditor.leaderMax" -}}
{{- $root := index . 0 -}}
{{- printf "max by (bookkeeper_cluster, namespace) (%s%s and on (instance) (bk_auditor_is_leader%s == 1))" (index . 1) (include "bk-auditor.sel" (list $root (index . 2))) (include "bk-auditor.sel" (list $root "")) -}}
{{- end -}}

{{/* A gauge every replica exports with the same meaning (the findings, the pause flag: the leader from
     its own state, a standby from what the leader persisted in ZooKeeper), per cluster, across replicas:
     (list $ "<metric>" "<matchers>"). No leader filter, so a failover (the old leader's series stop, the
     new one's value comes from another pod) changes nothing in the result. */}}
{{- define "bk-auditor.clusterMax" -}}
{{- $root := index . 0 -}}
{{- printf "max by (bookkeeper_cluster, namespace) (%s%s)" (index . 1) (include "bk-auditor.sel" (list $root (index . 2))) -}}
{{- end -}}
