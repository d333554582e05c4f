{{/* The name of every object: the release (the CR) name, which is unique per namespace. */}}
{{- define "memcached.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels shared by all objects; the selector labels are the stable subset. */}}
{{- define "memcached.selectorLabels" -}}
app.kubernetes.io/name: memcached
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end -}}

{{- define "memcached.labels" -}}
{{ include "memcached.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}
