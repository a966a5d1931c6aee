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

{{/*
An image reference: repository@digest when a digest is given (in `digest`, or already in the repository, as
air-gapped installs pin them), else repository:tag with the chart's appVersion as the default tag.
*/}}
{{- define "agent-engine.imageRef" -}}
{{- $image := index . 0 -}}
{{- $appVersion := index . 1 -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else if contains "@" $image.repository -}}
{{- $image.repository -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default $appVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "agent-engine.operatorImage" -}}
{{- include "agent-engine.imageRef" (list .Values.image.operator .Chart.AppVersion) -}}
{{- end -}}

{{- define "agent-engine.runtimeImage" -}}
{{- include "agent-engine.imageRef" (list .Values.image.runtime .Chart.AppVersion) -}}
{{- end -}}

{{- define "agent-engine.nodeRuntimeImage" -}}
{{- include "agent-engine.imageRef" (list .Values.image.nodeRuntime .Chart.AppVersion) -}}
{{- end -}}

{{/* Where the operator publishes registrations and the OE reads them: a namespace holding nothing else. */}}
{{- define "agent-engine.registrationsNamespace" -}}
{{- default (printf "%s-registrations" .Release.Namespace | trunc 63 | trimSuffix "-") .Values.oe.registrations.namespace -}}
{{- end -}}

{{/*
A default spread over nodes for a component with several replicas (`ScheduleAnyway`: a small cluster still
schedules them all); a non-empty `topologySpreadConstraints` value replaces it. Args: values, selector labels.
*/}}
{{- define "agent-engine.topologySpread" -}}
{{- $values := index . 0 -}}
{{- $selector := index . 1 -}}
{{- if $values.topologySpreadConstraints -}}
{{- toYaml $values.topologySpreadConstraints -}}
{{- else -}}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- $selector | nindent 6 }}
{{- end -}}
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


{{/* The telemetry variables every component gets (issue 33): the OE directly, the Agents' AER, Tool Pod
and Memory server through the operator (AGENT_OPERATOR_TELEMETRY_ENV). Only OTEL_*, AGENTIC_TRACING_* and
AGENTIC_EXECUTION_LOG* names: the operator refuses any other. A JSON object. */}}
{{- define "agent-engine.telemetryEnv" -}}
{{- $o := .Values.observability | default dict -}}
{{- $t := $o.tracing | default dict -}}
{{- $env := dict -}}
{{- with $t.otlpEndpoint }}{{ $_ := set $env "OTEL_EXPORTER_OTLP_ENDPOINT" . }}{{ end -}}
{{- with $t.exporters }}{{ $_ := set $env "AGENTIC_TRACING_EXPORTER" (join "," .) }}{{ end -}}
{{- with $t.sampler }}{{ $_ := set $env "OTEL_TRACES_SAMPLER" . }}{{ end -}}
{{- with $t.samplerArg }}{{ $_ := set $env "OTEL_TRACES_SAMPLER_ARG" (toString .) }}{{ end -}}
{{- if $t.arguments }}{{ $_ := set $env "AGENTIC_TRACING_ARGUMENTS" "true" }}{{ end -}}
{{- with ($o.executionLog | default dict).sinks }}{{ $_ := set $env "AGENTIC_EXECUTION_LOG" (join "," .) }}{{ end -}}
{{- range $k, $v := ($o.extraEnv | default dict) }}{{ $_ := set $env $k (toString $v) }}{{ end -}}
{{- toJson $env -}}
{{- end -}}
