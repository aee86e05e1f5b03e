{{/* The environment of every Glance process: the database connection and keystonemiddleware's settings
     reach oslo.config as OS_<SECTION>__<OPTION>, so no ConfigMap holds a secret. */}}
{{- define "glance.env" -}}
- name: OS_DATABASE__CONNECTION
  valueFrom: {secretKeyRef: {name: {{ .Release.Name }}-db, key: connection}}
{{ include "stackflow.authtokenEnv" . }}
- {name: HOME, value: /tmp}
{{- end -}}

{{- define "glance.mounts" -}}
- name: etc
  mountPath: /etc/glance/glance-api.conf
  subPath: glance-api.conf
  readOnly: true
- name: etc
  mountPath: /etc/glance/glance-api-paste.ini
  subPath: glance-api-paste.ini
  readOnly: true
- name: tmp
  mountPath: /tmp
- name: bin
  mountPath: /tmp/bin
  readOnly: true
{{- end -}}

{{- define "glance.volumes" -}}
- name: etc
  configMap: {name: {{ .Release.Name }}-etc}
- name: tmp
  emptyDir: {}
- name: bin
  configMap: {name: {{ .Release.Name }}-bin}
{{- end -}}

{{/* What the pods run with: a change of any of it rolls them and re-runs the setup Job. Secret values
     enter only as hashes. */}}
{{- define "glance.inputsHash" -}}
{{- if ne .Values.storage "emptydir" }}{{ fail (printf "storage %q: this chart stores images on the API pod's emptyDir only (storage: emptydir)" .Values.storage) }}{{ end -}}
{{- list (include "stackflow.oslo" .Values.conf.glance) (include "stackflow.oslo" .Values.conf.paste) (include "stackflow.dbConnection" . | sha256sum) (include "stackflow.ksPassword" . | sha256sum) .Values.images.tags .Values.endpoints.identity .Values.endpoints.image | toJson | sha256sum | trunc 16 -}}
{{- end -}}
