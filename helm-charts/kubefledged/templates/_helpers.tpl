{{/*
kubefledged.values: .Values with the original chart's keys (aliases.yaml)
folded into the keys that replace them, as YAML. Every template reads its
values through this, so no template has to know the legacy names:

  {{- $v := include "kubefledged.values" . | fromYaml }}

A legacy value applies only where the new key still holds its chart default,
so a new key set to anything else wins. Empty legacy strings count as unset:
the original chart shipped "" for several of them.
*/}}
{{- define "kubefledged.values" -}}
{{- $v := deepCopy .Values -}}
{{- $aliases := .Files.Get "aliases.yaml" | fromYamlArray -}}
{{- $done := dict -}}
{{- range $a := $aliases -}}
  {{- if not (hasKey $done $a.key) -}}
    {{- /* Find the legacy value, if any. */ -}}
    {{- $old := $v -}}
    {{- $found := true -}}
    {{- range $p := splitList "." $a.legacy -}}
      {{- if and $found (kindIs "map" $old) (hasKey $old $p) -}}
        {{- $old = index $old $p -}}
      {{- else -}}
        {{- $found = false -}}
      {{- end -}}
    {{- end -}}
    {{- if and $found (kindIs "string" $old) (eq $old "") -}}
      {{- $found = false -}}
    {{- end -}}
    {{- if and $found (kindIs "invalid" $old) -}}
      {{- $found = false -}}
    {{- end -}}
    {{- if and $found $a.ignore (kindIs "string" $old) -}}
      {{- if regexMatch $a.ignore $old -}}
        {{- $found = false -}}
      {{- end -}}
    {{- end -}}
    {{- if $found -}}
      {{- /* Walk to the new key's parent, making maps on the way. */ -}}
      {{- $parts := splitList "." $a.key -}}
      {{- $parent := $v -}}
      {{- range $p := initial $parts -}}
        {{- if not (kindIs "map" (index $parent $p)) -}}
          {{- $_ := set $parent $p dict -}}
        {{- end -}}
        {{- $parent = index $parent $p -}}
      {{- end -}}
      {{- $leaf := last $parts -}}
      {{- $cur := index $parent $leaf -}}
      {{- if or (kindIs "invalid" $cur) (eq (toJson $cur) (toJson $a.default)) -}}
        {{- $new := $old -}}
        {{- if and $a.lower (kindIs "string" $old) -}}
          {{- $new = lower $old -}}
        {{- end -}}
        {{- if and $a.map (kindIs "string" $old) -}}
          {{- if hasKey $a.map (lower $old) -}}
            {{- $new = index $a.map (lower $old) -}}
          {{- end -}}
        {{- end -}}
        {{- $_ := set $parent $leaf $new -}}
        {{- $_ := set $done $a.key true -}}
      {{- end -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- toYaml $v -}}
{{- end -}}

