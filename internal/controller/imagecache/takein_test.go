package imagecache

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// operationsOf are the operation labels of the cache's Jobs of image.
func (h *harness) operationsOf(cache, image string) []string {
	var out []string
	for _, j := range h.jobs(cache) {
		if j.Annotations[jobs.AnnotationImage] == image {
			out = append(out, j.Labels[jobs.LabelOperation])
		}
	}
	return out
}

// TestTakeInWhileRunning: the templates a cache follows gain images while
// its update runs, its Jobs unfinished. Their pulls start at once, in that
// very operation, whose end counts and records them with the others; the
// image a template left stays in the record until the end, and is dropped
// after it, with its Event, deleted from no node.
func TestTakeInWhileRunning(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("n1"), node("n2"),
		pausedDeployment("web", "nginx:1.27"), workloadCache("ic"))
	seen := map[string]bool{}
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(HaveLen(4))
	h.report("nginx:1.27", "redis:7")

	h.setImage("web", "nginx:1.28")
	h.settleDown("ic")
	g.Expect(h.running("ic")).To(BeTrue())
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.28 n1", "pull nginx:1.28 n2"}))
	update := h.operationsOf("ic", "nginx:1.28")[0]

	// Another workload, and the first one's image changed again.
	h.addWorkload(pausedDeployment("api", "envoy:1.30"))
	h.setImage("web", "nginx:1.29")
	h.settleDown("ic")
	g.Expect(h.running("ic")).To(BeTrue(), "the Jobs of nginx:1.28 still run")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull envoy:1.30 n1", "pull envoy:1.30 n2", "pull nginx:1.29 n1", "pull nginx:1.29 n2"}))
	g.Expect(h.operationsOf("ic", "envoy:1.30")).To(Equal([]string{update, update}), "the running update took them in")
	g.Expect(h.operationsOf("ic", "nginx:1.29")).To(Equal([]string{update, update}))
	g.Expect(h.events()).To(ContainElement("Normal PodImagesAdded the running operation pulls the images the selected pods or workload templates gained since it started: envoy:1.30, nginx:1.29"))
	h.advance(time.Second) // the least time between two progress writes
	_, err := h.step("ic")
	g.Expect(err).NotTo(HaveOccurred())
	st := h.status("ic")
	g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusProcessing))
	g.Expect(*st.Counts).To(Equal(v1alpha2.Counts{Desired: 8, AlreadyPresent: 2, InFlight: 6}), "the progress counts them at once")

	h.completeAll("ic")
	h.runToEnd("ic", 20, nil)
	st = h.status("ic")
	g.Expect(outcomeOf(st)).To(Equal(outcome{v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheReasonImageCacheUpdate,
		v1alpha2.ImageCacheMessageImagesPulledSuccessfully}))
	g.Expect(*st.Counts).To(Equal(v1alpha2.Counts{Desired: 8, AlreadyPresent: 2, Succeeded: 6}))
	g.Expect(st.Progress).To(Equal("8/8"))
	g.Expect(condition(st, v1alpha2.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(workloadImagesOf(st)).To(Equal([]string{"list 0: 0 pods, 2 workloads, 3 images",
		"  envoy:1.30 0 1 apps/Deployment/api", "  nginx:1.28 0 1 apps/Deployment/web", "  nginx:1.29 0 1 apps/Deployment/web"}),
		"the end records what it took in, and what the templates left until it ended")

	// After it, nginx:1.28 is dropped, and nothing runs again.
	h.settleDown("ic")
	g.Expect(h.running("ic")).To(BeFalse())
	g.Expect(h.newJobs("ic", seen)).To(BeEmpty())
	g.Expect(workloadImagesOf(h.status("ic"))).To(Equal([]string{"list 0: 0 pods, 2 workloads, 2 images",
		"  envoy:1.30 0 1 apps/Deployment/api", "  nginx:1.29 0 1 apps/Deployment/web"}))
	g.Expect(h.events()).To(ContainElement(And(ContainSubstring("Normal PodImagesDropped"), ContainSubstring("nginx:1.28"))))
}

// TestTakeInOtherOperations: which running operations take in an image a
// template gained, and on which nodes.
func TestTakeInOtherOperations(t *testing.T) {
	cases := []struct {
		name string
		// during starts the operation and leaves it running.
		during func(h *harness)
		// want are the Jobs of nginx:1.28 made while it runs.
		want []string
		// then are those the operations after it make.
		then []string
	}{
		{name: "a refresh takes it in on every node",
			during: func(h *harness) { h.annotate("ic", v1alpha2.RefreshAnnotation, "") },
			want:   []string{"pull nginx:1.28 n1", "pull nginx:1.28 n2"}},
		{name: "a new-node operation takes it in on every node, not only the new one",
			during: func(h *harness) { h.addNode(node("n3", h.joinedNow)) },
			want:   []string{"pull nginx:1.28 n1", "pull nginx:1.28 n2", "pull nginx:1.28 n3"}},
		{name: "a purge takes nothing in, and follows nothing after",
			during: func(h *harness) { h.annotate("ic", v1alpha2.PurgeAnnotation, "") }},
		{name: "after a spec edit, the update that follows pulls it",
			during: func(h *harness) {
				h.annotate("ic", v1alpha2.RefreshAnnotation, "")
				h.settleDown("ic")
				h.edit("ic", func(c *v1alpha2.ImageCache) {
					c.Spec.CacheSpec[0].Images = append(c.Spec.CacheSpec[0].Images, "redis:7.2")
				})
			},
			then: []string{"pull nginx:1.28 n1", "pull nginx:1.28 n2", "pull redis:7.2 n1", "pull redis:7.2 n2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("n1"), node("n2"),
				pausedDeployment("web", "nginx:1.27"), workloadCache("ic"))
			seen := map[string]bool{}
			h.succeed("ic")
			h.newJobs("ic", seen)
			// nginx:1.27 not reported: a refresh pulls it again.
			h.report("redis:7")

			tc.during(h)
			h.settleDown("ic")
			g.Expect(h.running("ic")).To(BeTrue())
			h.newJobs("ic", seen)
			h.setImage("web", "nginx:1.28")
			h.settleDown("ic")
			g.Expect(h.newJobs("ic", seen)).To(Equal(tc.want))

			h.completeAll("ic")
			h.runToEnd("ic", 20, nil)
			if tc.want != nil {
				st := h.status("ic")
				g.Expect(workloadImagesOf(st)).To(ContainElement("  nginx:1.28 0 1 apps/Deployment/web"), "its end records it")
				g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
			}
			h.settleDown("ic")
			h.completeAll("ic")
			h.runToEnd("ic", 20, nil)
			h.settleDown("ic")
			g.Expect(h.newJobs("ic", seen)).To(ConsistOf(tc.then))
		})
	}
}
