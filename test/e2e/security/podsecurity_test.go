package security

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/golden"
)

// psaNamespace creates a namespace whose Pod Security admission enforces
// level, with the ServiceAccounts the pods below name.
func psaNamespace(t *testing.T, w *world, level string, sas ...string) string {
	t.Helper()
	ns := "psa-" + level + "-" + rand.String(4)
	ctx := context.Background()
	if err := w.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         level,
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}); err != nil {
		t.Fatal(err)
	}
	for _, sa := range sas {
		if err := w.admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// admit dry-runs the creation of a pod with spec in ns: Pod Security
// admission answers exactly as it would for the real pod.
func admit(w *world, ns string, meta metav1.ObjectMeta, spec corev1.PodSpec) error {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + rand.String(5), Namespace: ns, Labels: meta.Labels}, Spec: spec}
	return w.admin.Create(context.Background(), p, client.DryRunAll)
}

// restrictedContainer checks the container-level part of the restricted
// profile that the issue names, field by field, so a failure says which.
func restrictedContainer(g Gomega, c corev1.Container, pod corev1.PodSpec, what string) {
	sc := c.SecurityContext
	g.Expect(sc).NotTo(BeNil(), what)
	nonRoot := sc.RunAsNonRoot
	if nonRoot == nil && pod.SecurityContext != nil {
		nonRoot = pod.SecurityContext.RunAsNonRoot
	}
	g.Expect(nonRoot).To(HaveValue(BeTrue()), "%s: runAsNonRoot", what)
	if sc.RunAsUser != nil {
		g.Expect(*sc.RunAsUser).NotTo(BeZero(), "%s: runAsUser", what)
	}
	g.Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), "%s: readOnlyRootFilesystem", what)
	g.Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), "%s: allowPrivilegeEscalation", what)
	g.Expect(sc.Privileged).To(Or(BeNil(), HaveValue(BeFalse())), "%s: privileged", what)
	g.Expect(sc.Capabilities).NotTo(BeNil(), what)
	g.Expect(sc.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")), "%s: capabilities dropped", what)
	g.Expect(sc.Capabilities.Add).To(BeEmpty(), "%s: capabilities added", what)
	seccomp := sc.SeccompProfile
	if seccomp == nil && pod.SecurityContext != nil {
		seccomp = pod.SecurityContext.SeccompProfile
	}
	g.Expect(seccomp).NotTo(BeNil(), "%s: seccomp", what)
	g.Expect(seccomp.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault), "%s: seccomp", what)
}

func noHostAccess(g Gomega, pod corev1.PodSpec, what string) {
	g.Expect(pod.HostNetwork).To(BeFalse(), "%s: hostNetwork", what)
	g.Expect(pod.HostPID).To(BeFalse(), "%s: hostPID", what)
	g.Expect(pod.HostIPC).To(BeFalse(), "%s: hostIPC", what)
	for _, v := range pod.Volumes {
		g.Expect(v.HostPath).To(BeNil(), "%s: hostPath volume %s", what, v.Name)
	}
}

// TestControllerPodRestricted: the chart's controller pod (with its default
// values) meets the restricted Pod Security profile, checked field by field
// and by the apiserver's own Pod Security admission.
func TestControllerPodRestricted(t *testing.T) {
	w := setup(t)
	g := NewWithT(t)
	dep := w.chart.Find("Deployment", golden.ReleaseName+"-controller")
	g.Expect(dep).To(HaveLen(1))
	d := &appsv1.Deployment{}
	g.Expect(yaml.UnmarshalStrict([]byte(dep[0].Content), d)).To(Succeed())
	pod := d.Spec.Template.Spec
	g.Expect(pod.SecurityContext).NotTo(BeNil())
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	// No UID pinned: the image's numeric USER satisfies runAsNonRoot
	// (test/dockerfile), and OpenShift's restricted-v2 refuses a UID
	// outside the namespace's range (TestOpenShiftRestrictedV2).
	g.Expect(pod.SecurityContext.RunAsUser).To(BeNil(), "runAsUser")
	g.Expect(pod.SecurityContext.RunAsGroup).To(BeNil(), "runAsGroup")
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		restrictedContainer(g, c, pod, "controller container "+c.Name)
		g.Expect(c.SecurityContext.RunAsUser).To(BeNil(), "controller container %s: runAsUser", c.Name)
	}
	noHostAccess(g, pod, "controller pod")
	ns := psaNamespace(t, w, "restricted", pod.ServiceAccountName)
	g.Expect(admit(w, ns, d.Spec.Template.ObjectMeta, pod)).To(Succeed(), "restricted Pod Security admission")
}