{{/* Chart name, for labels and the default object names. */}}
{{- define "kubefledged.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Prefix of object names: fullnameOverride, else the release name when it
already contains the chart name, else <release>-<chart>. Truncated so that
the suffixes added below (longest "-leader-election", 16) stay within 63.
*/}}
{{- define "kubefledged.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 47 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 47 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 47 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kubefledged.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Every value a template prints is quoted (structures go through toYaml), so
that no value, a KubeFledged's spec included, can end its scalar and write
YAML of its own: objects the operator would apply with its rights. The
release name and namespace print as they are: Helm, and for a KubeFledged
the API server, hold them to DNS names.
*/}}
{{- define "kubefledged.labels" -}}
helm.sh/chart: {{ include "kubefledged.chart" . }}
{{ include "kubefledged.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kube-fledged
{{- end -}}

{{/* Selector labels of the controller pods; never change them, a Deployment's selector is immutable. */}}
{{- define "kubefledged.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubefledged.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{/*
The controller's ServiceAccount. With serviceAccount.create false the
configured name is used everywhere (the original hard-coded its own name in
the Deployment and bindings, which broke create: false).
*/}}
{{- define "kubefledged.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-controller" (include "kubefledged.fullname" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The delete Jobs' ServiceAccount, in the release namespace. Empty (not
created, no name) leaves the Jobs on the namespace's default.
*/}}
{{- define "kubefledged.deleteServiceAccountName" -}}
{{- if .Values.deleteJobs.serviceAccount.create -}}
{{- default (printf "%s-delete" (include "kubefledged.fullname" .)) .Values.deleteJobs.serviceAccount.name -}}
{{- else -}}
{{- .Values.deleteJobs.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kubefledged.clusterRoleName" -}}
{{- default (printf "%s-controller" (include "kubefledged.fullname" .)) .Values.clusterRole.name -}}
{{- end -}}

{{- define "kubefledged.clusterRoleBindingName" -}}
{{- default (printf "%s-controller" (include "kubefledged.fullname" .)) .Values.clusterRoleBinding.name -}}
{{- end -}}

{{/* The following take the aliased values ($v) in .v and the root in .root. */}}

{{- define "kubefledged.webhookServiceName" -}}
{{- default (printf "%s-webhook" (include "kubefledged.fullname" .root)) .v.webhook.service.name -}}
{{- end -}}

{{- define "kubefledged.webhookSecretName" -}}
{{- default (printf "%s-webhook-cert" (include "kubefledged.fullname" .root)) .v.webhook.secretName -}}
{{- end -}}

{{- define "kubefledged.webhookConfigurationName" -}}
{{- default (include "kubefledged.fullname" .root) .v.webhook.configuration.name -}}
{{- end -}}

{{- define "kubefledged.certificateName" -}}
{{- printf "%s-webhook" (include "kubefledged.fullname" .root) -}}
{{- end -}}

{{/* "self" or "external"; cert-manager always means external. */}}
{{- define "kubefledged.certManagement" -}}
{{- if .v.webhook.certManager.enabled -}}
external
{{- else -}}
{{- .v.webhook.certManagement -}}
{{- end -}}
{{- end -}}

{{- define "kubefledged.leaderElectionNamespace" -}}
{{- default .root.Release.Namespace .v.controller.leaderElectionNamespace -}}
{{- end -}}

{{/*
The kube-fledged image: image.reference when set (the operator's
RELATED_IMAGE_KUBEFLEDGED), else repository, tag (appVersion by default) and
digest.
*/}}
{{- define "kubefledged.image" -}}
{{- $i := .v.image -}}
{{- if $i.reference -}}
{{- $i.reference -}}
{{- else -}}
{{- $ref := $i.repository -}}
{{- $tag := default .root.Chart.AppVersion $i.tag -}}
{{- if $tag -}}
{{- $ref = printf "%s:%s" $ref $tag -}}
{{- end -}}
{{- if $i.digest -}}
{{- $ref = printf "%s@%s" $ref $i.digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}
{{- end -}}

{{/*
kubefledged.seconds: a Go duration (the controller's flags' form: 90s, 5m,
1h30m, 1.5h) as whole seconds, rounded up; "0" and "0s" give 0. The alerts
compare and wait in seconds, so that every duration value of the chart has
the one form the controller's flags already use.
*/}}
{{- define "kubefledged.seconds" -}}
{{- $scale := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range $part := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" . -1 -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $part -}}
{{- $total = addf $total (mulf (float64 $num) (index $scale (trimPrefix $num $part))) -}}
{{- end -}}
{{- ceil $total | int -}}
{{- end -}}

{{/*
kubefledged.inline: a value for the inside of a block scalar (the alerts'
expressions and texts), where quotes would be text. A line break would end
the scalar and let the rest of the value be YAML of its own, objects
included, so it fails the rendering. The schema refuses line breaks first;
this holds where it was skipped (helm --skip-schema-validation). YAML 1.1,
which Kubernetes parses, also breaks lines at NEL, LS and PS.
*/}}
{{- define "kubefledged.inline" -}}
{{- $s := toString . -}}
{{- if regexMatch `[\r\n\x{85}\x{2028}\x{2029}]` $s -}}
{{- fail (printf "%q holds a line break: it cannot be printed inside a block scalar" $s) -}}
{{- end -}}
{{- $s -}}
{{- end -}}

{{/*
kubefledged.metricSelector: the PromQL label matchers of the controller's
series as Prometheus stores them. By default those the chart's
ServiceMonitor gives: prometheus-operator names the job after the Service
and adds the namespace it runs in.
*/}}
{{- define "kubefledged.metricSelector" -}}
{{- default (printf "job=%q,namespace=%q" (printf "%s-metrics" (include "kubefledged.fullname" .root)) .root.Release.Namespace) .v.prometheusRule.selector -}}
{{- end -}}

{{/*
The test's objects must not carry the controller's selector labels: the
check lists the controller pods by them, and the Deployment's ReplicaSet
would adopt a bare pod that matched its selector.
*/}}
{{- define "kubefledged.testLabels" -}}
helm.sh/chart: {{ include "kubefledged.chart" . }}
app.kubernetes.io/name: {{ include "kubefledged.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kube-fledged
{{- end -}}
{{/* Hooks of `helm test`, kept when the test fails, for `kubectl logs`; replaced by the next run. */}}
{{- define "kubefledged.testHook" -}}
helm.sh/hook: test
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end -}}

{{/*
kubefledged.tolerations: the controller pods' tolerations as a YAML list,
taking the aliased values ($v) in .v. With controller.nodeStartupTaint set,
they tolerate that taint beside the user's tolerations: the controller is
what removes it, so when a whole node pool is replaced and every new node
carries it, a controller that cannot run on them would never release one
(not even at the timeout, which it enforces). The value is read as
--node-startup-taint reads it (internal/plan.ParseStartupTaint: KEY[:EFFECT],
trimmed; the schema refuses the rest) into the toleration the pull Jobs get
(StartupTaint.Toleration): Exists, whatever value the node pool gave the
taint, for the one effect or, without one, for every effect. A user
toleration that already tolerates all of that is not repeated.
*/}}
{{- define "kubefledged.tolerations" -}}
{{- $out := list -}}
{{- range .v.tolerations -}}
{{- $out = append $out . -}}
{{- end -}}
{{- $taint := trim (toString (default "" .v.controller.nodeStartupTaint)) -}}
{{- if $taint -}}
  {{- $key := $taint -}}
  {{- $effect := "" -}}
  {{- if contains ":" $taint -}}
    {{- $parts := splitn ":" 2 $taint -}}
    {{- $key = $parts._0 -}}
    {{- $effect = $parts._1 -}}
  {{- end -}}
  {{- $covered := false -}}
  {{- range $out -}}
    {{- $op := toString (default "Equal" (get . "operator")) -}}
    {{- $k := toString (get . "key") -}}
    {{- $e := toString (get . "effect") -}}
    {{- if and (eq $op "Exists") (or (eq $k "") (eq $k $key)) (or (eq $e "") (eq $e $effect)) (not (hasKey . "tolerationSeconds")) -}}
      {{- $covered = true -}}
    {{- end -}}
  {{- end -}}
  {{- if not $covered -}}
    {{- $t := dict "key" $key "operator" "Exists" -}}
    {{- if $effect -}}
      {{- $_ := set $t "effect" $effect -}}
    {{- end -}}
    {{- $out = append $out $t -}}
  {{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
The chart's pods' node selector, given $ctx: the nodeSelector value, with
kubernetes.io/os: linux unless it names an OS itself. Our image holds Linux
binaries only, and a Windows pool without a taint would otherwise take them.
*/}}
{{- define "kubefledged.nodeSelector" -}}
{{- merge (deepCopy (default (dict) .v.nodeSelector)) (dict "kubernetes.io/os" "linux") | toYaml -}}
{{- end -}}
