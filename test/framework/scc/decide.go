// Package scc plays, on the sandbox, what OpenShift's SecurityContextConstraints
// admission does to pods with its two stock constraints that matter to us:
// restricted-v2, which every ServiceAccount may use, and privileged, which only
// those granted it may. A mutating and a validating admission webhook, served in
// the test process over TLS on loopback, call the pure decisions of this file:
// which constraint admits a pod, the UID it is given, and what a refusal says.
// docs/openshift.md says what the emulation leaves out.
package scc

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// The constraints emulated, by the names OpenShift gives them, and the
// annotation in which it records on a pod the one that admitted it.
const (
	RestrictedV2    = "restricted-v2"
	Privileged      = "privileged"
	AnnotationSCC   = "openshift.io/scc"
	privilegedGroup = "security.openshift.io"
	sccResource     = "securitycontextconstraints"
)

// restrictedVolumes are the volume types restricted-v2 allows; hostPath is
// the one that matters, since it is the host's file system.
var restrictedVolumes = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}

// Input is what admission knows of a pod besides the pod: its namespace's
// UID range annotation, as written (absent: ok false), and whether the
// pod's ServiceAccount may use the privileged constraint.
type Input struct {
	UIDRange     string
	HasUIDRange  bool
	MayPrivilege bool
}

// Decision is the constraint that admitted a pod and the pod as it then is,
// or the refusal.
type Decision struct {
	SCC     string
	Pod     *corev1.Pod
	Refusal string
}

// Mutate is the mutating phase: restricted-v2 first, as OpenShift tries the
// most restrictive constraint first, filling in what it defaults (the UID,
// when neither the pod nor a container names one); then privileged, if the
// ServiceAccount may use it, which admits the pod as it is.
func Mutate(pod *corev1.Pod, in Input) Decision {
	return decide(pod, in, true)
}

// Validate is the validating phase: the pod as the mutating webhooks left
// it must pass, unchanged, a constraint it may use. A mutating webhook that
// ran after ours and moved a UID out of range is caught here, as OpenShift's
// second look catches it.
func Validate(pod *corev1.Pod, in Input) Decision {
	return decide(pod, in, false)
}

func decide(pod *corev1.Pod, in Input, mutate bool) Decision {
	out := pod.DeepCopy()
	var why []string
	r, err := rangeOf(in)
	if err != nil {
		why = append(why, err.Error())
	} else if errs := restricted(out, r, mutate); len(errs) > 0 {
		why = append(why, errs...)
	} else {
		if mutate {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[AnnotationSCC] = RestrictedV2
		}
		return Decision{SCC: RestrictedV2, Pod: out}
	}
	restrictedWhy := fmt.Sprintf("provider %q: %s", RestrictedV2, strings.Join(why, ", "))
	if in.MayPrivilege {
		out = pod.DeepCopy()
		if mutate {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[AnnotationSCC] = Privileged
		}
		return Decision{SCC: Privileged, Pod: out}
	}
	return Decision{Refusal: fmt.Sprintf("unable to validate against any security context constraint: [%s, provider %q: Forbidden: not usable by user or serviceaccount]",
		restrictedWhy, Privileged)}
}

func rangeOf(in Input) (jobs.UIDRange, error) {
	if !in.HasUIDRange {
		return jobs.UIDRange{}, fmt.Errorf("unable to find annotation %s", jobs.AnnotationUIDRange)
	}
	return jobs.ParseUIDRange(in.UIDRange)
}

