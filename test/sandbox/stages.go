package sandbox

import (
	"fmt"
	"strings"
	"time"
)

// NotReadyLabel on a fake node makes the kwok stages below report it NotReady (and keep it
// so) instead of Ready; SetNodeReady and NodeSpec.NotReady set it.
const NotReadyLabel = "sandbox.kubefledged.io/not-ready"

// kwok stage selectors are jq expressions over the object. A failing jq expression selects
// nothing rather than erroring, so every iteration over a list that may be absent is
// guarded with `// []`.
const (
	jqNotReadyLabel = `.metadata.labels["` + NotReadyLabel + `"]`
	jqReady         = `.status.conditions.[] | select( .type == "Ready" ) | .status`
	// A pod whose (init)container image is under FailPrefix must never look pulled.
	jqFailImage = `[(.spec.initContainers // [])[].image, (.spec.containers // [])[].image] | any(startswith("` + FailPrefix + `"))`
	// A pod whose image is under HangPrefix never finishes pulling it.
	jqHangImage = `[(.spec.initContainers // [])[].image, (.spec.containers // [])[].image] | any(startswith("` + HangPrefix + `"))`
	// A pod whose image is under RunFailPrefix (and none under FailPrefix: the pull fails
	// first) must never look healthy.
	jqRunFailImage = `[(.spec.initContainers // [])[].image, (.spec.containers // [])[].image] | any(startswith("` + RunFailPrefix + `"))`
	// Run-to-completion pods: the kubelet would see their processes exit.
	jqRunsToCompletion = `((.metadata.ownerReferences // []) | any(.kind == "Job")) or (.spec.restartPolicy == "Never")`
)

func jqWaitingReason(reason string) string {
	return `[(.status.initContainerStatuses // [])[], (.status.containerStatuses // [])[] | .state.waiting.reason // ""] | any(. == "` + reason + `")`
}

