package security

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/scc"
	"github.com/kubefledged/kube-fledged/test/golden"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// uidRange is a namespace's range as OpenShift writes it.
const (
	uidRange = "1000680000/10000"
	uidFirst = int64(1000680000)
)

// sccAdmit creates, as a dry run, a pod of spec in ns under the SCC
// emulation, with its ServiceAccount made first, and returns the pod as
// admitted.
func sccAdmit(w *world, ns string, meta metav1.ObjectMeta, spec corev1.PodSpec) (*corev1.Pod, error) {
	ctx := context.Background()
	if sa := spec.ServiceAccountName; sa != "" {
		if err := w.admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + rand.String(5), Namespace: ns, Labels: meta.Labels}, Spec: spec}
	return p, w.admin.Create(ctx, p, client.DryRunAll)
}

// runAs is the UID each container of pod runs as, by name.
func runAs(pod *corev1.Pod) map[string]int64 {
	out := map[string]int64{}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		switch {
		case c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil:
			out[c.Name] = *c.SecurityContext.RunAsUser
		case pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsUser != nil:
			out[c.Name] = *pod.Spec.SecurityContext.RunAsUser
		default:
			out[c.Name] = -1
		}
	}
	return out
}

// TestOpenShiftRestrictedV2: under the emulation of OpenShift's SCC
// admission, in a namespace with a UID range that also enforces Pod
// Security restricted, restricted-v2 admits every pod kube-fledged makes
// there (the chart's controller and test pods, the operator's pod, the pull
// Jobs of both granularities), each running in the range; a pull pod with
// the UID it had before namespaces were read is refused. The delete Job
// needs root and the runtime's socket: refused unless its ServiceAccount
// may use privileged, then admitted by that.
func TestOpenShiftRestrictedV2(t *testing.T) {
	w := setup(t)
	e := scc.Start(t, sandbox.Get().Config())
	ns := e.Namespace(t, "scc-", uidRange, map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	})
	inRange := func(g Gomega, pod *corev1.Pod, what string) {
		g.Expect(pod.Annotations).To(HaveKeyWithValue(scc.AnnotationSCC, scc.RestrictedV2), what)
		for c, uid := range runAs(pod) {
			g.Expect(uid).To(Equal(uidFirst), "%s: container %s", what, c)
		}
	}

	t.Run("the chart's pods", func(t *testing.T) {
		g := NewWithT(t)
		for _, kind := range []string{"Deployment", "Pod"} {
			for _, m := range w.chart.Find(kind, "") {
				var meta metav1.ObjectMeta
				var spec corev1.PodSpec
				if kind == "Deployment" {
					d := &appsv1.Deployment{}
					g.Expect(yaml.UnmarshalStrict([]byte(m.Content), d)).To(Succeed())
					meta, spec = d.Spec.Template.ObjectMeta, d.Spec.Template.Spec
				} else {
					p := &corev1.Pod{}
					g.Expect(yaml.UnmarshalStrict([]byte(m.Content), p)).To(Succeed())
					meta, spec = p.ObjectMeta, p.Spec
				}
				what := kind + " " + m.Head.Metadata.Name
				pod, err := sccAdmit(w, ns, meta, spec)
				g.Expect(err).NotTo(HaveOccurred(), what)
				inRange(g, pod, what)
			}
		}
	})

	t.Run("the chart's pods with a UID pinned by values", func(t *testing.T) {
		g := NewWithT(t)
		c, err := golden.LoadChart()
		g.Expect(err).NotTo(HaveOccurred())
		r, err := golden.Render(c, map[string]interface{}{"podSecurityContext": map[string]interface{}{"runAsUser": 65532}})
		g.Expect(err).NotTo(HaveOccurred())
		d := &appsv1.Deployment{}
		g.Expect(yaml.UnmarshalStrict([]byte(r.Find("Deployment", golden.ReleaseName+"-controller")[0].Content), d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.SecurityContext.RunAsUser).To(HaveValue(BeEquivalentTo(65532)), "a value still pins one")
		_, err = sccAdmit(w, ns, d.Spec.Template.ObjectMeta, d.Spec.Template.Spec)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec.securityContext.runAsUser: Invalid value: 65532: must be in the ranges: [1000680000, 1000689999]"))
	})

	t.Run("the operator's pod", func(t *testing.T) {
		g := NewWithT(t)
		raw, err := os.ReadFile(filepath.Join(w.root, "config", "manager", "manager.yaml"))
		g.Expect(err).NotTo(HaveOccurred())
		for _, doc := range strings.Split(string(raw), "\n---") {
			if !strings.Contains(doc, "kind: Deployment") {
				continue
			}
			d := &appsv1.Deployment{}
			g.Expect(yaml.UnmarshalStrict([]byte(doc), d)).To(Succeed())
			pod, err := sccAdmit(w, ns, d.Spec.Template.ObjectMeta, d.Spec.Template.Spec)
			g.Expect(err).NotTo(HaveOccurred())
			inRange(g, pod, "operator")
		}
	})

	t.Run("pull Jobs", func(t *testing.T) {
		g := NewWithT(t)
		nsObj := &corev1.Namespace{}
		g.Expect(w.admin.Get(context.Background(), client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
		user, err := jobs.PullUser(nsObj.Annotations)
		g.Expect(err).NotTo(HaveOccurred())
		opts := jobs.Options{HelperImage: "ghcr.io/kubefledged/kubefledged:v0.11.0", PullPolicy: corev1.PullIfNotPresent, ActiveDeadline: 3600}
		o := owner()
		o.PullUser = user
		byImage, err := jobs.Build(o, work(jobs.Pull, "nginx:1.27", "containerd://1.7.27"), opts)
		g.Expect(err).NotTo(HaveOccurred())
		byNode, err := jobs.BuildNode(o, []jobs.Work{work(jobs.Pull, "nginx:1.27", "containerd://1.7.27"), work(jobs.Pull, "redis:7", "containerd://1.7.27")}, opts)
		g.Expect(err).NotTo(HaveOccurred())
		for what, job := range map[string]*batchv1.Job{"per image": byImage, "per node": byNode} {
			spec := job.Spec.Template.Spec
			spec.ImagePullSecrets = nil
			pod, err := sccAdmit(w, ns, job.Spec.Template.ObjectMeta, spec)
			g.Expect(err).NotTo(HaveOccurred(), what)
			inRange(g, pod, what)
		}

		o.PullUser = 0 // what every pull ran as before
		old, err := jobs.Build(o, work(jobs.Pull, "nginx:1.27", "containerd://1.7.27"), opts)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = sccAdmit(w, ns, old.Spec.Template.ObjectMeta, old.Spec.Template.Spec)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("runAsUser: Invalid value: 65534: must be in the ranges: [1000680000, 1000689999]"))
	})

	t.Run("delete Jobs", func(t *testing.T) {
		g := NewWithT(t)
		plain := e.Namespace(t, "scc-delete-", uidRange, nil)
		opts := jobs.Options{HelperImage: "ghcr.io/kubefledged/kubefledged:v0.11.0", ActiveDeadline: 3600, ServiceAccountName: "deleter"}
		job, err := jobs.Build(owner(), work(jobs.Delete, "nginx:1.27", "containerd://1.7.27"), opts)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = sccAdmit(w, plain, job.Spec.Template.ObjectMeta, job.Spec.Template.Spec)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		for _, want := range []string{`"hostPath": hostPath volumes are not allowed to be used`, "runAsUser: Invalid value: 0", `provider "privileged": Forbidden: not usable`} {
			g.Expect(err.Error()).To(ContainSubstring(want))
		}
		scc.GrantPrivileged(t, w.admin, plain, "deleter")
		g.Eventually(func(g Gomega) {
			pod, err := sccAdmit(w, plain, job.Spec.Template.ObjectMeta, job.Spec.Template.Spec)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pod.Annotations).To(HaveKeyWithValue(scc.AnnotationSCC, scc.Privileged))
			g.Expect(runAs(pod)).To(Equal(map[string]int64{"delete": 0}))
		}).WithTimeout(framework.ClusterTimeout).Should(Succeed())
	})
}
