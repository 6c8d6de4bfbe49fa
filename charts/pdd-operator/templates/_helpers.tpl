{{/* Names and labels shared by the templates. */}}

{{- define "pdd-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "pdd-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pdd-operator.labels" -}}
{{ include "pdd-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "pdd-operator.serviceAccountName" -}}
{{- default (include "pdd-operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The ValidatingWebhookConfiguration's name (cluster-scoped: one per release). */}}
{{- define "pdd-operator.webhookConfigurationName" -}}
{{- printf "%s.pdd-operator.dev" (include "pdd-operator.fullname" .) -}}
{{- end -}}

{{- define "pdd-operator.webhookServiceName" -}}
{{- printf "%s-webhook" (include "pdd-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pdd-operator.webhookSecretName" -}}
{{- printf "%s-webhook-certs" (include "pdd-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The host name the apiserver dials and the serving certificate names. */}}
{{- define "pdd-operator.webhookHost" -}}
{{- if .Values.webhook.url -}}
{{- (urlParse .Values.webhook.url).hostname -}}
{{- else -}}
{{- printf "%s.%s.svc" (include "pdd-operator.webhookServiceName" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{- define "pdd-operator.image" -}}
{{- $registry := default .Values.image.registry .Values.global.imageRegistry -}}
{{- $ref := printf "%s:%s" .Values.image.repository (default (printf "v%s" .Chart.AppVersion) .Values.image.tag) -}}
{{- if .Values.image.digest -}}{{- $ref = printf "%s@%s" .Values.image.repository .Values.image.digest -}}{{- end -}}
{{- if $registry -}}{{ printf "%s/%s" $registry $ref }}{{- else -}}{{ $ref }}{{- end -}}
{{- end -}}

{{- define "pdd-operator.leaseName" -}}
{{- include "pdd-operator.fullname" . -}}
{{- end -}}
