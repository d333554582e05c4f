{{/* Every object is named after the release (the CR), unique per namespace. */}}
{{- define "${lower}.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "${lower}.selectorLabels" -}}
app.kubernetes.io/name: ${lower}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end -}}

{{- define "${lower}.labels" -}}
{{ include "${lower}.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}
