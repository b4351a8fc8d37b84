{{/* Chart name, truncated to the 63 bytes of a label value. */}}
{{- define "ironlink-hub.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified name of the release's objects: <release>-hub unless
fullnameOverride says otherwise (63 bytes at most, a DNS label).
*/}}
{{- define "ironlink-hub.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-hub" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
Labels every object carries (Kubernetes recommended labels); each object
adds its own app.kubernetes.io/component.
*/}}
{{- define "ironlink-hub.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ironlink-hub.instanceLabels" . }}
app.kubernetes.io/version: {{ include "ironlink-hub.tag" . | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ironlink
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels naming the release's objects of every component. */}}
{{- define "ironlink-hub.instanceLabels" -}}
app.kubernetes.io/name: {{ include "ironlink-hub.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels that select the serving hub pods (never change them on upgrade). */}}
{{- define "ironlink-hub.selectorLabels" -}}
{{ include "ironlink-hub.instanceLabels" . }}
app.kubernetes.io/component: hub
{{- end }}

{{/* The image tag: image.tag, else the chart's appVersion. */}}
{{- define "ironlink-hub.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/* The image reference: repository:tag, or repository@digest when set. */}}
{{- define "ironlink-hub.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (include "ironlink-hub.tag" .) }}
{{- end }}
{{- end }}

{{/* The ServiceAccount name. */}}
{{- define "ironlink-hub.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ironlink-hub.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Pod security context: the restricted Pod Security Standard. */}}
{{- define "ironlink-hub.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Container security context: the restricted Pod Security Standard. */}}
{{- define "ironlink-hub.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The DATABASE_URL variable, from the existing Secret. */}}
{{- define "ironlink-hub.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "database.existingSecret is required: a Secret holding the PostgreSQL URL" .Values.database.existingSecret }}
      key: {{ .Values.database.secretKey }}
{{- end }}

{{/* The job label Prometheus gives the admin Service's targets. */}}
{{- define "ironlink-hub.metricsJob" -}}
{{- printf "%s-admin" (include "ironlink-hub.fullname" .) }}
{{- end }}

{{/*
GOMEMLIMIT of the hub container, in bytes: 90 % of resources.limits.memory,
the share the hub takes of its cgroup's limit by itself when GOMEMLIMIT is
unset (hub/app MemoryLimitRatio; docs/design/performance.md "Memory
limit"), so the Go runtime collects harder before the kernel kills the pod
for memory. Empty without a memory limit. The limit is a Kubernetes
quantity: plain bytes or with a suffix Ki, Mi, Gi, Ti, K, M, G, T.
*/}}
{{/*
The container's resources: .Values.resources, with limits.memory derived
from .Values.memory (links × perLinkKiB + baseMiB, over the 0.9 that
GOMEMLIMIT takes, in whole MiB) unless limits.memory is set.
*/}}
{{- define "ironlink-hub.resources" -}}
{{- $r := deepCopy (default dict .Values.resources) -}}
{{- $lim := default dict $r.limits -}}
{{- if not (get $lim "memory") -}}
{{- $m := .Values.memory -}}
{{- $mib := ceil (divf (addf (float64 $m.baseMiB) (divf (mulf (float64 $m.links) (float64 $m.perLinkKiB)) 1024.0)) 0.9) -}}
{{- $_ := set $lim "memory" (printf "%.0fMi" $mib) -}}
{{- end -}}
{{- $_ := set $r "limits" $lim -}}
{{- toYaml $r -}}
{{- end }}

{{- define "ironlink-hub.goMemLimit" -}}
{{- $q := toString (dig "limits" "memory" "" (include "ironlink-hub.resources" . | fromYaml)) -}}
{{- if $q -}}
{{- $num := $q -}}
{{- $mult := 1.0 -}}
{{- range $u, $m := dict "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "K" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 -}}
{{- if hasSuffix $u $q -}}
{{- $num = trimSuffix $u $q -}}
{{- $mult = $m -}}
{{- end -}}
{{- end -}}
{{- printf "%.0f" (floor (mulf (float64 $num) $mult 0.9)) -}}
{{- end -}}
{{- end }}
