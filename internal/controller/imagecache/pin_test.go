package imagecache

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

func runtime(v string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Status.NodeInfo.ContainerRuntimeVersion = v }
}

func pinning(pin *bool, images ...string) *v1alpha2.ImageCache {
	c := imageCache("c", images...)
	c.Spec.Pin = pin
	return c
}

// pinJobs are the cache's pin Jobs in the cluster, by node.
func (h *harness) pinJobs(cache string) map[string]batchv1.Job {
	out := map[string]batchv1.Job{}
	for _, j := range h.jobs(cache) {
		if j.Labels[jobs.LabelKind] == string(jobs.Pin) {
			out[j.Annotations[jobs.AnnotationNode]] = j
		}
	}
	return out
}

// Whether a cache pins is its spec.pin, else the controller's flag.
func TestPinsOrNot(t *testing.T) {
	tests := []struct {
		name string
		pin  *bool
		flag bool
		want bool
	}{
		{"spec.pin true", ptr.To(true), false, true},
		{"spec.pin false wins over the flag", ptr.To(false), true, false},
		{"unset takes the flag", nil, true, true},
		{"unset, flag off", nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, Config{PinImages: tt.flag, Jobs: jobs.Options{DeleteNamespace: controllerNS}}, node("a"), pinning(tt.pin, "nginx:1.25"))
			h.settleDown("c")
			h.completeAll("c")
			h.settleDown("c")
			g.Expect(h.pinJobs("c")).To(HaveLen(map[bool]int{true: 1, false: 0}[tt.want]))
			h.completeAll("c")
			h.settleDown("c")
			st := h.status("c")
			g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
			if !tt.want {
				g.Expect(st.Pins).To(BeNil())
				g.Expect(meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionPinned)).To(BeNil())
				return
			}
			g.Expect(st.Pins.Images).To(Equal([]v1alpha2.PinnedImage{{Image: "nginx:1.25", Nodes: 1}}))
			g.Expect(st.Counts.Pinned).To(Equal(int32(1)))
			g.Expect(condition(st, v1alpha2.ConditionPinned).Status).To(Equal(metav1.ConditionTrue))
		})
	}
}

