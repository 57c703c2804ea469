{{/* Security: TLS material and credentials mounted from Secrets (Pulsar chart layout), the settings that
     point at them, the pod-IP binding of the admin API. docs/security.md. */}}

{{- define "bk-auditor.certDir" -}}/pulsar/certs{{- end -}}
{{- define "bk-auditor.caFile" -}}/pulsar/certs/ca/ca.crt{{- end -}}
{{- define "bk-auditor.zkAuthDir" -}}/etc/bk-auditor/auth/zookeeper{{- end -}}
{{- define "bk-auditor.agentTokenDir" -}}/etc/bk-auditor/agent{{- end -}}

{{- define "bk-auditor.adminServerName" -}}
{{- .Values.tls.admin.serverName | default (printf "%s.%s.svc.cluster.local" (include "bk-auditor.fullname" .) .Release.Namespace) -}}
{{- end -}}

{{/* The port the kubelet probes: the plaintext probe listener with admin TLS, else the admin port. */}}
{{- define "bk-auditor.probePort" -}}
{{- if .Values.tls.admin.enabled -}}{{ .Values.tls.admin.probePort }}{{- else -}}{{ .Values.ports.admin }}{{- end -}}
{{- end -}}

{{/* Refuse what cannot work, naming the value. */}}
{{- define "bk-auditor.securityChecks" -}}
{{- $t := .Values.tls -}}
{{- if and (or $t.admin.enabled $t.zookeeper.enabled $t.bookie.enabled) (not $t.ca.secretName) -}}
{{- fail "tls.ca.secretName is required with TLS enabled (the Pulsar chart's CA Secret is <release>-ca-tls)" -}}
{{- end -}}
{{- if and $t.admin.enabled (not $t.admin.secretName) -}}
{{- fail "tls.admin.secretName is required with tls.admin.enabled (a Secret with tls.crt and tls.key)" -}}
{{- end -}}
{{- if and $t.admin.enabled (or (eq (int $t.admin.probePort) (int .Values.ports.admin)) (eq (int $t.admin.probePort) (int .Values.ports.metrics))) -}}
{{- fail "tls.admin.probePort must differ from ports.admin and ports.metrics" -}}
{{- end -}}
{{- $a := .Values.auth.zookeeper -}}
{{- if and $a.enabled (not $a.secretName) -}}
{{- fail "auth.zookeeper.secretName is required with auth.zookeeper.enabled" -}}
{{- end -}}
{{- if and $a.enabled (not $a.jaasKey) (not $a.username) -}}
{{- fail "auth.zookeeper needs jaasKey (scheme sasl) or username + passwordKey" -}}
{{- end -}}
{{- if and $a.enabled (eq $a.scheme "digest") (not $a.username) -}}
{{- fail "auth.zookeeper.scheme digest needs auth.zookeeper.username (and the password in the Secret)" -}}
{{- end -}}
{{- if and .Values.agent.enabled (not .Values.agent.tokenSecret.name) -}}
{{- fail "agent.tokenSecret.name is required with agent.enabled (the Secret the bookies' agent sidecars read)" -}}
{{- end -}}
{{- end -}}

