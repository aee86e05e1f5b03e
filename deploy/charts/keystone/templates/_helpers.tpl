{{- define "keystone.adminPassword" -}}
{{- include "stackflow.generated" (list . (printf "%s-admin" .Release.Name) "OS_PASSWORD" .Values.endpoints.identity.auth.admin.password) -}}
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
{{- list (include "stackflow.oslo" .Values.conf.keystone) (include "stackflow.dbConnection" . | sha256sum) (include "keystone.adminPassword" . | sha256sum) .Values.images.tags (include "stackflow.endpointURL" (list . "identity" "/v3")) .Values.endpoints.identity.auth.admin.region_name | toJson | sha256sum | trunc 16 -}}
{{- end -}}