// TestOperatorPodRestricted: the same for the operator's Deployment
// (config/manager), which the bundle installs.
func TestOperatorPodRestricted(t *testing.T) {
	w := setup(t)
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(w.root, "config", "manager", "manager.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var d *appsv1.Deployment
	for _, doc := range strings.Split(string(raw), "\n---") {
		if strings.Contains(doc, "kind: Deployment") {
			d = &appsv1.Deployment{}
			g.Expect(yaml.UnmarshalStrict([]byte(doc), d)).To(Succeed())
		}
	}
	g.Expect(d).NotTo(BeNil(), "no Deployment in config/manager/manager.yaml")
	pod := d.Spec.Template.Spec
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		restrictedContainer(g, c, pod, "operator container "+c.Name)
	}
	noHostAccess(g, pod, "operator pod")
	ns := psaNamespace(t, w, "restricted", pod.ServiceAccountName)
	g.Expect(admit(w, ns, d.Spec.Template.ObjectMeta, pod)).To(Succeed(), "restricted Pod Security admission")
}

func owner() jobs.Owner {
	return jobs.Owner{Cache: &v1alpha2.ImageCache{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: types.UID("0b7c3b5e-1111-4222-8333-944445555666")},
		Spec: v1alpha2.ImageCacheSpec{
			CacheSpec:        []v1alpha2.CacheSpecImages{{Images: []string{"nginx:1.27"}}},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}},
		},
	}, Operation: "0123456789"}
}

func work(kind jobs.Kind, image, runtime string) jobs.Work {
	ref, err := images.Parse(image)
	if err != nil {
		panic(err)
	}
	return jobs.Work{Kind: kind, Image: image, Ref: ref, Node: jobs.Node{Name: "node-1", Runtime: runtime}}
}

// TestPullJobs: a pull Job runs the image being cached, which may be
// anyone's; so it runs it restricted, non-root, on a read-only root, with
// no ServiceAccount token unless one is configured, and with nothing of the
// node's.
func TestPullJobs(t *testing.T) {
	w := setup(t)
	g := NewWithT(t)
	opts := jobs.Options{HelperImage: "ghcr.io/kubefledged/kubefledged:v0.11.0", PullPolicy: corev1.PullIfNotPresent, ActiveDeadline: 3600}
	for _, image := range []string{"nginx:1.27", "quay.io/org/app@sha256:" + strings.Repeat("a", 64), "registry.example.com:5000/app"} {
		job, err := jobs.Build(owner(), work(jobs.Pull, image, "containerd://1.7.27"), opts)
		g.Expect(err).NotTo(HaveOccurred())
		pod := job.Spec.Template.Spec
		g.Expect(pod.ServiceAccountName).To(BeEmpty())
		g.Expect(pod.AutomountServiceAccountToken).To(HaveValue(BeFalse()), "no token without --service-account-name")
		g.Expect(pod.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "regcred"}}))
		g.Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
		g.Expect(job.Spec.BackoffLimit).To(HaveValue(BeZero()))
		g.Expect(job.Spec.ActiveDeadlineSeconds).To(HaveValue(BeNumerically(">", 0)), "a Job that outlives the controller still ends")
		for _, c := range append(pod.InitContainers, pod.Containers...) {
			restrictedContainer(g, c, pod, image+": container "+c.Name)
			g.Expect(c.Resources.Limits).To(HaveKey(corev1.ResourceMemory), "%s: memory limit", c.Name)
		}
		noHostAccess(g, pod, image)
		for _, v := range pod.Volumes {
			g.Expect(v.EmptyDir).NotTo(BeNil(), "volume %s", v.Name)
			g.Expect(v.EmptyDir.SizeLimit).NotTo(BeNil(), "volume %s is bounded", v.Name)
		}
		// The cached image only sees the helper, read-only.
		for _, m := range pod.Containers[0].VolumeMounts {
			g.Expect(m.ReadOnly).To(BeTrue(), "mount %s of the image being pulled", m.Name)
		}
		ns := psaNamespace(t, w, "restricted")
		pod.ImagePullSecrets = nil // not in the probe namespace; irrelevant to admission
		g.Expect(admit(w, ns, job.Spec.Template.ObjectMeta, pod)).To(Succeed(), "restricted Pod Security admission of a pull Job")
	}

	opts.ServiceAccountName = "puller"
	job, err := jobs.Build(owner(), work(jobs.Pull, "nginx:1.27", "containerd://1.7.27"), opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.Spec.Template.Spec.ServiceAccountName).To(Equal("puller"))
	g.Expect(job.Spec.Template.Spec.AutomountServiceAccountToken).To(BeNil(), "a configured ServiceAccount decides for itself")
}

