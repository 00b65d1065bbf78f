package imagecache

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// Under the retain policy an operation's Jobs stay, labelled with their
// result, until their (image, node) pair runs again: then, and only then,
// the kept Job of that pair goes. A user retained Jobs to look at them, and
// an operation that re-runs the image on one node says nothing new about
// the others, so the kept Job of the other node must survive.
func TestRetainedJobReplacedOnlyForItsPair(t *testing.T) {
	const img = "nginx:1.25"
	tests := []struct {
		name string
		// rerunOnA makes the cache run (img, a) again, and only it.
		rerunOnA func(h *harness)
		wantKind string
	}{{
		name: "a refresh while b reports the image",
		rerunOnA: func(h *harness) {
			h.editNode("b", holding("docker.io/library/nginx:1.25"))
			h.annotate("c", v1alpha2.RefreshAnnotation, "")
		},
		wantKind: v1alpha2.ImageCacheReasonImageCacheRefresh,
	}, {
		name: "a new-node operation when a is Ready again",
		rerunOnA: func(h *harness) {
			h.editNode("a", notReady)
			h.settleDown("c")
			h.editNode("a", ready)
		},
		wantKind: v1alpha2.ImageCacheReasonImageCacheNewNodes,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("a"), node("b"), imageCache("c", img))
			h.succeed("c")
			kept := map[string]string{} // node -> kept Job
			for _, j := range h.jobs("c") {
				g.Expect(j.Labels).To(HaveKeyWithValue(jobs.LabelResult, jobs.ResultSucceeded))
				kept[j.Annotations[jobs.AnnotationNode]] = j.Name
			}
			g.Expect(kept).To(HaveLen(2))
			g.Expect(h.writesOf("patch", "jobs")).To(HaveEach(HaveField("Body",
				`{"metadata":{"annotations":{"kubefledged.io/result-message":""},"labels":{"kubefledged.io/result":"succeeded"}}}`)))
			g.Expect(h.writesOf("delete", "jobs")).To(BeEmpty())

			tt.rerunOnA(h)
			h.settleDown("c")

			g.Expect(h.status("c").Reason).To(Equal(tt.wantKind))
			h.job("c", img, "a") // the pair runs again
			g.Expect(h.writesOf("delete", "jobs")).To(HaveExactElements(HaveField("Name", kept["a"])))
			h.complete("c", img, "a")
			h.settleDown("c")

			g.Expect(h.status("c").Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
			var names []string
			for _, j := range h.jobs("c") {
				names = append(names, j.Name)
				g.Expect(j.Labels).To(HaveKeyWithValue(jobs.LabelResult, jobs.ResultSucceeded))
			}
			g.Expect(names).To(ContainElement(kept["b"]), "the kept Job of b stays")
			g.Expect(names).NotTo(ContainElement(kept["a"]))
			g.Expect(names).To(HaveLen(2), "one Job per pair, the latest")
		})
	}
}

// TestWorse: a node Job stands for the first expired failure of its
// containers, else their first failure, else success, in whatever order
// the containers are folded.
func TestWorse(t *testing.T) {
	ok := results.Outcome{State: results.Succeeded}
	denied := results.Outcome{State: results.Failed, Reason: "ErrImagePull"}
	missing := results.Outcome{State: results.Failed, Reason: "NotFound"}
	late := results.Outcome{State: results.Failed, Expired: true, Reason: "RegistryKeptFailing"}
	later := results.Outcome{State: results.Failed, Expired: true, Reason: "JobDeleted"}
	tests := []struct {
		name       string
		containers []results.Outcome
		want       results.Outcome
		wantLabel  string
	}{
		{name: "one", containers: []results.Outcome{denied}, want: denied, wantLabel: jobs.ResultFailed},
		{name: "all pulled", containers: []results.Outcome{ok, ok}, want: ok, wantLabel: jobs.ResultSucceeded},
		{name: "a failure after successes", containers: []results.Outcome{ok, ok, denied}, want: denied, wantLabel: jobs.ResultFailed},
		{name: "the first failure", containers: []results.Outcome{denied, ok, missing}, want: denied, wantLabel: jobs.ResultFailed},
		{name: "an expired one before others", containers: []results.Outcome{denied, late, ok}, want: late, wantLabel: jobs.ResultExpired},
		{name: "the first expired one", containers: []results.Outcome{late, missing, later}, want: late, wantLabel: jobs.ResultExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var all results.Outcome
			for k, o := range tt.containers {
				all = worse(all, o, k > 0)
			}
			g.Expect(all).To(Equal(tt.want))
			g.Expect(resultOf(all)).To(Equal(tt.wantLabel))
		})
	}
}
