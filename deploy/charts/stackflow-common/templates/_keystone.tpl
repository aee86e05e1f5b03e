{{/* The host of an endpoint (root context, endpoints key): endpoints.<key>.host_fqdn_override.default,
     else the ClusterIP of the Service endpoints.<key>.hosts.default, as Kubernetes expands it in a
     container's environment (the Service must exist before the pod; the stack has no cluster DNS). */}}
{{- define "stackflow.endpointHost" -}}
{{- $ep := index (index . 0).Values.endpoints (index . 1) -}}
{{- $ep.host_fqdn_override.default | default (printf "$(%s_SERVICE_HOST)" ($ep.hosts.default | upper | replace "-" "_")) -}}
{{- end -}}

{{/* An endpoint's URL (root context, endpoints key, path) for a container's environment. */}}
{{- define "stackflow.endpointURL" -}}
{{- $ep := index (index . 0).Values.endpoints (index . 1) -}}
{{ $ep.scheme.default }}://{{ include "stackflow.endpointHost" (list (index . 0) (index . 1)) }}:{{ $ep.port.api.default }}{{ index . 2 }}
{{- end -}}

{{/* The service's Keystone user, endpoints.identity.auth.<chart>; its password, when the values give
     none, is generated once and kept in the Secret <release>-keystone (keys username, password). */}}
{{- define "stackflow.ksPassword" -}}
{{- include "stackflow.generated" (list . (printf "%s-keystone" .Release.Name) "password" (index .Values.endpoints.identity.auth .Chart.Name).password) -}}
{{- end -}}

{{- define "stackflow.secretKeystone" -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-keystone
  labels:
    {{- include "stackflow.labels" . | nindent 4 }}
type: Opaque
data:
  username: {{ (index .Values.endpoints.identity.auth .Chart.Name).username | b64enc }}
  password: {{ include "stackflow.ksPassword" . | b64enc }}
{{- end -}}

{{/* keystonemiddleware's settings for the service's API, as oslo.config's environment: the password
     stays in the Secret, and the URL follows the identity Service. */}}
{{- define "stackflow.authtokenEnv" -}}
{{- $u := index .Values.endpoints.identity.auth .Chart.Name -}}
- {name: OS_KEYSTONE_AUTHTOKEN__AUTH_TYPE, value: password}
- {name: OS_KEYSTONE_AUTHTOKEN__AUTH_URL, value: {{ include "stackflow.endpointURL" (list . "identity" "/v3") | quote }}}
- {name: OS_KEYSTONE_AUTHTOKEN__WWW_AUTHENTICATE_URI, value: {{ include "stackflow.endpointURL" (list . "identity" "/v3") | quote }}}
- {name: OS_KEYSTONE_AUTHTOKEN__USERNAME, value: {{ $u.username | quote }}}
- {name: OS_KEYSTONE_AUTHTOKEN__PROJECT_NAME, value: {{ $u.project_name | quote }}}
- {name: OS_KEYSTONE_AUTHTOKEN__USER_DOMAIN_NAME, value: {{ $u.user_domain_name | quote }}}
- {name: OS_KEYSTONE_AUTHTOKEN__PROJECT_DOMAIN_NAME, value: {{ $u.project_domain_name | quote }}}
- {name: OS_KEYSTONE_AUTHTOKEN__REGION_NAME, value: {{ $u.region_name | quote }}}
- name: OS_KEYSTONE_AUTHTOKEN__PASSWORD
  valueFrom: {secretKeyRef: {name: {{ .Release.Name }}-keystone, key: password}}
{{- end -}}

{{/* The ks-register container (root context, service type, endpoints key, URL path): registers the
     service's user, the service and its endpoints as Keystone's administrator, whose client environment
     is the Secret endpoints.identity.auth.admin.secret (the keystone release's <release>-admin). */}}
{{- define "stackflow.containerKsRegister" -}}
{{- $root := index . 0 -}}
{{- $u := index $root.Values.endpoints.identity.auth $root.Chart.Name -}}
- name: ks-register
  image: {{ index $root.Values.images.tags (printf "%s_ks_register" $root.Chart.Name) | quote }}
  imagePullPolicy: {{ $root.Values.images.pull_policy }}
  terminationMessagePolicy: FallbackToLogsOnError
  command: ["sh", "/tmp/bin/run.sh", "python3", "/tmp/bin/ks-register.py"]
  envFrom:
    - secretRef: {name: {{ $root.Values.endpoints.identity.auth.admin.secret }}}
  env:
    - {name: OS_AUTH_URL, value: {{ include "stackflow.endpointURL" (list $root "identity" "/v3") | quote }}}
    - {name: SERVICE_TYPE, value: {{ index . 1 | quote }}}
    - {name: SERVICE_NAME, value: {{ $root.Chart.Name | quote }}}
    - {name: SERVICE_URL, value: {{ include "stackflow.endpointURL" (list $root (index . 2) (index . 3)) | quote }}}
    - {name: SERVICE_REGION, value: {{ $u.region_name | quote }}}
    - {name: SERVICE_USERNAME, value: {{ $u.username | quote }}}
    - {name: SERVICE_PROJECT_NAME, value: {{ $u.project_name | quote }}}
    - {name: SERVICE_USER_DOMAIN_NAME, value: {{ $u.user_domain_name | quote }}}
    - {name: SERVICE_PROJECT_DOMAIN_NAME, value: {{ $u.project_domain_name | quote }}}
    - {name: SERVICE_ROLE, value: {{ $u.role | default "admin" | quote }}}
    - name: SERVICE_PASSWORD
      valueFrom: {secretKeyRef: {name: {{ $root.Release.Name }}-keystone, key: password}}
  volumeMounts:
    - {name: tmp, mountPath: /tmp}
    - {name: bin, mountPath: /tmp/bin, readOnly: true}
{{- end -}}


{{/* The bootstrap Job (root context, service type, endpoints key): creates what bootstrap.structured
     lists through the service's API, as Keystone's administrator (OpenStack-Helm's bootstrap Job). Its
     name carries the hash of what it makes, so a change runs it again (all of it idempotent). It runs
     the image of images.tags.<chart>_bootstrap. */}}
{{- define "stackflow.jobBootstrap" -}}
{{- $root := index . 0 -}}
{{- if and $root.Values.manifests.job_bootstrap $root.Values.bootstrap.enabled }}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ $root.Chart.Name }}-bootstrap-{{ list $root.Values.bootstrap $root.Values.images.tags $root.Values.labels.job $root.Values.pod.tolerations $root.Values.endpoints.identity | toJson | sha256sum | trunc 8 }}
  labels:
    {{- include "stackflow.labels" $root | nindent 4 }}
    component: bootstrap
