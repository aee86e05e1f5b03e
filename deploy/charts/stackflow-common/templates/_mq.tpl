{{/* A service's message bus, in OpenStack-Helm's values: endpoints.oslo_messaging.{hosts,port,path} and
     the user endpoints.oslo_messaging.auth.<chart>; its password, when the values give none, is generated
     once and kept in the Secret <release>-mq (keys username, password, transport_url). The vhost is the
     path. mq-init creates the vhost and the user with the administrator of the Secret
     endpoints.oslo_messaging.auth.admin.secret (keys username, password, management_url), as
     OpenStack-Helm's rabbit-init does. */}}
{{- define "stackflow.mqUser" -}}{{ (index .Values.endpoints.oslo_messaging.auth .Chart.Name).username }}{{- end -}}
{{- define "stackflow.mqPassword" -}}
{{- include "stackflow.generated" (list . (printf "%s-mq" .Release.Name) "password" (index .Values.endpoints.oslo_messaging.auth .Chart.Name).password) -}}
{{- end -}}
{{- define "stackflow.mqVhost" -}}{{ trimPrefix "/" .Values.endpoints.oslo_messaging.path }}{{- end -}}
{{- define "stackflow.transportURL" -}}
{{- $mq := .Values.endpoints.oslo_messaging -}}
rabbit://{{ include "stackflow.mqUser" . }}:{{ include "stackflow.mqPassword" . | urlquery }}@{{ $mq.hosts.default }}:{{ $mq.port.amqp.default }}/{{ include "stackflow.mqVhost" . }}
{{- end -}}

{{- define "stackflow.secretMQ" -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-mq
  labels:
    {{- include "stackflow.labels" . | nindent 4 }}
type: Opaque
data:
  username: {{ include "stackflow.mqUser" . | b64enc }}
  password: {{ include "stackflow.mqPassword" . | b64enc }}
  transport_url: {{ include "stackflow.transportURL" . | b64enc }}
{{- end -}}

{{/* The environment of mq-init and mq-drop: the vhost, the user, and the bus's administrator. */}}
{{- define "stackflow.mqAdminEnv" -}}
{{- $admin := .Values.endpoints.oslo_messaging.auth.admin.secret -}}
- {name: MQ_VHOST, value: {{ include "stackflow.mqVhost" . | quote }}}
- {name: MQ_USER, value: {{ include "stackflow.mqUser" . | quote }}}
- name: MQ_ADMIN_URL
  valueFrom: {secretKeyRef: {name: {{ $admin }}, key: management_url}}
- name: MQ_ADMIN_USER
  valueFrom: {secretKeyRef: {name: {{ $admin }}, key: username}}
- name: MQ_ADMIN_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ $admin }}, key: password}}
{{- end -}}

{{/* The mq-init container (image images.tags.<chart>_db_init, which has Python). */}}
{{- define "stackflow.containerMQInit" -}}
- name: mq-init
  image: {{ index .Values.images.tags (printf "%s_db_init" .Chart.Name) | quote }}
  imagePullPolicy: {{ .Values.images.pull_policy }}
  terminationMessagePolicy: FallbackToLogsOnError
  command: ["sh", "/tmp/bin/run.sh", "python3", "/tmp/bin/mq.py", "init"]
  env:
    {{- include "stackflow.mqAdminEnv" . | nindent 4 }}
    - name: MQ_PASSWORD
      valueFrom: {secretKeyRef: {name: {{ .Release.Name }}-mq, key: password}}
  volumeMounts:
    - {name: tmp, mountPath: /tmp}
    - {name: bin, mountPath: /tmp/bin, readOnly: true}
{{- end -}}