// After the pulls, one pin Job per node that can pin, in the controller's
// namespace; the operation ends once they settle. A node that is not
// containerd 1.7 or newer gets no Job and PinUnsupported; a failed pin
// leaves the operation Succeeded (the images are cached) but the Pinned
// condition False; the next operation pins only what is not pinned yet.
func TestPinPhase(t *testing.T) {
	const img = "nginx:1.25"
	g := NewWithT(t)
	h := newHarness(t, Config{Jobs: jobs.Options{DeleteNamespace: controllerNS}},
		node("a"), node("b"), node("crio", runtime("cri-o://1.30.0")), node("old", runtime("containerd://1.6.9")),
		pinning(ptr.To(true), img, "redis:7"))
	h.settleDown("c")
	h.completeAll("c")
	h.settleDown("c")
	g.Expect(h.status("c").Status).To(Equal(v1alpha2.ImageCacheActionStatusProcessing), "the pins are not settled yet")
	pins := h.pinJobs("c")
	g.Expect(pins).To(HaveLen(2))
	g.Expect(pins).To(HaveKey("a"))
	g.Expect(pins).To(HaveKey("b"))
	for _, j := range pins {
		g.Expect(j.Namespace).To(Equal(controllerNS))
		g.Expect(j.Spec.Template.Spec.Containers[0].Command).To(ContainElements("pin", "--owner=uid-c", "--image="+img, "--image=redis:7"))
	}
	a, b := pins["a"], pins["b"]
	h.finishJob(&a, batchv1.JobComplete, "", "")
	h.finishJob(&b, batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
	h.settleDown("c")

	st := h.status("c")
	g.Expect(outcomeOf(st)).To(Equal(outcome{v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheReasonImageCacheCreate,
		v1alpha2.ImageCacheMessageImagesPulledSuccessfully}))
	g.Expect(st.Pins.Images).To(Equal([]v1alpha2.PinnedImage{{Image: img, Nodes: 1}, {Image: "redis:7", Nodes: 1}}))
	g.Expect(st.Pins.Unsupported).To(Equal([]v1alpha2.SkippedNodes{{Reason: v1alpha2.PinUnsupported, Count: 2, Nodes: []string{"crio", "old"}}}))
	g.Expect(st.Pins.Failures).To(HaveLen(2))
	g.Expect(st.Pins.Failures[0]).To(Equal(v1alpha2.PinFailure{Image: img, Node: "b",
		Message: "BackoffLimitExceeded: Job has reached the specified backoff limit"}))
	g.Expect(st.Counts.Pinned).To(Equal(int32(2)))
	c := condition(st, v1alpha2.ConditionPinned)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(v1alpha2.PinnedReasonPinFailed))
	g.Expect(h.pinJobs("c")).To(BeEmpty(), "settled pin Jobs are deleted")
	g.Expect(h.events()).To(ContainElement(HavePrefix("Warning PinFailed 2 (image, node) pairs could not be pinned")))

	// The nodes report the images: a refresh pulls nothing, and pins
	// again only on b.
	h.report(img, "redis:7")
	h.annotate("c", v1alpha2.RefreshAnnotation, "")
	h.settleDown("c")
	pins = h.pinJobs("c")
	g.Expect(pins).To(HaveLen(1))
	g.Expect(pins).To(HaveKey("b"))
	b = pins["b"]
	h.finishJob(&b, batchv1.JobComplete, "", "")
	h.settleDown("c")
	st = h.status("c")
	g.Expect(st.Pins.Images).To(Equal([]v1alpha2.PinnedImage{{Image: img, Nodes: 2}, {Image: "redis:7", Nodes: 2}}))
	g.Expect(st.Pins.Failures).To(BeEmpty())
	g.Expect(st.Counts.Pinned).To(Equal(int32(4)))
	g.Expect(condition(st, v1alpha2.ConditionPinned).Status).To(Equal(metav1.ConditionTrue))
}

// A purge of a cache that pins releases its pins with the delete Jobs
// (cri-rmi --unpin-owner) and clears what its status says of them.
func TestPurgeUnpins(t *testing.T) {
	const img = "nginx:1.25"
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage, Jobs: jobs.Options{DeleteNamespace: controllerNS}}, node("a"), pinning(ptr.To(true), img))
	h.settleDown("c")
	h.completeAll("c")
	h.settleDown("c")
	h.completeAll("c")
	h.settleDown("c")
	g.Expect(h.status("c").Counts.Pinned).To(Equal(int32(1)))

	h.annotate("c", v1alpha2.PurgeAnnotation, "")
	h.settleDown("c")
	del := h.job("c", img, "a")
	g.Expect(del.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--unpin-owner=uid-c"))
	h.completeAll("c")
	h.settleDown("c")
	st := h.status("c")
	g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(st.Pins).To(BeNil())
	g.Expect(st.Counts.Pinned).To(BeZero())
	g.Expect(meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionPinned)).To(BeNil())
	g.Expect(h.pinJobs("c")).To(BeEmpty(), "a purge pins nothing")
}

// unpinJobs are the cache's unpin Jobs in the cluster.
func (h *harness) unpinJobs(cache string) []batchv1.Job {
	var out []batchv1.Job
	for _, j := range h.jobs(cache) {
		if j.Labels[jobs.LabelKind] == string(jobs.Unpin) {
			out = append(out, j)
		}
	}
	return out
}

// pinned runs a pinning cache's create to its end, every Job succeeding.
func (h *harness) pinned(name string) {
	h.t.Helper()
	for i := 0; i < 20 && (h.running(name) || h.status(name).Pins == nil); i++ {
		h.settleDown(name)
		h.completeAll(name)
		h.settleDown(name)
	}
	if h.running(name) || h.status(name).Pins == nil {
		h.t.Fatalf("%s did not end pinned", name)
	}
}

