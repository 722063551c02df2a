{{/* Chart name, truncated to 63 characters (DNS label). */}}
{{- define "folio.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release-chart unless the release already holds it. */}}
{{- define "folio.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "folio.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Names of the objects. Worker names leave room for "-<ordinal>" and the
     controller-revision-hash label (StatefulSet names up to 52 characters). */}}
{{- define "folio.scheduler.fullname" -}}
{{- printf "%s-scheduler" (include "folio.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- define "folio.worker.fullname" -}}
{{- printf "%s-worker" (include "folio.fullname" . | trunc 45 | trimSuffix "-") }}
{{- end }}
{{- define "folio.worker.headless" -}}
{{- printf "%s-headless" (include "folio.worker.fullname" .) }}
{{- end }}

{{- define "folio.labels" -}}
helm.sh/chart: {{ include "folio.chart" . }}
{{ include "folio.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: folio
{{- end }}

{{- define "folio.selectorLabels" -}}
app.kubernetes.io/name: {{ include "folio.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "folio.scheduler.selectorLabels" -}}
{{ include "folio.selectorLabels" . }}
app.kubernetes.io/component: scheduler
{{- end }}

{{- define "folio.worker.selectorLabels" -}}
{{ include "folio.selectorLabels" . }}
app.kubernetes.io/component: worker
{{- end }}

{{/* The Service label whose value the ServiceMonitor makes the `job` label
     (folio-scheduler, folio-worker: the jobs deploy/prometheus/folio-rules.yml names). */}}
{{- define "folio.metricsJobLabel" -}}
folio.dev/metrics-job
{{- end }}

{{- define "folio.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "folio.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "folio.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The model directory inside the containers. */}}
{{- define "folio.modelDir" -}}
{{- if .Values.model.subPath }}
{{- printf "%s/%s" (trimSuffix "/" .Values.model.mountPath) (trimPrefix "/" .Values.model.subPath) }}
{{- else }}
{{- .Values.model.mountPath }}
{{- end }}
{{- end }}

{{/* The served model name (GetModelInfo, the `model` label of every metric):
     model.name, else the last element of model.subPath. Empty when neither is set:
     folio-scheduler then names the model after the last element of model.mountPath. */}}
{{- define "folio.modelName" -}}
{{- $sub := trimAll "/" .Values.model.subPath }}
{{- if .Values.model.name }}
{{- .Values.model.name }}
{{- else if $sub }}
{{- base $sub }}
{{- end }}
{{- end }}

{{- define "folio.modelClaimName" -}}
{{- default (printf "%s-model" (include "folio.fullname" .)) .Values.model.pvc.existingClaim }}
{{- end }}

{{- define "folio.secretName" -}}
{{- default (printf "%s-secret" (include "folio.fullname" .)) .Values.secret.existingSecret }}
{{- end }}

{{/* Whether the scheduler pod gets the Secret. */}}
{{- define "folio.secret.enabled" -}}
{{- if or .Values.secret.create .Values.secret.existingSecret }}true{{ end }}
{{- end }}

{{/* Whether the scheduler's client port speaks TLS: secret.tls.enabled, or a Secret
     the chart makes with both crt and key. */}}
{{- define "folio.tls.enabled" -}}
{{- $s := .Values.secret }}
{{- $created := and $s.create (not $s.existingSecret) }}
{{- if or $s.tls.enabled (and $created $s.tls.crt $s.tls.key) }}
{{- if not (include "folio.secret.enabled" .) }}
{{- fail "secret.tls.enabled needs the TLS files in a Secret: secret.create (with secret.tls.crt and secret.tls.key) or secret.existingSecret" }}
{{- end }}
{{- if and $created (not (and $s.tls.crt $s.tls.key)) }}
{{- fail "secret.tls.enabled with secret.create needs secret.tls.crt and secret.tls.key" }}
{{- end }}
{{- if or (eq (int .Values.scheduler.healthPort) (int .Values.scheduler.port)) (eq (int .Values.scheduler.rendezvousPort) (int .Values.scheduler.port)) (eq (int .Values.scheduler.healthPort) (int .Values.scheduler.rendezvousPort)) }}
{{- fail "scheduler.port, scheduler.healthPort and scheduler.rendezvousPort must differ" }}
{{- end }}
{{- print "true" }}
{{- else if $s.tls.clientAuth }}
{{- fail "secret.tls.clientAuth needs TLS (secret.tls.enabled, or secret.create with secret.tls.crt and secret.tls.key)" }}
{{- end }}
{{- end }}

{{/* The directory the Secret is mounted at. */}}
{{- define "folio.secret.mountPath" -}}
/etc/folio/tls
{{- end }}

{{/* Whether the scheduler serves the OpenAI-compatible HTTP API (scheduler.httpPort > 0),
     on a port of its own. */}}
{{- define "folio.http.enabled" -}}
{{- $s := .Values.scheduler }}
{{- $http := int $s.httpPort }}
{{- if gt $http 0 }}
{{- $others := list (int $s.port) (int $s.metricsPort) }}
{{- if include "folio.tls.enabled" . }}
{{- $others = concat $others (list (int $s.healthPort) (int $s.rendezvousPort)) }}
{{- end }}
{{- if has $http $others }}
{{- fail (printf "scheduler.httpPort (%d) must differ from the scheduler's other ports" $http) }}
{{- end }}
{{- print "true" }}
{{- end }}
{{- end }}

{{/* The model name the scheduler serves (the OpenAI API's "model"): folio.modelName, else
     the last element of model.mountPath, as folio-scheduler picks it. */}}
{{- define "folio.servedModelName" -}}
{{- default (base (trimAll "/" .Values.model.mountPath)) (include "folio.modelName" .) }}
{{- end }}

{{/* The port of the scheduler's gRPC probes: plaintext health port under TLS. */}}
{{- define "folio.scheduler.probePort" -}}
{{- if include "folio.tls.enabled" . }}{{ .Values.scheduler.healthPort }}{{ else }}{{ .Values.scheduler.port }}{{ end }}
{{- end }}

{{/* Worker addresses in rank order, as the scheduler's --workers wants them. */}}
{{- define "folio.workerAddresses" -}}
{{- $worker := include "folio.worker.fullname" . }}
{{- $headless := include "folio.worker.headless" . }}
{{- $addrs := list }}
{{- range $r := until (int .Values.tensorParallelSize) }}
{{- $addrs = append $addrs (printf "%s-%d.%s.%s.svc:%d" $worker $r $headless $.Release.Namespace (int $.Values.worker.port)) }}
{{- end }}
{{- join "," $addrs }}
{{- end }}

{{/* Whether worker pods request an accelerator resource. */}}
{{- define "folio.worker.gpu" -}}
{{- if and .Values.worker.gpu.resourceName (gt (int .Values.worker.gpu.count) 0) }}true{{ end }}
{{- end }}

{{/* The model volume (pod spec "volumes" entry). */}}
{{- define "folio.modelVolume" -}}
- name: model
{{- if eq .Values.model.source "pvc" }}
  persistentVolumeClaim:
    claimName: {{ include "folio.modelClaimName" . }}
    readOnly: true
{{- else if eq .Values.model.source "hostPath" }}
  hostPath:
    path: {{ .Values.model.hostPath.path }}
    type: {{ .Values.model.hostPath.type }}
{{- else if eq .Values.model.source "image" }}
{{- /* {} when unbounded: a bare "emptyDir:" is null, a volume of no type. */}}
{{- with .Values.model.image.sizeLimit }}
  emptyDir:
    sizeLimit: {{ . }}
{{- else }}
  emptyDir: {}
{{- end }}
{{- else }}
{{- fail (printf "model.source must be pvc, hostPath or image, not %q" .Values.model.source) }}
{{- end }}
{{- end }}

{{/* The init container that copies the model out of an image (model.source=image).
     cp -R, not -a: a non-root user (folio's image runs as one) may not set the times
     of the emptyDir it copies into, which root owns. */}}
{{- define "folio.modelInitContainers" -}}
{{- if eq .Values.model.source "image" }}
{{- if not .Values.model.image.repository }}
{{- fail "model.source=image needs model.image.repository" }}
{{- end }}
initContainers:
  - name: copy-model
    image: "{{ .Values.model.image.repository }}:{{ .Values.model.image.tag }}"
    imagePullPolicy: {{ .Values.model.image.pullPolicy }}
    command: ["sh", "-c", "cp -R \"$0\"/. \"$1\"/", {{ .Values.model.image.sourcePath | quote }}, {{ .Values.model.mountPath | quote }}]
    volumeMounts:
      - name: model
        mountPath: {{ .Values.model.mountPath }}
{{- end }}
{{- end }}

{{- define "folio.modelMount" -}}
- name: model
  mountPath: {{ .Values.model.mountPath }}
  readOnly: true
{{- end }}