{{/* The settings the chart manages, merged into the config file: (dict "cfg" $cfg "root" $). */}}
{{- define "bk-auditor.securityConfig" -}}
{{- $cfg := .cfg -}}
{{- $root := .root -}}
{{- $t := $root.Values.tls -}}
{{- $ca := include "bk-auditor.caFile" $root -}}
{{- $certs := include "bk-auditor.certDir" $root -}}
{{- $admin := get $cfg "admin" | default dict -}}
{{- if $root.Values.agent.enabled -}}
{{- $agent := get $cfg "agent" | default dict -}}
{{- range $key := list "port" "token_file" -}}
{{- if hasKey $agent $key -}}
{{- fail (printf "config.agent.%s is set by the chart; use agent.* instead" $key) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $agent "port" (int $root.Values.agent.port) -}}
{{- $_ := set $agent "token_file" (printf "%s/token" (include "bk-auditor.agentTokenDir" $root)) -}}
{{- $_ := set $cfg "agent" $agent -}}
{{- end -}}
{{- range $key := list "tls_cert" "tls_key" "tls_client_ca" "probe_bind" -}}
{{- if hasKey $admin $key -}}
{{- fail (printf "config.admin.%s is set by the chart; use tls.admin.* instead" $key) -}}
{{- end -}}
{{- end -}}
{{- if $t.admin.enabled -}}
{{- $_ := set $admin "tls_cert" (printf "%s/bk-auditor/tls.crt" $certs) -}}
{{- $_ := set $admin "tls_key" (printf "%s/bk-auditor/tls.key" $certs) -}}
{{- $_ := set $admin "tls_client_ca" (printf "%s/admin-client-ca/ca.crt" $certs) -}}
{{- $_ := set $admin "authorized_clients" $t.admin.authorizedClients -}}
{{- $_ := set $admin "unauthenticated_reads" $t.admin.unauthenticatedReads -}}
{{- end -}}
{{- $_ := set $cfg "admin" $admin -}}
{{- $zk := get $cfg "zookeeper" | default dict -}}
{{- if $t.zookeeper.enabled -}}
{{- if hasKey $zk "tls" -}}{{- fail "config.zookeeper.tls is set by the chart with tls.zookeeper.enabled; use tls.zookeeper.* instead" -}}{{- end -}}
{{- $zt := dict "enabled" true "ca_file" $ca "verify_hostname" $t.zookeeper.verifyHostname -}}
{{- if $t.zookeeper.secretName -}}
{{- $_ := set $zt "cert_file" (printf "%s/zookeeper-client/tls.crt" $certs) -}}
{{- $_ := set $zt "key_file" (printf "%s/zookeeper-client/tls.key" $certs) -}}
{{- end -}}
{{- $_ := set $zk "tls" $zt -}}
{{- end -}}
{{- $a := $root.Values.auth.zookeeper -}}
{{- if $a.enabled -}}
{{- if hasKey $zk "auth" -}}{{- fail "config.zookeeper.auth is set by the chart with auth.zookeeper.enabled; use auth.zookeeper.* instead" -}}{{- end -}}
{{- $dir := include "bk-auditor.zkAuthDir" $root -}}
{{- $za := dict "secure_acls" $a.secureAcls -}}
{{- if eq $a.scheme "digest" -}}
{{- $_ := set $za "sasl_enabled" false -}}
{{- $_ := set $za "digest_username" $a.username -}}
{{- $_ := set $za "digest_password_file" (printf "%s/%s" $dir $a.passwordKey) -}}
{{- else if $a.jaasKey -}}
{{- $_ := set $za "jaas_file" (printf "%s/%s" $dir $a.jaasKey) -}}
{{- else -}}
{{- $_ := set $za "sasl_username" $a.username -}}
{{- $_ := set $za "sasl_password_file" (printf "%s/%s" $dir $a.passwordKey) -}}
{{- end -}}
{{- $_ := set $zk "auth" $za -}}
{{- end -}}
{{- if $zk -}}{{- $_ := set $cfg "zookeeper" $zk -}}{{- end -}}
{{- if $t.bookie.enabled -}}
{{- $bc := get $cfg "bookie_client" | default dict -}}
{{- if hasKey $bc "tls" -}}{{- fail "config.bookie_client.tls is set by the chart with tls.bookie.enabled; use tls.bookie.* instead" -}}{{- end -}}
{{- $bt := dict "enabled" true "ca_file" $ca "verify_hostname" $t.bookie.verifyHostname -}}
{{- if $t.bookie.secretName -}}
{{- $_ := set $bt "cert_file" (printf "%s/bookie-client/tls.crt" $certs) -}}
{{- $_ := set $bt "key_file" (printf "%s/bookie-client/tls.key" $certs) -}}
{{- end -}}
{{- $_ := set $bc "tls" $bt -}}
{{- $_ := set $cfg "bookie_client" $bc -}}
{{- end -}}
{{- end -}}

{{/* Container env: the admin API on the pod IP, and the in-pod CLI's address and TLS material. */}}
{{- define "bk-auditor.securityEnv" -}}
{{- $certs := include "bk-auditor.certDir" . -}}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
# The admin API listens on the pod IP only (the kubelet probes the pod IP); the CLI in the pod finds it here.
- name: BKAUDIT_ADMIN__BIND
  value: "$(POD_IP):{{ .Values.ports.admin }}"
- name: BKAUDIT_ADMIN_ADDRESS
  value: "$(POD_IP):{{ .Values.ports.admin }}"
{{- if .Values.tls.admin.enabled }}
- name: BKAUDIT_ADMIN__PROBE_BIND
  value: "$(POD_IP):{{ .Values.tls.admin.probePort }}"
- name: BKAUDIT_CLI_TLS_CA
  value: {{ include "bk-auditor.caFile" . | quote }}
- name: BKAUDIT_CLI_TLS_CERT
  value: "{{ $certs }}/{{ ternary "bk-auditor-client" "bk-auditor" (ne .Values.tls.admin.clientSecretName "") }}/tls.crt"
- name: BKAUDIT_CLI_TLS_KEY
  value: "{{ $certs }}/{{ ternary "bk-auditor-client" "bk-auditor" (ne .Values.tls.admin.clientSecretName "") }}/tls.key"
