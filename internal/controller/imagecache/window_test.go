package imagecache

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/metrics"
)

// TestJobStartWindow: below --max-concurrent-jobs, the Jobs in flight
// follow how fast the Job controller starts them (pacing.Window), at either
// granularity: ten at first, more as they start promptly, fewer once they
// start late, and all of them at once with the window off.
func TestJobStartWindow(t *testing.T) {
	const img = "registry.example/app:1"
	for _, tc := range []struct {
		name        string
		granularity jobs.Granularity
		target      time.Duration
		// want are the Jobs created after the first reconcile, after the
		// first ten started promptly, after the next ones started late,
		// and after every Job created so far completed.
		want [4]int
	}{
		{"node Jobs", jobs.PerNode, 2 * time.Second, [4]int{10, 20, 20, 30}},
		{"a Job per (image, node)", jobs.PerImage, 2 * time.Second, [4]int{10, 20, 20, 30}},
		{"the window off", jobs.PerNode, 0, [4]int{30, 30, 30, 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := []client.Object{imageCache("c", img)}
			for i := range 30 {
				objs = append(objs, node(fmt.Sprintf("n%02d", i)))
			}
			h := newHarness(t, Config{Granularity: tc.granularity, MaxJobs: 100, JobStartTarget: tc.target}, objs...)
			created := func() int { return len(h.writesOf("create", "jobs")) }

			h.settleDown("c")
			g.Expect(created()).To(Equal(tc.want[0]), "the first reconcile")
			if tc.target > 0 {
				g.Expect(testutil.ToFloat64(metrics.JobsWindow)).To(BeEquivalentTo(10), "kubefledged_jobs_window")
				h.advance(time.Second) // past the progress writes' interval
				h.settleDown("c")
				g.Expect(h.status("c").Counts.Waiting).To(BeEquivalentTo(20), "the pairs waiting for the window")
			}

			h.startJobs("c")
			h.settleDown("c")
			if tc.target > 0 {
				g.Expect(h.woken()).To(ContainElement("c"), "the window grew: the waiting cache is woken")
			}
			h.settleDown("c")
			g.Expect(created()).To(Equal(tc.want[1]), "after ten prompt starts")

			h.advance(5 * time.Second) // the next ten start late
			h.startJobs("c")
			h.settleDown("c")
			g.Expect(created()).To(Equal(tc.want[2]), "after late starts: the window shrank below the Jobs in flight")
			if tc.target > 0 {
				g.Expect(testutil.ToFloat64(metrics.JobsWindow)).To(BeEquivalentTo(14), "20 cut by 30%")
			}

			h.completeAll("c")
			h.settleDown("c")
			g.Expect(created()).To(Equal(tc.want[3]), "the slots freed go to the pairs left, within the window")
			h.completeAll("c")
			h.settleDown("c")
			g.Expect(h.running("c")).To(BeFalse())
			g.Expect(h.status("c").Status).To(BeEquivalentTo("Succeeded"))
		})
	}
}

// TestJoiningNodesSkipTheWindow: a node that joins does not wait for the
// window, at either granularity: its first Job is created at once, whether
// it joined a running operation that fills the window or a cache at rest
// (a new-nodes operation for many nodes at once), and its pairs then take
// the slots freed before the operation's others.
func TestJoiningNodesSkipTheWindow(t *testing.T) {
	const img1, img2 = "registry.example/app:1", "registry.example/sidecar:1"
	for _, tc := range []struct {
		name        string
		granularity jobs.Granularity
		atRest      bool // the nodes join once the cache's operation ended
	}{
		{"node Jobs, joining a running operation", jobs.PerNode, false},
		{"a Job per (image, node), joining a running operation", jobs.PerImage, false},
		{"node Jobs, fifteen joining a cache at rest", jobs.PerNode, true},
		{"a Job per (image, node), fifteen joining a cache at rest", jobs.PerImage, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := []client.Object{imageCache("c", img1, img2)}
			for i := range 30 {
				objs = append(objs, node(fmt.Sprintf("n%02d", i)))
			}
			h := newHarness(t, Config{Granularity: tc.granularity, MaxJobs: 100, JobStartTarget: 2 * time.Second}, objs...)
			seen := map[string]bool{}
			h.settleDown("c")
			g.Expect(h.newJobs("c", seen)).To(HaveLen(10), "the window holds ten")
			if !tc.atRest {
				h.addNode(node("new", h.joinedNow))
				h.settleDown("c")
				g.Expect(h.newJobs("c", seen)).To(ConsistOf(HaveSuffix(" new")), "the joining node's first Job, past the full window")
				if tc.granularity == jobs.PerImage {
					// Two old Jobs end: the window of ten holds nine.
					h.complete("c", img1, "n00")
					h.complete("c", img1, "n01")
					h.settleDown("c")
					g.Expect(h.newJobs("c", seen)).To(Equal([]string{"pull " + img2 + " new"}), "the joining node's next pair takes the slot first")
				}
				return
			}
			for h.completeAll("c") {
				h.settleDown("c")
			}
			g.Expect(h.running("c")).To(BeFalse())
			h.newJobs("c", seen)
			for i := range 15 {
				h.addNode(node(fmt.Sprintf("new%02d", i), h.joinedNow))
			}
			h.settleDown("c")
			g.Expect(h.status("c").Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheNewNodes))
			g.Expect(h.newJobs("c", seen)).To(HaveLen(15), "a first Job on each new node, five past the window")
		})
	}
}
