package imagecache_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// TestRestrictedNamespace: a cache in a namespace that enforces Pod Security
// restricted is created, updated (dropping an image), refreshed and purged,
// each succeeding. The pulls run there, restricted-compliant; the deletes,
// which need the runtime socket and root, run in the controller's
// namespace. When the delete Jobs ran in the cache's namespace, Pod
// Security refused their pods, and the update and the purge ended Failed
// with NoPod on every node.
func TestRestrictedNamespace(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	restricted := &corev1.Namespace{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: ns}, restricted)).To(Succeed())
	restricted.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	restricted.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	g.Expect(k8s.Update(context.Background(), restricted)).To(Succeed())
	rec := framework.RecordCacheJobs(t, kube, ns)
	runController(t, nil)
	key := client.ObjectKey{Namespace: ns, Name: "restricted"}
	succeeded := func(c *v1alpha2.ImageCache) {
		t.Helper()
		g.Expect(c.Status.Failures).To(BeEmpty())
		g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	}

	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, key.Name, list("nginx:1.21", "redis:7")))).To(Succeed())
	succeeded(framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout))
	for _, j := range rec.Await(g, ConsistOf(append(each("pull", "nginx:1.21", allNodes()...), each("pull", "redis:7", allNodes()...)...))) {
		g.Expect(j.Namespace).To(Equal(ns), "a pull runs in the cache's namespace")
	}

	framework.WaitNodesReport(g, k8s, allNodes(), "docker.io/library/nginx:1.21", "docker.io/library/redis:7")
	t1 := framework.Tick()
	c := &v1alpha2.ImageCache{}
	g.Expect(k8s.Get(context.Background(), key, c)).To(Succeed())
	c.Spec.CacheSpec[0].Images = []string{"nginx:1.21"}
	g.Expect(k8s.Update(context.Background(), c)).To(Succeed())
	succeeded(framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheUpdate, t1, opTimeout))
	for _, j := range rec.Await(g, ConsistOf(each("delete", "redis:7", allNodes()...))) {
		g.Expect(j.Namespace).To(Equal(controllerNamespace), "a delete runs in the controller's namespace")
	}

	// A node that lost the image gets it again.
	g.Expect(sandbox.Get().SetNodeImages(context.Background(), "sandbox-node-1", nil)).To(Succeed())
	succeeded(refreshAfterLoss(g, key))
	rec.Await(g, ConsistOf(each("pull", "nginx:1.21", "sandbox-node-1")))

	t3 := framework.Annotate(g, k8s, key, v1alpha2.PurgeAnnotation)
	succeeded(framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCachePurge, t3, opTimeout))
	rec.Await(g, ConsistOf(each("delete", "nginx:1.21", allNodes()...)))
}

// TestDeleteNamespaceRefusedAtStart: a controller whose delete Jobs could
// never run (their namespace is missing, or enforces a Pod Security level
// that refuses them) stops at start with the reason, instead of starting
// healthy and failing every purge later with NoPod.
func TestDeleteNamespaceRefusedAtStart(t *testing.T) {
	ns := namespace(t)
	g := NewWithT(t)
	restricted := &corev1.Namespace{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: ns}, restricted)).To(Succeed())
	restricted.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	g.Expect(k8s.Update(context.Background(), restricted)).To(Succeed())
	for _, tc := range []struct{ namespace, wantErr string }{
		{ns + "-missing", `--delete-job-namespace "` + ns + `-missing": no such namespace`},
		{ns, `--delete-job-namespace "` + ns + `" enforces Pod Security "restricted"`},
	} {
		t.Run(tc.namespace, func(t *testing.T) {
			g := NewWithT(t)
			o := controllerOptions(t, func(o *commands.ControllerOptions) { o.DeleteJobNamespace = tc.namespace })
			// It returns before its manager starts: a deadline only a hang reaches.
			ctx, cancel := context.WithTimeout(context.Background(), framework.ClusterTimeout)
			defer cancel()
			err := commands.RunController(ctx, sandbox.Get().Config(), o)
			g.Expect(ctx.Err()).NotTo(HaveOccurred(), "the controller ran on instead of stopping")
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}
