package framework

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Tick waits for the next whole second and returns it. Status times have a resolution of
// one second, so an operation triggered after Tick has a startTime no earlier than it, and
// the one before an earlier startTime: Final tells them apart by it.
func Tick() time.Time {
	next := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next))
	return next
}

// Final waits up to timeout for the cache to finish an operation with the given reason that
// started at or after `after` (see Tick), and returns the cache as it then is.
func Final(g Gomega, c client.Client, key client.ObjectKey, reason string, after time.Time, timeout time.Duration) *v1alpha2.ImageCache {
	ic := &v1alpha2.ImageCache{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), key, ic)).To(Succeed())
		g.Expect(ic.Status.Status).NotTo(BeElementOf(v1alpha2.ImageCacheActionStatusProcessing, v1alpha2.ImageCacheActionStatus("")))
		g.Expect(ic.Status.Reason).To(Equal(reason))
		g.Expect(ic.Status.CompletionTime).NotTo(BeNil())
		g.Expect(ic.Status.StartTime.Time.Before(after.Truncate(time.Second))).To(BeFalse(), "started before %s", after)
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	return ic
}

// Annotate asks for an operation on the cache by its annotation (e.g. purge or refresh),
// at a Tick, and returns that tick for Final.
func Annotate(g Gomega, c client.Client, key client.ObjectKey, annotation string) time.Time {
	at := Tick()
	ic := &v1alpha2.ImageCache{}
	g.Expect(c.Get(context.Background(), key, ic)).To(Succeed())
	patch := client.MergeFrom(ic.DeepCopy())
	if ic.Annotations == nil {
		ic.Annotations = map[string]string{}
	}
	ic.Annotations[annotation] = ""
	g.Expect(c.Patch(context.Background(), ic, patch)).To(Succeed())
	return at
}

// Namespace creates a namespace named prefix plus a random suffix, with the given labels
// set to "true", and returns its name. Tests share the sandbox, so each works in its own.
func Namespace(t testing.TB, c client.Client, prefix string, labels ...string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + rand.String(6), Labels: map[string]string{}}}
	for _, l := range labels {
		ns.Labels[l] = "true"
	}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// CacheOnNode is a cache whose one list selects a single node by its hostname label: a real
// node, beside kwok nodes that must get no Job.
func CacheOnNode(ns, name, node string, images ...string) *v1alpha2.ImageCache {
	return &v1alpha2.ImageCache{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{
			Images:       images,
			NodeSelector: map[string]string{corev1.LabelHostname: node},
		}}},
	}
}

// WaitNodesReport waits until every named node lists every image in its status, as its
// kubelet reports what its runtime holds (every 10 s or so, with an image list it refreshes
// on a period of its own). An update or refresh pulls what the nodes do not report, so a
// test that expects it to pull only what a list gained waits for this first.
func WaitNodesReport(g Gomega, c client.Client, nodeNames []string, images ...string) {
	g.Eventually(func(g Gomega) {
		for _, name := range nodeNames {
			n := &corev1.Node{}
			g.Expect(c.Get(context.Background(), client.ObjectKey{Name: name}, n)).To(Succeed())
			var listed []string
			for _, img := range n.Status.Images {
				listed = append(listed, img.Names...)
			}
			g.Expect(listed).To(ContainElements(images), name)
		}
	}).WithTimeout(ClusterTimeout).Should(Succeed())
}
