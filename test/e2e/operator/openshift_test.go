package operator_test

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/helmop"
	"github.com/kubefledged/kube-fledged/test/framework/scc"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// TestHelmInstallUnderSCC: `helm install` with the chart's defaults into a
// namespace OpenShift gave a UID range, under the emulation of its SCC
// admission: the ReplicaSet's controller pod is admitted by restricted-v2
// and runs as the range's first UID. With the UID the chart used to pin,
// the pod was refused and the Deployment never had one. The pod runs on a
// kwok node, so this is admission only: no process starts as that UID.
func TestHelmInstallUnderSCC(t *testing.T) {
	g := NewWithT(t)
	k8s = newClient(t)
	g.Expect(framework.InstallCRDs(context.Background(), sandbox.Get().Config(), framework.ImageCacheCRD)).To(Succeed())
	e := scc.Start(t, sandbox.Get().Config())
	ns := e.Namespace(t, "op-scc-", "1000680000/10000", nil)

	chrt, err := loader.Load(filepath.Join(repo, "helm-charts", "kubefledged"))
	g.Expect(err).NotTo(HaveOccurred())
	install := action.NewInstall(helmop.HelmConfig(t, ns))
	install.ReleaseName = "scc"
	install.Namespace = ns
	install.Timeout = timeout
	// The webhook's registration would outlive the test cluster-wide and
	// call a controller that never runs on a kwok node.
	_, err = install.Run(chrt, helmValues(t, "webhook.enabled=false", "tests.enabled=false"))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _, _ = action.NewUninstall(helmop.HelmConfig(t, ns)).Run("scc") })

	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(context.Background(), pods, client.InNamespace(ns),
			client.MatchingLabels{"app.kubernetes.io/component": "controller", "app.kubernetes.io/instance": "scc"})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty(), "no controller pod: %s", replicaSetEvents(g, ns))
		for _, p := range pods.Items {
			g.Expect(p.Annotations).To(HaveKeyWithValue(scc.AnnotationSCC, scc.RestrictedV2), p.Name)
			for _, c := range p.Spec.Containers {
				g.Expect(c.SecurityContext.RunAsUser).To(HaveValue(BeEquivalentTo(1000680000)), "%s container %s", p.Name, c.Name)
			}
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// replicaSetEvents are the warnings of the namespace, where a ReplicaSet
// says why it made no pod.
func replicaSetEvents(g Gomega, ns string) []string {
	l := &corev1.EventList{}
	g.Expect(k8s.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range l.Items {
		if e.Type == corev1.EventTypeWarning {
			out = append(out, e.InvolvedObject.Kind+" "+e.Reason+": "+e.Message)
		}
	}
	return out
}