// stageConfig is the kwok --config file: a KwokConfiguration plus the Stage objects that
// replace a kubelet on the fake nodes. They are the stock v0.8.0 kustomize/stage stages
// (node fast + heartbeat-with-lease, pod fast) adjusted for:
//   - nodes labelled NotReadyLabel go and stay NotReady;
//   - the node heartbeat refreshes only conditions, so status.images set by SetNodeImages
//     survives (kwok sends a strategic merge patch, and images are not in it);
//   - pods get the pull delay, container IDs and `started`, and Jobs complete at once;
//   - pods with an image under FailPrefix go ErrImagePull, then ImagePullBackOff, and stay
//     Pending, as a kubelet does for an image that does not exist;
//   - pods with an image under RunFailPrefix crash: Failed, or CrashLoopBackOff;
//   - pods with an image under HangPrefix stay Pending, that container in ContainerCreating.
//
// Each pod stage's selector excludes the others' pods, so at most one stage matches a pod.
func stageConfig(pullDelay, heartbeat time.Duration) string {
	var b strings.Builder
	b.WriteString(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 16
  nodePlayStageParallelism: 8
  nodeLeaseParallelism: 8
`)
	stage := func(s string) {
		b.WriteString("---\n")
		b.WriteString(strings.TrimLeft(s, "\n"))
	}

	// The initial and the "back to Ready" transition: any node not reporting Ready and not
	// asked to be NotReady.
	stage(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '` + jqNotReadyLabel + `'
      operator: NotIn
      values: ['true']
    - key: '` + jqReady + `'
      operator: NotIn
      values: ['True']
  next:
    statusTemplate: |
` + indent(nodeStatusTemplate(true), 6))

	stage(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-not-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '` + jqNotReadyLabel + `'
      operator: In
      values: ['true']
    - key: '` + jqReady + `'
      operator: NotIn
      values: ['False']
  next:
    statusTemplate: |
` + indent(nodeStatusTemplate(false), 6))

	// With node leases renewed by kwok, status only needs the occasional refresh a kubelet
	// sends (nodeStatusReportFrequency); it must not touch anything but conditions.
	hb := heartbeat.Milliseconds()
	stage(fmt.Sprintf(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '%s'
      operator: NotIn
      values: ['true']
    - key: '.status.phase'
      operator: In
      values: ['Running']
    - key: '%s'
      operator: In
      values: ['True']
  delay:
    durationMilliseconds: %d
    jitterDurationMilliseconds: %d
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
`, jqNotReadyLabel, jqReady, hb, hb+hb/50+1))

	delay := ""
	if pullDelay > 0 {
		delay = fmt.Sprintf("  delay:\n    durationMilliseconds: %d\n", pullDelay.Milliseconds())
	}
	stage(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: ['Pending']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ['True']
    - key: '` + jqFailImage + `'
      operator: NotIn
      values: ['true']
    - key: '` + jqRunFailImage + `'
      operator: NotIn
      values: ['true']
    - key: '` + jqHangImage + `'
      operator: NotIn
      values: ['true']
` + delay + `  next:
    statusTemplate: |
` + indent(podReadyTemplate, 6))

	// Pulled after the same delay as a healthy pod, then crashed at once.
	stage(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-run-failed
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: ['Pending']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ['True', 'False']
    - key: '` + jqFailImage + `'
      operator: NotIn
      values: ['true']
    - key: '` + jqRunFailImage + `'
      operator: In
      values: ['true']
` + delay + `  next:
    statusTemplate: |
` + indent(podRunFailedTemplate, 6))

	stage(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: ['Running']
    - key: '` + jqRunsToCompletion + `'
      operator: In
      values: ['true']
    - key: '` + jqRunFailImage + `'
      operator: NotIn
      values: ['true']
  next:
    statusTemplate: |
` + indent(podCompleteTemplate, 6))

	// Once, after the pull delay: the hanging container waits, its siblings run (or exit 0).
	stage(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-image-pull-hangs
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: ['Pending']
    - key: '` + jqHangImage + `'
      operator: In
      values: ['true']
    - key: '` + jqFailImage + `'
      operator: NotIn
      values: ['true']
    - key: '` + jqRunFailImage + `'
      operator: NotIn
      values: ['true']
    - key: '` + jqWaitingReason("ContainerCreating") + `'
      operator: NotIn
      values: ['true']
` + delay + `  next:
    statusTemplate: |
` + indent(podPullFailedTemplate(HangPrefix, "ContainerCreating", "", true), 6))

	stage(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-image-pull-error
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: ['Pending']
    - key: '` + jqFailImage + `'
      operator: In
      values: ['true']
    - key: '` + jqWaitingReason("ErrImagePull") + `'
      operator: NotIn
      values: ['true']
    - key: '` + jqWaitingReason("ImagePullBackOff") + `'
      operator: NotIn
      values: ['true']
  next:
    statusTemplate: |
` + indent(podPullFailedTemplate(FailPrefix, "ErrImagePull",
		`rpc error: code = NotFound desc = failed to pull and unpack image \"%s\": not found`, true), 6))

	stage(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-image-pull-backoff
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: ['Pending']
    - key: '` + jqWaitingReason("ErrImagePull") + `'
      operator: In
      values: ['true']
  delay:
    durationMilliseconds: 1500
  next:
    statusTemplate: |
` + indent(podPullFailedTemplate(FailPrefix, "ImagePullBackOff", `Back-off pulling image \"%s\"`, false), 6))

	// Without a kubelet nobody finishes a graceful deletion; this lets GC and Job cleanup work.
	stage(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: Exists
  next:
    delete: true
`)
	return b.String()
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// nodeStatusTemplate is the stock node-initialize template, with the Ready condition forced
// to False for NotReady nodes and transition times set to now (it runs on transitions).
func nodeStatusTemplate(ready bool) string {
	cond := `{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}`
	if !ready {
		cond = `{{ range NodeConditions }}
{{ if eq .type "Ready" }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
  message: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady (simulated by the kube-fledged sandbox)"
  reason: KubeletNotReady
  status: "False"
  type: Ready
{{ else }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
{{ end }}`
	}
	return `{{ $now := Now }}
conditions:
` + cond + `
{{ $hasInternalIP := false }}
{{ $hasHostname := false }}
{{ range .status.addresses }}
{{ if eq .type "InternalIP" }}{{ $hasInternalIP = true }}{{ end }}
{{ if eq .type "Hostname" }}{{ $hasHostname = true }}{{ end }}
{{ end }}
{{ if or (not $hasInternalIP) (not $hasHostname) }}
addresses:
{{ if not $hasInternalIP }}
{{ with NodeIP }}
- address: {{ . | Quote }}
  type: InternalIP
{{ end }}
{{ end }}
{{ if not $hasHostname }}
{{ with NodeName }}
- address: {{ . | Quote }}
  type: Hostname
{{ end }}
{{ end }}
{{ end }}
allocatable:
{{ with .status.allocatable }}
{{ YAML . 1 }}
{{ else }}
  cpu: "32"
  memory: 256Gi
  pods: "500"
{{ end }}
capacity:
{{ with .status.capacity }}
{{ YAML . 1 }}
{{ else }}
  cpu: "32"
  memory: 256Gi
  pods: "500"
{{ end }}
{{ $nodeInfo := .status.nodeInfo }}
nodeInfo:
  architecture: {{ or $nodeInfo.architecture "amd64" }}
  bootID: {{ or $nodeInfo.bootID ` + "`\"\"`" + ` }}
  containerRuntimeVersion: {{ or $nodeInfo.containerRuntimeVersion "` + defaultRuntimeVersion + `" }}
  kernelVersion: {{ or $nodeInfo.kernelVersion "6.1.0-sandbox" }}
  kubeletVersion: {{ or $nodeInfo.kubeletVersion "` + kubeletVersion + `" }}
  machineID: {{ or $nodeInfo.machineID ` + "`\"\"`" + ` }}
  operatingSystem: {{ or $nodeInfo.operatingSystem "linux" }}
  osImage: {{ or $nodeInfo.osImage ` + "`\"\"`" + ` }}
  systemUUID: {{ or $nodeInfo.systemUUID ` + "`\"\"`" + ` }}
phase: Running
`
}

// Shared by the pod templates: the IPs kwok allocates, as the stock pod-ready stage does.
const podIPsTemplate = `{{ $hostIPs := NodeIPsWith .spec.nodeName }}
{{ with $hostIPs }}
hostIP: {{ index . 0 | Quote }}
hostIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
{{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
{{ with $podIPs }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
`

// containerIDs are derived from the pod UID so that each stage renders the same ID for the
// same container, like a runtime that keeps its container.
const podReadyTemplate = `{{ $now := Now }}
{{ $uid := or .metadata.uid "" }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
{{ range .spec.readinessGates }}
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: {{ .conditionType | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  imageID: {{ printf "%s@sha256:%s" .image (sha256sum .image) | Quote }}
  containerID: {{ printf "containerd://%s" (sha256sum (print $uid "/" .name)) | Quote }}
  name: {{ .name | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with .spec.initContainers }}
initContainerStatuses:
{{ range . }}
- image: {{ .image | Quote }}
  imageID: {{ printf "%s@sha256:%s" .image (sha256sum .image) | Quote }}
  containerID: {{ printf "containerd://%s" (sha256sum (print $uid "/" .name)) | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  {{ if eq (or .restartPolicy "") "Always" }}
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
  {{ else }}
  started: false
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
  {{ end }}
{{ end }}
{{ end }}
` + podIPsTemplate + `phase: Running
startTime: {{ $now | Quote }}
`

const podCompleteTemplate = `{{ $now := Now }}
{{ $uid := or .metadata.uid "" }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  reason: PodCompleted
  status: "False"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  reason: PodCompleted
  status: "False"
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  imageID: {{ printf "%s@sha256:%s" .image (sha256sum .image) | Quote }}
  containerID: {{ printf "containerd://%s" (sha256sum (print $uid "/" .name)) | Quote }}
  name: {{ .name | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Succeeded
`

// podPullFailedTemplate renders the kubelet's view of a pod one of whose images cannot be
// pulled: init containers run in order, so a failing one blocks the rest with
// PodInitializing; regular containers are started independently, so siblings of a failing
// container run while the pod stays Pending, and in a run-to-completion pod (restartPolicy
// Never, as a Job's) they run and exit 0, as a node pull Job's other images do.
//
// Only the first of these stages assigns IPs: kwok allocates afresh on every call and the
// strategic merge would then append a second IP of the same family, which is invalid.
func podPullFailedTemplate(prefix, reason, messageFormat string, assignIPs bool) string {
	ips := ""
	if assignIPs {
		ips = podIPsTemplate
	}
	msg := `{{ printf "` + messageFormat + `" .image | Quote }}`
	if messageFormat == "" {
		msg = `""`
	}
	return `{{ $now := Now }}
{{ $uid := or .metadata.uid "" }}
{{ $prefix := "` + prefix + `" }}
{{ $never := eq (or .spec.restartPolicy "Always") "Never" }}
{{ $initFailed := false }}
{{ range .spec.initContainers }}{{ if hasPrefix $prefix .image }}{{ $initFailed = true }}{{ end }}{{ end }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  {{ if $initFailed }}
  reason: ContainersNotInitialized
  message: "containers with incomplete status"
  status: "False"
  {{ else }}
  status: "True"
  {{ end }}
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  reason: ContainersNotReady
  message: "containers with unready status"
  status: "False"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  reason: ContainersNotReady
  message: "containers with unready status"
  status: "False"
  type: ContainersReady
{{ $blocked := false }}
{{ with .spec.initContainers }}
initContainerStatuses:
{{ range . }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: {{ not (or $blocked (hasPrefix $prefix .image)) }}
  restartCount: 0
  started: false
  state:
  {{ if $blocked }}
    waiting:
      reason: PodInitializing
  {{ else if hasPrefix $prefix .image }}
    waiting:
      reason: ` + reason + `
      message: ` + msg + `
  {{ $blocked = true }}
  {{ else }}
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
  {{ end }}
{{ end }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  restartCount: 0
  {{ if $initFailed }}
  ready: false
  started: false
  state:
    waiting:
      reason: PodInitializing
  {{ else if hasPrefix $prefix .image }}
  ready: false
  started: false
  state:
    waiting:
      reason: ` + reason + `
      message: ` + msg + `
  {{ else }}
  imageID: {{ printf "%s@sha256:%s" .image (sha256sum .image) | Quote }}
  containerID: {{ printf "containerd://%s" (sha256sum (print $uid "/" .name)) | Quote }}
  {{ if $never }}
  ready: false
  started: false
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
  {{ else }}
  ready: true
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
  {{ end }}
  {{ end }}
{{ end }}
` + ips + `phase: Pending
startTime: {{ or .status.startTime $now | Quote }}
`
}

// podRunFailedTemplate renders a pod one of whose containers exits 1 on start. With
// restartPolicy Never the kubelet gives up: the pod is Failed (an init container failing
// fails the pod too). Otherwise it restarts the container with back-off: CrashLoopBackOff,
// the last run terminated with Error, and the pod Running (or Pending, for an init
// container, which blocks the rest).
const podRunFailedTemplate = `{{ $now := Now }}
{{ $uid := or .metadata.uid "" }}
{{ $pod := printf "%s_%s(%s)" .metadata.name .metadata.namespace $uid }}
{{ $prefix := "` + RunFailPrefix + `" }}
{{ $never := eq (or .spec.restartPolicy "Always") "Never" }}
{{ $initFailed := false }}
{{ range .spec.initContainers }}{{ if hasPrefix $prefix .image }}{{ $initFailed = true }}{{ end }}{{ end }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  {{ if $initFailed }}
  reason: ContainersNotInitialized
  message: "containers with incomplete status"
  status: "False"
  {{ else }}
  status: "True"
  {{ end }}
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  reason: {{ if $never }}PodFailed{{ else }}ContainersNotReady{{ end }}
  status: "False"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  reason: {{ if $never }}PodFailed{{ else }}ContainersNotReady{{ end }}
  status: "False"
  type: ContainersReady
{{ $blocked := false }}
{{ with .spec.initContainers }}
initContainerStatuses:
{{ range . }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  started: false
  {{ if $blocked }}
  ready: false
  restartCount: 0
  state:
    waiting:
      reason: PodInitializing
  {{ else }}
  imageID: {{ printf "%s@sha256:%s" .image (sha256sum .image) | Quote }}
  containerID: {{ printf "containerd://%s" (sha256sum (print $uid "/" .name)) | Quote }}
  {{ if hasPrefix $prefix .image }}
  ready: false
  {{ if $never }}
  restartCount: 0
  state:
    terminated:
      exitCode: 1
      reason: Error
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
  {{ else }}
  restartCount: 1
  lastState:
    terminated:
      exitCode: 1
      reason: Error
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
  state:
    waiting:
      reason: CrashLoopBackOff
      message: {{ printf "back-off 10s restarting failed container=%s pod=%s" .name $pod | Quote }}
  {{ end }}
  {{ $blocked = true }}
  {{ else }}
  ready: true
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
  {{ end }}
  {{ end }}
{{ end }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  {{ if $initFailed }}
  ready: false
  started: false
  restartCount: 0
  state:
    waiting:
      reason: PodInitializing
  {{ else }}
  imageID: {{ printf "%s@sha256:%s" .image (sha256sum .image) | Quote }}
  containerID: {{ printf "containerd://%s" (sha256sum (print $uid "/" .name)) | Quote }}
  {{ if hasPrefix $prefix .image }}
  ready: false
  started: false
  {{ if $never }}
  restartCount: 0
  state:
    terminated:
      exitCode: 1
      reason: Error
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
  {{ else }}
  restartCount: 1
  lastState:
    terminated:
      exitCode: 1
      reason: Error
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
  state:
    waiting:
      reason: CrashLoopBackOff
      message: {{ printf "back-off 10s restarting failed container=%s pod=%s" .name $pod | Quote }}
  {{ end }}
  {{ else if $never }}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
  {{ else }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
  {{ end }}
  {{ end }}
{{ end }}
` + podIPsTemplate + `phase: {{ if $never }}Failed{{ else if $initFailed }}Pending{{ else }}Running{{ end }}
startTime: {{ $now | Quote }}
`
