{{/* The name of a device's objects: gnmi-sidecar-NAME. */}}
{{- define "gnmi-sidecar.device" -}}
{{- printf "gnmi-sidecar-%s" .name -}}
{{- end -}}

{{/* The labels every object of the release carries. */}}
{{- define "gnmi-sidecar.labels" -}}
app.kubernetes.io/name: gnmi-sidecar
app.kubernetes.io/part-of: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The pods of the release (PodDisruptionBudget, spread). */}}
{{- define "gnmi-sidecar.fleetSelector" -}}
app.kubernetes.io/name: gnmi-sidecar
app.kubernetes.io/part-of: {{ .Release.Name }}
{{- end -}}
