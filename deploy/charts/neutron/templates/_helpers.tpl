{{/* The environment of every Neutron process: the database connection, the message bus and
     keystonemiddleware's settings reach oslo.config as OS_<SECTION>__<OPTION>, so no ConfigMap holds a
     secret; OVN's databases follow their Services. */}}
{{- define "neutron.env" -}}
- name: OS_DATABASE__CONNECTION
  valueFrom: {secretKeyRef: {name: {{ .Release.Name }}-db, key: connection}}
- name: OS_DEFAULT__TRANSPORT_URL
  valueFrom: {secretKeyRef: {name: {{ .Release.Name }}-mq, key: transport_url}}
- {name: OS_OVN__OVN_NB_CONNECTION, value: {{ include "neutron.ovsdb" (list . "ovn_ovsdb_nb") | quote }}}
- {name: OS_OVN__OVN_SB_CONNECTION, value: {{ include "neutron.ovsdb" (list . "ovn_ovsdb_sb") | quote }}}
{{ include "stackflow.authtokenEnv" . }}
- {name: HOME, value: /tmp}
{{- end -}}

{{/* An OVN database's address (root context, endpoints key): tcp:<host>:<port>. */}}
{{- define "neutron.ovsdb" -}}
{{- $ep := index (index . 0).Values.endpoints (index . 1) -}}
tcp:{{ include "stackflow.endpointHost" . }}:{{ $ep.port.ovsdb.default }}
{{- end -}}

{{/* A command of Debian's python3-neutron (the package has no console scripts of its own): the module's
     main with the chart's configuration files. */}}
{{- define "neutron.cmd" -}}
["sh", "/tmp/bin/run.sh", "sh", "/tmp/bin/neutron.sh", {{ index . 0 | quote }}{{ range (rest .) }}, {{ . | quote }}{{ end }}]
{{- end -}}

{{- define "neutron.mounts" -}}
- name: etc
  mountPath: /etc/neutron
  readOnly: true
- name: tmp
  mountPath: /tmp
- name: bin
  mountPath: /tmp/bin
  readOnly: true
{{- end -}}

{{- define "neutron.volumes" -}}
- name: etc
  configMap: {name: {{ .Release.Name }}-etc}
- name: tmp
  emptyDir: {}
- name: bin
  configMap: {name: {{ .Release.Name }}-bin}
{{- end -}}

{{/* What the pods run with: a change of any of it rolls them and re-runs the setup Job. Secret values
     enter only as hashes. */}}
{{- define "neutron.inputsHash" -}}
{{- list (include "stackflow.oslo" .Values.conf.neutron) (include "stackflow.oslo" .Values.conf.plugins.ml2_conf) (include "stackflow.oslo" .Values.conf.paste) (include "stackflow.dbConnection" . | sha256sum) (include "stackflow.transportURL" . | sha256sum) (include "stackflow.ksPassword" . | sha256sum) .Values.images.tags .Values.endpoints.identity .Values.endpoints.network .Values.endpoints.ovn_ovsdb_nb .Values.endpoints.ovn_ovsdb_sb | toJson | sha256sum | trunc 16 -}}
{{- end -}}
