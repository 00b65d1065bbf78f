package imagecache_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// TestUnsupportedArchSkipped: a node whose kubernetes.io/arch our image
// holds no binary for (internal/platform) gets no Job, whose pod could never
// start there; it is skipped as UnsupportedArch, named in the status and in
// the Ready condition, while nodes of the architectures the image holds get
// the image. A purge leaves it out too: it never got our images.
func TestUnsupportedArchSkipped(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	pool, sel := nodePool(t, g, "arch",
		sandbox.NodeSpec{Name: "amd64", Labels: map[string]string{corev1.LabelArchStable: "amd64"}},
		sandbox.NodeSpec{Name: "arm64", Labels: map[string]string{corev1.LabelArchStable: "arm64"}},
		sandbox.NodeSpec{Name: "riscv64", Labels: map[string]string{corev1.LabelArchStable: "riscv64"}},
	)
	rec := framework.RecordCacheJobs(t, kube, ns)
	runController(t, nil)
	key := client.ObjectKey{Namespace: ns, Name: "arches"}
	skipped := v1alpha2.SkippedNodes{Reason: v1alpha2.SkipUnsupportedArch, Count: 1, Nodes: []string{pool + "-riscv64"}}

	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, key.Name, withSelector(sel, "busybox:arch")))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	rec.Await(g, ConsistOf("pull busybox:arch "+pool+"-amd64", "pull busybox:arch "+pool+"-arm64"))
	g.Expect(c.Status.SkippedNodes).To(ConsistOf(skipped))
	g.Expect(c.Status.Counts.Desired).To(Equal(int32(2)))
	g.Expect(c.Status.Counts.Skipped).To(Equal(int32(1)))
	ready := meta.FindStatusCondition(c.Status.Conditions, v1alpha2.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(v1alpha2.ReadyReasonNodesSkipped))
	g.Expect(ready.Message).To(ContainSubstring("1 UnsupportedArch (" + pool + "-riscv64)"))
	framework.WaitNodesReport(g, k8s, []string{pool + "-amd64", pool + "-arm64"}, "docker.io/library/busybox:arch")

	t1 := framework.Annotate(g, k8s, key, v1alpha2.PurgeAnnotation)
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCachePurge, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	rec.Await(g, ConsistOf("delete busybox:arch "+pool+"-amd64", "delete busybox:arch "+pool+"-arm64"))
	g.Expect(c.Status.SkippedNodes).To(ConsistOf(skipped))
	g.Expect(rec.Take()).To(BeEmpty())
}
