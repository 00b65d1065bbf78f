package scc

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestDecisions(t *testing.T) {
	const first = 1000680000
	ranged := Input{UIDRange: "1000680000/10000", HasUIDRange: true}
	granted := ranged
	granted.MayPrivilege = true
	pod := func(change func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", Image: "helper"}},
				Containers:     []corev1.Container{{Name: "main", Image: "app"}, {Name: "side", Image: "app"}},
			},
		}
		if change != nil {
			change(p)
		}
		return p
	}
	containerUser := func(uid int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for i := range p.Spec.Containers {
				p.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To(uid)}
			}
			for i := range p.Spec.InitContainers {
				p.Spec.InitContainers[i].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To(uid)}
			}
		}
	}
	hostPath := func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "sock", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/run/containerd/containerd.sock"}}}}
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		in   Input
		// scc is the constraint that admits it, "" a refusal that says
		// every one of refusal.
		scc     string
		refusal []string
		// users are the UIDs of the init container, then the others,
		// after the mutating phase; nil: as given.
		users []int64
		// validates says whether the mutated pod passes the validating
		// phase as it is.
		validates bool
	}{
		{name: "no UID anywhere: the first of the range", pod: pod(nil), in: ranged, scc: RestrictedV2,
			users: []int64{first, first, first}, validates: true},
		{name: "a UID in range is kept", pod: pod(containerUser(first + 5)), in: ranged, scc: RestrictedV2,
			users: []int64{first + 5, first + 5, first + 5}, validates: true},
		{name: "the pod's UID in range is inherited, not overwritten", pod: pod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](first + 9999)}
		}), in: ranged, scc: RestrictedV2, validates: true},
		{name: "the old fixed pull UID", pod: pod(containerUser(65534)), in: ranged,
			refusal: []string{`provider "restricted-v2": spec.initContainers[0].securityContext.runAsUser: Invalid value: 65534: must be in the ranges: [1000680000, 1000689999]`,
				`spec.containers[1].securityContext.runAsUser: Invalid value: 65534`, `provider "privileged": Forbidden: not usable by user or serviceaccount`}},
		{name: "the old fixed controller UID, pod-wide", pod: pod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532)}
		}), in: ranged, refusal: []string{"spec.securityContext.runAsUser: Invalid value: 65532", "spec.containers[0].securityContext.runAsUser: Invalid value: 65532"}},
		{name: "one past the range", pod: pod(containerUser(first + 10000)), in: ranged, refusal: []string{"Invalid value: 1000690000: must be in the ranges"}},
		{name: "root", pod: pod(containerUser(0)), in: ranged, refusal: []string{"runAsUser: Invalid value: 0: must be in the ranges"}},
		{name: "root, allowed privileged", pod: pod(containerUser(0)), in: granted, scc: Privileged, users: []int64{0, 0, 0}, validates: true},
		{name: "hostPath", pod: pod(hostPath), in: ranged, refusal: []string{`spec.volumes[0]: Invalid value: "hostPath": hostPath volumes are not allowed to be used`}},
		{name: "hostPath, allowed privileged", pod: pod(hostPath), in: granted, scc: Privileged, validates: true},
		{name: "emptyDir and projected are fine", pod: pod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "a", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}}
		}), in: ranged, scc: RestrictedV2, validates: true},
		{name: "privileged container", pod: pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}), in: ranged, refusal: []string{"spec.containers[0].securityContext.privileged: Invalid value: true: Privileged containers are not allowed"}},
		{name: "host network and PID", pod: pod(func(p *corev1.Pod) { p.Spec.HostNetwork, p.Spec.HostPID = true, true }), in: ranged,
			refusal: []string{"Host network is not allowed to be used", "Host PID is not allowed to be used"}},
		{name: "host network, allowed privileged", pod: pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), in: granted, scc: Privileged, validates: true},
		{name: "escalation and capabilities", pod: pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true),
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE", "SYS_ADMIN"}}}
		}), in: ranged, refusal: []string{"Allowing privilege escalation for containers is not allowed", `capabilities.add: Invalid value: "SYS_ADMIN"`}},
		{name: "a host port", pod: pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}),
			in: ranged, refusal: []string{"Host ports are not allowed to be used"}},
		{name: "an unconfined seccomp profile", pod: pod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}), in: ranged, refusal: []string{`seccompProfile.type: Invalid value: "Unconfined"`}},
		{name: "a namespace without a range", pod: pod(nil), in: Input{}, refusal: []string{"unable to find annotation openshift.io/sa.scc.uid-range"}},
		{name: "a namespace without a range, allowed privileged", pod: pod(nil), in: Input{MayPrivilege: true}, scc: Privileged, validates: true},
		{name: "a range that cannot be read", pod: pod(nil), in: Input{UIDRange: "65534", HasUIDRange: true}, refusal: []string{"no / or - in it"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			before := c.pod.DeepCopy()
			d := Mutate(c.pod, c.in)
			g.Expect(c.pod).To(Equal(before), "the pod given is left alone")
			if c.scc == "" {
				g.Expect(d.SCC).To(BeEmpty())
				g.Expect(d.Refusal).To(HavePrefix("unable to validate against any security context constraint: ["))
				for _, want := range c.refusal {
					g.Expect(d.Refusal).To(ContainSubstring(want))
				}
				g.Expect(Validate(c.pod, c.in).Refusal).NotTo(BeEmpty(), "refused by the validating phase too")
				return
			}
			g.Expect(d.Refusal).To(BeEmpty())
			g.Expect(d.SCC).To(Equal(c.scc))
			g.Expect(d.Pod.Annotations).To(HaveKeyWithValue(AnnotationSCC, c.scc))
			if c.users != nil {
				var got []int64
				for _, ct := range append(d.Pod.Spec.InitContainers, d.Pod.Spec.Containers...) {
					g.Expect(ct.SecurityContext).NotTo(BeNil(), ct.Name)
					got = append(got, ptr.Deref(ct.SecurityContext.RunAsUser, -1))
				}
				g.Expect(got).To(Equal(c.users))
			}
			v := Validate(d.Pod, c.in)
			if c.validates {
				g.Expect(v.Refusal).To(BeEmpty())
				g.Expect(v.SCC).To(Equal(c.scc))
			}
		})
	}
}

// The validating phase gives no UID: a pod that reaches it with none (a
// mutating webhook after ours removed it) is refused, as is one moved out of
// range after the mutating phase admitted it.
func TestValidateDoesNotMutate(t *testing.T) {
	g := NewWithT(t)
	in := Input{UIDRange: "2000/100", HasUIDRange: true}
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	g.Expect(Validate(p, in).Refusal).To(ContainSubstring("spec.containers[0].securityContext.runAsUser: Required value"))
	m := Mutate(p, in)
	g.Expect(Validate(m.Pod, in).Refusal).To(BeEmpty())
	m.Pod.Spec.Containers[0].SecurityContext.RunAsUser = ptr.To[int64](2100)
	g.Expect(Validate(m.Pod, in).Refusal).To(ContainSubstring("Invalid value: 2100: must be in the ranges: [2000, 2099]"))
}
