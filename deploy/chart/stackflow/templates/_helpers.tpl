{{/* Name of the release's objects. */}}
{{- define "stackflow.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 40 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "stackflow.labels" -}}
app.kubernetes.io/name: stackflow
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector: the labels of one component's pods; call with (list . "component"). */}}
{{- define "stackflow.selector" -}}
app.kubernetes.io/name: stackflow
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* image: call with (list . "bridge"|"worker"). */}}
{{- define "stackflow.image" -}}
{{- $root := index . 0 -}}{{- $img := index $root.Values.image (index . 1) -}}
{{- $repo := printf "%s/%s" $root.Values.image.registry $img.repository -}}
{{- if $img.digest -}}{{ $repo }}@{{ $img.digest }}{{- else -}}{{ $repo }}:{{ $root.Values.image.tag | default $root.Chart.AppVersion }}{{- end -}}
{{- end -}}

{{/* ServiceAccount of an account of the rules file. */}}
{{- define "stackflow.account" -}}
{{ include "stackflow.fullname" (index . 0) }}-{{ index . 1 }}
{{- end -}}

{{/* Temporal connection: environment (read by both commands), mounts and volumes. */}}
{{- define "stackflow.temporalEnv" -}}
- name: TEMPORAL_ADDRESS
  value: {{ .Values.temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
{{- if .Values.temporal.tls.enabled }}
- name: TEMPORAL_TLS
  value: "true"
{{- if .Values.temporal.tls.secretName }}
- name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
  value: /etc/stackflow/temporal-tls/ca.crt
- name: TEMPORAL_TLS_CLIENT_CERT_PATH
  value: /etc/stackflow/temporal-tls/tls.crt
- name: TEMPORAL_TLS_CLIENT_KEY_PATH
  value: /etc/stackflow/temporal-tls/tls.key
{{- end }}
{{- with .Values.temporal.tls.serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- if .Values.temporal.apiKey.secretName }}
- name: TEMPORAL_API_KEY_FILE
  value: /etc/stackflow/temporal-api-key/{{ .Values.temporal.apiKey.key }}
{{- end }}
{{- if .Values.codec.enabled }}
- name: STACKFLOW_CODEC_KEYS
  value: /etc/stackflow/codec-keys
{{- end }}
{{- end -}}

{{- define "stackflow.temporalMounts" -}}
- {name: tmp, mountPath: /tmp}
{{- if and .Values.temporal.tls.enabled .Values.temporal.tls.secretName }}
- {name: temporal-tls, mountPath: /etc/stackflow/temporal-tls, readOnly: true}
{{- end }}
{{- if .Values.temporal.apiKey.secretName }}
- {name: temporal-api-key, mountPath: /etc/stackflow/temporal-api-key, readOnly: true}
{{- end }}
{{- if .Values.codec.enabled }}
- {name: codec-keys, mountPath: /etc/stackflow/codec-keys, readOnly: true}
{{- end }}
{{- end -}}

{{- define "stackflow.temporalVolumes" -}}
- {name: tmp, emptyDir: {}}
{{- if and .Values.temporal.tls.enabled .Values.temporal.tls.secretName }}
- name: temporal-tls
  secret: {secretName: {{ .Values.temporal.tls.secretName | quote }}}
{{- end }}
{{- if .Values.temporal.apiKey.secretName }}
- name: temporal-api-key
  secret: {secretName: {{ .Values.temporal.apiKey.secretName | quote }}}
{{- end }}
{{- if .Values.codec.enabled }}
- name: codec-keys
  secret: {secretName: {{ required "codec.secretName is required while codec.enabled" .Values.codec.secretName | quote }}}
{{- end }}
{{- end -}}

{{/* Probes on the metrics listener. The argument is the readiness path: a worker is ready once its
task queues are polled (/readyz), the bridge once it serves (/healthz). Liveness and start-up ask only
whether the process lives, so a Temporal outage does not restart every pod. */}}
{{- define "stackflow.probes" -}}
livenessProbe:
  httpGet: {path: /healthz, port: metrics}
  periodSeconds: 20
  failureThreshold: 3
readinessProbe:
  httpGet: {path: {{ . }}, port: metrics}
  periodSeconds: 10
startupProbe:
  httpGet: {path: /healthz, port: metrics}
  periodSeconds: 2
  failureThreshold: 60
{{- end -}}