spec:
  backoffLimit: 2
  template:
    metadata:
      labels:
        app.kubernetes.io/instance: {{ $root.Release.Name }}
        component: bootstrap
    spec:
      restartPolicy: Never
      {{- include "stackflow.scheduling" (list $root "job") | nindent 6 }}
      containers:
        - name: bootstrap
          image: {{ index $root.Values.images.tags (printf "%s_bootstrap" $root.Chart.Name) | quote }}
          imagePullPolicy: {{ $root.Values.images.pull_policy }}
          terminationMessagePolicy: FallbackToLogsOnError
          command: ["sh", "/tmp/bin/run.sh", "python3", "/tmp/bin/bootstrap.py"]
          envFrom:
            - secretRef: {name: {{ $root.Values.endpoints.identity.auth.admin.secret }}}
          env:
            - {name: OS_AUTH_URL, value: {{ include "stackflow.endpointURL" (list $root "identity" "/v3") | quote }}}
            - {name: SERVICE_TYPE, value: {{ index . 1 | quote }}}
            - {name: SERVICE_URL, value: {{ include "stackflow.endpointURL" (list $root (index . 2) "") | quote }}}
            - {name: BOOTSTRAP, value: {{ $root.Values.bootstrap.structured | toJson | quote }}}
            - {name: HOME, value: /tmp}
          volumeMounts:
            - {name: tmp, mountPath: /tmp}
            - {name: bin, mountPath: /tmp/bin, readOnly: true}
      volumes:
        - {name: tmp, emptyDir: {}}
        - name: bin
          configMap: {name: {{ $root.Release.Name }}-bin}
{{- end }}
{{- end -}}
