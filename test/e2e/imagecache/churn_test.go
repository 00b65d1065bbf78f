package imagecache_test

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// TestNewNodesKeepHistory: a new-node operation adds its results to the
// cache's status instead of replacing them: the failures on the other
// nodes stay, and status and counts describe the whole cache.
func TestNewNodesKeepHistory(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	pool, sel := nodePool(t, g, "history")
	runController(t, nil) // deadline 8s
	key := client.ObjectKey{Namespace: ns, Name: "history"}
	bad := sandbox.FailPrefix + "gone:1"

	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, key.Name, withSelector(sel, "nginx:1.27", bad)))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect(failedNodes(c, bad)).To(ConsistOf(pool+"-a", pool+"-b"))

	t1 := framework.Tick()
	addNodes(t, g, sandbox.NodeSpec{Name: pool + "-c", Labels: sel})
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheNewNodes, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect(c.Status.Message).To(Equal(v1alpha2.ImageCacheMessageImagePullFailedForSomeImages))
	g.Expect(failedNodes(c, bad)).To(ConsistOf(pool+"-a", pool+"-b", pool+"-c"), "the earlier failures stay")
	g.Expect(c.Status.Counts.Desired).To(Equal(int32(6)), "counts are the whole cache's")
	g.Expect(c.Status.Counts.Failed).To(Equal(int32(3)))
	g.Expect(c.Status.Progress).To(Equal("3/6"))
}

func failedNodes(c *v1alpha2.ImageCache, image string) []string {
	var out []string
	for _, f := range c.Status.Failures[image] {
		out = append(out, f.Node)
	}
	return out
}

// TestChurnDoesNotPostponeRefresh: a node that is cordoned and uncordoned
// again and again makes a new-node operation each time; the periodic
// refresh still comes on time, counted from the last refresh.
func TestChurnDoesNotPostponeRefresh(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	pool, sel := nodePool(t, g, "churn")
	runController(t, func(o *commands.ControllerOptions) { o.RefreshEvery.Value = 6 * time.Second })
	key := client.ObjectKey{Namespace: ns, Name: "churn"}
	statuses := watchStatuses(t, ns, key.Name)
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, key.Name, withSelector(sel, "nginx:1.27")))).To(Succeed())
	framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)

	// Flap a node every second, far more often than the period, until both a new-node
	// operation and the periodic refresh have run. A refresh postponed by each new-node
	// operation never comes while the node flaps; one counted from the last refresh comes
	// about a period in, or later on a loaded machine, which a fixed stretch of flapping
	// could not tell from never.
	flapping := pool + "-b"
	deadline := time.Now().Add(framework.ClusterTimeout)
	for cordon := true; ; cordon = !cordon {
		setCordon(g, flapping, cordon)
		time.Sleep(time.Second)
		c := &v1alpha2.ImageCache{}
		g.Expect(k8s.Get(context.Background(), key, c)).To(Succeed())
		var reasons []string
		for _, s := range statuses(c) {
			if s.Status == v1alpha2.ImageCacheActionStatusProcessing {
				reasons = append(reasons, s.Reason)
			}
		}
		if slices.Contains(reasons, v1alpha2.ImageCacheReasonImageCacheNewNodes) && slices.Contains(reasons, v1alpha2.ImageCacheReasonImageCacheRefresh) {
			break
		}
		g.Expect(time.Now().Before(deadline)).To(BeTrue(), "after %s of flapping, the operations were %v", framework.ClusterTimeout, reasons)
	}
	setCordon(g, flapping, false)
}

func setCordon(g Gomega, node string, cordon bool) {
	n := &corev1.Node{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: node}, n)).To(Succeed())
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Unschedulable = cordon
	g.Expect(k8s.Patch(context.Background(), n, patch)).To(Succeed())
}

// TestRetainKeepsOtherNodesJobs: with the retain policy a Job stays until
// its own (image, node) runs again: a new node's operation leaves the Jobs
// kept on the other nodes alone, and a refresh replaces only the Jobs of
// the pairs it runs again.
func TestRetainKeepsOtherNodesJobs(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	pool, sel := nodePool(t, g, "kept")
	runController(t, func(o *commands.ControllerOptions) { o.Retention = jobs.Retain })
	key := client.ObjectKey{Namespace: ns, Name: "kept"}
	keptOn := func() map[string]string {
		out := map[string]string{}
		for _, j := range jobsOf(g, ns, client.MatchingLabels{jobs.LabelImageCache: key.Name}) {
			out[j.Annotations[jobs.AnnotationNode]] = j.Name
		}
		return out
	}

	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, key.Name, withSelector(sel, "nginx:1.27")))).To(Succeed())
	framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	before := keptOn()
	g.Expect(before).To(HaveLen(2))

	t1 := framework.Tick()
	addNodes(t, g, sandbox.NodeSpec{Name: pool + "-c", Labels: sel})
	framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheNewNodes, t1, opTimeout)
	after := keptOn()
	g.Expect(after).To(HaveLen(3))
	g.Expect(after[pool+"-a"]).To(Equal(before[pool+"-a"]), "the new node's operation kept the other nodes' Jobs")
	g.Expect(after[pool+"-b"]).To(Equal(before[pool+"-b"]))

	// Node a lost the image: a refresh pulls it there again and replaces
	// that pair's Job; the pairs it skips (present) keep theirs.
	framework.WaitNodesReport(g, k8s, []string{pool + "-b", pool + "-c"}, "docker.io/library/nginx:1.27")
	g.Expect(sandbox.Get().SetNodeImages(context.Background(), pool+"-a", nil)).To(Succeed())
	t2 := framework.Annotate(g, k8s, key, v1alpha2.RefreshAnnotation)
	framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheRefresh, t2, opTimeout)
	g.Eventually(keptOn).WithTimeout(framework.ClusterTimeout).Should(SatisfyAll(
		HaveLen(3),
		HaveKeyWithValue(pool+"-b", after[pool+"-b"]),
		HaveKeyWithValue(pool+"-c", after[pool+"-c"]),
		Not(HaveKeyWithValue(pool+"-a", after[pool+"-a"])),
	))
}
