{{/* Names, labels and image references shared by every template. */}}

{{- define "agent-engine.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "agent-engine.operatorName" -}}
{{- printf "%s-operator" (include "agent-engine.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agent-engine.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "agent-engine.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "agent-engine.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "agent-engine.labels" -}}
{{ include "agent-engine.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "agent-engine.operatorImage" -}}
{{- printf "%s:%s" .Values.image.operator.repository (default .Chart.AppVersion .Values.image.operator.tag) -}}
{{- end -}}

{{- define "agent-engine.runtimeImage" -}}
{{- printf "%s:%s" .Values.image.runtime.repository (default .Chart.AppVersion .Values.image.runtime.tag) -}}
{{- end -}}

{{- define "agent-engine.oeName" -}}
{{- printf "%s-oe" (include "agent-engine.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The OE's pod labels: what the operator's NetworkPolicies admit to the Agents' AER and Tool Pods. */}}
{{- define "agent-engine.oeSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: oe
{{- end -}}

{{- define "agent-engine.oeLabels" -}}
{{ include "agent-engine.oeSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "agent-engine.oeClientTokenSecret" -}}
{{- default (printf "%s-client-token" (include "agent-engine.oeName" .)) .Values.oe.clientToken.existingSecret -}}
{{- end -}}
