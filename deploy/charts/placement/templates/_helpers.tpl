{{/* The environment of every Placement process: the database connection and keystonemiddleware's
     settings reach oslo.config as OS_<SECTION>__<OPTION>, so no ConfigMap holds a secret. */}}
{{- define "placement.env" -}}
- name: OS_PLACEMENT_DATABASE__CONNECTION
  valueFrom: {secretKeyRef: {name: {{ .Release.Name }}-db, key: connection}}
{{ include "stackflow.authtokenEnv" . }}
- {name: HOME, value: /tmp}
{{- end -}}

{{- define "placement.mounts" -}}
- name: etc
  mountPath: /etc/placement/placement.conf
  subPath: placement.conf
  readOnly: true
- name: tmp
  mountPath: /tmp
- name: bin
  mountPath: /tmp/bin
  readOnly: true
{{- end -}}

{{- define "placement.volumes" -}}
- name: etc
  configMap: {name: {{ .Release.Name }}-etc}
- name: tmp
  emptyDir: {}
- name: bin
  configMap: {name: {{ .Release.Name }}-bin}
{{- end -}}

{{/* What the pods run with: a change of any of it rolls them and re-runs the setup Job. Secret values
     enter only as hashes. */}}
{{- define "placement.inputsHash" -}}
{{- list (include "stackflow.oslo" .Values.conf.placement) (include "stackflow.dbConnection" . | sha256sum) (include "stackflow.ksPassword" . | sha256sum) .Values.images.tags .Values.endpoints.identity .Values.endpoints.placement | toJson | sha256sum | trunc 16 -}}
{{- end -}}
