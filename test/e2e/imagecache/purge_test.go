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

// TestPurgeReachesEveryNode: a purge deletes the images from cordoned nodes
// too (they still hold them); a NotReady node cannot be reached, so it is a
// failure, never a "succesfully deleted"; a node that is not Linux never got
// our images (our helpers are Linux binaries) and is skipped, with the
// reason in the status. Delete Jobs run in the controller's namespace, so
// they do not carry the cache's pull secrets, which live in the cache's:
// the pull secrets of their ServiceAccount open a private mirror.
func TestPurgeReachesEveryNode(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	pool, sel := nodePool(t, g, "purge", mixedNodes(
		sandbox.NodeSpec{Name: "windows", Labels: map[string]string{corev1.LabelOSStable: "windows"}},
	)...)
	rec := framework.RecordCacheJobs(t, kube, ns)
	runController(t, nil)
	key := client.ObjectKey{Namespace: ns, Name: "purged"}
	cache := newCache(ns, key.Name, withSelector(sel, "busybox:1.36"))
	cache.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "mirror-cred"}}

	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), cache)).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	rec.Await(g, ConsistOf("pull busybox:1.36 "+pool+"-ok"))
	g.Expect(c.Status.SkippedNodes).To(ConsistOf(
		v1alpha2.SkippedNodes{Reason: v1alpha2.SkipCordoned, Count: 1, Nodes: []string{pool + "-cordoned"}},
		v1alpha2.SkippedNodes{Reason: v1alpha2.SkipNotReady, Count: 1, Nodes: []string{pool + "-notready"}},
		v1alpha2.SkippedNodes{Reason: v1alpha2.SkipNotLinux, Count: 1, Nodes: []string{pool + "-windows"}},
	))

	t1 := framework.Annotate(g, k8s, key, v1alpha2.PurgeAnnotation)
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCachePurge, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect(c.Status.Message).To(Equal(`Image deletion failed for some images. Please see "failures" section`))
	g.Expect(c.Status.Failures["busybox:1.36"]).To(HaveLen(1))
	g.Expect(c.Status.Failures["busybox:1.36"][0].Node).To(Equal(pool + "-notready"))
	g.Expect(c.Status.Failures["busybox:1.36"][0].Reason).To(Equal("NodeNotReady"))
	g.Expect(c.Status.SkippedNodes).To(ConsistOf(v1alpha2.SkippedNodes{Reason: v1alpha2.SkipNotLinux, Count: 1, Nodes: []string{pool + "-windows"}}))
	deletes := rec.Await(g, ConsistOf("delete busybox:1.36 "+pool+"-ok", "delete busybox:1.36 "+pool+"-cordoned"))
	for _, j := range deletes {
		pod := j.Spec.Template.Spec
		g.Expect(j.Namespace).To(Equal(controllerNamespace), j.Name)
		g.Expect(pod.ImagePullSecrets).To(BeEmpty(), j.Name)
		g.Expect(pod.Tolerations).To(ConsistOf(corev1.Toleration{Operator: corev1.TolerationOpExists}), j.Name)
	}

	// A list that selects only Windows nodes can pull nothing: a node
	// matched, so not NoImagesPulledOrDeleted; Failed, and not Ready,
	// with the node named in the condition.
	t2 := framework.Tick()
	windowsOnly := map[string]string{"pool": pool, corev1.LabelOSStable: "windows"}
	g.Expect(k8s.Create(context.Background(), newCache(ns, "windows", withSelector(windowsOnly, "busybox:1.36")))).To(Succeed())
	c = framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: "windows"}, v1alpha2.ImageCacheReasonImageCacheCreate, t2, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect(c.Status.Message).To(Equal(v1alpha2.ImageCacheMessageImagePullFailedForSomeImages))
	g.Expect(c.Status.Failures).To(BeEmpty())
	ready := meta.FindStatusCondition(c.Status.Conditions, v1alpha2.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(v1alpha2.ReadyReasonNodesSkipped))
	g.Expect(ready.Message).To(ContainSubstring("1 NotLinux (" + pool + "-windows)"))
	g.Expect(rec.Take()).To(BeEmpty())
}
