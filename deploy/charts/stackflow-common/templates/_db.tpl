{{/* A service's database, in OpenStack-Helm's values: endpoints.oslo_db.{hosts,port,path} and the
     user endpoints.oslo_db.auth.<chart>; its password, when the values give none, is generated once and
     kept in the Secret <release>-db (keys username, password, connection). */}}
{{- define "stackflow.dbUser" -}}{{ (index .Values.endpoints.oslo_db.auth .Chart.Name).username }}{{- end -}}
{{- define "stackflow.dbPassword" -}}
{{- include "stackflow.generated" (list . (printf "%s-db" .Release.Name) "password" (index .Values.endpoints.oslo_db.auth .Chart.Name).password) -}}
{{- end -}}
{{- define "stackflow.dbName" -}}{{ trimPrefix "/" .Values.endpoints.oslo_db.path }}{{- end -}}
{{- define "stackflow.dbConnection" -}}
mysql+pymysql://{{ include "stackflow.dbUser" . }}:{{ include "stackflow.dbPassword" . | urlquery }}@{{ .Values.endpoints.oslo_db.hosts.default }}:{{ .Values.endpoints.oslo_db.port.mysql.default }}/{{ include "stackflow.dbName" . }}?charset=utf8
{{- end -}}

{{- define "stackflow.secretDB" -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-db
  labels:
    {{- include "stackflow.labels" . | nindent 4 }}
type: Opaque
data:
  username: {{ include "stackflow.dbUser" . | b64enc }}
  password: {{ include "stackflow.dbPassword" . | b64enc }}
  connection: {{ include "stackflow.dbConnection" . | b64enc }}
{{- end -}}

{{/* The environment of db-init and db-drop: the database, its user, and the administrator of the Secret
     endpoints.oslo_db.auth.admin.secret (keys username, password). */}}
{{- define "stackflow.dbAdminEnv" -}}
{{- $db := .Values.endpoints.oslo_db -}}
- {name: DB_HOST, value: {{ $db.hosts.default | quote }}}
- {name: DB_PORT, value: {{ $db.port.mysql.default | quote }}}
- {name: DB_NAME, value: {{ include "stackflow.dbName" . | quote }}}
- {name: DB_USER, value: {{ include "stackflow.dbUser" . | quote }}}
- name: ADMIN_USER
  valueFrom: {secretKeyRef: {name: {{ $db.auth.admin.secret }}, key: username}}
- name: ADMIN_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ $db.auth.admin.secret }}, key: password}}
{{- end -}}

{{/* The db-init container: creates the database and its user (image images.tags.<chart>_db_init). */}}
{{- define "stackflow.containerDBInit" -}}
- name: db-init
  image: {{ index .Values.images.tags (printf "%s_db_init" .Chart.Name) | quote }}
  imagePullPolicy: {{ .Values.images.pull_policy }}
  terminationMessagePolicy: FallbackToLogsOnError
  command: ["sh", "/tmp/bin/run.sh", "python3", "/tmp/bin/db-init.py"]
  env:
    {{- include "stackflow.dbAdminEnv" . | nindent 4 }}
    - name: DB_PASSWORD
      valueFrom: {secretKeyRef: {name: {{ .Release.Name }}-db, key: password}}
  volumeMounts:
    - {name: tmp, mountPath: /tmp}
    - {name: bin, mountPath: /tmp/bin, readOnly: true}
{{- end -}}

{{/* manifests.job_db_drop: a pre-delete hook that drops the database and its user when the release is
     uninstalled (image images.tags.<chart>_db_drop). */}}
{{- define "stackflow.jobDBDrop" -}}
{{- if .Values.manifests.job_db_drop }}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Chart.Name }}-db-drop
  labels:
    {{- include "stackflow.labels" . | nindent 4 }}
    component: db-drop
  annotations:
    helm.sh/hook: pre-delete
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
spec:
  backoffLimit: 2
  template:
    metadata:
      labels:
        app.kubernetes.io/instance: {{ .Release.Name }}
        component: db-drop
    spec:
      restartPolicy: Never
      {{- include "stackflow.scheduling" (list . "job") | nindent 6 }}
      containers:
        - name: db-drop
          image: {{ index .Values.images.tags (printf "%s_db_drop" .Chart.Name) | quote }}
          imagePullPolicy: {{ .Values.images.pull_policy }}
          terminationMessagePolicy: FallbackToLogsOnError
          command: ["sh", "/tmp/bin/run.sh", "python3", "/tmp/bin/db-drop.py"]
          env:
            {{- include "stackflow.dbAdminEnv" . | nindent 12 }}
          volumeMounts:
            - {name: tmp, mountPath: /tmp}
            - {name: bin, mountPath: /tmp/bin, readOnly: true}
        {{- if hasKey .Values.endpoints "oslo_messaging" }}
        # and the message bus's vhost and user, for a chart that has one
        - name: mq-drop
          image: {{ index .Values.images.tags (printf "%s_db_drop" .Chart.Name) | quote }}
          imagePullPolicy: {{ .Values.images.pull_policy }}
          terminationMessagePolicy: FallbackToLogsOnError
          command: ["sh", "/tmp/bin/run.sh", "python3", "/tmp/bin/mq.py", "drop"]
          env:
            {{- include "stackflow.mqAdminEnv" . | nindent 12 }}
          volumeMounts:
            - {name: tmp, mountPath: /tmp}
            - {name: bin, mountPath: /tmp/bin, readOnly: true}
        {{- end }}
      volumes:
        - name: tmp
          emptyDir: {}
        - name: bin
          configMap: {name: {{ .Release.Name }}-bin}
{{- end }}
{{- end -}}