// TestDeleteJobs: a delete Job talks to the node's container runtime, which
// is root on the node; it gets the runtime's socket and nothing else of the
// host: no other path, no host network unless asked, no capabilities, no
// privilege escalation, no token. It runs as root only to open the socket,
// so namespaces that enforce the restricted or baseline Pod Security level
// refuse it: it runs in the controller's namespace, labelled privileged
// (docs/security.md).
func TestDeleteJobs(t *testing.T) {
	w := setup(t)
	g := NewWithT(t)
	for runtime, socket := range map[string]string{
		"containerd://1.7.27":    jobs.SocketContainerd,
		"cri-o://1.30.0":         jobs.SocketCRIO,
		"docker://27.0.1":        jobs.SocketCRIDockerd,
		"remote://custom:socket": "/run/custom/cri.sock",
	} {
		opts := jobs.Options{HelperImage: "ghcr.io/kubefledged/kubefledged:v0.11.0", ActiveDeadline: 3600}
		if strings.HasPrefix(runtime, "remote") {
			_, err := jobs.Build(owner(), work(jobs.Delete, "nginx:1.27", runtime), opts)
			g.Expect(err).To(MatchError(ContainSubstring("set --cri-socket-path")), "an unknown runtime without a socket flag")
			opts.CRISocketPath = socket
		}
		job, err := jobs.Build(owner(), work(jobs.Delete, "nginx:1.27", runtime), opts)
		g.Expect(err).NotTo(HaveOccurred())
		pod := job.Spec.Template.Spec
		g.Expect(pod.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
		g.Expect(pod.HostNetwork).To(BeFalse())
		g.Expect(pod.HostPID).To(BeFalse())
		g.Expect(pod.HostIPC).To(BeFalse())
		g.Expect(pod.InitContainers).To(BeEmpty())
		g.Expect(pod.Volumes).To(HaveLen(1), "%s: volumes", runtime)
		v := pod.Volumes[0]
		g.Expect(v.HostPath).NotTo(BeNil())
		g.Expect(v.HostPath.Path).To(Equal(socket), runtime)
		g.Expect(v.HostPath.Type).To(HaveValue(Equal(corev1.HostPathSocket)), "%s: only a socket may be mounted, never a directory put in its place", runtime)
		g.Expect(pod.Containers).To(HaveLen(1))
		c := pod.Containers[0]
		g.Expect(c.VolumeMounts).To(HaveLen(1))
		g.Expect(c.VolumeMounts[0].Name).To(Equal(v.Name))
		g.Expect(c.Image).To(Equal(opts.HelperImage), "only our own helper runs with the socket")
		sc := c.SecurityContext
		g.Expect(sc.Privileged).To(Or(BeNil(), HaveValue(BeFalse())))
		g.Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
		g.Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		g.Expect(sc.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")))
		g.Expect(sc.Capabilities.Add).To(BeEmpty())
		g.Expect(sc.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
		g.Expect(c.Args).To(BeEmpty())
		g.Expect(strings.Join(c.Command, " ")).To(ContainSubstring("--image=nginx:1.27"))
	}

	opts := jobs.Options{HelperImage: "ghcr.io/kubefledged/kubefledged:v0.11.0", ActiveDeadline: 3600, DeleteHostNetwork: true}
	job, err := jobs.Build(owner(), work(jobs.Delete, "nginx:1.27", "containerd://1.7.27"), opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.Spec.Template.Spec.HostNetwork).To(BeTrue(), "--image-delete-job-host-network")

	// What Pod Security admission says of it, level by level.
	opts.DeleteHostNetwork = false
	job, err = jobs.Build(owner(), work(jobs.Delete, "nginx:1.27", "containerd://1.7.27"), opts)
	g.Expect(err).NotTo(HaveOccurred())
	for level, want := range map[string]string{"restricted": "hostPath", "baseline": "hostPath", "privileged": ""} {
		err := admit(w, psaNamespace(t, w, level), job.Spec.Template.ObjectMeta, job.Spec.Template.Spec)
		if want == "" {
			g.Expect(err).NotTo(HaveOccurred(), level)
			continue
		}
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", level, err)
		g.Expect(err.Error()).To(ContainSubstring(want), level)
	}
}
