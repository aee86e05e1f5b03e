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

{{/* keystone.generated returns a generated secret value: the values' own if set, else the one kept in
     the release's Secret (so upgrades and rollbacks keep it), else a new random one. It is remembered
     for the rest of the render, so every template that needs it sees the same value. Arguments: the
     root context, the Secret's name, its key, the values' setting. */}}
{{- define "keystone.generated" -}}
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

{{- define "keystone.dbPassword" -}}
{{- include "keystone.generated" (list . (printf "%s-db" .Release.Name) "password" .Values.endpoints.oslo_db.auth.keystone.password) -}}
{{- end -}}

{{- define "keystone.adminPassword" -}}
{{- include "keystone.generated" (list . (printf "%s-admin" .Release.Name) "OS_PASSWORD" .Values.endpoints.identity.auth.admin.password) -}}
{{- end -}}

{{/* The database's host and name, and the connection string oslo.db reads. */}}
{{- define "keystone.dbName" -}}{{ trimPrefix "/" .Values.endpoints.oslo_db.path }}{{- end -}}
{{- define "keystone.dbConnection" -}}
mysql+pymysql://{{ .Values.endpoints.oslo_db.auth.keystone.username }}:{{ include "keystone.dbPassword" . | urlquery }}@{{ .Values.endpoints.oslo_db.hosts.default }}:{{ .Values.endpoints.oslo_db.port.mysql.default }}/{{ include "keystone.dbName" . }}?charset=utf8
{{- end -}}

{{/* Where the pods are scheduled: the group's node selector and the chart's tolerations. */}}
{{- define "keystone.placement" -}}
{{- $root := index . 0 -}}{{- $group := index . 1 -}}
nodeSelector:
  {{ (index $root.Values.labels $group).node_selector_key }}: {{ (index $root.Values.labels $group).node_selector_value | quote }}
{{- if $root.Values.pod.tolerations.keystone.enabled }}
tolerations:
  {{- toYaml $root.Values.pod.tolerations.keystone.tolerations | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The environment of every Keystone process: its configuration file and the database connection,
     which oslo.config reads from OS_DATABASE__CONNECTION so that no ConfigMap holds the password. */}}
{{- define "keystone.env" -}}
- name: OS_KEYSTONE_CONFIG_FILES
  value: /etc/keystone/keystone.conf
- name: OS_DATABASE__CONNECTION
  valueFrom:
    secretKeyRef:
      name: {{ .Release.Name }}-db
      key: connection
- name: HOME
  value: /tmp
{{- end -}}

{{- define "keystone.mounts" -}}
- name: etc
  mountPath: /etc/keystone/keystone.conf
  subPath: keystone.conf
  readOnly: true
- name: fernet-keys
  mountPath: /etc/keystone/fernet-keys
  readOnly: true
- name: credential-keys
  mountPath: /etc/keystone/credential-keys
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "keystone.volumes" -}}
- name: etc
  configMap:
    name: {{ .Release.Name }}-etc
- name: fernet-keys
  secret:
    secretName: {{ .Release.Name }}-keys
    items: [{key: fernet-0, path: "0"}, {key: fernet-1, path: "1"}]
- name: credential-keys
  secret:
    secretName: {{ .Release.Name }}-keys
    items: [{key: credential-0, path: "0"}, {key: credential-1, path: "1"}]
- name: tmp
  emptyDir: {}
{{- end -}}

{{/* What the pods run with: a change of any of it rolls them and re-runs the setup Job. Secret values
     enter only as hashes. */}}
{{- define "keystone.inputsHash" -}}
{{- list (include "stackflow.oslo" .Values.conf.keystone) (include "keystone.dbConnection" . | sha256sum) (include "keystone.adminPassword" . | sha256sum) .Values.images.tags (include "keystone.catalogHost" .) .Values.endpoints.identity.auth.admin.region_name | toJson | sha256sum | trunc 16 -}}
{{- end -}}

{{/* Pod annotations: a change of what the pods run with, or of the restart token, rolls the pods. */}}
{{- define "stackflow.podAnnotations" -}}
configmap-etc-hash: {{ include "keystone.inputsHash" . }}
{{- if .Values.stackflowRestartToken }}
stackflow.io/restart-token: {{ .Values.stackflowRestartToken | quote }}
{{- end }}
{{- end -}}

{{- define "keystone.catalogHost" -}}
{{- .Values.endpoints.identity.host_fqdn_override.default -}}
{{- end -}}
