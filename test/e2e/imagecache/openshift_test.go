package imagecache_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/scc"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// TestOpenShiftCreateAndRefresh: in a namespace that OpenShift gave a UID
// range, under the emulation of its SCC admission and with Pod Security
// restricted enforced too, a create and a refresh that has pulls to do both
// succeed: every pull pod is admitted by restricted-v2 and runs as the
// range's first UID. Before the controller read the range, its pulls ran as
// 65534, restricted-v2 refused their pods, and every pull ended NoPod.
func TestOpenShiftCreateAndRefresh(t *testing.T) {
	g := NewWithT(t)
	env(t)
	const first = int64(1000680000)
	e := scc.Start(t, sandbox.Get().Config())
	ns := e.Namespace(t, "e2e-scc-", "1000680000/10000", map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	})
	for _, n := range allNodes() {
		g.Expect(sandbox.Get().SetNodeImages(context.Background(), n, nil)).To(Succeed())
	}
	pods := watchPods(t, ns)
	rec := framework.RecordJobs(t, kube, ns, nil)
	runController(t, nil)
	key := client.ObjectKey{Namespace: ns, Name: "web"}

	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "web", list("nginx:1.21", "redis:7")))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Failures).To(BeEmpty())
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	rec.Await(g, ConsistOf(append(each("pull", "nginx:1.21", allNodes()...), each("pull", "redis:7", allNodes()...)...)))

	// A node that lost the images gets them again, by pods admitted the
	// same way.
	framework.WaitNodesReport(g, k8s, allNodes(), "docker.io/library/nginx:1.21", "docker.io/library/redis:7")
	g.Expect(sandbox.Get().SetNodeImages(context.Background(), "sandbox-node-1", nil)).To(Succeed())
	c = refreshAfterLoss(g, key)
	g.Expect(c.Status.Failures).To(BeEmpty())
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	rec.Await(g, ConsistOf(each("pull", "nginx:1.21", "sandbox-node-1")[0], each("pull", "redis:7", "sandbox-node-1")[0]))

	want := 2*nodes + 2 // a pod per (image, node)
	if perNode() {
		want = nodes + 1 // a pod per node
	}
	seen := pods(g, want)
	for _, p := range seen {
		g.Expect(p.Annotations).To(HaveKeyWithValue(scc.AnnotationSCC, scc.RestrictedV2), p.Name)
		for _, ct := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			g.Expect(ct.SecurityContext.RunAsUser).To(HaveValue(Equal(first)), "pod %s container %s", p.Name, ct.Name)
		}
	}
}

// watchPods records the pull pods created in ns, as admitted (an informer:
// a bare watch ends for good when the API server drops it). What it returns
// waits until the watch has delivered want pods, the pull pods of the
// operations the test saw end: the watch can trail the status the test read.
func watchPods(t *testing.T, ns string) func(g Gomega, want int) []corev1.Pod {
	t.Helper()
	var mu sync.Mutex
	byName := map[string]corev1.Pod{}
	pods := kube.CoreV1().Pods(ns)
	framework.InformTest(t, kube, pods.List, pods.Watch, jobs.LabelKind+"="+string(jobs.Pull), &corev1.Pod{}, func(typ watch.EventType, p *corev1.Pod, _ bool) {
		if typ == watch.Added {
			mu.Lock()
			byName[p.Name] = *p
			mu.Unlock()
		}
	})
	seen := func() []corev1.Pod {
		mu.Lock()
		defer mu.Unlock()
		var out []corev1.Pod
		for _, p := range byName {
			out = append(out, p)
		}
		return out
	}
	return func(g Gomega, want int) []corev1.Pod {
		g.Eventually(seen).WithTimeout(framework.ClusterTimeout).WithPolling(100*time.Millisecond).Should(HaveLen(want), "the pull pods of the create and of the refresh")
		return seen()
	}
}

// TestOpenShiftPurge: under the emulation of SCC admission, a purge's
// delete Jobs, which run in the controller's namespace as their own
// ServiceAccount, are admitted only once that ServiceAccount may use the
// privileged SCC, as the chart and the bundle grant it: without the grant
// no pod is made and the purge fails on every node; with it, it succeeds.
func TestOpenShiftPurge(t *testing.T) {
	g := NewWithT(t)
	env(t)
	e := scc.Start(t, sandbox.Get().Config())
	ns := e.Namespace(t, "e2e-scc-", "1000680000/10000", map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	})
	controllerNS := e.Namespace(t, "e2e-scc-controller-", "1000690000/10000", nil)
	const deleter = "kubefledged-delete"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: controllerNS, Name: deleter}, AutomountServiceAccountToken: ptr.To(false)}
	g.Expect(k8s.Create(context.Background(), sa)).To(Succeed())
	for _, n := range allNodes() {
		g.Expect(sandbox.Get().SetNodeImages(context.Background(), n, nil)).To(Succeed())
	}
	runController(t, func(o *commands.ControllerOptions) {
		o.DeleteJobNamespace, o.DeleteJobServiceAccount = controllerNS, deleter
	})
	key := client.ObjectKey{Namespace: ns, Name: "purged"}

	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, key.Name, list("nginx:1.21")))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	framework.WaitNodesReport(g, k8s, allNodes(), "docker.io/library/nginx:1.21")

	t1 := framework.Annotate(g, k8s, key, v1alpha2.PurgeAnnotation)
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCachePurge, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed), "no grant, no delete pod")
	g.Expect(c.Status.Failures["nginx:1.21"]).To(HaveLen(nodes))

	scc.GrantPrivileged(t, k8s, controllerNS, deleter)
	t2 := framework.Annotate(g, k8s, key, v1alpha2.PurgeAnnotation)
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCachePurge, t2, opTimeout)
	g.Expect(c.Status.Failures).To(BeEmpty())
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
}