// Deleting a cache that pins releases its pins with an unpin Job per node
// that can pin before the finalizer lets it go; Jobs that never finish
// (a node gone) hold it no longer than the deadline, and an Event says so.
// A reconcile that reads it from an informer not yet caught up with the
// finalizer's removal runs no unpin Job again.
func TestDeletingUnpins(t *testing.T) {
	tests := []struct {
		name      string
		finish    func(h *harness, j batchv1.Job)
		wantEvent string
	}{
		{"unpinned", func(h *harness, j batchv1.Job) { h.finishJob(&j, batchv1.JobComplete, "", "") },
			"Normal Unpinned the ImageCache is being deleted: its images are unpinned on every node (1 unpin Jobs)"},
		{"never finishes", func(h *harness, _ batchv1.Job) { h.advance(2 * time.Minute) },
			"Warning UnpinIncomplete the ImageCache is being deleted: of 1 unpin Jobs, 1 did not finish before the deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, Config{Jobs: jobs.Options{DeleteNamespace: controllerNS}},
				node("a"), node("crio", runtime("cri-o://1.30.0")), pinning(ptr.To(true), "nginx:1.25"))
			h.pinned("c")
			c := h.cache("c")
			g.Expect(c.Finalizers).To(ConsistOf(v1alpha2.UnpinFinalizer))
			g.Expect(h.api.Delete(h.ctx, c)).To(Succeed())
			h.events()
			h.settleDown("c")
			unpin := h.unpinJobs("c")
			g.Expect(unpin).To(HaveLen(1))
			g.Expect(unpin[0].Annotations).To(HaveKeyWithValue(jobs.AnnotationNode, "a"))
			g.Expect(unpin[0].Namespace).To(Equal(controllerNS))
			g.Expect(unpin[0].Spec.Template.Spec.Containers[0].Command).To(ContainElements("unpin", "--owner=uid-c", "--image=nginx:1.25"))
			g.Expect(h.api.Get(h.ctx, client.ObjectKeyFromObject(c), &v1alpha2.ImageCache{})).To(Succeed(), "held by the finalizer")

			going := h.cache("c")
			tt.finish(h, unpin[0])
			_, err := h.step("c")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(apierrors.IsNotFound(h.api.Get(h.ctx, client.ObjectKeyFromObject(c), &v1alpha2.ImageCache{}))).To(BeTrue(), "the finalizer let go")
			// The informer may still show it going, with the finalizer; its
			// Jobs deleted, it must not unpin again.
			h.readStale(going)
			_, err = h.step("c")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(h.unpinJobs("c")).To(BeEmpty(), "a stale read of the deleted cache ran its unpin Jobs again")
			// Once it is gone, each reconcile sweeps its Jobs elsewhere:
			// step, not settleDown.
			for i := 0; i < 3; i++ {
				_, err := h.step("c")
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(apierrors.IsNotFound(h.api.Get(h.ctx, client.ObjectKeyFromObject(c), &v1alpha2.ImageCache{}))).To(BeTrue())
			g.Expect(h.events()).To(ContainElement(HavePrefix(tt.wantEvent)))
			g.Expect(h.unpinJobs("c")).To(BeEmpty())
			g.Expect(h.r.pinned.isUnpinned(c.UID)).To(BeFalse(), "forgotten once read gone")
		})
	}
}