- name: BKAUDIT_CLI_TLS_SERVER_NAME
  value: {{ include "bk-auditor.adminServerName" . | quote }}
{{- end }}
{{- end -}}

{{/* (list <volume name> <Secret name> <items: list of (list key path)>) -> a Secret volume. */}}
{{- define "bk-auditor.secretVolume" -}}
- name: {{ index . 0 }}
  secret:
    secretName: {{ index . 1 }}
    defaultMode: 0440
    {{- with index . 2 }}
    items:
      {{- range . }}
      - key: {{ index . 0 }}
        path: {{ index . 1 }}
      {{- end }}
    {{- end }}
{{- end -}}

{{- define "bk-auditor.securityVolumes" -}}
{{- $t := .Values.tls -}}
{{- $pair := list (list "tls.crt" "tls.crt") (list "tls.key" "tls.key") -}}
{{- if or $t.admin.enabled $t.zookeeper.enabled $t.bookie.enabled }}
{{ include "bk-auditor.secretVolume" (list "tls-ca" $t.ca.secretName (list (list $t.ca.key "ca.crt"))) }}
{{- end }}
{{- if $t.admin.enabled }}
{{ include "bk-auditor.secretVolume" (list "tls-admin" $t.admin.secretName $pair) }}
{{- $clientCA := $t.admin.clientCA.secretName | default $t.ca.secretName }}
{{- $clientCAKey := ternary $t.admin.clientCA.key $t.ca.key (ne $t.admin.clientCA.secretName "") }}
{{ include "bk-auditor.secretVolume" (list "tls-admin-client-ca" $clientCA (list (list $clientCAKey "ca.crt"))) }}
{{- if $t.admin.clientSecretName }}
{{ include "bk-auditor.secretVolume" (list "tls-admin-client" $t.admin.clientSecretName $pair) }}
{{- end }}
{{- end }}
{{- if and $t.zookeeper.enabled $t.zookeeper.secretName }}
{{ include "bk-auditor.secretVolume" (list "tls-zookeeper-client" $t.zookeeper.secretName $pair) }}
{{- end }}
{{- if and $t.bookie.enabled $t.bookie.secretName }}
{{ include "bk-auditor.secretVolume" (list "tls-bookie-client" $t.bookie.secretName $pair) }}
{{- end }}
{{- if .Values.auth.zookeeper.enabled }}
{{ include "bk-auditor.secretVolume" (list "auth-zookeeper" .Values.auth.zookeeper.secretName (list)) }}
{{- end }}
{{- if .Values.agent.enabled }}
{{ include "bk-auditor.secretVolume" (list "agent-token" .Values.agent.tokenSecret.name (list (list .Values.agent.tokenSecret.key "token"))) }}
{{- end }}
{{- end -}}

{{- define "bk-auditor.securityVolumeMounts" -}}
{{- $t := .Values.tls -}}
{{- $certs := include "bk-auditor.certDir" . -}}
{{- $mounts := list -}}
{{- if or $t.admin.enabled $t.zookeeper.enabled $t.bookie.enabled -}}{{- $mounts = append $mounts (list "tls-ca" (printf "%s/ca" $certs)) -}}{{- end -}}
{{- if $t.admin.enabled -}}
{{- $mounts = append $mounts (list "tls-admin" (printf "%s/bk-auditor" $certs)) -}}
{{- $mounts = append $mounts (list "tls-admin-client-ca" (printf "%s/admin-client-ca" $certs)) -}}
{{- if $t.admin.clientSecretName -}}{{- $mounts = append $mounts (list "tls-admin-client" (printf "%s/bk-auditor-client" $certs)) -}}{{- end -}}
{{- end -}}
{{- if and $t.zookeeper.enabled $t.zookeeper.secretName -}}{{- $mounts = append $mounts (list "tls-zookeeper-client" (printf "%s/zookeeper-client" $certs)) -}}{{- end -}}
{{- if and $t.bookie.enabled $t.bookie.secretName -}}{{- $mounts = append $mounts (list "tls-bookie-client" (printf "%s/bookie-client" $certs)) -}}{{- end -}}
{{- if .Values.auth.zookeeper.enabled -}}{{- $mounts = append $mounts (list "auth-zookeeper" (include "bk-auditor.zkAuthDir" .)) -}}{{- end -}}
{{- if .Values.agent.enabled -}}{{- $mounts = append $mounts (list "agent-token" (include "bk-auditor.agentTokenDir" .)) -}}{{- end -}}
{{- range $mounts }}
- name: {{ index . 0 }}
  mountPath: {{ index . 1 }}
  readOnly: true
{{- end }}
{{- end -}}
