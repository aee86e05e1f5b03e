{{/* oslo.config INI from conf.<service>: sections in order, options in order. */}}
{{- define "stackflow.oslo" -}}
{{- range $section, $opts := . }}
[{{ $section }}]
{{- range $k, $v := $opts }}
{{ $k }} = {{ $v }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Labels of every object of the release. */}}
{{- define "stackflow.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* Pod annotations: a config change or a restart token change rolls the pods. */}}
{{- define "stackflow.podAnnotations" -}}
configmap-etc-hash: {{ include "stackflow.oslo" (index .Values.conf .Chart.Name) | sha256sum | trunc 16 }}
{{- if .Values.stackflowRestartToken }}
stackflow.io/restart-token: {{ .Values.stackflowRestartToken | quote }}
{{- end }}
{{- end -}}