// Deleting a cache that pins on many nodes runs its unpin Jobs at most
// --max-concurrent-jobs at once, and a create the API server refuses or
// keeps failing ends the unpinning (at that Job's deadline) instead of
// holding the cache for ever.
func TestDeletingUnpinsPaced(t *testing.T) {
	isUnpin := func(obj client.Object) bool { return obj.GetLabels()[jobs.LabelKind] == string(jobs.Unpin) }
	refused := func(obj client.Object) error {
		if isUnpin(obj) {
			return quotaExceeded(obj)
		}
		return nil
	}
	timesOut := func(obj client.Object) error {
		if isUnpin(obj) {
			return serverTimeout(obj)
		}
		return nil
	}
	tests := []struct {
		name      string
		fault     *fault
		wantEvent string
	}{
		{name: "the cap binds",
			wantEvent: "Normal Unpinned the ImageCache is being deleted: its images are unpinned on every node (3 unpin Jobs)"},
		{name: "a create fails once", fault: &fault{verb: "create", resource: "jobs", n: 1, err: timesOut},
			wantEvent: "Normal Unpinned the ImageCache is being deleted: its images are unpinned on every node (3 unpin Jobs)"},
		{name: "creates refused", fault: &fault{verb: "create", resource: "jobs", err: refused},
			wantEvent: "Warning UnpinIncomplete the ImageCache is being deleted: of 3 unpin Jobs, 0 did not finish before the deadline and 3 images failed to unpin"},
		{name: "creates keep failing", fault: &fault{verb: "create", resource: "jobs", err: timesOut},
			wantEvent: "Warning UnpinIncomplete the ImageCache is being deleted: of 3 unpin Jobs, 3 did not finish before the deadline and 0 images failed to unpin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, Config{MaxJobs: 1, Jobs: jobs.Options{DeleteNamespace: controllerNS}},
				node("a"), node("b"), node("x"), pinning(ptr.To(true), "nginx:1.25"))
			h.pinned("c")
			c := h.cache("c")
			g.Expect(h.api.Delete(h.ctx, c)).To(Succeed())
			if tt.fault != nil {
				h.inject(*tt.fault)
			}
			h.events()
			finished := map[string]bool{}
			for i := 0; i < 40 && h.api.Get(h.ctx, client.ObjectKeyFromObject(c), &v1alpha2.ImageCache{}) == nil; i++ {
				_, err := h.step("c")
				g.Expect(err).NotTo(HaveOccurred())
				var open []batchv1.Job
				for _, j := range h.unpinJobs("c") {
					if !finished[j.Name] {
						open = append(open, j)
					}
				}
				g.Expect(len(open)).To(BeNumerically("<=", 1), "unpin Jobs running at once")
				for _, j := range open {
					h.finishJob(&j, batchv1.JobComplete, "", "")
					finished[j.Name] = true
				}
				h.advance(10 * time.Second)
			}
			g.Expect(apierrors.IsNotFound(h.api.Get(h.ctx, client.ObjectKeyFromObject(c), &v1alpha2.ImageCache{}))).To(BeTrue(), "the finalizer let go")
			if tt.fault == nil || tt.fault.n > 0 {
				g.Expect(finished).To(HaveLen(3))
			}
			g.Expect(h.events()).To(ContainElement(HavePrefix(tt.wantEvent)))
		})
	}
}

// A cache that does not pin never gets the finalizer: deleting it is as
// before.
func TestNoFinalizerWithoutPins(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{}, node("a"), pinning(nil, "nginx:1.25"))
	h.succeed("c")
	g.Expect(h.cache("c").Finalizers).To(BeEmpty())
}

// A cache that stops pinning unpins, then drops status.pins, the Pinned
// condition and the finalizer.
func TestStopPinning(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Jobs: jobs.Options{DeleteNamespace: controllerNS}}, node("a"), pinning(ptr.To(true), "nginx:1.25"))
	h.pinned("c")
	h.edit("c", func(c *v1alpha2.ImageCache) { c.Spec.Pin = ptr.To(false) })
	h.settleDown("c")
	unpin := h.unpinJobs("c")
	g.Expect(unpin).To(HaveLen(1))
	h.finishJob(&unpin[0], batchv1.JobComplete, "", "")
	h.settleDown("c")
	c := h.cache("c")
	g.Expect(c.Status.Pins).To(BeNil())
	g.Expect(c.Status.Counts.Pinned).To(BeZero())
	g.Expect(meta.FindStatusCondition(c.Status.Conditions, v1alpha2.ConditionPinned)).To(BeNil())
	g.Expect(c.Finalizers).To(BeEmpty())
	g.Expect(h.unpinJobs("c")).To(BeEmpty())
	g.Expect(h.events()).To(ContainElement(HavePrefix("Normal Unpinned the ImageCache no longer pins")))
}

