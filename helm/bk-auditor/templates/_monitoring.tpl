{{/* One scrape endpoint of a PodMonitor/ServiceMonitor (VMPodScrape/VMServiceScrape): the metrics port
     with podMonitor's interval, timeout and relabelings, named as the operator in use names them.
     Renders the endpoint's fields, to be indented under "- ". */}}
{{- define "bk-auditor.scrapeEndpoint" -}}
port: http-metrics
path: /metrics
interval: {{ .Values.podMonitor.interval }}
scrapeTimeout: {{ .Values.podMonitor.scrapeTimeout }}
{{- $relabel := ternary "relabelConfigs" "relabelings" .Values.victoriaMetrics.enabled }}
{{- $metricRelabel := ternary "metricRelabelConfigs" "metricRelabelings" .Values.victoriaMetrics.enabled }}
{{- with .Values.podMonitor.relabelings }}
{{ $relabel }}:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.podMonitor.metricRelabelings }}
{{ $metricRelabel }}:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* How the repair workers' metrics are scraped: "podMonitor", "serviceMonitor" or "" (not by the chart). */}}
{{- define "bk-auditor.repairScrape" -}}
{{- if .Values.repair.enabled -}}
{{- if not (has .Values.repair.scrape (list "podMonitor" "serviceMonitor" "none")) -}}
{{- fail "repair.scrape must be podMonitor, serviceMonitor or none" -}}
{{- end -}}
{{- if ne .Values.repair.scrape "none" -}}{{ .Values.repair.scrape }}{{- end -}}
{{- end -}}
{{- end -}}
