package imagecache

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// An update that gains no image (a pull secret fixed after failures, the
// order of a list) still pulls every pair its nodes do not report, keeps
// the failures in sight until it has retried them, and never ends as if no
// node matched: an update that pulled nothing and said "did not match any
// nodes" with Ready True was a green over nodes that lacked the images.
func TestUpdateRetriesWhatIsMissing(t *testing.T) {
	const (
		nginx = "nginx:1.27"
		redis = "redis:7.2"
	)
	earlier := v1alpha2.NodeReasonMessage{Node: "a", Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}
	reporting := func(images ...string) func(*harness) { return func(h *harness) { h.report(images...) } }
	// asLeft: each node reports what the create pulled there.
	asLeft := func(h *harness) {
		h.editNode("a", holding(redis))
		h.editNode("b", func(n *corev1.Node) { holding(redis)(n); holding(nginx)(n) })
	}
	secret := func(name string) func(*v1alpha2.ImageCache) {
		return func(c *v1alpha2.ImageCache) { c.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: name}} }
	}
	tests := []struct {
		name string
		// world is how the nodes stand after a create in which nginx
		// failed on node a and every other pair succeeded; edit is the
		// user's change then.
		world    func(h *harness)
		edit     func(*v1alpha2.ImageCache)
		wantJobs []string
		// retry settles the update's Jobs.
		retry        func(h *harness)
		want         outcome
		wantFailures map[string]v1alpha2.NodeReasonMessageList
		wantReady    metav1.Condition
	}{{
		name:     "only imagePullSecrets changed, and the retry pulls",
		world:    asLeft,
		edit:     secret("fixed"),
		wantJobs: []string{"pull nginx:1.27 a"},
		retry:    func(h *harness) { h.completeAll("c") },
		want: outcome{v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheReasonImageCacheUpdate,
			v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		wantReady: metav1.Condition{Status: metav1.ConditionTrue, Reason: string(v1alpha2.ImageCacheActionStatusSucceeded)},
	}, {
		name:     "only imagePullSecrets changed, and the retry fails again",
		world:    asLeft,
		edit:     secret("still-wrong"),
		wantJobs: []string{"pull nginx:1.27 a"},
		retry:    func(h *harness) { h.fail("c", nginx, "a") },
		want: outcome{v1alpha2.ImageCacheActionStatusFailed, v1alpha2.ImageCacheReasonImageCacheUpdate,
			v1alpha2.ImageCacheMessageImagePullFailedForSomeImages},
		wantFailures: map[string]v1alpha2.NodeReasonMessageList{nginx: {earlier}},
		wantReady:    metav1.Condition{Status: metav1.ConditionFalse, Reason: string(v1alpha2.ImageCacheActionStatusFailed)},
	}, {
		// b's nginx was collected by its kubelet since; a's redis stays.
		name:     "the order of a list changed; a node lost an image since",
		world:    reporting(redis),
		edit:     func(c *v1alpha2.ImageCache) { c.Spec.CacheSpec[0].Images = []string{redis, nginx} },
		wantJobs: []string{"pull nginx:1.27 a", "pull nginx:1.27 b"},
		retry:    func(h *harness) { h.completeAll("c") },
		want: outcome{v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheReasonImageCacheUpdate,
			v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		wantReady: metav1.Condition{Status: metav1.ConditionTrue, Reason: string(v1alpha2.ImageCacheActionStatusSucceeded)},
	}, {
		name:  "the failed image is on its node now (pulled by hand): nothing to pull, and the failure is over",
		world: reporting(redis, nginx),
		edit:  secret("fixed"),
		retry: func(*harness) {},
		want: outcome{v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheReasonImageCacheUpdate,
			v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		wantReady: metav1.Condition{Status: metav1.ConditionTrue, Reason: string(v1alpha2.ImageCacheActionStatusSucceeded)},
	}, {
		name: "the failed pair's node is cordoned since: not retried, so its failure stays",
		world: func(h *harness) {
			h.editNode("a", func(n *corev1.Node) { cordoned(n); holding(redis)(n) })
			h.editNode("b", func(n *corev1.Node) { holding(redis)(n); holding(nginx)(n) })
		},
		edit:  secret("fixed"),
		retry: func(*harness) {},
		want: outcome{v1alpha2.ImageCacheActionStatusFailed, v1alpha2.ImageCacheReasonImageCacheUpdate,
			v1alpha2.ImageCacheMessageImagePullFailedForSomeImages},
		wantFailures: map[string]v1alpha2.NodeReasonMessageList{nginx: {earlier}},
		wantReady:    metav1.Condition{Status: metav1.ConditionFalse, Reason: string(v1alpha2.ImageCacheActionStatusFailed)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("a"), node("b"), imageCache("c", nginx, redis))
			seen := map[string]bool{}
			h.settleDown("c")
			h.fail("c", nginx, "a")
			h.completeAll("c")
			h.settleDown("c")
			h.newJobs("c", seen)
			g.Expect(h.status("c").Failures).To(Equal(map[string]v1alpha2.NodeReasonMessageList{nginx: {earlier}}))
			tt.world(h)
			h.events()

			h.edit("c", tt.edit)
			h.settleDown("c")

			g.Expect(h.newJobs("c", seen)).To(ConsistOf(tt.wantJobs), "every pair the nodes do not report is pulled")
			if len(tt.wantJobs) > 0 {
				st := h.status("c")
				g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusProcessing))
				g.Expect(st.Failures).To(Equal(map[string]v1alpha2.NodeReasonMessageList{nginx: {earlier}}),
					"the failures stay until the update has retried them")
				g.Expect(condition(st, v1alpha2.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
			}
			tt.retry(h)
			h.settleDown("c")

			g.Expect(h.running("c")).To(BeFalse())
			st := h.status("c")
			g.Expect(outcomeOf(st)).To(Equal(tt.want))
			g.Expect(st.Failures).To(Equal(tt.wantFailures))
			ready := condition(st, v1alpha2.ConditionReady)
			g.Expect(metav1.Condition{Status: ready.Status, Reason: ready.Reason}).To(Equal(tt.wantReady))
		})
	}
}

// Ready is True only when every node a list selects holds every image: a
// node the pulls left out (cordoned, NotReady, not Linux) counts unless it
// reports the images, and the status says which nodes; the original's
// status stays that of the pulls that ran.
func TestReadyOnlyWhenEverySelectedNodeHoldsEveryImage(t *testing.T) {
	const img = "nginx:1.27"
	tests := []struct {
		name      string
		nodes     []*corev1.Node
		settle    func(h *harness)
		want      v1alpha2.ImageCacheActionStatus
		wantReady metav1.Condition
		// then changes the world after the first operation, and
		// wantThen is Ready once the cache has settled again.
		then     func(h *harness)
		wantThen metav1.ConditionStatus
	}{{
		name:      "every node pulled",
		nodes:     []*corev1.Node{node("a"), node("b")},
		settle:    func(h *harness) { h.completeAll("c") },
		want:      v1alpha2.ImageCacheActionStatusSucceeded,
		wantReady: metav1.Condition{Status: metav1.ConditionTrue, Reason: string(v1alpha2.ImageCacheActionStatusSucceeded)},
	}, {
		name:   "a pull failed",
		nodes:  []*corev1.Node{node("a"), node("b")},
		settle: func(h *harness) { h.fail("c", img, "a"); h.completeAll("c") },
		want:   v1alpha2.ImageCacheActionStatusFailed,
		wantReady: metav1.Condition{Status: metav1.ConditionFalse, Reason: string(v1alpha2.ImageCacheActionStatusFailed),
			Message: v1alpha2.ImageCacheMessageImagePullFailedForSomeImages},
	}, {
		name:   "a cordoned node lacks the image; uncordoned, it gets it",
		nodes:  []*corev1.Node{node("a"), node("b", cordoned)},
		settle: func(h *harness) { h.completeAll("c") },
		want:   v1alpha2.ImageCacheActionStatusSucceeded,
		wantReady: metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha2.ReadyReasonNodesSkipped,
			Message: "1 selected node(s) do not report every image and got no pull Job: 1 Cordoned (b)"},
		then: func(h *harness) {
			h.editNode("b", func(n *corev1.Node) { n.Spec.Unschedulable, n.Spec.Taints = false, nil })
			h.succeed("c")
			g := NewWithT(h.t)
			g.Expect(h.status("c").Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheNewNodes))
		},
		wantThen: metav1.ConditionTrue,
	}, {
		name:      "a NotReady node reports the image",
		nodes:     []*corev1.Node{node("a"), node("b", notReady, holding(img))},
		settle:    func(h *harness) { h.completeAll("c") },
		want:      v1alpha2.ImageCacheActionStatusSucceeded,
		wantReady: metav1.Condition{Status: metav1.ConditionTrue, Reason: string(v1alpha2.ImageCacheActionStatusSucceeded)},
	}, {
		name:   "a Windows node the list selects can never hold it",
		nodes:  []*corev1.Node{node("a"), node("w", windows)},
		settle: func(h *harness) { h.completeAll("c") },
		want:   v1alpha2.ImageCacheActionStatusSucceeded,
		wantReady: metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha2.ReadyReasonNodesSkipped,
			Message: "1 selected node(s) do not report every image and got no pull Job: 1 NotLinux (w)"},
		then: func(h *harness) {
			h.annotate("c", v1alpha2.RefreshAnnotation, "")
			h.succeed("c")
		},
		wantThen: metav1.ConditionFalse,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var objs []client.Object
			for _, n := range tt.nodes {
				objs = append(objs, n)
			}
			h := newHarness(t, Config{Granularity: jobs.PerImage}, append(objs, imageCache("c", img))...)
			h.settleDown("c")
			tt.settle(h)
			h.settleDown("c")

			g.Expect(h.running("c")).To(BeFalse())
			st := h.status("c")
			g.Expect(st.Status).To(Equal(tt.want))
			ready := condition(st, v1alpha2.ConditionReady)
			if tt.wantReady.Message == "" {
				tt.wantReady.Message = ready.Message
			}
			g.Expect(metav1.Condition{Status: ready.Status, Reason: ready.Reason, Message: ready.Message}).To(Equal(tt.wantReady))
			if tt.then != nil {
				h.advance(time.Minute)
				tt.then(h)
				g.Expect(condition(h.status("c"), v1alpha2.ConditionReady).Status).To(Equal(tt.wantThen))
			}
		})
	}
}
