package imagecache

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// An operation with no Job to run ends in the reconcile that starts it, and
// its status must still be the original's, word for word: users' alerts
// match status.message. What we know beyond the original (which list
// matched nothing, and why) goes only to the Ready condition and Events.
func TestStartWithNothingToRun(t *testing.T) {
	const (
		nginx = "nginx:1.25"
		redis = "redis:7.2"
	)
	pulling := "Normal ImageCacheCreate " + v1alpha2.ImageCacheMessagePullingImages
	tests := []struct {
		name        string
		nodes       []*corev1.Node
		selector    map[string]string
		want        outcome
		wantCounts  v1alpha2.Counts
		wantSkipped []v1alpha2.SkippedNodes
		wantReady   metav1.Condition
		wantEvents  []string
	}{{
		name: "every node already reports every image",
		nodes: []*corev1.Node{
			node("a", holding("docker.io/library/nginx:1.25", "docker.io/library/nginx@sha256:0123"), holding("docker.io/library/redis:7.2")),
			node("b", holding("docker.io/library/redis:7.2"), holding("nginx:1.25")),
		},
		want:       outcome{v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		wantCounts: v1alpha2.Counts{Desired: 4, AlreadyPresent: 4},
		wantReady: metav1.Condition{Status: metav1.ConditionTrue, Reason: string(v1alpha2.ImageCacheActionStatusSucceeded),
			Message: v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		wantEvents: []string{pulling, "Normal ImageCacheCreate " + v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
	}, {
		name:     "the selector matches no node",
		nodes:    []*corev1.Node{node("a"), node("b")},
		selector: map[string]string{"disk": "ssd"},
		want: outcome{v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted, v1alpha2.ImageCacheReasonImageCacheCreate,
			v1alpha2.ImageCacheMessageNoImagesPulledOrDeleted},
		wantReady: metav1.Condition{Status: metav1.ConditionTrue, Reason: string(v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted),
			Message: v1alpha2.ImageCacheMessageNoImagesPulledOrDeleted + ": cacheSpec[0] (nodeSelector disk=ssd) matches no node"},
		wantEvents: []string{
			pulling,
			"Warning NoMatchingNodes cacheSpec[0] (nodeSelector disk=ssd) matches no node",
			"Normal ImageCacheCreate " + v1alpha2.ImageCacheMessageNoImagesPulledOrDeleted + ": cacheSpec[0] (nodeSelector disk=ssd) matches no node",
		},
	}, {
		// Nodes matched: "no node matched" would be false, and Ready True
		// a green over a node without the images.
		name:     "the selector matches only a cordoned node, which lacks the images",
		nodes:    []*corev1.Node{node("a", labelled("disk", "ssd"), cordoned), node("b")},
		selector: map[string]string{"disk": "ssd"},
		want: outcome{v1alpha2.ImageCacheActionStatusFailed, v1alpha2.ImageCacheReasonImageCacheCreate,
			v1alpha2.ImageCacheMessageImagePullFailedForSomeImages},
		wantCounts:  v1alpha2.Counts{Skipped: 2},
		wantSkipped: []v1alpha2.SkippedNodes{{Reason: v1alpha2.SkipCordoned, Count: 1, Nodes: []string{"a"}}},
		wantReady: metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha2.ReadyReasonNodesSkipped,
			Message: "1 selected node(s) do not report every image and got no pull Job: 1 Cordoned (a)"},
		wantEvents: []string{
			pulling,
			"Warning NoMatchingNodes cacheSpec[0] (nodeSelector disk=ssd) matches 1 node(s), none eligible: 1 Cordoned",
			"Warning ImageCacheCreate " + v1alpha2.ImageCacheMessageImagePullFailedForSomeImages + ": cacheSpec[0] (nodeSelector disk=ssd) matches 1 node(s), none eligible: 1 Cordoned",
		},
	}, {
		name:     "the selector matches only Windows nodes",
		nodes:    []*corev1.Node{node("w1", windows), node("w2", windows, holding("docker.io/library/nginx:1.25")), node("l")},
		selector: map[string]string{corev1.LabelOSStable: "windows"},
		want: outcome{v1alpha2.ImageCacheActionStatusFailed, v1alpha2.ImageCacheReasonImageCacheCreate,
			v1alpha2.ImageCacheMessageImagePullFailedForSomeImages},
		wantCounts:  v1alpha2.Counts{Skipped: 4},
		wantSkipped: []v1alpha2.SkippedNodes{{Reason: v1alpha2.SkipNotLinux, Count: 2, Nodes: []string{"w1", "w2"}}},
		wantReady: metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha2.ReadyReasonNodesSkipped,
			Message: "2 selected node(s) do not report every image and got no pull Job: 2 NotLinux (w1, w2)"},
		wantEvents: []string{
			pulling,
			"Warning NoMatchingNodes cacheSpec[0] (nodeSelector kubernetes.io/os=windows) matches 2 node(s), none eligible: 2 NotLinux",
			"Warning ImageCacheCreate " + v1alpha2.ImageCacheMessageImagePullFailedForSomeImages + ": cacheSpec[0] (nodeSelector kubernetes.io/os=windows) matches 2 node(s), none eligible: 2 NotLinux",
		},
	}, {
		// Drained after its pulls, the node still holds the cache.
		name:     "the selector matches only a cordoned node, which reports every image",
		nodes:    []*corev1.Node{node("a", labelled("disk", "ssd"), cordoned, holding("nginx:1.25"), holding("redis:7.2")), node("b")},
		selector: map[string]string{"disk": "ssd"},
		want: outcome{v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheReasonImageCacheCreate,
			v1alpha2.ImageCacheMessageImagesPulledSuccessfully},
		wantCounts:  v1alpha2.Counts{Skipped: 2},
		wantSkipped: []v1alpha2.SkippedNodes{{Reason: v1alpha2.SkipCordoned, Count: 1, Nodes: []string{"a"}}},
		wantReady: metav1.Condition{Status: metav1.ConditionTrue, Reason: string(v1alpha2.ImageCacheActionStatusSucceeded),
			Message: v1alpha2.ImageCacheMessageImagesPulledSuccessfully + ": cacheSpec[0] (nodeSelector disk=ssd) matches 1 node(s), none eligible: 1 Cordoned"},
		wantEvents: []string{
			pulling,
			"Warning NoMatchingNodes cacheSpec[0] (nodeSelector disk=ssd) matches 1 node(s), none eligible: 1 Cordoned",
			"Normal ImageCacheCreate " + v1alpha2.ImageCacheMessageImagesPulledSuccessfully + ": cacheSpec[0] (nodeSelector disk=ssd) matches 1 node(s), none eligible: 1 Cordoned",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := imageCache("c", nginx, redis)
			c.Spec.CacheSpec[0].NodeSelector = tt.selector
			h := newHarness(t, Config{Granularity: jobs.PerImage}, c)
			for _, n := range tt.nodes {
				h.addNode(n)
			}

			h.settleDown("c")

			st := h.status("c")
			g.Expect(outcomeOf(st)).To(Equal(tt.want))
			g.Expect(st.Failures).To(BeEmpty())
			g.Expect(*st.Counts).To(Equal(tt.wantCounts))
			g.Expect(st.SkippedNodes).To(Equal(tt.wantSkipped))
			ready := condition(st, v1alpha2.ConditionReady)
			g.Expect(metav1.Condition{Status: ready.Status, Reason: ready.Reason, Message: ready.Message}).To(Equal(tt.wantReady))
			g.Expect(h.writesOf("create", "jobs")).To(BeEmpty())
			g.Expect(h.writes()).To(HaveEach(HaveField("String()", "update imagecaches/status/c")), "Processing, then the end")
			g.Expect(h.writes()).To(HaveLen(2))
			g.Expect(h.events()).To(Equal(tt.wantEvents))
			g.Expect(h.running("c")).To(BeFalse())
		})
	}
}

// Each operation, as it starts, writes the original's Processing message of
// its kind; a new-node operation pulls as a create does and says so, and
// names its nodes only in its condition and Event.
func TestProcessingMessages(t *testing.T) {
	const img = "nginx:1.25"
	tests := []struct {
		name string
		// setup brings the cache, created and finished, to where the
		// operation is due.
		setup        func(h *harness)
		want         outcome
		wantProgress string
	}{{
		name:         "create",
		want:         outcome{v1alpha2.ImageCacheActionStatusProcessing, v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheMessagePullingImages},
		wantProgress: v1alpha2.ImageCacheMessagePullingImages,
	}, {
		name: "update after a spec edit",
		setup: func(h *harness) {
			h.succeed("c")
			h.edit("c", func(c *v1alpha2.ImageCache) {
				c.Spec.CacheSpec[0].Images = append(c.Spec.CacheSpec[0].Images, "redis:7.2")
			})
		},
		want:         outcome{v1alpha2.ImageCacheActionStatusProcessing, v1alpha2.ImageCacheReasonImageCacheUpdate, v1alpha2.ImageCacheMessageUpdatingCache},
		wantProgress: v1alpha2.ImageCacheMessageUpdatingCache,
	}, {
		name:         "refresh on demand",
		setup:        requested(v1alpha2.RefreshAnnotation, ""),
		want:         outcome{v1alpha2.ImageCacheActionStatusProcessing, v1alpha2.ImageCacheReasonImageCacheRefresh, v1alpha2.ImageCacheMessageRefreshingCache},
		wantProgress: v1alpha2.ImageCacheMessageRefreshingCache,
	}, {
		name:         "purge on demand",
		setup:        requested(v1alpha2.PurgeAnnotation, ""),
		want:         outcome{v1alpha2.ImageCacheActionStatusProcessing, v1alpha2.ImageCacheReasonImageCachePurge, v1alpha2.ImageCacheMessagePurgingCache},
		wantProgress: v1alpha2.ImageCacheMessagePurgingCache,
	}, {
		name: "a node joins",
		setup: func(h *harness) {
			h.succeed("c")
			h.advance(time.Minute)
			h.addNode(node("b", h.joinedNow))
		},
		want:         outcome{v1alpha2.ImageCacheActionStatusProcessing, v1alpha2.ImageCacheReasonImageCacheNewNodes, v1alpha2.ImageCacheMessagePullingImages},
		wantProgress: "Images are being pulled on to new nodes: b",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, Config{Granularity: jobs.PerImage}, node("a"), imageCache("c", img))
			if tt.setup != nil {
				tt.setup(h)
			}
			h.events()

			_, err := h.step("c")
			g.Expect(err).NotTo(HaveOccurred())

			st := h.status("c")
			g.Expect(outcomeOf(st)).To(Equal(tt.want))
			g.Expect(st.StartTime.Time).To(BeTemporally("==", h.clock.Now()))
			g.Expect(st.CompletionTime).To(BeNil())
			prog := condition(st, v1alpha2.ConditionProgressing)
			g.Expect(prog.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(prog.Message).To(Equal(tt.wantProgress))
			g.Expect(h.events()).To(HaveExactElements("Normal " + tt.want.Reason + " " + tt.wantProgress))
			g.Expect(h.running("c")).To(BeTrue(), "its Job runs")
		})
	}
}
