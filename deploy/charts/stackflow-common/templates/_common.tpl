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

{{/* Pod annotations: a config change or a restart token change rolls the pods. The hash is that of
     conf.<chart>; charts whose pods run with more than that use stackflow.podAnnotationsWith. */}}
{{- define "stackflow.podAnnotations" -}}
{{- include "stackflow.podAnnotationsWith" (list . (include "stackflow.oslo" (index .Values.conf .Chart.Name) | sha256sum | trunc 16)) -}}
{{- end -}}

{{/* Pod annotations with the hash of what the pods run with (root context, hash). */}}
{{- define "stackflow.podAnnotationsWith" -}}
{{- $root := index . 0 -}}
configmap-etc-hash: {{ index . 1 }}
{{- if $root.Values.stackflowRestartToken }}
stackflow.io/restart-token: {{ $root.Values.stackflowRestartToken | quote }}
{{- end }}
{{- end -}}

{{/* Where a group's pods are scheduled: labels.<group>'s node selector and pod.tolerations.<chart>
     (root context, group). */}}
{{- define "stackflow.scheduling" -}}
{{- $root := index . 0 -}}{{- $group := index . 1 -}}
{{- $tol := index $root.Values.pod.tolerations $root.Chart.Name -}}
nodeSelector:
  {{ (index $root.Values.labels $group).node_selector_key }}: {{ (index $root.Values.labels $group).node_selector_value | quote }}
{{- if $tol.enabled }}
tolerations:
  {{- toYaml $tol.tolerations | nindent 2 }}
{{- end }}
{{- end -}}

{{/* stackflow.generated returns a generated secret value: the values' own if set, else the one kept in
     the release's Secret (so upgrades and rollbacks keep it), else a new random one. It is remembered
     for the rest of the render, so every template that needs it sees the same value. Arguments: the
     root context, the Secret's name, its key, the values' setting. */}}
{{- define "stackflow.generated" -}}
{{- $root := index . 0 -}}{{- $secret := index . 1 -}}{{- $key := index . 2 -}}{{- $set := index . 3 -}}
{{- $memo := printf "%s/%s" $secret $key -}}
{{- if not (hasKey $root.Values "_generated") }}{{- $_ := set $root.Values "_generated" dict -}}{{- end -}}
{{- if not (hasKey $root.Values._generated $memo) -}}
{{- $v := $set -}}
{{- if not $v -}}
{{- $old := lookup "v1" "Secret" $root.Release.Namespace $secret -}}
{{- if and $old $old.data (hasKey $old.data $key) }}{{ $v = index $old.data $key | b64dec }}{{ end -}}
{{- end -}}
{{- if not $v }}{{ $v = randAlphaNum 32 }}{{ end -}}
{{- $_ := set $root.Values._generated $memo $v -}}
{{- end -}}
{{- index $root.Values._generated $memo -}}
{{- end -}}