// restricted checks pod against restricted-v2, first filling in, when
// mutate, the UID of every container that names none (the pod's when it
// names one, else the first of the range, MustRunAsRange's choice). It
// returns why the pod does not pass, as OpenShift words it, field by field.
func restricted(pod *corev1.Pod, r jobs.UIDRange, mutate bool) []string {
	var why []string
	spec := &pod.Spec
	if spec.HostNetwork {
		why = append(why, "spec.securityContext.hostNetwork: Invalid value: true: Host network is not allowed to be used")
	}
	if spec.HostPID {
		why = append(why, "spec.securityContext.hostPID: Invalid value: true: Host PID is not allowed to be used")
	}
	if spec.HostIPC {
		why = append(why, "spec.securityContext.hostIPC: Invalid value: true: Host IPC is not allowed to be used")
	}
	for i, v := range spec.Volumes {
		if t := volumeType(v); !slices.Contains(restrictedVolumes, t) {
			why = append(why, fmt.Sprintf("spec.volumes[%d]: Invalid value: %q: %s volumes are not allowed to be used", i, t, t))
		}
	}
	var podUser *int64
	if sc := spec.SecurityContext; sc != nil {
		podUser = sc.RunAsUser
		if podUser != nil && !r.Contains(*podUser) {
			why = append(why, fmt.Sprintf("spec.securityContext.runAsUser: Invalid value: %d: must be in the ranges: %s", *podUser, r))
		}
		if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			why = append(why, fmt.Sprintf("spec.securityContext.seccompProfile.type: Invalid value: %q: runtime/default is the only profile allowed", sc.SeccompProfile.Type))
		}
	}
	each := func(field string, cs []corev1.Container) {
		for i := range cs {
			c := &cs[i]
			at := fmt.Sprintf("spec.%s[%d]", field, i)
			if c.SecurityContext == nil {
				c.SecurityContext = &corev1.SecurityContext{}
			}
			sc := c.SecurityContext
			user := sc.RunAsUser
			if user == nil {
				user = podUser
			}
			switch {
			case user == nil && mutate:
				sc.RunAsUser = ptr.To(r.First)
			case user == nil:
				why = append(why, fmt.Sprintf("%s.securityContext.runAsUser: Required value: restricted-v2 gives every container a UID", at))
			case !r.Contains(*user):
				why = append(why, fmt.Sprintf("%s.securityContext.runAsUser: Invalid value: %d: must be in the ranges: %s", at, *user, r))
			}
			if ptr.Deref(sc.Privileged, false) {
				why = append(why, at+".securityContext.privileged: Invalid value: true: Privileged containers are not allowed")
			}
			if ptr.Deref(sc.AllowPrivilegeEscalation, false) {
				why = append(why, at+".securityContext.allowPrivilegeEscalation: Invalid value: true: Allowing privilege escalation for containers is not allowed")
			}
			if sc.Capabilities != nil {
				for _, cap := range sc.Capabilities.Add {
					if cap != "NET_BIND_SERVICE" {
						why = append(why, fmt.Sprintf("%s.securityContext.capabilities.add: Invalid value: %q: capability may not be added", at, cap))
					}
				}
			}
			if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				why = append(why, fmt.Sprintf("%s.securityContext.seccompProfile.type: Invalid value: %q: runtime/default is the only profile allowed", at, sc.SeccompProfile.Type))
			}
			for _, p := range c.Ports {
				if p.HostPort != 0 {
					why = append(why, fmt.Sprintf("%s.ports: Invalid value: %d: Host ports are not allowed to be used", at, p.HostPort))
				}
			}
		}
	}
	each("initContainers", spec.InitContainers)
	each("containers", spec.Containers)
	return why
}

// volumeType is a volume's source as the SCC's volumes list names it.
func volumeType(v corev1.Volume) string {
	s := v.VolumeSource
	switch {
	case s.HostPath != nil:
		return "hostPath"
	case s.EmptyDir != nil:
		return "emptyDir"
	case s.Secret != nil:
		return "secret"
	case s.ConfigMap != nil:
		return "configMap"
	case s.Projected != nil:
		return "projected"
	case s.DownwardAPI != nil:
		return "downwardAPI"
	case s.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case s.CSI != nil:
		return "csi"
	case s.Ephemeral != nil:
		return "ephemeral"
	}
	return "other"
}