// A pair the operation pulled again is pinned again, whatever this process
// pinned before: the node had lost the image, and its new copy has no pin.
// A new-node operation pins its new nodes only.
func TestPinAgainAfterPull(t *testing.T) {
	const img = "nginx:1.25"
	g := NewWithT(t)
	h := newHarness(t, Config{Jobs: jobs.Options{DeleteNamespace: controllerNS}}, node("a"), node("b"), pinning(ptr.To(true), img))
	h.pinned("c")
	g.Expect(h.status("c").Counts.Pinned).To(Equal(int32(2)))

	h.editNode("b", holding(img))
	h.annotate("c", v1alpha2.RefreshAnnotation, "")
	h.settleDown("c")
	h.completeAll("c")
	h.settleDown("c")
	g.Expect(h.pinJobs("c")).To(HaveLen(1))
	g.Expect(h.pinJobs("c")).To(HaveKey("a"), "pulled again on a, present on b")
	h.completeAll("c")
	h.settleDown("c")

	h.addNode(node("new", h.joinedNow))
	h.settleDown("c")
	h.completeAll("c")
	h.settleDown("c")
	g.Expect(h.pinJobs("c")).To(HaveLen(1))
	g.Expect(h.pinJobs("c")).To(HaveKey("new"))
	h.completeAll("c")
	h.settleDown("c")
	st := h.status("c")
	g.Expect(st.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheNewNodes))
	g.Expect(st.Counts.Pinned).To(Equal(int32(3)))
}

// An update that drops an image deletes it with the cache's pin released
// (--unpin-owner), and its status no longer counts it.
func TestUpdateDropUnpins(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage, Jobs: jobs.Options{DeleteNamespace: controllerNS}}, node("a"), pinning(ptr.To(true), "nginx:1.25", "redis:7"))
	h.pinned("c")
	g.Expect(h.status("c").Counts.Pinned).To(Equal(int32(2)))
	h.edit("c", func(c *v1alpha2.ImageCache) { c.Spec.CacheSpec[0].Images = []string{"nginx:1.25"} })
	h.settleDown("c")
	del := h.job("c", "redis:7", "a")
	g.Expect(del.Labels).To(HaveKeyWithValue(jobs.LabelKind, string(jobs.Delete)))
	g.Expect(del.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--unpin-owner=uid-c"))
	for i := 0; i < 3; i++ {
		h.completeAll("c")
		h.settleDown("c")
	}
	st := h.status("c")
	g.Expect(st.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheUpdate))
	g.Expect(st.Pins.Images).To(Equal([]v1alpha2.PinnedImage{{Image: "nginx:1.25", Nodes: 1}}))
	g.Expect(st.Counts.Pinned).To(Equal(int32(1)))
}

// An image the cache wants no more whose pin no delete Job released (the
// delete failed here; fromPods' dropped images are never deleted) gets an
// unpin Job, so that the kubelet may collect it.
func TestUnwantedPinReleased(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage, Jobs: jobs.Options{DeleteNamespace: controllerNS}}, node("a"), pinning(ptr.To(true), "nginx:1.25", "redis:7"))
	h.pinned("c")
	h.report("nginx:1.25", "redis:7")
	h.edit("c", func(c *v1alpha2.ImageCache) { c.Spec.CacheSpec[0].Images = []string{"nginx:1.25"} })
	h.settleDown("c")
	h.fail("c", "redis:7", "a")
	h.settleDown("c")
	unpin := h.unpinJobs("c")
	g.Expect(unpin).To(HaveLen(1))
	g.Expect(unpin[0].Annotations).To(HaveKeyWithValue(jobs.AnnotationNode, "a"))
	g.Expect(unpin[0].Spec.Template.Spec.Containers[0].Command).To(ContainElements("unpin", "--owner=uid-c", "--image=redis:7"))
	g.Expect(h.pinJobs("c")).To(BeEmpty(), "nginx is pinned already")
	h.completeAll("c")
	h.settleDown("c")
	st := h.status("c")
	g.Expect(st.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheUpdate))
	g.Expect(st.Pins.Images).To(Equal([]v1alpha2.PinnedImage{{Image: "nginx:1.25", Nodes: 1}}))
	g.Expect(h.unpinJobs("c")).To(BeEmpty())
}
