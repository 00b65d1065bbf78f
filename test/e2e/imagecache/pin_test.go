package imagecache_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// TestPinBookkeeping: with --pin-images a cache that leaves spec.pin unset
// pins. After its pulls, the containerd node gets a pin Job in the
// controller's namespace (kwok completes it without running the helper,
// which counts as every image pinned), the CRI-O node none and
// PinUnsupported; the status counts the pairs pinned. A purge's delete
// Job on the containerd node releases the cache's pins (--unpin-owner),
// and deleting the cache
// runs an unpin Job before its finalizer lets it go.
func TestPinBookkeeping(t *testing.T) {
	const img = "nginx:1.27"
	g := NewWithT(t)
	ns := namespace(t)
	pool, sel := nodePool(t, g, "pin", sandbox.NodeSpec{Name: "ctrd"}, sandbox.NodeSpec{Name: "crio", ContainerRuntimeVersion: "cri-o://1.30.0"})
	rec := framework.RecordCacheJobs(t, kube, ns)
	runController(t, func(o *commands.ControllerOptions) { o.PinImages = true })
	key := client.ObjectKey{Namespace: ns, Name: "pinned"}

	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, key.Name, withSelector(sel, img)))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(c.Finalizers).To(ContainElement(v1alpha2.UnpinFinalizer))
	g.Expect(c.Status.Pins).NotTo(BeNil())
	g.Expect(c.Status.Pins.Images).To(Equal([]v1alpha2.PinnedImage{{Image: img, Nodes: 1}}))
	g.Expect(c.Status.Pins.Unsupported).To(Equal([]v1alpha2.SkippedNodes{{Reason: v1alpha2.PinUnsupported, Count: 1, Nodes: []string{pool + "-crio"}}}))
	g.Expect(c.Status.Counts.Pinned).To(Equal(int32(1)))
	g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha2.ConditionPinned)).To(BeTrue())
	created := rec.Await(g, ConsistOf("pull "+img+" "+pool+"-ctrd", "pull "+img+" "+pool+"-crio", "pin "+img+" "+pool+"-ctrd"))
	for _, j := range created {
		if j.Labels["kubefledged.io/job-kind"] == "pin" {
			g.Expect(j.Namespace).To(Equal(controllerNamespace))
			g.Expect(j.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--owner=" + string(c.UID)))
		}
	}

	t1 := framework.Annotate(g, k8s, key, v1alpha2.PurgeAnnotation)
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCachePurge, t1, opTimeout)
	g.Expect(c.Status.Pins).To(BeNil())
	g.Expect(meta.FindStatusCondition(c.Status.Conditions, v1alpha2.ConditionPinned)).To(BeNil())
	deletes := rec.Await(g, ConsistOf("delete "+img+" "+pool+"-ctrd", "delete "+img+" "+pool+"-crio"))
	for _, j := range deletes {
		unpin := ContainElement("--unpin-owner=" + string(c.UID))
		if j.Annotations["kubefledged.io/node"] == pool+"-crio" {
			// CRI-O holds no pin of ours, and has no API to unpin with.
			unpin = Not(unpin)
		}
		g.Expect(j.Spec.Template.Spec.Containers[0].Command).To(unpin, j.Name)
	}

	g.Expect(k8s.Delete(context.Background(), c)).To(Succeed())
	rec.Await(g, ConsistOf("unpin "+img+" "+pool+"-ctrd"))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), key, &v1alpha2.ImageCache{}))
	}).WithTimeout(opTimeout).Should(BeTrue(), "the finalizer lets the cache go once its unpin Job is done")
	g.Eventually(func(g Gomega) {
		l := &batchv1.JobList{}
		g.Expect(k8s.List(context.Background(), l, client.InNamespace(controllerNamespace),
			client.MatchingLabels{"kubefledged.io/operation": "unpin-" + string(c.UID)})).To(Succeed())
		g.Expect(l.Items).To(BeEmpty())
	}).WithTimeout(opTimeout).Should(Succeed(), "the unpin Jobs are deleted")
}

// TestDeletingUnpinsPaced: deleting a cache pinned on more nodes than
// --max-concurrent-jobs runs at most that many unpin Jobs at once. The second
// controller's unpin Jobs never end (its helper image is one whose pull hangs),
// so a place frees only at a Job's deadline: the third unpin Job is created a
// deadline after the first two, where without the cap all four would be created
// by one look. Once every Job has reached its deadline, the cache goes, with an
// Event that says what may stay pinned.
func TestDeletingUnpinsPaced(t *testing.T) {
	const img = "nginx:1.27"
	const deadline = 20 * time.Second
	g := NewWithT(t)
	ns := namespace(t)
	_, sel := nodePool(t, g, "unpin", sandbox.NodeSpec{Name: "a"}, sandbox.NodeSpec{Name: "b"}, sandbox.NodeSpec{Name: "c"}, sandbox.NodeSpec{Name: "d"})
	rec := framework.RecordCacheJobs(t, kube, ns)
	stop := runController(t, func(o *commands.ControllerOptions) { o.PinImages = true })
	key := client.ObjectKey{Namespace: ns, Name: "unpinned"}
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, key.Name, withSelector(sel, img)))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Counts.Pinned).To(BeEquivalentTo(4))
	stop()

	runController(t, func(o *commands.ControllerOptions) {
		o.PinImages = true
		o.MaxJobs.Value = 2
		o.Deadline.Value = deadline
		o.HelperImage = sandbox.HangPrefix + "kubefledged:e2e"
	})
	g.Expect(k8s.Delete(context.Background(), c)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), key, &v1alpha2.ImageCache{}))
	}).WithTimeout(opTimeout).Should(BeTrue(), "the finalizer lets the cache go once every unpin Job has reached its deadline")
	hasEvent(g, ns, key.Name, corev1.EventTypeWarning, "UnpinIncomplete", "the ImageCache is being deleted: of 4 unpin Jobs, 4 did not finish before the deadline")

	var created []batchv1.Job
	var seen []string
	for _, ev := range rec.Events() {
		if ev.Job.Labels[jobs.LabelKind] == string(jobs.Unpin) {
			seen = append(seen, fmt.Sprintf("%s %s %s %s", ev.At.Format("15:04:05.000"), ev.Type, ev.Job.Name, ev.Job.Annotations[jobs.AnnotationNode]))
			if ev.Type == watch.Added {
				created = append(created, ev.Job)
			}
		}
	}
	g.Expect(created).To(HaveLen(4), "%s", strings.Join(seen, "\n"))
	// Server timestamps, to the whole second; the controller counts the deadline from just
	// before its create, which a loaded API server may answer seconds later: half of it
	// is what no look without the cap comes near.
	gap := created[2].CreationTimestamp.Sub(created[1].CreationTimestamp.Time)
	g.Expect(gap).To(BeNumerically(">=", deadline/2), "the third unpin Job was created %s after the second", gap)
}
