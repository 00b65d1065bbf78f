package realnode_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode"
)

// TestPurgeKeepsWhatTheNodeNeeds: whoever may write an ImageCache may purge
// it, and its images may be ones other workloads run. On the real node a
// purge removes the image nothing uses, and keeps the one a running pod
// uses and the runtime's sandbox image (containerd pins it), each named in
// status.kept with why; the purge still succeeds, as the delete of what was
// safe to remove, and the pod runs on.
func TestPurgeKeepsWhatTheNodeNeeds(t *testing.T) {
	framework.NeedRealNode(t)
	g := NewWithT(t)
	ctx := context.Background()
	runController(t, jobs.RetainNone, jobs.PerNode)
	ns := framework.Namespace(t, k8s, "keep-")
	used, idle := webImage(t, g, "keep-used:v1"), webImage(t, g, "keep-idle:v1")
	sandbox := node.Registry() + "/" + realnode.PauseRepo
	g.Expect(k8s.Create(ctx, realWeb(ns, used))).To(Succeed())
	pod := runningPod(g, ns, used)

	key := client.ObjectKey{Namespace: ns, Name: "keep"}
	t0 := framework.Tick()
	g.Expect(k8s.Create(ctx, framework.CacheOnNode(ns, "keep", node.Name(), used, idle, sandbox))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "failures: %v", c.Status.Failures)
	g.Expect(inRuntime(g, idle)).To(BeTrue())

	t1 := framework.Annotate(g, k8s, key, v1alpha2.PurgeAnnotation)
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCachePurge, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "failures: %v", c.Status.Failures)
	g.Expect(c.Status.Message).To(Equal(v1alpha2.ImageCacheMessageImagesDeletedSuccessfully))
	g.Expect(c.Status.Failures).To(BeEmpty())
	g.Expect(c.Status.Kept).To(HaveLen(2), "kept: %v", c.Status.Kept)
	g.Expect(c.Status.Kept[used]).To(ConsistOf(And(
		HaveField("Node", node.Name()), HaveField("Reason", v1alpha2.KeptReasonInUse), HaveField("Message", ContainSubstring(ns+"/"+pod+"/web")))))
	g.Expect(c.Status.Kept[sandbox]).To(ConsistOf(And(
		HaveField("Node", node.Name()), HaveField("Reason", v1alpha2.KeptReasonPinned), HaveField("Message", ContainSubstring("pinned on this node")))))
	g.Expect(inRuntime(g, idle)).To(BeFalse(), "the image nothing uses is still in containerd")
	g.Expect(inRuntime(g, used)).To(BeTrue(), "the image a running pod uses was removed")
	g.Expect(inRuntime(g, sandbox)).To(BeTrue(), "the sandbox image was removed")
	g.Expect(runningPod(g, ns, used)).To(Equal(pod))
	t.Logf("kept: %v", c.Status.Kept)
}
